#include "openlake/ec/codec.h"

#include <climits>
#include <string>
#include <vector>

#include <isa-l/erasure_code.h>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

#include "openlake/strings.h"

namespace openlake::ec {
namespace {

class IsalCodec final : public Codec {
 public:
  IsalCodec(int k, int m) : Codec(k, m), matrix_(static_cast<size_t>((k + m) * k)) {
    // Rows 0..k-1 are the identity; rows k.. the Cauchy coefficients of the parity shards.
    gf_gen_cauchy1_matrix(matrix_.data(), k + m, k);
    if (m > 0) {
      encode_tables_.resize(static_cast<size_t>(32 * k * m));
      ec_init_tables(k, m, &matrix_[static_cast<size_t>(k * k)], encode_tables_.data());
    }
  }

  void Encode(size_t len, const uint8_t* const* data, uint8_t* const* parity) const override {
    if (m_ == 0 || len == 0) return;
    // ISA-L takes non-const pointers; it only reads the data shards.
    ec_encode_data(static_cast<int>(len), k_, m_, const_cast<unsigned char*>(encode_tables_.data()),
                   const_cast<unsigned char**>(data), const_cast<unsigned char**>(parity));
  }

  absl::Status Reconstruct(size_t len, uint8_t* const* shards,
                           absl::Span<const bool> present) const override {
    const int n = k_ + m_;
    if (static_cast<int>(present.size()) != n) {
      return absl::InvalidArgumentError(
          StrCat("present has ", present.size(), " entries for ", n, " shards"));
    }
    std::string pattern(static_cast<size_t>(n), '\0');
    int have = 0;
    for (int i = 0; i < n; ++i) {
      pattern[i] = present[i] ? 1 : 0;
      have += present[i] ? 1 : 0;
    }
    if (have == n || len == 0) return absl::OkStatus();
    if (have < k_) {
      return absl::DataLossError(StrCat("only ", have, " of ", n, " shards are readable; ", k_,
                                        " are needed to reconstruct"));
    }
    const Decoder* d = DecoderFor(pattern);
    if (d == nullptr) return absl::InternalError("decode matrix not invertible");
    // Sources: the first k present shards; outputs: every lost one.
    unsigned char* src[kMaxShards];
    unsigned char* out[kMaxShards];
    for (int i = 0; i < k_; ++i) src[i] = shards[d->sources[i]];
    for (size_t i = 0; i < d->lost.size(); ++i) out[i] = shards[d->lost[i]];
    ec_encode_data(static_cast<int>(len), k_, static_cast<int>(d->lost.size()),
                   const_cast<unsigned char*>(d->tables.data()), src, out);
    return absl::OkStatus();
  }

 private:
  struct Decoder {
    std::vector<int> sources;  // k shard indexes read
    std::vector<int> lost;     // shard indexes written
    std::vector<unsigned char> tables;
  };

  // Decode tables of one erasure pattern: built once, then shared.
  const Decoder* DecoderFor(const std::string& pattern) const {
    {
      absl::ReaderMutexLock lock(&mu_);
      auto it = decoders_.find(pattern);
      if (it != decoders_.end()) return it->second.get();
    }
    auto d = std::make_unique<Decoder>();
    const int n = k_ + m_;
    for (int i = 0; i < n && static_cast<int>(d->sources.size()) < k_; ++i) {
      if (pattern[i]) d->sources.push_back(i);
    }
    for (int i = 0; i < n; ++i) {
      if (!pattern[i]) d->lost.push_back(i);
    }
    // B = the rows of the generator matrix for the sources; D = B^-1 maps sources to data.
    std::vector<unsigned char> b(static_cast<size_t>(k_ * k_)), inv(static_cast<size_t>(k_ * k_));
    for (int r = 0; r < k_; ++r) {
      for (int c = 0; c < k_; ++c) b[r * k_ + c] = matrix_[d->sources[r] * k_ + c];
    }
    if (gf_invert_matrix(b.data(), inv.data(), k_) != 0) return nullptr;
    // Row for lost shard x: data shard → row x of D; parity shard → (row x of the generator) · D.
    std::vector<unsigned char> rows(d->lost.size() * static_cast<size_t>(k_));
    for (size_t l = 0; l < d->lost.size(); ++l) {
      const int x = d->lost[l];
      for (int c = 0; c < k_; ++c) {
        unsigned char v = 0;
        if (x < k_) {
          v = inv[x * k_ + c];
        } else {
          for (int t = 0; t < k_; ++t) v ^= gf_mul(matrix_[x * k_ + t], inv[t * k_ + c]);
        }
        rows[l * k_ + c] = v;
      }
    }
    d->tables.resize(static_cast<size_t>(32) * k_ * d->lost.size());
    ec_init_tables(k_, static_cast<int>(d->lost.size()), rows.data(), d->tables.data());
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = decoders_.emplace(pattern, std::move(d));
    return it->second.get();
  }

  std::vector<unsigned char> matrix_;
  std::vector<unsigned char> encode_tables_;
  mutable absl::Mutex mu_;
  mutable absl::flat_hash_map<std::string, std::unique_ptr<Decoder>> decoders_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<Codec>> Codec::Create(int k, int m) {
  if (k < 1 || m < 0 || k + m > kMaxShards) {
    return absl::InvalidArgumentError(
        StrCat("erasure code RS(", k, "+", m,
               ") is out of range: want k >= 1, m >= 0, k + m <= ", kMaxShards));
  }
  return std::unique_ptr<Codec>(new IsalCodec(k, m));
}

}  // namespace openlake::ec

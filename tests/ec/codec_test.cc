#include "openlake/ec/codec.h"

#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "ec/reference.h"

using openlake::ec::Codec;
namespace ref = openlake::ec::reference;

namespace {
std::vector<std::vector<uint8_t>> Random(std::mt19937_64& rng, int n, size_t len) {
  std::vector<std::vector<uint8_t>> v(static_cast<size_t>(n), std::vector<uint8_t>(len));
  for (auto& s : v) {
    for (auto& b : s) b = static_cast<uint8_t>(rng());
  }
  return v;
}
}  // namespace

TEST_CASE("reference GF(2^8) arithmetic", "[ec]") {
  for (int a = 1; a < 256; ++a) {
    CHECK(ref::Mul(static_cast<uint8_t>(a), ref::Inv(static_cast<uint8_t>(a))) == 1);
  }
  CHECK(ref::Mul(0, 7) == 0);
  CHECK(ref::Mul(2, 0x80) == 0x1d);  // x · x^7 = x^8 = 0x11d - 0x100
}

TEST_CASE("shapes out of range are refused", "[ec]") {
  CHECK(!Codec::Create(0, 2).ok());
  CHECK(!Codec::Create(4, -1).ok());
  CHECK(!Codec::Create(200, 56).ok());
  CHECK(Codec::Create(1, 0).ok());
  CHECK(Codec::Create(200, 55).ok());
}

TEST_CASE("seeded sweep: ISA-L encode and reconstruct agree with the reference", "[ec]") {
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed << " (replay by setting it here)");
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 120; ++trial) {
    const int k = 1 + static_cast<int>(rng() % 12);
    const int m = static_cast<int>(rng() % 6);
    const size_t len = 1 + rng() % 3000;
    INFO("trial " << trial << ": RS(" << k << "+" << m << "), " << len << " bytes");
    auto codec = Codec::Create(k, m);
    REQUIRE(codec.ok());
    auto data = Random(rng, k, len);
    std::vector<std::vector<uint8_t>> want;
    ref::Encode(k, m, data, &want);
    std::vector<std::vector<uint8_t>> parity(static_cast<size_t>(m), std::vector<uint8_t>(len, 0));
    std::vector<const uint8_t*> dp;
    std::vector<uint8_t*> pp;
    for (auto& d : data) dp.push_back(d.data());
    for (auto& p : parity) pp.push_back(p.data());
    (*codec)->Encode(len, dp.data(), pp.data());
    REQUIRE(parity == want);

    // Lose up to m shards at random, reconstruct, compare with the originals and the reference.
    std::vector<std::vector<uint8_t>> all = data;
    all.insert(all.end(), parity.begin(), parity.end());
    const int n = k + m;
    std::vector<bool> present(static_cast<size_t>(n), true);
    const int lose = m == 0 ? 0 : static_cast<int>(rng() % (m + 1));
    for (int l = 0; l < lose;) {
      const int i = static_cast<int>(rng() % n);
      if (present[i]) {
        present[i] = false;
        ++l;
      }
    }
    std::vector<std::vector<uint8_t>> damaged = all;
    for (int i = 0; i < n; ++i) {
      if (!present[i]) std::fill(damaged[i].begin(), damaged[i].end(), 0xAB);
    }
    std::vector<std::vector<uint8_t>> oracle = damaged;
    REQUIRE(ref::Reconstruct(k, m, &oracle, present));
    REQUIRE(oracle == all);
    std::vector<uint8_t*> sp;
    for (auto& s : damaged) sp.push_back(s.data());
    std::unique_ptr<bool[]> pr(new bool[n]);
    for (int i = 0; i < n; ++i) pr[i] = present[i];
    REQUIRE((*codec)->Reconstruct(len, sp.data(), absl::MakeConstSpan(pr.get(), n)).ok());
    REQUIRE(damaged == all);
  }
}

TEST_CASE("every erasure pattern of RS(4+2) and RS(8+4) is recoverable", "[ec]") {
  std::mt19937_64 rng(7);
  for (auto [k, m] : {std::pair{4, 2}, std::pair{8, 4}}) {
    auto codec = *Codec::Create(k, m);
    const int n = k + m;
    const size_t len = 4096;
    auto data = Random(rng, k, len);
    std::vector<std::vector<uint8_t>> parity(static_cast<size_t>(m), std::vector<uint8_t>(len));
    std::vector<const uint8_t*> dp;
    std::vector<uint8_t*> pp;
    for (auto& d : data) dp.push_back(d.data());
    for (auto& p : parity) pp.push_back(p.data());
    codec->Encode(len, dp.data(), pp.data());
    std::vector<std::vector<uint8_t>> all = data;
    all.insert(all.end(), parity.begin(), parity.end());
    for (uint32_t mask = 0; mask < (1u << n); ++mask) {
      if (__builtin_popcount(mask) > m) continue;
      std::vector<std::vector<uint8_t>> s = all;
      std::unique_ptr<bool[]> present(new bool[n]);
      std::vector<uint8_t*> sp;
      for (int i = 0; i < n; ++i) {
        present[i] = !(mask & (1u << i));
        if (!present[i]) std::fill(s[i].begin(), s[i].end(), 0);
        sp.push_back(s[i].data());
      }
      REQUIRE(codec->Reconstruct(len, sp.data(), absl::MakeConstSpan(present.get(), n)).ok());
      REQUIRE(s == all);
    }
    // One erasure too many: DataLoss, and nothing written.
    std::vector<uint8_t*> sp;
    std::vector<std::vector<uint8_t>> s = all;
    std::unique_ptr<bool[]> present(new bool[n]);
    for (int i = 0; i < n; ++i) {
      present[i] = i > m;  // m + 1 lost
      sp.push_back(s[i].data());
    }
    CHECK(codec->Reconstruct(len, sp.data(), absl::MakeConstSpan(present.get(), n)).code() ==
          absl::StatusCode::kDataLoss);
  }
}

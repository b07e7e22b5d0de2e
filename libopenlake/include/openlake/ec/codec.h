// File: openlake/ec/codec.h
//
// Reed–Solomon erasure coding of k data shards into m parity shards, over ISA-L. Any k of the
// k + m shards reconstruct the rest. The generator matrix is ISA-L's Cauchy matrix (every k×k
// submatrix is invertible, so every pattern of up to m erasures is recoverable).
//
//   OL_ASSIGN_OR_RETURN(auto codec, ec::Codec::Create(4, 2));
//   const uint8_t* data[4] = {...};  uint8_t* parity[2] = {...};
//   codec->Encode(len, data, parity);
//   ...
//   uint8_t* shards[6] = {...};      // lost ones point at buffers to fill
//   bool present[6] = {true, false, true, true, false, true};
//   OL_RETURN_IF_ERROR(codec->Reconstruct(len, shards, present));
//
// Set-up is separate from the kernels (as in ISA-L): Create builds the encode tables once per
// (k, m); Reconstruct builds decode tables once per erasure pattern and caches them. Encode and
// Reconstruct work on caller buffers and allocate nothing once a pattern's tables exist. A codec
// is safe to share between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include "openlake/export.h"

namespace openlake::ec {

inline constexpr int kMaxShards = 255;

class OL_EXPORT Codec {
 public:
  // InvalidArgument unless 1 <= k, 0 <= m and k + m <= kMaxShards.
  static absl::StatusOr<std::unique_ptr<Codec>> Create(int k, int m);
  virtual ~Codec() = default;

  int k() const { return k_; }
  int m() const { return m_; }

  // parity[i] = the i-th parity shard of data[0..k), each `len` bytes.
  // REQUIRES: data has k pointers, parity has m, none overlapping; len <= INT_MAX.
  virtual void Encode(size_t len, const uint8_t* const* data, uint8_t* const* parity) const = 0;

  // Fills every shard whose present[i] is false from k of the present ones. shards has k + m
  // pointers (data shards first); lost shards must point at writable buffers of `len` bytes.
  // DataLoss when fewer than k shards are present.
  virtual absl::Status Reconstruct(size_t len, uint8_t* const* shards,
                                   absl::Span<const bool> present) const = 0;

 protected:
  Codec(int k, int m) : k_(k), m_(m) {}
  const int k_;
  const int m_;
};

}  // namespace openlake::ec

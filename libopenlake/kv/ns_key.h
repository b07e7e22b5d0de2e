// A block's identity inside one daemon: (namespace id, key), and the hash both of the KV pool's
// indexes (the slab's, kv/pool.h, and the disk tier's, kv/disk_tier.h) use for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "openlake/kv/types.h"

namespace openlake::kv {

struct NsKey {
  uint32_t ns;
  BlockKey key;
  friend bool operator==(const NsKey& a, const NsKey& b) { return a.ns == b.ns && a.key == b.key; }
};

// Keys are mostly hashes already; fold the four 8-byte words and the namespace, then mix
// (MurmurHash3's finaliser) so that non-random keys spread too. Several times cheaper than the
// generic string hash on the Lookup path.
struct NsKeyHash {
  size_t operator()(const NsKey& k) const {
    uint64_t w[4];
    std::memcpy(w, k.key.padded(), sizeof(w));
    uint64_t h = w[0] ^ Rotl(w[1], 17) ^ Rotl(w[2], 31) ^ Rotl(w[3], 47) ^
                 (uint64_t{k.ns} << 32 | k.key.size());
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return static_cast<size_t>(h);
  }
  static uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
};

}  // namespace openlake::kv

// Where an object lives: which erasure set, and which drive of the set holds which shard.
//
// The set is SipHash-2-4 of "<bucket>/<key>", keyed with the deployment id's 16 bytes, modulo
// the number of sets: stable for the life of the deployment, different between deployments
// (so one cannot aim keys at one set of another's), and needing no table. Within the set the
// shards rotate: shard s of the object sits at position (rotation + s) mod N, where the
// rotation comes from the same hash, so data shards (the ones every read touches) spread over
// all drives instead of loading the first k.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace openlake::store {

using SipKey = std::array<uint8_t, 16>;

uint64_t SipHash24(const SipKey& key, std::string_view data);

struct Placement {
  uint32_t set = 0;
  uint32_t rotation = 0;
};

Placement Place(const SipKey& key, uint32_t set_count, uint32_t set_drive_count,
                std::string_view bucket, std::string_view object_key);

// Position in the set of shard `shard` / shard held by position `pos`.
inline uint32_t ShardPosition(uint32_t rotation, uint32_t shard, uint32_t n) {
  return (rotation + shard) % n;
}
inline uint32_t ShardAt(uint32_t rotation, uint32_t pos, uint32_t n) {
  return (pos + n - rotation % n) % n;
}

}  // namespace openlake::store

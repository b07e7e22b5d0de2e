// File: openlake/kv/types.h
//
// Value types of the KV pool shared by its client and its service.
//
// A namespace holds the blocks of one model shard: it is opened with a name, a block size and
// a LayoutFingerprint describing how the engine lays a block out (model, dtype, heads, head
// size, tokens per block, layout, TP/PP rank). Opening an existing name with a different
// fingerprint or block size is refused with a message that names the fields that differ, so
// two engines can never read each other's bytes as their own.
//
// A key is the engine's block hash (vLLM's prefix-chained hash), up to 32 bytes, scoped by the
// namespace.
//
//   kv::LayoutFingerprint fp;
//   fp.model = "meta-llama/Llama-3.1-8B"; fp.dtype = "bfloat16"; fp.num_layers = 32;
//   fp.num_kv_heads = 8; fp.head_size = 128; fp.block_tokens = 16; fp.layout = "NHD";
//   kv::BlockKey key(hash_bytes);  // REQUIRES: hash_bytes.size() <= 32
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "openlake/export.h"

namespace openlake::kv {

inline constexpr size_t kMaxKeyBytes = 32;
// Block sizes a namespace may declare.
inline constexpr uint32_t kMinBlockBytes = 64;

class BlockKey {
 public:
  BlockKey() = default;
  // Takes the first kMaxKeyBytes bytes of `bytes` (callers pass at most that many).
  explicit BlockKey(std::string_view bytes) {
    len_ = static_cast<uint8_t>(bytes.size() < kMaxKeyBytes ? bytes.size() : kMaxKeyBytes);
    // A full-length key (a 32-byte block hash, the common case) is a fixed-size copy the
    // compiler inlines; a variable length is a call into libc.
    if (len_ == kMaxKeyBytes) {
      std::memcpy(bytes_.data(), bytes.data(), kMaxKeyBytes);
    } else {
      std::memcpy(bytes_.data(), bytes.data(), len_);
    }
  }
  std::string_view bytes() const {
    return std::string_view(reinterpret_cast<const char*>(bytes_.data()), len_);
  }
  size_t size() const { return len_; }
  bool empty() const { return len_ == 0; }
  // All kMaxKeyBytes bytes; those past size() are always zero, so whole-array comparisons and
  // hashes are exact.
  const uint8_t* padded() const { return bytes_.data(); }
  friend bool operator==(const BlockKey& a, const BlockKey& b) {
    return a.len_ == b.len_ && std::memcmp(a.bytes_.data(), b.bytes_.data(), kMaxKeyBytes) == 0;
  }

 private:
  std::array<uint8_t, kMaxKeyBytes> bytes_{};
  uint8_t len_ = 0;
};

struct LayoutFingerprint {
  std::string model;
  std::string dtype;
  std::string layout;  // e.g. "NHD", "HND", "MLA", "[B,H,N,C]"
  uint32_t num_layers = 0;
  uint32_t num_kv_heads = 0;
  uint32_t head_size = 0;
  uint32_t block_tokens = 0;
  uint32_t tp_rank = 0;
  uint32_t tp_size = 1;
  uint32_t pp_rank = 0;
  uint32_t pp_size = 1;
  std::string extra;  // anything else the engine wants to pin down

  // "model=... dtype=... layers=32 ...": every field, for messages.
  OL_EXPORT std::string Describe() const;
  // Stable 64-bit digest of every field (CRC-64 of a canonical encoding).
  OL_EXPORT uint64_t Digest() const;
  // The fields that differ from `other`, as "dtype: float16 vs bfloat16; ..."; empty if none.
  OL_EXPORT std::string Diff(const LayoutFingerprint& other) const;
  friend bool operator==(const LayoutFingerprint&, const LayoutFingerprint&) = default;
};

// An open namespace, as the client holds it. Every request names it by id and carries the
// digest; a digest that no longer matches (the namespace was re-created) is refused.
struct Namespace {
  uint32_t id = 0;
  uint64_t digest = 0;
  std::string name;
  uint32_t block_bytes = 0;
  uint64_t slot_bytes = 0;  // block_bytes rounded up to the slot alignment
};

struct NamespaceStats {
  std::string name;
  uint32_t id = 0;
  uint32_t block_bytes = 0;
  uint64_t blocks = 0;  // committed, visible
  std::string fingerprint;
};

struct PoolStats {
  uint64_t capacity_bytes = 0;  // slab size
  uint64_t segment_bytes = 0;
  uint32_t segments_total = 0;
  uint32_t segments_used = 0;
  uint64_t used_bytes = 0;  // committed blocks × their slot size
  uint64_t committed_blocks = 0;
  uint64_t reserved_slots = 0;
  uint64_t pinned_slots = 0;
  uint64_t namespaces = 0;
  uint64_t sessions = 0;  // connected clients
  // Counters since start.
  uint64_t lookups = 0;  // Lookup calls
  uint64_t lookup_keys = 0;
  uint64_t hits = 0;     // keys found by Lookup
  uint64_t misses = 0;   // first missing key of each Lookup plus the keys after it
  uint64_t commits = 0;  // blocks committed
  uint64_t evictions = 0;
  uint64_t expired_reservations = 0;
  uint64_t expired_pins = 0;
  uint64_t reserve_failures = 0;  // Reserve answered ResourceExhausted
  uint64_t bytes_in = 0;          // committed block bytes
  uint64_t bytes_out = 0;         // block bytes handed to Lookup
  // The disk tier (all zero without one; docs/kv-pool.md, "Disk tier").
  uint32_t disk_paths = 0;         // configured
  uint32_t disk_paths_online = 0;  // not taken offline by an I/O error
  uint64_t disk_capacity_bytes = 0;
  uint64_t disk_used_bytes = 0;  // slots holding blocks
  uint64_t disk_blocks = 0;
  uint64_t dirty_blocks = 0;    // committed in the slab, not yet on disk
  uint64_t disk_hits = 0;       // keys Lookup served by reading them back from disk
  uint64_t spilled_blocks = 0;  // written to disk
  uint64_t spilled_bytes = 0;
  uint64_t promoted_blocks = 0;  // read back into the slab
  uint64_t promoted_bytes = 0;
  uint64_t spill_drops = 0;           // evicted from the slab before the disk had them
  uint64_t disk_evictions = 0;        // dropped from disk to make room
  uint64_t disk_errors = 0;           // failed reads, writes and syncs
  uint64_t disk_checksum_errors = 0;  // blocks read back whose CRC-64 did not match
  uint64_t recovered_blocks = 0;      // found on disk at start
  double recovery_seconds = 0;        // time to read the disk tier's indexes at start
  // The cluster pool (all zero outside a cluster; docs/kv-pool.md, "Cluster pool").
  uint32_t cluster_nodes = 0;     // members of [[nodes]], this daemon included
  uint64_t remote_hits = 0;       // keys Lookup served by pulling them from a peer
  uint64_t remote_probe_hits = 0;  // keys Exists counted as present on a peer
  uint64_t pulls = 0;             // local misses that asked a peer for blocks
  uint64_t pulled_blocks = 0;     // read from a peer, verified and committed here
  uint64_t pulled_bytes = 0;
  uint64_t pull_failures = 0;     // an owner was asked and nothing came (down, late, refused)
  uint64_t pull_rejected_blocks = 0;  // pulled, but failed their CRC-64 or came after the lease
  double pull_get_seconds = 0;    // spent in the UCX gets of pulls that brought blocks
  uint64_t probes = 0;            // local misses of Exists that asked a peer
  uint64_t announcements = 0;     // messages to the homes of chain heads held here
  uint64_t peer_lookups = 0;      // PeerLookups served to other daemons
  uint64_t peer_served_blocks = 0;  // blocks pinned here for other daemons' gets
  double hit_rate() const {
    return lookup_keys ? static_cast<double>(hits) / static_cast<double>(lookup_keys) : 0.0;
  }
  std::vector<NamespaceStats> per_namespace;
};

// The pool's handles, one set for the client and the service (kv/pool.h): for engines that
// move the bytes themselves (e.g. by GPU DMA from the registered slab), and for the pool.
//
// A reserved slot: its id ((segment << 32) | index), the offset of its bytes from the slab's
// start (Client::slab_base()), and the generation that proves the slot is still the one granted.
struct SlotGrant {
  uint64_t slot = 0;
  uint64_t offset = 0;
  uint64_t generation = 0;
};
// A hit of a Lookup, pinned: as a grant, plus the block's CRC-64 as its writer committed it.
struct SlotHit {
  uint64_t slot = 0;
  uint64_t offset = 0;
  uint64_t generation = 0;
  uint64_t checksum = 0;
};
// The answer of a Lookup: the leading hits, all pinned under one pin batch id.
struct Pins {
  uint64_t batch = 0;  // 0 when nothing was found (nothing to release)
  std::vector<SlotHit> hits;
  uint32_t from_disk = 0;  // of the hits, how many were read back from the disk tier for this call
  uint32_t from_peers = 0;  // of the hits, how many were pulled from another node for this call
};
// One block to commit: the reserved slot it was written into, its key, the CRC-64 of its bytes
// (Crc64) and its position in its chain (0 = the first block of a prompt), which eviction
// uses to take a chain's tail before its head.
struct CommitEntry {
  uint64_t slot = 0;
  BlockKey key;
  uint64_t checksum = 0;
  uint32_t depth = 0;
};
// The answer of Exists: how many leading keys are present, and which keys are.
struct ExistsResult {
  size_t prefix = 0;
  std::vector<bool> present;
  // The last `on_peers` keys of the prefix are held by other nodes of the cluster, not this
  // daemon: a Lookup pulls them first.
  size_t on_peers = 0;
};

}  // namespace openlake::kv

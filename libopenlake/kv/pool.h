// The KV pool's state: slot allocator, block index, namespaces, sessions with their leases, and
// eviction. A plain single-threaded state machine over a mapped slab: it does no I/O and reads
// no clock (callers pass `now_ns`), so tests drive it directly. The service owns one Pool on
// one reactor; nothing else touches it.
//
// Slots. The slab is cut into equal segments. A segment is formatted for one slot size (a size
// class: a block size rounded up to its alignment) when a namespace of that size first needs
// room, and returns to the free segments when its last slot is freed. A slot is free,
// reserved (by one session, for one namespace, until its lease ends), committed (bound to a
// key, visible to Lookup), or orphaned (committed, then unbound by Reset or overwritten, but
// still pinned by a reader; freed when the last pin goes).
//
// Leases. Reservations and read pins belong to the session (connection) that took them and end
// when it closes or when `lease` passes without a Release. The pins of one Lookup form a pin
// batch, released (or expired) together by its id. ExpireLeases walks what sessions hold
// (bounded by the number of slots), so nothing is kept for leases already released.
//
// Eviction: approximate LRU, prefix-aware. Commit and Lookup stamp a slot with the time (in
// units of 2^30 ns, about a second). A Reserve that finds no free slot and no free segment
// sweeps a clock hand over its size class and, among the next `evict_sample` committed,
// unpinned slots, evicts the one stamped earliest; among equally old ones, the deepest in its
// chain (largest depth), so a prefix's tail goes before its head. When a class has nothing to
// evict, the coldest segment of another class whose slots are all evictable is reclaimed
// whole. A Reserve that cannot be met in full (without allow_partial) answers
// ResourceExhausted before evicting anything, as does one past the session's cap
// (max_reserved_bytes_per_session). A segment free for `trim_after_ns` returns its
// memory to the kernel (MADV_REMOVE) when TrimFreeSegments runs.
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include "kv/layout.h"
#include "kv/ns_key.h"

#include "openlake/kv/types.h"

namespace openlake::kv {

struct NsRef {
  uint32_t id = 0;
  uint64_t digest = 0;
};

struct PoolOptions {
  int64_t lease_ns = 60'000'000'000;  // reservations and pins
  uint32_t evict_sample = 16;
  int64_t trim_after_ns = 10'000'000'000;  // free segments older than this give memory back
  // Bytes of slots one session may hold reserved at once (0: no cap). A Reserve past it is
  // cut to what is left (allow_partial) or refused, before anything is evicted: one client
  // cannot empty the pool of everyone else's blocks or keep every slot from other writers.
  uint64_t max_reserved_bytes_per_session = 0;
  // Owner of namespaces opened without one (Pool::OpenNamespace).
  uint32_t default_owner = 0;
  // A disk tier holds copies of blocks (kv/disk_tier.h): committed blocks are queued for the
  // spiller (TakeSpill), eviction prefers blocks the disk already holds, and a block evicted
  // before the disk had it counts as a spill drop.
  bool spill = false;
};

// A committed block handed to the spiller, pinned until EndSpill.
struct SpillBlock {
  uint64_t slot = 0;
  uint64_t generation = 0;
  uint64_t offset = 0;      // of its bytes in the slab
  uint64_t slot_bytes = 0;  // the slot's size
  uint32_t ns = 0;
  uint32_t block_bytes = 0;
  uint32_t depth = 0;
  uint64_t checksum = 0;
  BlockKey key;
};

// Who asks: a namespace belongs to the uid that created it; `admin` (the daemon's own user,
// root, a holder of the shared secret) may change any namespace.
struct Caller {
  uint32_t uid = 0;
  bool admin = true;
};

class Pool {
 public:
  // The values it answers are the client's own (openlake/kv/types.h): SlotGrant, CommitEntry,
  // SlotHit, Pins, ExistsResult.

  // `slab` is the mapped slab with a valid header; the pool formats segments as it uses them.
  Pool(void* slab, PoolOptions options);

  // Creates `name` or returns the existing one. FailedPrecondition when it exists with another
  // fingerprint or block size; InvalidArgument for a block size that fits no segment.
  // A new namespace belongs to `caller`'s uid.
  absl::StatusOr<Namespace> OpenNamespace(std::string_view name, const LayoutFingerprint& fp,
                                          uint32_t block_bytes, Caller caller = {});
  // OK when `caller` may change `ns` (Reserve into it, Commit, Remove, Reset): it owns it or
  // is an admin. PermissionDenied naming the owner otherwise; reading (Lookup, Exists) is open
  // to every client the server admitted.
  absl::Status MayWrite(NsRef ns, Caller caller) const;
  // PoolOptions::max_reserved_bytes_per_session.
  uint64_t max_reserved_bytes() const { return options_.max_reserved_bytes_per_session; }

  // The namespace called `name`, with its fingerprint's description; NotFound when none. For
  // readers that only ask what exists (a scheduler) and cannot compute the full fingerprint.
  absl::StatusOr<Namespace> FindNamespace(std::string_view name, std::string* fingerprint) const;

  // Ends a session: frees its reservations and drops its pins.
  void CloseSession(uint64_t session);

  // Reserves `count` slots for `ns`. With `allow_partial`, returns as many as could be had
  // (ResourceExhausted only when none); without, all or ResourceExhausted.
  absl::StatusOr<std::vector<SlotGrant>> Reserve(uint64_t session, NsRef ns, uint32_t count,
                                                 bool allow_partial, int64_t now_ns);
  // Makes the blocks visible, all or none: every slot must be reserved by this session for this
  // namespace with its lease still running (FailedPrecondition otherwise, naming the entry),
  // and no slot or key may appear twice. A key already present is replaced (newest wins).
  absl::Status Commit(uint64_t session, NsRef ns, absl::Span<const CommitEntry> entries,
                      int64_t now_ns);
  // The longest run of leading keys present, pinned for this session as one pin batch.
  // `count` false: a second pass of one client's Lookup (after blocks came back from disk),
  // left out of the lookup counters.
  absl::StatusOr<Pins> Lookup(uint64_t session, NsRef ns, absl::Span<const BlockKey> keys,
                              int64_t now_ns, bool count = true);
  // Whether (ns, key) is committed in the slab.
  bool Contains(uint32_t ns, const BlockKey& key) const {
    return index_.contains(IndexKey{ns, key});
  }
  // Drops this session's pin batches and frees its reservations. Unknown ones are
  // InvalidArgument (after releasing the valid ones).
  absl::Status Release(uint64_t session, absl::Span<const uint64_t> pin_batches,
                       absl::Span<const uint64_t> reserved);
  // Presence without pinning or touching recency.
  absl::StatusOr<ExistsResult> Exists(NsRef ns, absl::Span<const BlockKey> keys) const;
  // Drops every block of `ns` (pinned ones stay readable until released). Other namespaces are
  // untouched.
  absl::Status Reset(NsRef ns);
  // Drops the blocks of these keys (pinned ones stay readable until released); returns how
  // many were present.
  absl::StatusOr<uint32_t> Remove(NsRef ns, absl::Span<const BlockKey> keys);
  // Ends leases whose deadline is ≤ now_ns; returns how many reservations and pins ended.
  size_t ExpireLeases(int64_t now_ns);
  // Returns the memory of segments free since before now_ns - trim_after_ns to the kernel.
  // Returns how many segments it trimmed.
  size_t TrimFreeSegments(int64_t now_ns);

  // ---- The disk tier's side (PoolOptions::spill). A committed block is dirty until the disk
  // holds a copy of it (clean). TakeSpill hands out up to `max_blocks` dirty, committed blocks
  // (at most `max_bytes` of slots), oldest commit first, each pinned so that it stays in place
  // while it is written. SpillCurrent says whether such a block is still the one taken (not
  // removed, reset or overwritten since); EndSpill unpins it, marking it clean when `stored`
  // (else it is queued again).
  size_t TakeSpill(size_t max_blocks, uint64_t max_bytes, std::vector<SpillBlock>* out);
  bool SpillCurrent(uint64_t slot, uint64_t generation) const;
  void EndSpill(uint64_t slot, uint64_t generation, bool stored);
  // The committed block of (ns, key), when the disk holds an identical copy already (a commit
  // of bytes the disk has): marks it clean. False when no such block is in the slab.
  bool MarkClean(uint32_t ns, const BlockKey& key, uint64_t checksum);
  // Blocks read back from disk: committed like Commit's, clean, except that a key present
  // already is left alone (its reservation is freed). Returns how many were committed.
  absl::StatusOr<uint32_t> Promote(uint64_t session, NsRef ns,
                                   absl::Span<const CommitEntry> entries, int64_t now_ns);
  // A Lookup answered partly from disk: `n` keys its first pass counted as misses were hits.
  void CountTierHits(uint64_t n, uint32_t block_bytes);
  uint64_t dirty_blocks() const { return dirty_count_; }
  // The owner (uid) of namespace `id`, 0 when none.
  uint32_t OwnerOf(uint32_t id) const;
  // The namespace's block size, 0 when none.
  uint32_t BlockBytesOf(uint32_t id) const;
  // Namespace `id` (its name and digest name it to other daemons); null when none.
  const Namespace* NamespaceOf(uint32_t id) const;
  // The depth a committed slot's block was committed with (0 for a slot that does not exist).
  uint32_t DepthOf(uint64_t slot) const {
    const SlotMeta* m = Meta(slot);
    return m != nullptr ? m->depth : 0;
  }
  // A session that belongs to the daemon itself (the disk tier's promotions): no reservation
  // cap applies to it.
  static constexpr uint64_t kInternalSession = ~uint64_t{0} - 1;

  PoolStats Stats() const;
  // Walks every structure and checks the invariants the docs state; Internal on a violation.
  absl::Status CheckInvariants() const;

  uint64_t slab_bytes() const { return header_->total_bytes; }
  int64_t lease_ns() const { return options_.lease_ns; }

 private:
  enum class State : uint8_t { kFree, kReserved, kCommitted, kOrphan };

  using IndexKey = NsKey;
  using IndexKeyHash = NsKeyHash;

  struct SlotMeta {
    State state = State::kFree;
    uint32_t ns = 0;
    uint32_t pins = 0;
    uint32_t depth = 0;
    uint64_t session = 0;     // reserving session
    int64_t deadline_ns = 0;  // reservation deadline
    uint64_t generation = 0;
    uint64_t checksum = 0;
    int64_t stamp = 0;  // time of last commit/lookup, in 2^30 ns units
    bool clean = false;  // the disk tier holds a copy
    BlockKey key;
  };

  struct Segment {
    int32_t cls = -1;  // size class, -1 when unassigned
    uint32_t slot_count = 0;
    uint64_t slot_bytes = 0;
    uint64_t data_offset = 0;  // from the slab's start
    std::vector<SlotMeta> slots;
    std::vector<uint32_t> free;  // stack of free slot indexes
    uint32_t busy = 0;           // reserved + pinned + orphaned slots
    int64_t stamp = 0;           // latest stamp of its slots
    bool listed = false;         // in its class's with_free list
    int64_t freed_ns = 0;        // when it joined the free segments
    bool resident = false;       // its pages may hold memory (not trimmed since last use)
  };

  struct SizeClass {
    uint64_t slot_bytes = 0;
    uint32_t slots_per_segment = 0;
    std::vector<uint32_t> segments;
    std::vector<uint32_t> with_free;  // segments that may have free slots (checked lazily)
    uint64_t evictable = 0;           // committed, unpinned slots
    size_t hand_seg = 0;              // the eviction clock hand: position in `segments`
    uint32_t hand_idx = 0;            // and slot index there
  };

  struct NamespaceState {
    Namespace ns;
    LayoutFingerprint fp;
    int32_t cls = -1;
    uint64_t blocks = 0;
    uint32_t owner = 0;  // uid of its creator
  };

  struct PinBatch {
    int64_t deadline_ns = 0;
    std::vector<uint64_t> slots;
  };
  struct Session {
    absl::flat_hash_map<uint64_t, PinBatch> pins;  // by batch id
    absl::flat_hash_set<uint64_t> reservations;
    uint64_t reserved_bytes = 0;  // slot bytes of `reservations`
  };

  static uint64_t SlotId(uint32_t seg, uint32_t idx) { return (uint64_t{seg} << 32) | idx; }
  static uint32_t SegOf(uint64_t slot) { return static_cast<uint32_t>(slot >> 32); }
  static uint32_t IdxOf(uint64_t slot) { return static_cast<uint32_t>(slot); }
  static int64_t Stamp(int64_t now_ns) { return now_ns >> 30; }

  SlotMeta* Meta(uint64_t slot);
  const SlotMeta* Meta(uint64_t slot) const;
  layout::SlotHeader* Shm(uint64_t slot);
  uint64_t OffsetOf(uint64_t slot) const;

  absl::StatusOr<NamespaceState*> Check(NsRef ref);
  absl::StatusOr<const NamespaceState*> Check(NsRef ref) const;

  int32_t ClassFor(uint64_t slot_bytes);
  void FormatSegment(uint32_t seg, int32_t cls);
  void ReleaseSegment(uint32_t seg);
  // Slots of class `cls` that Reserve could obtain now (free, evictable or reclaimable).
  uint64_t Obtainable(int32_t cls) const;
  // A free slot of class `cls`, evicting if need be; kNil when nothing can be had.
  uint64_t AcquireSlot(int32_t cls);
  uint64_t PopFree(int32_t cls);
  bool EvictOne(int32_t cls);
  bool ReclaimSegment(int32_t cls);
  void FreeSlot(uint64_t slot);
  void Unbind(uint64_t slot);  // committed → (free | orphan)
  void Unpin(uint64_t slot);
  void Touch(SlotMeta* m, uint64_t slot, int64_t stamp);
  void Pin(uint64_t slot);
  // Commits one validated entry (Commit and Promote).
  void Bind(uint64_t session, NamespaceState* ns, const CommitEntry& e, int64_t stamp, bool clean);
  void EndPins(Session& sess, PinBatch& batch);
  // Frees a slot `sess` held reserved (release, expiry, close); the caller erases it from
  // sess.reservations.
  void EndReservation(Session& sess, uint64_t slot);
  // Writes fresh random bytes over the start of a slot about to be granted, so that what an
  // earlier block left there cannot pass its old checksum under a new key.
  void Scrub(uint64_t slot);

  static constexpr uint64_t kNil = ~uint64_t{0};
  // Index entries past which Lookup prefetches (about 8 MiB of index: beyond a core's L2).
  static constexpr size_t kPrefetchAbove = 1 << 17;

  PoolOptions options_;
  void* base_;
  const layout::SlabHeader* header_;
  std::vector<Segment> segments_;
  std::vector<uint32_t> free_segments_;  // stack: the most recently freed on top
  std::vector<SizeClass> classes_;
  absl::flat_hash_map<IndexKey, uint64_t, IndexKeyHash> index_;
  absl::flat_hash_map<std::string, uint32_t> ns_by_name_;
  absl::flat_hash_map<uint32_t, NamespaceState> namespaces_;
  uint32_t next_ns_id_ = 1;
  absl::flat_hash_map<uint64_t, Session> sessions_;
  uint64_t next_pin_batch_ = 1;
  int64_t last_now_ns_ = 0;  // latest time seen, for stamping freed segments
  uint64_t reserved_ = 0;
  uint64_t pinned_ = 0;
  uint64_t scrub_state_;  // splitmix64 state, seeded at random
  // Dirty committed blocks in commit order, as (slot, generation); stale entries are skipped.
  std::deque<std::pair<uint64_t, uint64_t>> dirty_;
  uint64_t dirty_count_ = 0;
  absl::flat_hash_map<uint64_t, uint32_t> spill_pins_;  // slot → pins held by the spiller
  PoolStats counters_;
};

}  // namespace openlake::kv

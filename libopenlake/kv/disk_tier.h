// The KV pool's disk tier: blocks evicted from the slab live on in a data file per configured
// path (one per NVMe drive), indexed by an append-only log (kv/disk_log.h), and a later Lookup
// reads them back into slab slots. The format is in docs/kv-pool.md ("Disk tier").
//
// Layout. Each path holds `kv-blocks.dat`, preallocated to its capacity and cut into segments;
// a segment holds slots of one size (a block size rounded up to 4 KiB), so every transfer is
// O_DIRECT, straight between the slab's memory and the file. The index lives in memory; the
// log `kv-index.log` beside the data file is its durable form.
//
// Writes (Spill). A batch goes to one path: one O_DIRECT write per block, all submitted at
// once; when they are done, one fdatasync of the data file; then the caller's Confirm decides,
// block by block, whether the block is still wanted (not removed or overwritten meanwhile); the
// Put records of those that are go to the log (one write, one fdatasync), and only then are
// the blocks in the index and reported stored. So a Put in the log always follows its bytes.
//
// Reads (Read). One O_DIRECT read per block into the caller's memory, then the block's CRC-64
// against the one its writer committed: a mismatch is a miss, the entry is dropped, and it is
// counted. A slot being read is never reused until the read ends.
//
// Eviction. Bounded by capacity: when a size class runs short of free slots, its least recently
// used entries go (a clock hand samples them; the deepest in its chain among equally old), or a
// whole segment of another class. A freed slot is reused only once its Free record is durable,
// so a crash never leaves a Put pointing at another block's bytes.
//
// Faults. An I/O error takes the path offline (logged, counted): its entries leave the index,
// nothing more is written there, and the other paths and the slab keep serving. A path whose
// data file is deleted is noticed by Tick and goes offline too.
//
// Recovery (Open) reads each log, cuts a torn tail, and replays it: blocks completely written
// before a crash come back with their namespaces (name, fingerprint, block size, owner).
// Attach then rewrites each log as a snapshot of what it holds, which also bounds its length;
// while serving, a log that grows past twice its snapshot is rewritten the same way.
//
// Threading: Open, BindRecovered and Attach run on a control thread before serving; every other
// call runs on the reactor passed to Attach.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

#include "kv/disk_log.h"
#include "kv/ns_key.h"

#include "openlake/io/reactor.h"
#include "openlake/kv/types.h"

namespace openlake::kv {

struct DiskTierOptions {
  std::vector<std::string> paths;  // a folder per drive; created (0700) when missing
  uint64_t capacity_bytes = 0;     // per path
  // Segment size; halved (down to 4 MiB, or min_segment_bytes) until a path holds at least 16
  // segments.
  uint64_t segment_bytes = 64ull << 20;
  // The largest block that must fit in a segment (the KV service passes the slab's segment
  // size, which bounds its blocks); a path smaller than one such segment is refused.
  uint64_t min_segment_bytes = 0;
  uint32_t evict_sample = 16;
  // A log is rewritten once it is this much larger than a snapshot of what it holds, and at
  // least min_compact_bytes long.
  uint64_t min_compact_bytes = 16ull << 20;
};

struct DiskTierStats {
  uint32_t paths = 0;
  uint32_t paths_online = 0;
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t blocks = 0;
  uint64_t spilled_blocks = 0;
  uint64_t spilled_bytes = 0;
  uint64_t read_blocks = 0;  // read back and verified
  uint64_t read_bytes = 0;
  uint64_t evictions = 0;
  uint64_t io_errors = 0;
  uint64_t checksum_errors = 0;
  uint64_t recovered_blocks = 0;
  uint64_t torn_records = 0;  // logs cut at recovery (a torn tail, records that did not apply)
  double recovery_seconds = 0;
};

class DiskTier {
 public:
  struct RecoveredNamespace {
    std::string name;
    LayoutFingerprint fingerprint;
    uint32_t block_bytes = 0;
    uint32_t owner = 0;
  };

  // Opens (or creates) every path and recovers its index. A path that cannot be used is
  // offline from the start (logged); only options that make no sense are an error.
  static absl::StatusOr<std::unique_ptr<DiskTier>> Open(DiskTierOptions options);
  ~DiskTier();

  // The namespaces blocks were recovered for. BindRecovered(i, id) gives recovered namespace i
  // the pool's id; its blocks are served under that id from then on. Unbound ones are dropped.
  const std::vector<RecoveredNamespace>& recovered() const { return recovered_; }
  void BindRecovered(size_t i, uint32_t pool_ns);
  // Rewrites each log as a snapshot (blocking) and starts serving on `r`.
  absl::Status Attach(io::Reactor& r);

  // ---- On the reactor.
  // A namespace the pool opened: blocks of it may be spilled from now on.
  void BindNamespace(uint32_t ns, const std::string& name, const LayoutFingerprint& fp,
                     uint32_t block_bytes, uint32_t owner);
  bool Contains(uint32_t ns, const BlockKey& key) const;
  // Every block the tier holds at depth 0 (the head of its chain).
  void ForEachHead(absl::FunctionRef<void(uint32_t ns, const BlockKey& key)> fn) const;
  // True when the disk holds (ns, key) with this checksum.
  bool Holds(uint32_t ns, const BlockKey& key, uint64_t checksum) const;

  struct SpillItem {
    uint32_t ns = 0;
    BlockKey key;
    uint64_t checksum = 0;
    uint32_t depth = 0;
    const std::byte* data = nullptr;  // the block's bytes (in the slab)
    uint32_t length = 0;              // bytes to write: the slab slot's size when 4 KiB-aligned
    uint64_t token = 0;               // the caller's, handed back
    uint64_t tag = 0;                 // the caller's too
  };
  // Asked once per block after its bytes are durable, before its Put is logged.
  using ConfirmFn = absl::AnyInvocable<bool(const SpillItem&)>;
  // token → stored.
  using SpillDoneFn = absl::AnyInvocable<void(std::vector<std::pair<uint64_t, bool>>)>;
  void SetConfirm(ConfirmFn confirm) { confirm_ = std::move(confirm); }
  // True when a path is online with room for another batch in flight.
  bool CanSpill() const;
  // Writes the blocks (to one path); `done` runs once, on the reactor, when each is stored or not.
  void Spill(std::vector<SpillItem> items, SpillDoneFn done);

  struct ReadItem {
    uint32_t ns = 0;
    BlockKey key;
    std::byte* dest = nullptr;  // at least `room` bytes
    uint64_t room = 0;
  };
  struct ReadResult {
    bool ok = false;  // read and verified
    uint64_t checksum = 0;
    uint32_t depth = 0;
  };
  // Reads the blocks into their destinations; `done` gets one result per item, in order.
  void Read(std::vector<ReadItem> items, absl::AnyInvocable<void(std::vector<ReadResult>)> done);

  // Drops (ns, key) / every block of `ns`, in flight ones included.
  void Drop(uint32_t ns, const BlockKey& key);
  void Reset(uint32_t ns);

  // Health check (a deleted data file takes its path offline) and log compaction. Call about
  // once a second.
  void Tick();
  // Operations in flight (writes, reads, log writes).
  size_t busy() const { return busy_; }

  DiskTierStats Stats() const;

 private:
  enum class St : uint8_t { kFree, kWriting, kLive, kDoomed };
  struct Slot {
    St st = St::kFree;
    bool cancelled = false;    // kWriting: dropped while in flight
    bool free_logged = false;  // kDoomed: its Free record is durable
    uint32_t readers = 0;
    uint32_t ns = 0;
    uint32_t depth = 0;
    uint64_t checksum = 0;
    int64_t stamp = 0;
    BlockKey key;
  };
  struct Segment {
    uint64_t slot_bytes = 0;  // 0: unassigned
    std::vector<Slot> slots;
    std::vector<uint32_t> free;  // free slot indexes
    uint32_t used = 0;           // slots not free
    bool listed = false;         // in its class's with_free list
    int64_t stamp = 0;
  };
  struct Class {
    uint64_t slot_bytes = 0;
    std::vector<uint32_t> segments;
    std::vector<uint32_t> with_free;
    uint64_t free_slots = 0;  // in segments of this class
    uint64_t live = 0;        // evictable candidates (live entries)
    size_t hand_seg = 0;
    uint32_t hand_idx = 0;
  };
  struct LogWaiter {
    uint64_t upto = 0;  // durable once the log's durable length reaches this
    absl::AnyInvocable<void()> fn;
  };
  struct Path {
    std::string dir;
    std::string why_offline;
    bool online = false;
    int data_fd = -1;    // buffered
    int direct_fd = -1;  // O_DIRECT, -1 when the file system refuses it
    int log_fd = -1;
    int dir_fd = -1;
    uint64_t tier_id = 0;
    uint64_t data_bytes = 0;
    uint64_t segment_bytes = 0;
    std::vector<Segment> segments;
    std::vector<uint32_t> free_segments;
    std::vector<Class> classes;
    // The log: what is written, what waits to be, what is durable.
    uint64_t log_bytes = 0;
    uint64_t log_durable = 0;
    uint64_t snapshot_bytes = 0;
    std::string log_pending;
    bool log_writing = false;
    bool compacting = false;
    std::vector<LogWaiter> log_waiters;
    absl::flat_hash_set<uint32_t> ns_logged;
    uint32_t batches = 0;  // spill batches in flight
    uint64_t live_blocks = 0;
    uint64_t used_slot_bytes = 0;
  };
  struct Ref {
    uint32_t path = 0;
    uint32_t seg = 0;
    uint32_t idx = 0;
  };
  struct NsInfo {
    std::string name;
    std::string fingerprint;  // wire::Fingerprint, serialised
    uint32_t block_bytes = 0;
    uint32_t owner = 0;
  };
  // A block recovered from a log, before its namespace is bound.
  struct Pending {
    uint32_t path;
    uint32_t recovered_ns;
    disklog::PutRec put;
    int64_t stamp;
  };

  explicit DiskTier(DiskTierOptions options) : options_(std::move(options)) {}
  absl::Status OpenPath(uint32_t index, std::vector<std::pair<uint32_t, disklog::Record>>* recs);
  void Recover(uint32_t path, const std::vector<disklog::Record>& records);
  std::string Snapshot(uint32_t path);

  static uint64_t SlotBytesFor(uint32_t block_bytes) {
    return (uint64_t{block_bytes} + 4095) / 4096 * 4096;
  }
  Slot& SlotAt(const Ref& r) { return paths_[r.path].segments[r.seg].slots[r.idx]; }
  uint64_t OffsetOf(const Ref& r) const;
  int32_t ClassOf(Path& p, uint64_t slot_bytes);
  void FormatSegment(Path& p, uint32_t seg, int32_t cls);
  // A free slot of `slot_bytes` on path `pi`; false when none is free now.
  bool Allocate(uint32_t pi, uint64_t slot_bytes, Ref* out);
  // Frees slots of the class ahead of need: dooms `n` least recently used entries.
  void EvictAhead(uint32_t pi, int32_t cls, uint32_t n);
  bool ReclaimSegment(uint32_t pi, int32_t cls);
  // Takes an entry out of the index and, with `log`, logs its Free; the slot is reused once that
  // is durable and no reader holds it (without `log`, the caller logs what frees it).
  // Takes `r` by value: callers pass the index's own entry, which Doom erases.
  void Doom(Ref r, bool log);
  void ReleaseSlot(const Ref& r);
  void FinishRead(const Ref& r);
  void Insert(const Ref& r);

  // Appends `bytes` to path `pi`'s log; `fn` (may be null) runs once they are durable.
  void LogAppend(uint32_t pi, const std::string& bytes, absl::AnyInvocable<void()> fn);
  void EnsureNsLogged(uint32_t pi, uint32_t ns);
  void FlushLog(uint32_t pi);
  void WriteLogAt(uint32_t pi, std::shared_ptr<std::string> buf, size_t done, uint64_t at);
  void LogDurable(uint32_t pi, uint64_t upto);
  void MaybeCompact(uint32_t pi);
  void Offline(uint32_t pi, const std::string& why);
  void FinishSpill(uint32_t pi, std::shared_ptr<struct SpillBatch> b);

  DiskTierOptions options_;
  io::Reactor* reactor_ = nullptr;
  std::vector<Path> paths_;
  absl::flat_hash_map<NsKey, Ref, NsKeyHash> index_;
  absl::flat_hash_map<uint32_t, NsInfo> namespaces_;  // by pool id
  std::vector<RecoveredNamespace> recovered_;
  std::vector<std::string> recovered_fp_;  // serialised fingerprints of recovered_
  std::vector<Pending> pending_;
  ConfirmFn confirm_;
  int64_t clock_ = 1;  // logical time for LRU
  uint32_t next_path_ = 0;
  size_t busy_ = 0;
  DiskTierStats counters_;
  friend struct SpillBatch;
};

}  // namespace openlake::kv

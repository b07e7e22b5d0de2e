// A drive's packed metadata records (docs/object-store.md, "Packed records").
//
// A small object's metadata file names no data folder: its shard is inline. Kept as a folder
// and a file per key per drive, each new small key costs the file system two inodes on every
// drive, and on these machines that, not the journal's fdatasync, bounds small PUTs. So with
// the commit journal on, such records live in the drive's pack instead: segment files under
// .openlake.sys/pack (named by a rising number), records appended back to back, and an index
// in memory from the object's metadata path to where its newest record is. A record is a
// JournalEntry in the engine's envelope (RecordType kPackEntry): PUT_META with the metadata
// file's bytes, REMOVE for a key that left the pack, DROP_BUCKET for a bucket trashed.
//
// Durability: an append is not synced. A step that packs a record logs it in the commit
// journal first, and a journal file is reused only after a syncfs that made its steps durable
// here too; a crash loses only appends the journal replays. Changes made without a journal
// step (a drive without one: the cluster's drive service, a test's bare drive) pass `sync`,
// and are fdatasynced before they return.
//
// Loading (the first For of a folder in the process): the segments are read in order, records
// that do not check out skipped, each up to where no record header starts, and the last record
// of each key decides (a DROP_BUCKET drops the bucket's earlier ones). A segment whose end does
// not parse is never appended to again (the next record starts a new one), so every load stops
// at the same place in it.
//
// Compaction: when the bytes of dead records (replaced, removed, tombstones) pass those of
// live ones and a floor, a thread of the pack's own copies the live records of the oldest
// segment to the newest, fdatasyncs them, and deletes the oldest. Only the oldest is ever
// compacted, so the tombstones and drops it holds have nothing older to hide and go with it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "store/drive_api.h"
#include "store/store.pb.h"

namespace openlake::store {

struct MetaPackOptions {
  uint64_t segment_bytes = 64u << 20;  // a segment is left once a record would pass this
  uint64_t min_garbage = 64u << 20;    // compaction waits for at least this many dead bytes
  bool background = true;              // a thread compacts when needed (tests call Compact)
};

class MetaPack {
 public:
  using Options = MetaPackOptions;
  // Records larger than this stay in the object's folder.
  static constexpr size_t kMaxRecord = 256u << 10;

  // The pack of the drive folder `root`, shared by every LocalDrive over it in this process;
  // loaded from its segments by the first call (blocking). `options` apply when it loads.
  static absl::StatusOr<std::shared_ptr<MetaPack>> For(const std::string& root,
                                                       Options options = Options());

  MetaPack(const MetaPack&) = delete;
  MetaPack& operator=(const MetaPack&) = delete;
  ~MetaPack();

  // The metadata file's bytes for the object whose metadata path (MetaPath) is `meta_path`;
  // NotFound when the pack does not hold it.
  absl::StatusOr<std::string> Read(const std::string& meta_path);
  bool Holds(const std::string& meta_path) const;

  // Appends the object's metadata and indexes it. `sync`: fdatasync before returning.
  absl::Status Put(const std::string& bucket, const std::string& key, const std::string& meta,
                   bool sync);
  // Appends a tombstone when the pack holds the object; nothing otherwise.
  absl::Status Remove(const std::string& bucket, const std::string& key, bool sync);
  // Forgets every object of the bucket (its folder went to the trash).
  absl::Status DropBucket(const std::string& bucket, bool sync);

  // The page of WalkRequest's keys (and common prefixes) the pack holds.
  std::vector<WalkItem> Walk(const WalkRequest& request) const;

  // The drive's folder (or its identity) was made anew while running: what the pack held is
  // forgotten and its folder read again.
  void Reset();

  struct Stats {
    uint64_t objects = 0;
    uint64_t segments = 0;
    uint64_t live_bytes = 0;
    uint64_t dead_bytes = 0;
    uint64_t compactions = 0;  // segments compacted away
    uint64_t reads = 0;        // records read (Read)
  };
  Stats stats() const;

  // Compacts the oldest segments while garbage outweighs live records and passes the floor
  // (the thread's work, run by tests directly). `force`: compacts every segment but the newest
  // once, whatever the garbage.
  absl::Status Compact(bool force = false);

 private:
  struct Segment {
    uint64_t id = 0;
    int fd = -1;
    uint64_t size = 0;
    uint64_t live = 0;
    ~Segment();
  };
  struct Loc {
    std::shared_ptr<Segment> seg;
    uint64_t offset = 0;
    uint32_t length = 0;
  };

  MetaPack(std::string root, Options options) : root_(std::move(root)), opts_(options) {}
  absl::Status Load();
  absl::Status LoadLocked();  // under mu_
  void Clear();               // forgets every record and segment; under mu_
  absl::Status LoadSegment(uint64_t id, bool newest);
  // Applies a record (from a load or an append) at `at` to the index. Under mu_.
  void Index(const pb::JournalEntry& e, const Loc& at);
  void Forget(const std::string& bucket, const std::string& key);
  // Appends an encoded record to the newest segment (a new one when it is full). Under mu_.
  absl::Status Append(std::string_view record, Loc* at);
  // Appends and indexes `e`; `sync`: fdatasync after.
  absl::Status Change(const pb::JournalEntry& e, bool sync);
  // True (and everything forgotten) when the newest segment was unlinked under us: the
  // drive's folder was removed while running. Under mu_.
  bool Gone();
  absl::Status OpenSegment(uint64_t id, bool create, std::shared_ptr<Segment>* out);
  absl::Status Sync(const Segment& seg) const;
  bool NeedsCompaction() const;
  void Compactor();

  std::string Dir() const;

  const std::string root_;
  const Options opts_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::map<uint64_t, std::shared_ptr<Segment>> segments_;  // by id; the last is appended to
  absl::flat_hash_map<std::string, Loc> index_;             // by metadata path
  absl::btree_set<std::string> keys_;                       // "<bucket>\0<key>", for walks
  uint64_t live_ = 0, total_ = 0, compactions_ = 0;  // bytes of live records, of all
  uint64_t reads_ = 0;
  bool roll_ = false;  // the newest segment ends in bytes that do not parse: start another
  std::thread compactor_;
  std::mutex compact_mu_;  // one compaction at a time
};

}  // namespace openlake::store

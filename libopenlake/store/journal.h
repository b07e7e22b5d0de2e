// A drive's commit journal: group commit for the steps that change an object's metadata file
// (docs/object-store.md, "The commit journal").
//
// Without it every commit on a drive costs a synced write of the record, an fsync of the
// object's folder and one of each folder it created: three journal commits of the file system
// for a new key, which is what kept 4 KiB PUTs near a hundred a second. With it a step is an
// entry appended to one of two preallocated files under .openlake.sys/journal; whoever finds no
// write in progress becomes the leader and writes every entry that has queued since, with one
// fdatasync (the file opened for the batch alone, so that nothing holds the drive's file
// system open for writing between batches), then wakes their owners on their own reactors. Only then does a step change the
// metadata file, without syncing it, and the engine counts the drive as committed: an
// acknowledgement still means durable on the write quorum.
//
// Files: entry records (meta.h's envelope, RecordType kJournalEntry) back to back after a
// 4 KiB header record naming the first sequence number the file holds this time round.
// Sequence numbers grow by one per entry across both files. A file grows in zero-filled 1 MiB
// steps, so that a batch's fdatasync has no size change to commit. When the active file is
// full the other takes over, provided it is reclaimed: the reclaim of a file starts when it is
// left, on a thread of its own, and waits until every step in it has been applied, then makes
// them durable in their real files with one syncfs(2). Its header is rewritten with the next
// batch it takes (under that batch's fdatasync), which voids its old entries. The file left
// behind still holds the newest steps, so what the journal holds is always the most recent
// stretch of the drive's history.
//
// Recovery (Open, before the engine reads the drive): the entries of both files, each file
// read from its header while sequence numbers rise and records check out, are replayed in
// sequence order: the last step per object decides (DROP_BUCKET voids the bucket's earlier
// steps), the drive applies it, one syncfs makes the lot durable and both headers are reset.
//
// Every change to an object's metadata file on the drive goes through here (LocalDrive's
// CommitObject and RemoveObject, and the trash of a bucket's folder); a change that did not
// would be undone by a replay of an older step.
#pragma once

#include <coroutine>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#include "store/store.pb.h"

#include "openlake/io/reactor.h"
#include "openlake/io/task.h"
#include "openlake/store/file_backend.h"

namespace openlake::store {

class DriveJournal {
 public:
  static constexpr uint64_t kHeaderBytes = 4096;
  // A file is switched once a batch would take it past this (a single larger batch still fits:
  // the file grows).
  static constexpr uint64_t kFileBytes = 32u << 20;

  // Applies one recovered step to the drive (blocking).
  using ApplyFn = std::function<absl::Status(const pb::JournalEntry&)>;

  // Replays what the journal under `fs` holds through `apply`, makes the drive durable and
  // opens the journal for new steps. Blocking: at start-up, before the drive is read.
  // `file_bytes`: the switch threshold (tests make it small).
  static absl::StatusOr<std::unique_ptr<DriveJournal>> Open(FileBackend* fs, const ApplyFn& apply,
                                                            uint64_t file_bytes = kFileBytes);

  DriveJournal(const DriveJournal&) = delete;
  DriveJournal& operator=(const DriveJournal&) = delete;
  ~DriveJournal();

  // Held from the moment a step's entry is durable until the step has changed the drive's
  // files: a journal file is reused only once every step in it has been applied (and synced).
  class Applying {
   public:
    Applying() = default;
    Applying(const Applying&) = delete;
    Applying& operator=(const Applying&) = delete;
    ~Applying() { Done(); }
    void Done();

   private:
    friend class DriveJournal;
    DriveJournal* journal_ = nullptr;
    int file_ = 0;
  };

  // Appends `entry` (numbering it) and returns once it is durable, written and fdatasynced
  // together with every entry that queued meanwhile. On success `applying` is held; the
  // caller applies the step, then lets go.
  io::Task<absl::Status> Log(pb::JournalEntry entry, Applying* applying);

  struct Stats {
    uint64_t entries = 0;   // steps made durable
    uint64_t batches = 0;   // fdatasyncs that made them so
    uint64_t switches = 0;  // file switches (one syncfs each)
    uint64_t replayed = 0;  // steps applied by the recovery at open
  };
  Stats stats() const;

 private:
  struct Waiter {
    std::coroutine_handle<> h;
    io::Reactor* home = nullptr;
    absl::Status status;
    int file = 0;
  };
  // The leader's alone, one leader at a time.
  struct File {
    uint64_t tail = kHeaderBytes;  // where the next batch goes
    uint64_t allocated = 0;        // bytes written since creation (zeros included)
    bool needs_header = false;     // the next batch rewrites the header first
  };
  class Enqueue;

  DriveJournal(FileBackend* fs, uint64_t file_bytes) : fs_(fs), file_bytes_(file_bytes) {}
  io::Task<void> Lead();
  io::Task<absl::Status> WriteBatch(std::string batch, uint64_t first_seq, int* file);
  bool Ready(int file);
  // Once every step in `file` is applied, syncfs, then `file` is ready to be reused.
  void StartReclaim(int file);

  FileBackend* fs_;
  const uint64_t file_bytes_;
  std::thread reclaimer_;  // the leader's alone (and the destructor's)
  File files_[2];
  int active_ = 0;  // the leader's alone

  mutable absl::Mutex mu_;
  uint64_t unapplied_[2] ABSL_GUARDED_BY(mu_) = {0, 0};  // durable steps not yet applied
  bool ready_[2] ABSL_GUARDED_BY(mu_) = {false, true};    // may be switched to
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  // The sequence number pending_ starts with.
  uint64_t pending_first_ ABSL_GUARDED_BY(mu_) = 1;
  std::string pending_ ABSL_GUARDED_BY(mu_);  // encoded entries waiting for the next batch
  std::vector<Waiter*> waiters_ ABSL_GUARDED_BY(mu_);
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace openlake::store

// A drive of this node: the per-drive API (drive_api.h) on a FileBackend, the kernel's file
// system or a test's faulty one. Namespace calls run synchronously on the calling reactor (a
// few system calls each, as the engine always made them); data and fsyncs go through io_uring.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "store/drive_api.h"
#include "absl/synchronization/mutex.h"

#include "store/journal.h"
#include "store/pack.h"

namespace openlake::store {

class LocalDrive final : public DriveApi {
 public:
  // `fs` must outlive the drive. `trashed` runs after something went into the trash (the
  // engine's purger wakes up); may be empty.
  LocalDrive(FileBackend* fs, std::function<void()> trashed)
      : fs_(fs), trashed_(std::move(trashed)) {}

  const std::string& name() const override { return fs_->root(); }
  bool is_local() const override { return true; }
  FileBackend& backend() { return *fs_; }

  io::Task<absl::StatusOr<std::string>> ReadFile(std::string path) override;
  io::Task<absl::Status> WriteFile(std::string path, std::string data, bool sync_dir) override;
  io::Task<absl::StatusOr<std::unique_ptr<FileHandle>>> OpenFile(std::string path,
                                                                 OpenMode mode) override;
  io::Task<absl::Status> MakeDirs(std::string path, std::string parents_from) override;
  io::Task<absl::StatusOr<std::vector<DirEntry>>> ReadDir(std::string path) override;
  io::Task<absl::StatusOr<bool>> Exists(std::string path) override;
  io::Task<absl::Status> Rename(std::string from, std::string to) override;
  io::Task<absl::Status> LinkInto(std::string dir, std::vector<LinkPair> links) override;
  io::Task<absl::Status> Unlink(std::string path) override;
  io::Task<absl::Status> RemoveDir(std::string path) override;
  io::Task<absl::Status> Trash(std::string path) override;
  io::Task<absl::Status> SyncDir(std::string path) override;
  io::Task<absl::StatusOr<DriveUsage>> Usage() override;
  io::Task<absl::Status> CommitObject(CommitStep step) override;
  io::Task<absl::Status> RemoveObject(std::string bucket, std::string key) override;
  io::Task<absl::StatusOr<std::vector<WalkItem>>> Walk(WalkRequest request) override;
  io::Task<absl::StatusOr<bool>> VerifyFile(VerifyRequest request) override;

  // Trash, for blocking callers (the engine's start-up).
  absl::Status TrashNow(const std::string& path);

  // The drive's pack of small objects' records (pack.h), loaded on first use; shared with
  // every other LocalDrive over the same folder in this process.
  absl::StatusOr<MetaPack*> Pack();
  // The drive's folder was made anew while running: the pack starts over.
  void ResetPack();

  // Loads the drive's pack, replays the drive's commit journal (journal.h) and, with `keep`,
  // opens it: from then on every change to an object's metadata file is a journal step,
  // group-committed with its neighbours, and a record that names no data folder is packed. Blocking, at start-up. Without a journal (`keep` false, a test's bare drive)
  // each commit syncs its own files; the replay still runs, so that steps a run with the
  // journal left are neither lost nor replayed later over newer changes.
  absl::Status OpenJournal(bool keep);

 private:
  // A recovered journal step, applied (blocking).
  absl::Status ApplyNow(const pb::JournalEntry& e);
  // RemoveObject's work, blocking: the object's folder (RemoveFolderNow) and its packed
  // record (synced when no journal step covers it).
  absl::Status RemoveObjectNow(const std::string& bucket, const std::string& key, bool sync);
  // The object's metadata file and data folders, and the folders that leaves empty.
  absl::Status RemoveFolderNow(const std::string& bucket, const std::string& key);
  // A packed record's step (PUT_META with `packed`), after its journal entry is durable:
  // the record is appended to the pack and the key's folder, if it had one, goes.
  absl::Status PutPackedNow(const std::string& bucket, const std::string& key,
                            const std::string& meta);
  // Logs `e` and returns once it is durable (OK at once without a journal).
  io::Task<absl::Status> Log(pb::JournalEntry e, DriveJournal::Applying* applying);

  FileBackend* fs_;
  std::function<void()> trashed_;
  std::unique_ptr<DriveJournal> journal_;
  absl::Mutex pack_mu_;
  std::shared_ptr<MetaPack> pack_ ABSL_GUARDED_BY(pack_mu_);
};

// The walk of one drive's folders (drive_walk.cc): WalkRequest's page of the keys whose
// metadata file is on `fs`, with a delimiter's common prefixes (docs/object-store.md,
// "Listing"). Blocking (readdir calls).
std::vector<WalkItem> WalkDrive(FileBackend& fs, const WalkRequest& request);

}  // namespace openlake::store

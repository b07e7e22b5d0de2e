// The commit every object write, delete and heal goes through (docs/object-store.md,
// "Commit"). Phase 1 makes the new version current on each drive while keeping the version it
// replaces beside it; only once a write quorum of drives has it does phase 2 drop the old one.
// A crash between the two leaves both on the drives, and the read quorum picks whichever
// enough drives hold: the old object or the new one, never a mix, never neither.
#include "store/engine.h"
#include "store/errors.h"
#include "store/names.h"

#include "openlake/log.h"
#include "openlake/strings.h"

namespace openlake::store {
namespace {

bool HoldsVersion(const MetaRead& m, const std::string& id, const pb::ObjectVersion** copy) {
  if (m.kind != MetaRead::kOk) return false;
  for (const pb::ObjectVersion& v : m.meta.versions()) {
    if (v.version_id() == id) {
      *copy = &v;
      return true;
    }
  }
  return false;
}

}  // namespace

io::Task<absl::Status> Engine::CommitOnDrive(int set, int pos, const std::string& bucket,
                                             const std::string& key, const DriveCommit& dc,
                                             const pb::ObjectVersion* keep) {
  FileBackend* f = fs(set, pos);
  if (f == nullptr) co_return Error(ErrorKind::kInsufficientDrives, "drive offline");
  const std::string dir = ObjectDir(bucket, key);
  absl::Status s = co_await MakeDirsDurable(*f, dir, bucket);
  if (absl::IsNotFound(s)) {
    co_return Error(ErrorKind::kNoSuchBucket,
                    StrCat("bucket \"", bucket, "\" is missing on ", f->root()));
  }
  OL_CO_RETURN_IF_ERROR(s);
  const std::string new_data = DataDirOf(dc.version);
  if (!dc.staged_dir.empty()) {
    // A data folder of this version may be there already (a heal, a retried commit).
    OL_CO_RETURN_IF_ERROR(Trash(*f, StrCat(dir, "/", new_data)));
    OL_CO_RETURN_IF_ERROR(f->Rename(dc.staged_dir, StrCat(dir, "/", new_data)));
    OL_CO_RETURN_IF_ERROR(co_await SyncDir(*f, dir));
  }
  pb::ObjectMeta meta;
  meta.set_bucket(bucket);
  meta.set_key(key);
  *meta.add_versions() = dc.version;
  if (keep != nullptr && keep->version_id() != dc.version.version_id()) {
    *meta.add_versions() = *keep;
  }
  OL_CO_RETURN_IF_ERROR(co_await AtomicReplace(*f, StrCat(dir, "/", kMetaName),
                                               EncodeRecord(RecordType::kObjectMeta, meta),
                                               /*sync_dir=*/true));
  // Data folders of any other version (failed writes, versions already replaced) go.
  std::string keep_data;
  if (keep != nullptr) keep_data = DataDirOf(*keep);
  auto entries = f->ReadDir(dir);
  if (entries.ok()) {
    for (const DirEntry& e : *entries) {
      if (e.name.rfind(kDataPrefix, 0) == 0 && e.name != new_data && e.name != keep_data) {
        (void)Trash(*f, StrCat(dir, "/", e.name));
      }
    }
  }
  co_return absl::OkStatus();
}

absl::Status Engine::RemoveObjectOnDrive(int set, int pos, const std::string& bucket,
                                         const std::string& key) {
  FileBackend* f = fs(set, pos);
  if (f == nullptr) return Error(ErrorKind::kInsufficientDrives, "drive offline");
  std::string dir = ObjectDir(bucket, key);
  auto entries = f->ReadDir(dir);
  if (!entries.ok()) return absl::IsNotFound(entries.status()) ? absl::OkStatus() : entries.status();
  for (const DirEntry& e : *entries) {
    if (e.name == kMetaName) {
      OL_RETURN_IF_ERROR(f->Unlink(StrCat(dir, "/", e.name)));
    } else if (e.name.rfind(kDataPrefix, 0) == 0) {
      OL_RETURN_IF_ERROR(Trash(*f, StrCat(dir, "/", e.name)));
    }
  }
  // Prune folders left empty, up to (not including) the bucket.
  while (dir.size() > bucket.size()) {
    if (!f->RemoveDir(dir).ok()) break;
    dir = ParentOf(dir);
  }
  return absl::OkStatus();
}

io::Task<absl::Status> Engine::CommitVersion(int set, std::string bucket, std::string key,
                                             std::vector<DriveCommit> commits, int quorum) {
  Resolved cur = co_await ReadAndResolve(set, bucket, key);
  const bool had_current = cur.status.ok() || (cur.holders > 0 && cur.version.deleted());

  // Phase 1, all drives at once.
  std::vector<const pb::ObjectVersion*> keep(static_cast<size_t>(n_), nullptr);
  std::vector<io::Task<absl::Status>> phase1;
  std::vector<int> positions;
  for (int p = 0; p < n_; ++p) {
    const DriveCommit& dc = commits[static_cast<size_t>(p)];
    if (!dc.use) continue;
    const pb::ObjectVersion* held = nullptr;
    if (had_current && HoldsVersion(cur.reads[static_cast<size_t>(p)], cur.version.version_id(),
                                    &held)) {
      keep[static_cast<size_t>(p)] = held;
    }
    phase1.push_back(CommitOnDrive(set, p, bucket, key, dc, keep[static_cast<size_t>(p)]));
    positions.push_back(p);
  }
  std::vector<absl::Status> results = co_await io::WhenAll(std::move(phase1));
  int ok = 0;
  absl::Status first_error;
  int full = 0;  // drives that had no room (ENOSPC, EDQUOT)
  std::vector<bool> done(static_cast<size_t>(n_), false);
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].ok()) {
      ++ok;
      done[static_cast<size_t>(positions[i])] = true;
    } else {
      if (first_error.ok()) first_error = results[i];
      if (absl::IsResourceExhausted(results[i])) ++full;
      OL_LOG_EVERY_N_SEC(kWarning, 5) << "store: commit of " << bucket << "/" << key
                                      << " on drive " << drive(set, positions[i]).path
                                      << " failed: " << results[i];
    }
  }

  if (ok < quorum) {
    // Roll back the drives that took it: the version they replaced becomes current again.
    for (int p = 0; p < n_; ++p) {
      if (!done[static_cast<size_t>(p)]) continue;
      FileBackend* f = fs(set, p);
      if (f == nullptr) continue;
      const pb::ObjectVersion* k = keep[static_cast<size_t>(p)];
      if (k != nullptr) {
        DriveCommit back;
        back.use = true;
        back.version = *k;
        absl::Status s = co_await CommitOnDrive(set, p, bucket, key, back, nullptr);
        if (!s.ok()) QueueHeal(bucket, key);
      } else {
        if (!RemoveObjectOnDrive(set, p, bucket, key).ok()) QueueHeal(bucket, key);
      }
    }
    if (ErrorKindOf(first_error) == ErrorKind::kNoSuchBucket && ok == 0) co_return first_error;
    // The drives' own errors name paths: they are in the log above, not in the answer.
    const ErrorKind kind = full > 0 ? ErrorKind::kStorageFull : ErrorKind::kInsufficientDrives;
    co_return Error(
        kind, StrCat("write quorum not reached: ", ok, " of ", n_, " drives committed, ", quorum,
                     " needed", full > 0 ? StrCat("; ", full, " drives are full") : ""));
  }

  // Phase 2: the new version stands; drop what it replaced.
  const DriveCommit* any = nullptr;
  for (const DriveCommit& c : commits) {
    if (c.use) any = &c;
  }
  const bool tombstone = any != nullptr && any->version.deleted();
  for (int p = 0; p < n_; ++p) {
    if (!done[static_cast<size_t>(p)]) continue;
    if (tombstone) {
      if (!RemoveObjectOnDrive(set, p, bucket, key).ok()) QueueHeal(bucket, key);
      continue;
    }
    if (keep[static_cast<size_t>(p)] == nullptr) continue;
    FileBackend* f = fs(set, p);
    if (f == nullptr) continue;
    DriveCommit alone = commits[static_cast<size_t>(p)];
    alone.staged_dir.clear();
    const std::string dir = ObjectDir(bucket, key);
    pb::ObjectMeta meta;
    meta.set_bucket(bucket);
    meta.set_key(key);
    *meta.add_versions() = alone.version;
    absl::Status s = co_await AtomicReplace(*f, StrCat(dir, "/", kMetaName),
                                            EncodeRecord(RecordType::kObjectMeta, meta),
                                            /*sync_dir=*/false);
    const std::string old_data = DataDirOf(*keep[static_cast<size_t>(p)]);
    if (s.ok() && old_data != DataDirOf(alone.version)) {  // not when the new one shares it
      s = Trash(*f, StrCat(dir, "/", old_data));
    }
    if (!s.ok()) QueueHeal(bucket, key);
  }
  if (ok < n_) QueueHeal(bucket, key);
  co_return absl::OkStatus();
}

}  // namespace openlake::store

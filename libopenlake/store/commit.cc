// The commit every object write, delete and heal goes through (docs/object-store.md,
// "Commit"). Phase 1 adds the new version to each drive's records, keeping the versions it
// holds beside it; only once a write quorum of drives has it does phase 2 drop what it
// supersedes (the previous record of its identity: the null version, for a bucket without
// versioning). A crash between the two leaves both on the drives, and the read quorum picks
// whichever enough drives hold: the old object or the new one, never a mix, never neither.
#include <algorithm>

#include "store/engine.h"
#include "store/errors.h"
#include "store/names.h"

#include "openlake/log.h"
#include "openlake/strings.h"

namespace openlake::store {

io::Task<absl::Status> Engine::CommitOnDrive(int set, int pos, const std::string& bucket,
                                             const std::string& key, const DriveCommit& dc,
                                             std::vector<pb::ObjectVersion> others,
                                             bool sync_dir) {
  DriveApi* d = api(set, pos);
  if (d == nullptr) co_return Error(ErrorKind::kInsufficientDrives, "drive offline");
  std::vector<const pb::ObjectVersion*> all{&dc.version};
  for (const pb::ObjectVersion& v : others) {
    if (v.version_id() != dc.version.version_id()) all.push_back(&v);
  }
  std::sort(all.begin(), all.end(), Newer);
  pb::ObjectMeta meta;
  meta.set_bucket(bucket);
  meta.set_key(key);
  for (const pb::ObjectVersion* v : all) *meta.add_versions() = *v;
  CommitStep step;
  step.bucket = bucket;
  step.key = key;
  step.staged_dir = dc.staged_dir;
  step.data_dir = DataDirOf(dc.version);
  step.meta = EncodeRecord(RecordType::kObjectMeta, meta);
  // The data folders in use: none when every version is inline (or has no bytes), and then
  // the drive may pack the record (store/pack.h).
  for (const pb::ObjectVersion* v : all) {
    if (!v->inline_data() && !v->deleted() && !v->delete_marker()) {
      step.keep_data_dirs.push_back(DataDirOf(*v));
    }
  }
  step.sync_dir = sync_dir;
  const absl::Status s = co_await d->CommitObject(std::move(step));
  co_return s;
}

io::Task<absl::Status> Engine::RemoveObjectOnDrive(int set, int pos, std::string bucket,
                                                   std::string key) {
  DriveApi* d = api(set, pos);
  if (d == nullptr) co_return Error(ErrorKind::kInsufficientDrives, "drive offline");
  const absl::Status s = co_await d->RemoveObject(std::move(bucket), std::move(key));
  co_return s;
}

io::Task<absl::Status> Engine::CommitVersion(int set, std::string bucket, std::string key,
                                             std::vector<DriveCommit> commits, int quorum,
                                             int64_t* mod_time) {
  Resolved cur = co_await ReadAndResolve(set, bucket, key);
  // What each drive holds of the key's versions stays beside the new one; so does a
  // tombstone of a delete in progress (a rollback brings it back).
  std::vector<const pb::ObjectVersion*> current = cur.versions;
  if (cur.versions.empty() && cur.holders > 0 && cur.version.deleted()) {
    current.push_back(&cur.version);
  }
  if (mod_time != nullptr) {
    int64_t newest = 0;
    for (const pb::ObjectVersion* v : current) newest = std::max(newest, v->mod_time_ns());
    for (DriveCommit& dc : commits) {
      if (dc.use && dc.version.mod_time_ns() <= newest) dc.version.set_mod_time_ns(newest + 1);
      if (dc.use) *mod_time = dc.version.mod_time_ns();
    }
  }

  // Phase 1, all drives at once.
  std::vector<std::vector<pb::ObjectVersion>> held(static_cast<size_t>(n_));
  std::vector<io::Task<absl::Status>> phase1;
  std::vector<int> positions;
  for (int p = 0; p < n_; ++p) {
    const DriveCommit& dc = commits[static_cast<size_t>(p)];
    if (!dc.use) continue;
    held[static_cast<size_t>(p)] = GoodRecords(cur.reads[static_cast<size_t>(p)], current);
    phase1.push_back(CommitOnDrive(set, p, bucket, key, dc, held[static_cast<size_t>(p)]));
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
    // Roll back the drives that took it: what they held before becomes theirs again.
    for (int p = 0; p < n_; ++p) {
      if (!done[static_cast<size_t>(p)]) continue;
      if (api(set, p) == nullptr) continue;
      std::vector<pb::ObjectVersion>& before = held[static_cast<size_t>(p)];
      if (!before.empty()) {
        DriveCommit back;
        back.use = true;
        back.version = before.front();
        absl::Status s = co_await CommitOnDrive(set, p, bucket, key, back, before);
        if (!s.ok()) QueueHeal(bucket, key);
      } else {
        const absl::Status s = co_await RemoveObjectOnDrive(set, p, bucket, key);
        if (!s.ok()) QueueHeal(bucket, key);
      }
    }
    if (ErrorKindOf(first_error) == ErrorKind::kNoSuchBucket && ok == 0) co_return first_error;
    // The drives' own errors name paths: they are in the log above, not in the answer.
    const ErrorKind kind = full > 0 ? ErrorKind::kStorageFull : ErrorKind::kInsufficientDrives;
    co_return Error(
        kind, StrCat("write quorum not reached: ", ok, " of ", n_, " drives committed, ", quorum,
                     " needed", full > 0 ? StrCat("; ", full, " drives are full") : ""));
  }

  // Phase 2: the new version stands; drop what it supersedes.
  for (int p = 0; p < n_; ++p) {
    if (!done[static_cast<size_t>(p)]) continue;
    const DriveCommit& dc = commits[static_cast<size_t>(p)];
    if (dc.version.deleted()) {
      const absl::Status s = co_await RemoveObjectOnDrive(set, p, bucket, key);
      if (!s.ok()) QueueHeal(bucket, key);
      continue;
    }
    std::vector<pb::ObjectVersion>& others = held[static_cast<size_t>(p)];
    const std::string identity = IdentityOf(dc.version);
    const size_t before = others.size();
    others.erase(std::remove_if(others.begin(), others.end(),
                                [&](const pb::ObjectVersion& v) {
                                  return v.version_id() != dc.version.version_id() &&
                                         (v.deleted() || IdentityOf(v) == identity);
                                }),
                 others.end());
    if (others.size() == before) continue;  // nothing superseded: phase 1 wrote it all
    DriveCommit alone = dc;
    alone.staged_dir.clear();
    // Not synced: until the rename is durable the drive holds the superseded record too,
    // which the read quorum orders below the new one.
    absl::Status s = co_await CommitOnDrive(set, p, bucket, key, alone, std::move(others),
                                            /*sync_dir=*/false);
    if (!s.ok()) QueueHeal(bucket, key);
  }
  if (ok < n_) QueueHeal(bucket, key);
  co_return absl::OkStatus();
}

}  // namespace openlake::store

// Buckets: a folder of that name on every drive of every set, plus a small record of its
// creation time (.openlake.sys/buckets/<name>.meta). A bucket exists when its folder is on at
// least half of the online drives (and one); create and delete need a majority of all drives.
#include <algorithm>
#include <map>

#include "store/engine.h"
#include "store/errors.h"
#include "store/names.h"

#include "openlake/log.h"
#include "openlake/strings.h"

namespace openlake::store {
namespace {

int Majority(int total) { return total / 2 + 1; }

}  // namespace

io::Task<absl::Status> Engine::MakeBucket(std::string bucket, std::string owner) {
  OL_CO_RETURN_IF_ERROR(ValidateBucketName(bucket));
  LockGuard lock = co_await locks_.Lock(StrCat("b:", bucket), true);
  const int total = static_cast<int>(drives_.size());
  int online = 0, present = 0;
  for (auto& d : drives_) {
    if (!d->online.load()) continue;
    ++online;
    auto e = d->fs->Exists(bucket);
    if (e.ok() && *e) ++present;
  }
  if (present > 0 && present * 2 >= online) {
    co_return Error(ErrorKind::kBucketExists, StrCat("bucket \"", bucket, "\" already exists"));
  }
  pb::BucketMeta meta;
  meta.set_name(bucket);
  meta.set_created_ns(NowNs());
  meta.set_owner(owner);
  meta.set_updated_ns(meta.created_ns());
  const std::string record = EncodeRecord(RecordType::kBucketMeta, meta);
  int ok = 0;
  std::vector<Drive*> made;
  for (auto& d : drives_) {
    if (!d->online.load()) continue;
    absl::Status s = d->fs->MakeDirs(bucket, "");
    if (s.ok()) s = co_await AtomicReplace(*d->fs, BucketMetaPath(bucket), record, true);
    if (s.ok()) {
      ++ok;
      made.push_back(d.get());
    } else {
      OL_LOG(kWarning) << "store: creating bucket " << bucket << " on " << d->path << ": " << s;
    }
  }
  if (ok < Majority(total)) {
    for (Drive* d : made) {
      (void)d->fs->RemoveDir(bucket);
      (void)d->fs->Unlink(BucketMetaPath(bucket));
    }
    co_return Error(ErrorKind::kInsufficientDrives,
                    StrCat("bucket \"", bucket, "\" reached ", ok, " drives; ",
                           Majority(total), " needed"));
  }
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<pb::BucketMeta>> Engine::NewestBucketRecord(std::string bucket) {
  OL_CO_RETURN_IF_ERROR(ValidateBucketName(bucket));
  int online = 0, present = 0;
  pb::BucketMeta newest;
  newest.set_name(bucket);
  newest.set_updated_ns(-1);
  for (auto& d : drives_) {
    if (!d->online.load()) continue;
    ++online;
    auto e = d->fs->Exists(bucket);
    if (!e.ok() || !*e) continue;
    ++present;
    // Every drive's record: one that missed a policy change (offline then) is older.
    absl::StatusOr<std::string> bytes = co_await ReadWholeFile(*d->fs, BucketMetaPath(bucket));
    pb::BucketMeta meta;
    if (bytes.ok() && DecodeRecord(RecordType::kBucketMeta, *bytes, &meta).ok() &&
        meta.updated_ns() > newest.updated_ns()) {
      newest = std::move(meta);
    }
  }
  if (present == 0 || present * 2 < online) {
    co_return Error(ErrorKind::kNoSuchBucket, StrCat("bucket \"", bucket, "\" does not exist"));
  }
  if (newest.updated_ns() < 0) newest.set_updated_ns(0);  // folders without a record
  newest.set_name(bucket);
  co_return newest;
}

io::Task<absl::StatusOr<BucketInfo>> Engine::StatBucket(std::string bucket) {
  OL_CO_ASSIGN_OR_RETURN(pb::BucketMeta meta, co_await NewestBucketRecord(bucket));
  BucketInfo info;
  info.name = std::move(bucket);
  info.created = FromNs(meta.created_ns());  // the epoch for folders without a record
  info.owner = meta.owner();
  info.policy = meta.policy();
  info.acl = meta.acl();
  info.lifecycle = meta.lifecycle();
  info.tagging = meta.tagging();
  info.versioning = meta.versioning() <= 2 ? static_cast<Versioning>(meta.versioning())
                                            : Versioning::kEnabled;
  co_return info;
}

// The setters change one field of the newest record (RewriteBucketRecord); plain functions
// handing on its task.
io::Task<absl::Status> Engine::SetBucketPolicy(std::string bucket, std::string policy) {
  return RewriteBucketRecord(std::move(bucket), "policy",
                             [policy = std::move(policy)](pb::BucketMeta& m) {
                               m.set_policy(policy);
                             });
}

io::Task<absl::Status> Engine::SetBucketAcl(std::string bucket, std::string acl) {
  return RewriteBucketRecord(std::move(bucket), "ACL",
                             [acl = std::move(acl)](pb::BucketMeta& m) { m.set_acl(acl); });
}

io::Task<absl::Status> Engine::SetBucketVersioning(std::string bucket, Versioning versioning) {
  if (versioning == Versioning::kUnversioned) {
    co_return absl::InvalidArgumentError("versioning cannot be turned off, only suspended");
  }
  std::function<void(pb::BucketMeta&)> change = [versioning](pb::BucketMeta& m) {
    m.set_versioning(static_cast<uint32_t>(versioning));
  };
  std::string what = "versioning";
  const absl::Status s =
      co_await RewriteBucketRecord(std::move(bucket), std::move(what), std::move(change));
  co_return s;
}

io::Task<absl::Status> Engine::SetBucketLifecycle(std::string bucket, std::string lifecycle) {
  return RewriteBucketRecord(std::move(bucket), "lifecycle",
                             [lifecycle = std::move(lifecycle)](pb::BucketMeta& m) {
                               m.set_lifecycle(lifecycle);
                             });
}

io::Task<absl::Status> Engine::SetBucketTagging(std::string bucket, std::string tagging) {
  return RewriteBucketRecord(std::move(bucket), "tags",
                             [tagging = std::move(tagging)](pb::BucketMeta& m) {
                               m.set_tagging(tagging);
                             });
}

io::Task<absl::Status> Engine::RewriteBucketRecord(std::string bucket, std::string what,
                                                   std::function<void(pb::BucketMeta&)> change) {
  OL_CO_RETURN_IF_ERROR(ValidateBucketName(bucket));
  const std::string lock_name = StrCat("b:", bucket);
  LockGuard lock = co_await locks_.Lock(lock_name, true);
  OL_CO_ASSIGN_OR_RETURN(pb::BucketMeta newest, co_await NewestBucketRecord(bucket));
  change(newest);
  newest.set_updated_ns(NowNs());
  const std::string record = EncodeRecord(RecordType::kBucketMeta, newest);
  const int total = static_cast<int>(drives_.size());
  int ok = 0;
  for (auto& d : drives_) {
    if (!d->online.load()) continue;
    auto e = d->fs->Exists(bucket);
    if (!e.ok() || !*e) continue;
    // The newest record changed, on every drive: one that missed an earlier change catches
    // up.
    absl::Status s = co_await AtomicReplace(*d->fs, BucketMetaPath(bucket), record, true);
    if (s.ok()) {
      ++ok;
    } else {
      OL_LOG(kWarning) << "store: " << what << " of bucket " << bucket << " on " << d->path
                       << ": " << s;
    }
  }
  if (ok < Majority(total)) {
    co_return Error(ErrorKind::kInsufficientDrives,
                    StrCat("the ", what, " of bucket \"", bucket, "\" reached ", ok, " drives; ",
                           Majority(total), " needed"));
  }
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<std::vector<BucketInfo>>> Engine::ListBuckets() {
  std::map<std::string, int> seen;
  int online = 0;
  for (auto& d : drives_) {
    if (!d->online.load()) continue;
    ++online;
    auto entries = d->fs->ReadDir("");
    if (!entries.ok()) continue;
    for (const DirEntry& e : *entries) {
      if (e.is_dir && ValidateBucketName(e.name).ok()) ++seen[e.name];
    }
  }
  std::vector<BucketInfo> out;
  for (const auto& [name, count] : seen) {
    if (count * 2 < online) continue;
    absl::StatusOr<BucketInfo> info = co_await StatBucket(name);
    if (info.ok()) out.push_back(*std::move(info));
  }
  co_return out;  // std::map: sorted by name
}

io::Task<absl::Status> Engine::DeleteBucket(std::string bucket) {
  OL_CO_RETURN_IF_ERROR(ValidateBucketName(bucket));
  LockGuard lock = co_await locks_.Lock(StrCat("b:", bucket), true);
  OL_CO_RETURN_IF_ERROR((co_await StatBucket(bucket)).status());
  for (int s = 0; s < sets_; ++s) {
    OL_CO_ASSIGN_OR_RETURN(std::vector<WalkItem> items,
                           WalkSet(s, bucket, "", "", "", 1, k_));
    if (!items.empty()) {
      co_return Error(ErrorKind::kBucketNotEmpty,
                      StrCat("bucket \"", bucket, "\" is not empty (holds \"", items[0].key,
                             "\")"));
    }
  }
  const int total = static_cast<int>(drives_.size());
  int ok = 0;
  for (auto& d : drives_) {
    if (!d->online.load()) continue;
    // Leftovers of failed writes and pending uploads go with it, into the trash.
    absl::Status st = Trash(*d->fs, bucket);
    if (st.ok()) st = Trash(*d->fs, StrCat(kMultipartDir, "/", bucket));
    if (st.ok()) {
      auto e = d->fs->Exists(BucketMetaPath(bucket));
      if (e.ok() && *e) st = d->fs->Unlink(BucketMetaPath(bucket));
    }
    if (st.ok()) st = co_await SyncDir(*d->fs, "");
    if (st.ok()) ++ok;
    else OL_LOG(kWarning) << "store: deleting bucket " << bucket << " on " << d->path << ": " << st;
  }
  if (ok < Majority(total)) {
    co_return Error(ErrorKind::kInsufficientDrives,
                    StrCat("bucket \"", bucket, "\" removed from ", ok, " drives; ",
                           Majority(total), " needed (a heal finishes it)"));
  }
  co_return absl::OkStatus();
}

}  // namespace openlake::store

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

// A bucket's folder and record on one drive.
io::Task<absl::Status> MakeBucketOn(DriveApi* d, std::string bucket, std::string record) {
  std::string none;
  OL_CO_RETURN_IF_ERROR(co_await d->MakeDirs(bucket, none));
  std::string path = BucketMetaPath(bucket);
  const absl::Status s = co_await d->WriteFile(path, std::move(record), true);
  co_return s;
}

// Removes a bucket's folder, uploads and record from one drive.
io::Task<absl::Status> DeleteBucketOn(DriveApi* d, std::string bucket) {
  OL_CO_RETURN_IF_ERROR(co_await d->Trash(bucket));
  std::string uploads = StrCat(kMultipartDir, "/", bucket);
  OL_CO_RETURN_IF_ERROR(co_await d->Trash(uploads));
  std::string path = BucketMetaPath(bucket);
  const absl::Status s = co_await d->Unlink(path);
  if (!s.ok() && !absl::IsNotFound(s)) co_return s;
  std::string root;
  const absl::Status synced = co_await d->SyncDir(root);
  co_return synced;
}

// The bucket's record on one drive: NotFound without its folder; an empty record (updated
// -1) when the folder has none or it does not decode.
io::Task<absl::StatusOr<pb::BucketMeta>> BucketRecordOn(DriveApi* d, std::string bucket) {
  absl::StatusOr<bool> e = co_await d->Exists(bucket);
  if (!e.ok()) co_return e.status();
  if (!*e) co_return absl::NotFoundError("no bucket folder");
  std::string path = BucketMetaPath(bucket);
  absl::StatusOr<std::string> bytes = co_await d->ReadFile(path);
  pb::BucketMeta meta;
  if (!bytes.ok() || !DecodeRecord(RecordType::kBucketMeta, *bytes, &meta).ok()) {
    meta.Clear();
    meta.set_updated_ns(-1);
  }
  co_return meta;
}

}  // namespace

io::Task<absl::Status> Engine::MakeBucket(std::string bucket, std::string owner) {
  OL_CO_RETURN_IF_ERROR(ValidateBucketName(bucket));
  std::string lock_name = StrCat("b:", bucket);
  OL_CO_ASSIGN_OR_RETURN(NsLock lock, co_await Lock(lock_name, true));
  const int total = static_cast<int>(drives_.size());
  int online = 0, present = 0;
  std::vector<io::Task<absl::StatusOr<bool>>> probes;
  for (auto& d : drives_) {
    if (!d->online.load()) continue;
    ++online;
    probes.push_back(d->api->Exists(bucket));
  }
  std::vector<absl::StatusOr<bool>> found = co_await io::WhenAll(std::move(probes));
  for (const absl::StatusOr<bool>& e : found) present += e.ok() && *e ? 1 : 0;
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
  std::vector<Drive*> tried;
  std::vector<io::Task<absl::Status>> makes;
  for (auto& d : drives_) {
    if (!d->online.load()) continue;
    tried.push_back(d.get());
    makes.push_back(MakeBucketOn(d->api.get(), bucket, record));
  }
  std::vector<absl::Status> results = co_await io::WhenAll(std::move(makes));
  std::vector<Drive*> made;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].ok()) {
      ++ok;
      made.push_back(tried[i]);
    } else {
      OL_LOG(kWarning) << "store: creating bucket " << bucket << " on " << tried[i]->path << ": "
                       << results[i];
    }
  }
  if (ok < Majority(total)) {
    const std::string path = BucketMetaPath(bucket);
    for (Drive* d : made) {
      (void)co_await d->api->RemoveDir(bucket);
      (void)co_await d->api->Unlink(path);
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
  // Every drive's record: one that missed a policy change (offline then) is older.
  std::vector<io::Task<absl::StatusOr<pb::BucketMeta>>> reads;
  for (auto& d : drives_) {
    if (!d->online.load()) continue;
    ++online;
    reads.push_back(BucketRecordOn(d->api.get(), bucket));
  }
  std::vector<absl::StatusOr<pb::BucketMeta>> records = co_await io::WhenAll(std::move(reads));
  for (absl::StatusOr<pb::BucketMeta>& meta : records) {
    if (!meta.ok()) continue;
    ++present;
    if (meta->updated_ns() > newest.updated_ns()) newest = *std::move(meta);
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
  OL_CO_ASSIGN_OR_RETURN(NsLock lock, co_await Lock(lock_name, true));
  OL_CO_ASSIGN_OR_RETURN(pb::BucketMeta newest, co_await NewestBucketRecord(bucket));
  change(newest);
  newest.set_updated_ns(NowNs());
  const std::string record = EncodeRecord(RecordType::kBucketMeta, newest);
  const int total = static_cast<int>(drives_.size());
  const std::string path = BucketMetaPath(bucket);
  int ok = 0;
  for (auto& d : drives_) {
    if (!d->online.load()) continue;
    absl::StatusOr<bool> e = co_await d->api->Exists(bucket);
    if (!e.ok() || !*e) continue;
    // The newest record changed, on every drive: one that missed an earlier change catches
    // up.
    absl::Status s = co_await d->api->WriteFile(path, record, true);
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
    std::string root;
    absl::StatusOr<std::vector<DirEntry>> entries = co_await d->api->ReadDir(root);
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
  std::string lock_name = StrCat("b:", bucket);
  OL_CO_ASSIGN_OR_RETURN(NsLock lock, co_await Lock(lock_name, true));
  OL_CO_RETURN_IF_ERROR((co_await StatBucket(bucket)).status());
  for (int s = 0; s < sets_; ++s) {
    WalkRequest req;
    req.bucket = bucket;
    req.limit = 1;
    OL_CO_ASSIGN_OR_RETURN(std::vector<WalkItem> items, co_await WalkSet(s, req, k_));
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
    absl::Status st = co_await DeleteBucketOn(d->api.get(), bucket);
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

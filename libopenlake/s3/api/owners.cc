// Bucket owners (see owners.h).
#include "s3/api/owners.h"

#include <utility>

#include "s3/api/ops.h"
#include "s3/api/service.h"

#include "openlake/strings.h"

namespace openlake::s3 {

std::string OwnerIdOf(std::string_view access_key) {
  return Sha256Hex(StrCat("openlake-owner:", access_key));
}

std::optional<BucketEntry> BucketOwners::Find(std::string_view bucket) const {
  absl::MutexLock lock(&mu_);
  auto it = owners_.find(std::string(bucket));
  if (it == owners_.end()) return std::nullopt;
  if (ttl_ != absl::InfiniteDuration() && absl::Now() >= it->second.expires) return std::nullopt;
  return it->second.entry;
}

void BucketOwners::Set(std::string_view bucket, BucketEntry entry) {
  absl::MutexLock lock(&mu_);
  if (owners_.size() >= kMaxEntries) owners_.clear();
  const absl::Time expires =
      ttl_ == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + ttl_;
  owners_[std::string(bucket)] = Cached{std::move(entry), expires};
}

void BucketOwners::Forget(std::string_view bucket) {
  absl::MutexLock lock(&mu_);
  owners_.erase(std::string(bucket));
}

std::string OwnerOf(const Call& c, const store::BucketInfo& bucket) {
  if (!bucket.owner.empty() || c.opts.credentials.keys.empty()) return bucket.owner;
  return OwnerIdOf(c.opts.credentials.keys.front().access_key);
}

IsUser UserIds(const Call& c) {
  return [&c](std::string_view id) { return !DisplayNameOf(c, id).empty(); };
}

std::string RoutedOwner(const Call& c) {
  return c.bucket_owner.empty() ? c.OwnerId() : c.bucket_owner;
}

std::string DisplayNameOf(const Call& c, std::string_view id) {
  for (const auto& key : c.opts.credentials.keys) {
    if (OwnerIdOf(key.access_key) == id) {
      return key.display_name.empty() ? key.access_key : key.display_name;
    }
  }
  return "";
}

io::Task<std::optional<BucketEntry>> BucketEntryOf(Call& c, std::string bucket) {
  if (c.owners != nullptr) {
    std::optional<BucketEntry> cached = c.owners->Find(bucket);
    if (cached) co_return cached;
  }
  absl::StatusOr<store::BucketInfo> info = co_await c.store.StatBucket(bucket);
  if (!info.ok()) co_return std::nullopt;
  BucketEntry entry;
  entry.owner = OwnerOf(c, *info);
  if (!info->policy.empty()) {
    absl::StatusOr<BucketPolicy> policy = BucketPolicy::Parse(info->policy, bucket);
    // A stored policy was checked when it was put; one that no longer parses grants nothing.
    if (policy.ok()) entry.policy = std::make_shared<const BucketPolicy>(*std::move(policy));
  }
  if (!info->acl.empty()) entry.acl = std::make_shared<const Acl>(DecodeAcl(info->acl));
  entry.versioning = info->versioning;
  if (c.owners != nullptr) c.owners->Set(bucket, entry);
  co_return entry;
}

io::Task<std::optional<std::string>> BucketOwner(Call& c, std::string bucket) {
  std::optional<BucketEntry> entry = co_await BucketEntryOf(c, std::move(bucket));
  if (!entry) co_return std::nullopt;
  co_return entry->owner;
}

std::string_view PolicyAction(Op op) {
  switch (op) {
    case Op::kListObjects:
    case Op::kListObjectsV2:
    case Op::kHeadBucket: return "s3:ListBucket";
    case Op::kGetBucketLocation: return "s3:GetBucketLocation";
    case Op::kGetBucketVersioning: return "s3:GetBucketVersioning";
    case Op::kPutBucketVersioning: return "s3:PutBucketVersioning";
    case Op::kListObjectVersions: return "s3:ListBucketVersions";
    case Op::kGetBucketLifecycle: return "s3:GetLifecycleConfiguration";
    case Op::kPutBucketLifecycle:
    case Op::kDeleteBucketLifecycle: return "s3:PutLifecycleConfiguration";
    case Op::kGetBucketTagging: return "s3:GetBucketTagging";
    case Op::kPutBucketTagging:
    case Op::kDeleteBucketTagging: return "s3:PutBucketTagging";
    case Op::kListMultipartUploads: return "s3:ListBucketMultipartUploads";
    case Op::kDeleteBucket: return "s3:DeleteBucket";
    case Op::kGetBucketPolicy: return "s3:GetBucketPolicy";
    case Op::kPutBucketPolicy: return "s3:PutBucketPolicy";
    case Op::kDeleteBucketPolicy: return "s3:DeleteBucketPolicy";
    case Op::kGetBucketAcl: return "s3:GetBucketAcl";
    case Op::kPutBucketAcl: return "s3:PutBucketAcl";
    case Op::kGetObjectAcl: return "s3:GetObjectAcl";
    case Op::kPutObjectAcl: return "s3:PutObjectAcl";
    case Op::kPutObject:
    case Op::kCopyObject:
    case Op::kPostObject:
    case Op::kCreateMultipartUpload:
    case Op::kUploadPart:
    case Op::kUploadPartCopy:
    case Op::kCompleteMultipartUpload: return "s3:PutObject";
    case Op::kGetObject:
    case Op::kHeadObject: return "s3:GetObject";
    case Op::kGetObjectAttributes: return "s3:GetObjectAttributes";
    case Op::kDeleteObject:
    case Op::kDeleteObjects: return "s3:DeleteObject";
    case Op::kAbortMultipartUpload: return "s3:AbortMultipartUpload";
    case Op::kListParts: return "s3:ListMultipartUploadParts";
    case Op::kGetObjectTagging: return "s3:GetObjectTagging";
    case Op::kPutObjectTagging: return "s3:PutObjectTagging";
    case Op::kDeleteObjectTagging: return "s3:DeleteObjectTagging";
    case Op::kListBuckets:
    case Op::kCreateBucket:
    case Op::kNotImplemented: return "";
  }
  return "";
}

namespace {

// The request as the bucket's policy sees it: action, resource, caller and condition keys.
PolicyRequest PolicyRequestOf(const Call& c, std::string_view action, std::string_view bucket,
                              std::string_view key) {
  PolicyRequest r;
  r.action = std::string(action);
  r.resource = key.empty() ? StrCat("arn:aws:s3:::", bucket)
                           : StrCat("arn:aws:s3:::", bucket, "/", key);
  r.anonymous = c.anonymous;
  if (!c.anonymous) {
    r.owner_id = c.OwnerId();
    r.keys["aws:username"] = c.auth.access_key;
    r.keys["aws:userid"] = r.owner_id;
    r.keys["s3:authtype"] = c.auth.presigned ? "REST-QUERY-STRING" : "REST-HEADER";
  }
  r.keys["aws:principaltype"] = c.anonymous ? "Anonymous" : "User";
  r.keys["aws:securetransport"] = "false";  // TLS ends in a proxy in front, if anywhere
  const absl::Time now = absl::Now();
  r.keys["aws:currenttime"] = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", now, absl::UTCTimeZone());
  r.keys["aws:epochtime"] = std::to_string(absl::ToUnixSeconds(now));
  std::string ip = c.ex.peer_address();
  if (!ip.empty()) r.keys["aws:sourceip"] = std::move(ip);
  constexpr std::pair<std::string_view, std::string_view> kHeaders[] = {
      {"user-agent", "aws:useragent"},
      {"referer", "aws:referer"},
      {"x-amz-acl", "s3:x-amz-acl"},
      {"x-amz-content-sha256", "s3:x-amz-content-sha256"},
      {"x-amz-storage-class", "s3:x-amz-storage-class"},
      {"x-amz-copy-source", "s3:x-amz-copy-source"},
      {"x-amz-metadata-directive", "s3:x-amz-metadata-directive"}};
  for (const auto& [header, name] : kHeaders) {
    const http::Header* h = c.req.Find(header);
    if (h != nullptr) r.keys[std::string(name)] = h->value;
  }
  if (action == "s3:ListBucket") {
    for (std::string_view param : {"prefix", "delimiter", "max-keys"}) {
      const std::string* v = c.route.Param(param);
      if (v != nullptr) r.keys[StrCat("s3:", param)] = *v;
    }
  }
  return r;
}

// The bucket ACL permission an action needs, when a bucket ACL can grant it.
std::optional<Permission> BucketPermission(std::string_view action) {
  if (action == "s3:ListBucket" || action == "s3:ListBucketMultipartUploads" ||
      action == "s3:ListBucketVersions") {
    return Permission::kRead;
  }
  if (action == "s3:PutObject" || action == "s3:DeleteObject" ||
      action == "s3:DeleteObjectVersion" ||
      action == "s3:AbortMultipartUpload" || action == "s3:ListMultipartUploadParts") {
    return Permission::kWrite;
  }
  if (action == "s3:GetBucketAcl") return Permission::kReadAcp;
  if (action == "s3:PutBucketAcl") return Permission::kWriteAcp;
  return std::nullopt;
}

// The object ACL permission an action needs, when an object ACL can grant it.
std::optional<Permission> ObjectPermission(std::string_view action) {
  if (action == "s3:GetObject" || action == "s3:GetObjectVersion" ||
      action == "s3:GetObjectAttributes" || action == "s3:GetObjectVersionAttributes") {
    return Permission::kRead;
  }
  if (action == "s3:GetObjectAcl" || action == "s3:GetObjectVersionAcl") return Permission::kReadAcp;
  if (action == "s3:PutObjectAcl" || action == "s3:PutObjectVersionAcl") return Permission::kWriteAcp;
  return std::nullopt;
}

// Whether the bucket's or the object's ACL grants `action` (the object's metadata is read
// only here, for callers neither ownership nor the policy let in).
io::Task<bool> AclGrants(Call& c, const BucketEntry& entry, const std::string& bucket,
                         std::string_view action, const std::string& key) {
  if (std::optional<Permission> p = BucketPermission(action)) {
    const bool granted =
        entry.acl != nullptr && AclAllows(*entry.acl, *p, c.anonymous, c.OwnerId());
    co_return granted;
  }
  std::optional<Permission> p = ObjectPermission(action);
  if (!p || key.empty()) co_return false;
  store::Conditions none;
  absl::StatusOr<store::ObjectInfo> info =
      co_await c.store.StatObject(bucket, key, std::move(none));
  if (!info.ok()) co_return false;
  auto it = info->user_meta.find(std::string(kAclMeta));
  if (it == info->user_meta.end()) co_return false;
  const Acl acl = DecodeAcl(it->second);
  co_return AclAllows(acl, *p, c.anonymous, c.OwnerId());
}

bool IsPolicyAction(std::string_view action) {
  return action == "s3:GetBucketPolicy" || action == "s3:PutBucketPolicy" ||
         action == "s3:DeleteBucketPolicy";
}

}  // namespace

io::Task<bool> Authorize(Call& c, std::string bucket, std::string_view action, std::string key,
                         bool answer) {
  std::optional<BucketEntry> entry = co_await BucketEntryOf(c, bucket);
  if (!entry) co_return true;  // no such bucket: the operation says so
  if (bucket == c.route.bucket) c.bucket_owner = entry->owner;
  const bool owner = !c.anonymous && entry->owner == c.OwnerId();
  PolicyDecision decision = PolicyDecision::kNone;
  if (entry->policy != nullptr) {
    decision = entry->policy->Evaluate(PolicyRequestOf(c, action, bucket, key));
  }
  // An owner denied by their own policy may still change the policy, as S3's root user may.
  const bool denied = decision == PolicyDecision::kDeny && !(owner && IsPolicyAction(action));
  if (!denied && (owner || decision == PolicyDecision::kAllow)) co_return true;
  if (!denied) {
    const bool granted = co_await AclGrants(c, *entry, bucket, action, key);
    if (granted) co_return true;
  }
  if (answer) co_await c.Error("AccessDenied", 403, "Access Denied");
  co_return false;
}

io::Task<bool> MayAskPerKey(Call& c) {
  std::optional<BucketEntry> entry = co_await BucketEntryOf(c, c.route.bucket);
  if (!entry || entry->policy != nullptr || entry->acl != nullptr) co_return true;
  if (!c.anonymous && entry->owner == c.OwnerId()) co_return true;
  co_await c.Error("AccessDenied", 403, "Access Denied");
  co_return false;
}

io::Task<bool> MayUseBucket(Call& c) {
  std::string action(PolicyAction(c.route.op));
  // On one version of an object, S3's actions name the version (s3:GetObjectVersion, ...).
  if (c.route.Has("versionId")) {
    for (std::string_view base : {"s3:GetObject", "s3:DeleteObject", "s3:GetObjectTagging",
                                  "s3:PutObjectTagging", "s3:DeleteObjectTagging",
                                  "s3:GetObjectAcl", "s3:PutObjectAcl",
                                  "s3:GetObjectAttributes"}) {
      if (action != base) continue;
      const size_t at = action.find("Object") + 6;
      action.insert(at, "Version");
      break;
    }
  }
  const bool may = co_await Authorize(c, c.route.bucket, action, c.route.key);
  co_return may;
}

}  // namespace openlake::s3

// Bucket owners (see owners.h).
#include "s3/api/owners.h"

#include <utility>

#include "s3/api/service.h"

#include "openlake/strings.h"

namespace openlake::s3 {

std::string OwnerIdOf(std::string_view access_key) {
  return Sha256Hex(StrCat("openlake-owner:", access_key));
}

std::optional<std::string> BucketOwners::Find(std::string_view bucket) const {
  absl::MutexLock lock(&mu_);
  auto it = owners_.find(std::string(bucket));
  if (it == owners_.end()) return std::nullopt;
  return it->second;
}

void BucketOwners::Set(std::string_view bucket, std::string owner) {
  absl::MutexLock lock(&mu_);
  if (owners_.size() >= kMaxEntries) owners_.clear();
  owners_[std::string(bucket)] = std::move(owner);
}

void BucketOwners::Forget(std::string_view bucket) {
  absl::MutexLock lock(&mu_);
  owners_.erase(std::string(bucket));
}

std::string OwnerOf(const Call& c, const store::BucketInfo& bucket) {
  if (!bucket.owner.empty() || c.opts.credentials.keys.empty()) return bucket.owner;
  return OwnerIdOf(c.opts.credentials.keys.front().access_key);
}

io::Task<std::optional<std::string>> BucketOwner(Call& c, std::string bucket) {
  if (c.owners != nullptr) {
    std::optional<std::string> cached = c.owners->Find(bucket);
    if (cached) co_return cached;
  }
  absl::StatusOr<store::BucketInfo> info = co_await c.store.StatBucket(bucket);
  if (!info.ok()) co_return std::nullopt;
  std::string owner = OwnerOf(c, *info);
  if (c.owners != nullptr) c.owners->Set(bucket, owner);
  co_return owner;
}

io::Task<bool> MayUseBucket(Call& c, std::string bucket) {
  std::optional<std::string> owner = co_await BucketOwner(c, std::move(bucket));
  if (!owner || *owner == c.OwnerId()) co_return true;
  co_await c.Error("AccessDenied", 403, "Access Denied");
  co_return false;
}

}  // namespace openlake::s3

// Bucket owners (docs/s3.md, "Users and bucket owners"): each [[credentials]] entry is a user
// whose owner id is derived from its access key; a bucket records the id of the user who made
// it, and only that user may use it (a bucket made before buckets had owners belongs to the
// first configured user). BucketOwners caches each bucket's owner so that the check costs no
// drive read per request; CreateBucket and DeleteBucket keep it current.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

#include "openlake/io/task.h"
#include "openlake/store/store.h"

namespace openlake::s3 {

struct Call;

// The owner id of the user with `access_key` (hex SHA-256; S3's canonical user ids are hex too).
std::string OwnerIdOf(std::string_view access_key);

class BucketOwners {
 public:
  std::optional<std::string> Find(std::string_view bucket) const;
  void Set(std::string_view bucket, std::string owner);
  void Forget(std::string_view bucket);

 private:
  static constexpr size_t kMaxEntries = 100000;  // forgotten all at once beyond (re-read)
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::string> owners_ ABSL_GUARDED_BY(mu_);
};

// The owner id of a bucket as recorded, the first configured user's when it has none.
std::string OwnerOf(const Call& c, const store::BucketInfo& bucket);
// The owner id of `bucket` (OwnerOf, cached); nullopt when
// the bucket does not exist or cannot be read now (the operation answers that itself).
io::Task<std::optional<std::string>> BucketOwner(Call& c, std::string bucket);
// True when the caller owns `bucket` or it does not exist; false after answering 403
// AccessDenied.
io::Task<bool> MayUseBucket(Call& c, std::string bucket);

}  // namespace openlake::s3

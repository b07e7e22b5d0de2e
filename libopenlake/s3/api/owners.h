// Bucket owners and access (docs/s3.md, "Users and bucket owners", "Bucket policies"): each
// [[credentials]] entry is a user whose owner id is derived from its access key; a bucket
// records the id of the user who made it (a bucket made before buckets had owners belongs to
// the first configured user) and may have a policy. Its owner may do anything but what the
// policy denies outright; another user, or an anonymous caller, what the policy allows.
// BucketOwners caches each bucket's owner and parsed policy so that the check costs no drive
// read per request; CreateBucket, DeleteBucket and the policy operations keep it current.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "s3/api/acl.h"
#include "s3/api/policy.h"
#include "s3/api/route.h"

#include "openlake/io/task.h"
#include "openlake/store/store.h"

namespace openlake::s3 {

struct Call;

// The owner id of the user with `access_key` (hex SHA-256; S3's canonical user ids are hex too).
std::string OwnerIdOf(std::string_view access_key);

struct BucketEntry {
  std::string owner;
  std::shared_ptr<const BucketPolicy> policy;  // null when the bucket has none
  std::shared_ptr<const Acl> acl;              // null when never set (private)
  store::Versioning versioning = store::Versioning::kUnversioned;
};

class BucketOwners {
 public:
  // Entries older than `ttl` are read again (another node may have changed the bucket).
  explicit BucketOwners(absl::Duration ttl = absl::InfiniteDuration()) : ttl_(ttl) {}
  std::optional<BucketEntry> Find(std::string_view bucket) const;
  void Set(std::string_view bucket, BucketEntry entry);
  void Forget(std::string_view bucket);

 private:
  static constexpr size_t kMaxEntries = 100000;  // forgotten all at once beyond (re-read)
  const absl::Duration ttl_;
  mutable absl::Mutex mu_;
  struct Cached {
    BucketEntry entry;
    absl::Time expires;
  };
  absl::flat_hash_map<std::string, Cached> owners_ ABSL_GUARDED_BY(mu_);
};

// The owner id of a bucket as recorded, the first configured user's when it has none.
std::string OwnerOf(const Call& c, const store::BucketInfo& bucket);
// Whether an id is a configured user's owner id (the ids an ACL grant may name); asked only
// when a grant names one.
IsUser UserIds(const Call& c);
// The routed bucket's owner id: the one Authorize recorded, else the caller's (who then owns
// it, or it does not exist). Every object's owner is its bucket's.
std::string RoutedOwner(const Call& c);
// The display name of owner id `id`: the configured user's display_name, else its access key
// ("" when it is no configured user).
std::string DisplayNameOf(const Call& c, std::string_view id);
// The owner id and policy of `bucket` (cached); nullopt when the bucket does not exist or
// cannot be read now (the operation answers that itself).
io::Task<std::optional<BucketEntry>> BucketEntryOf(Call& c, std::string bucket);
io::Task<std::optional<std::string>> BucketOwner(Call& c, std::string bucket);
// The policy action of an operation ("s3:GetObject"); "" for those outside buckets.
std::string_view PolicyAction(Op op);
// Whether the caller may do `action` ("s3:GetObject") to `key` of `bucket` ("" for the bucket
// itself): true too when the bucket does not exist; otherwise false, after answering 403
// AccessDenied when `answer`.
io::Task<bool> Authorize(Call& c, std::string bucket, std::string_view action, std::string key,
                         bool answer = true);
// Authorize for the routed operation on the routed bucket and key.
io::Task<bool> MayUseBucket(Call& c);
// For operations that ask per key (DeleteObjects): true when the caller owns the routed bucket,
// it has a policy that might allow some keys, or it does not exist; false after answering 403.
io::Task<bool> MayAskPerKey(Call& c);

}  // namespace openlake::s3

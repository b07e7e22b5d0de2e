// Get/Put/DeleteBucketPolicy (docs/s3.md, "Bucket policies"): the policy document is checked
// (BucketPolicy::Parse) before it is stored with the bucket, kept as the client sent it, and
// the service's cache of owners and policies updated with it, so the next request is judged by
// the new policy.
#include <memory>
#include <utility>

#include "s3/api/ops.h"
#include "s3/api/owners.h"
#include "s3/api/policy.h"

#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

// Stores `policy` ("" removes it) and updates the cache; false after answering an error.
io::Task<bool> StorePolicy(Call& c, std::string text,
                           std::shared_ptr<const BucketPolicy> parsed) {
  const absl::Status st = co_await c.store.SetBucketPolicy(c.route.bucket, std::move(text));
  if (!st.ok()) {
    // Whatever reached the drives is read again on the next request.
    if (c.owners != nullptr) c.owners->Forget(c.route.bucket);
    co_await c.Fail(st);
    co_return false;
  }
  std::optional<BucketEntry> entry = co_await BucketEntryOf(c, c.route.bucket);
  if (entry && c.owners != nullptr) {
    entry->policy = std::move(parsed);
    c.owners->Set(c.route.bucket, *std::move(entry));
  }
  co_return true;
}

}  // namespace

io::Task<void> GetBucketPolicy(Call& c) {
  absl::StatusOr<store::BucketInfo> info = co_await c.store.StatBucket(c.route.bucket);
  if (!info.ok()) {
    co_await c.Fail(info.status());
    co_return;
  }
  if (info->policy.empty()) {
    co_await c.Error("NoSuchBucketPolicy", 404, "The bucket policy does not exist");
    co_return;
  }
  c.ex.SetStatus(200);
  c.ex.AddHeader("Content-Type", "application/json");
  (void)co_await c.ex.Respond(info->policy);
}

io::Task<void> PutBucketPolicy(Call& c) {
  std::string doc;
  const bool have_doc = co_await ReadDocument(c, kMaxPolicyBytes + 1, &doc);
  if (!have_doc) co_return;
  absl::StatusOr<BucketPolicy> policy = BucketPolicy::Parse(doc, c.route.bucket);
  if (!policy.ok()) {
    std::string message(policy.status().message());
    co_await c.Error("MalformedPolicy", 400, std::move(message));
    co_return;
  }
  auto parsed = std::make_shared<const BucketPolicy>(*std::move(policy));
  const bool stored = co_await StorePolicy(c, std::move(doc), std::move(parsed));
  if (stored) co_await c.Empty(204);
}

io::Task<void> DeleteBucketPolicy(Call& c) {
  std::string none;
  std::shared_ptr<const BucketPolicy> no_policy;
  const bool stored = co_await StorePolicy(c, std::move(none), std::move(no_policy));
  if (stored) co_await c.Empty(204);
}

}  // namespace openlake::s3

// Get/Put/DeleteBucketTagging (docs/s3.md): a bucket's tags, checked as S3 checks them (at most
// 50) and kept in the bucket's record in the form object tags are kept in (TagsOf, SetTags).
#include "s3/api/ops.h"

namespace openlake::s3 {
namespace {

// Stores `tags` (none: removes them) and answers `status`.
io::Task<void> StoreBucketTags(Call& c, const TagSet& tags, int status) {
  std::map<std::string, std::string> kept;
  SetTags(tags, &kept);
  std::string text = kept.empty() ? std::string() : kept.begin()->second;
  const absl::Status st = co_await c.store.SetBucketTagging(c.route.bucket, std::move(text));
  if (!st.ok()) {
    co_await c.Fail(st);
    co_return;
  }
  co_await c.Empty(status);
}

}  // namespace

io::Task<void> GetBucketTagging(Call& c) {
  absl::StatusOr<store::BucketInfo> info = co_await c.store.StatBucket(c.route.bucket);
  if (!info.ok()) {
    co_await c.Fail(info.status());
    co_return;
  }
  std::map<std::string, std::string> kept;
  if (!info->tagging.empty()) kept[std::string(kTagsMeta)] = info->tagging;
  const TagSet tags = TagsOf(kept);
  if (tags.empty()) {
    co_await c.Error("NoSuchTagSet", 404, "The TagSet does not exist");
    co_return;
  }
  std::string body = TaggingXml(tags);
  co_await c.Xml(200, std::move(body));
}

io::Task<void> PutBucketTagging(Call& c) {
  std::optional<TagSet> tags = co_await ReadTagging(c, kMaxBucketTags);
  if (!tags) co_return;
  co_await StoreBucketTags(c, *tags, 204);
}

io::Task<void> DeleteBucketTagging(Call& c) {
  const TagSet none;
  co_await StoreBucketTags(c, none, 204);
}

}  // namespace openlake::s3

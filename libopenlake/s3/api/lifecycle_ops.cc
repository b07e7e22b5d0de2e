// Get/Put/DeleteBucketLifecycleConfiguration (docs/s3.md, "Lifecycle"): the document is parsed
// and checked (lifecycle.h) before it is kept in the bucket's record, in the form
// GetBucketLifecycleConfiguration returns; the lifecycle scanner reads it from there.
#include "s3/api/lifecycle.h"
#include "s3/api/ops.h"
#include "s3/api/xml.h"

namespace openlake::s3 {

io::Task<void> GetBucketLifecycle(Call& c) {
  absl::StatusOr<store::BucketInfo> info = co_await c.store.StatBucket(c.route.bucket);
  if (!info.ok()) {
    co_await c.Fail(info.status());
    co_return;
  }
  if (info->lifecycle.empty()) {
    co_await c.Error("NoSuchLifecycleConfiguration", 404,
                     "The lifecycle configuration does not exist");
    co_return;
  }
  co_await c.Xml(200, info->lifecycle);
}

io::Task<void> PutBucketLifecycle(Call& c) {
  std::string doc;
  const bool have_doc = co_await ReadDocument(c, c.opts.max_xml_bytes, &doc);
  if (!have_doc) co_return;
  absl::StatusOr<LifecycleDocument> parsed = ParseLifecycleConfiguration(doc);
  if (!parsed.ok()) {
    co_await FailMalformedDocument(c, parsed.status());
    co_return;
  }
  LifecycleConfig config;
  S3Error err;
  if (!LifecycleFromDocument(*parsed, &config, &err)) {
    co_await c.Error(std::move(err));
    co_return;
  }
  std::string kept = LifecycleXml(config);
  const absl::Status st = co_await c.store.SetBucketLifecycle(c.route.bucket, std::move(kept));
  if (!st.ok()) {
    co_await c.Fail(st);
    co_return;
  }
  co_await c.Empty(200);
}

io::Task<void> DeleteBucketLifecycle(Call& c) {
  std::string none;
  const absl::Status st = co_await c.store.SetBucketLifecycle(c.route.bucket, std::move(none));
  if (!st.ok()) {
    co_await c.Fail(st);
    co_return;
  }
  co_await c.Empty(204);
}

}  // namespace openlake::s3

// Bucket versioning (docs/s3.md, "Versioning"): Get/PutBucketVersioning, and what every
// object operation needs of it: the bucket's state (cached with its owner, so that a PUT costs
// no extra drive read), a request's versionId, and the x-amz-version-id header.
#include "s3/api/ops.h"
#include "s3/api/owners.h"
#include "s3/api/xml.h"

#include "openlake/strings.h"

namespace openlake::s3 {

io::Task<store::Versioning> VersioningOf(Call& c) {
  std::optional<BucketEntry> entry = co_await BucketEntryOf(c, c.route.bucket);
  co_return entry ? entry->versioning : store::Versioning::kUnversioned;
}

std::string VersionIdParam(const Route& r) {
  const std::string* v = r.Param("versionId");
  return v ? *v : std::string();
}

void AddVersionHeader(Call& c, const store::ObjectInfo& info) {
  // The null version has no id of its own: named only when the request named it.
  if (info.version_id != store::kNullVersionId || c.route.Has("versionId")) {
    c.ex.AddHeader("x-amz-version-id", info.version_id);
  }
}

io::Task<void> GetBucketVersioning(Call& c) {
  absl::StatusOr<store::BucketInfo> info = co_await c.store.StatBucket(c.route.bucket);
  if (!info.ok()) {
    co_await c.Fail(info.status());
    co_return;
  }
  XmlWriter w("VersioningConfiguration");  // never enabled: no Status element
  if (info->versioning == store::Versioning::kEnabled) w.Element("Status", "Enabled");
  if (info->versioning == store::Versioning::kSuspended) w.Element("Status", "Suspended");
  co_await c.Xml(200, w.Finish());
}

io::Task<void> PutBucketVersioning(Call& c) {
  std::string doc;
  const bool have_doc = co_await ReadDocument(c, c.opts.max_xml_bytes, &doc);
  if (!have_doc) co_return;
  absl::StatusOr<VersioningDocument> parsed = ParseVersioningConfiguration(doc);
  if (!parsed.ok()) {
    co_await FailMalformedDocument(c, parsed.status());
    co_return;
  }
  if (parsed->mfa_delete == "Enabled") {
    co_await c.Error("NotImplemented", 501,
                     "A header you provided implies functionality that is not implemented: "
                     "MFA delete.");
    co_return;
  }
  if (!parsed->mfa_delete.empty() && parsed->mfa_delete != "Disabled") {
    co_await FailMalformedDocument(c, absl::InvalidArgumentError("MfaDelete is not "
                                                                 "Enabled or Disabled"));
    co_return;
  }
  store::Versioning state;
  if (parsed->status == "Enabled") {
    state = store::Versioning::kEnabled;
  } else if (parsed->status == "Suspended") {
    state = store::Versioning::kSuspended;
  } else {
    // S3 accepts a document without a Status only as "no change"; anything else is malformed.
    if (parsed->status.empty()) {
      co_await c.Empty(200);
      co_return;
    }
    co_await FailMalformedDocument(c, absl::InvalidArgumentError(
                                          "Status is not Enabled or Suspended"));
    co_return;
  }
  const absl::Status st = co_await c.store.SetBucketVersioning(c.route.bucket, state);
  // The cached state is read again on the next request, whatever reached the drives.
  if (c.owners != nullptr) c.owners->Forget(c.route.bucket);
  if (!st.ok()) {
    co_await c.Fail(st);
    co_return;
  }
  co_await c.Empty(200);
}

}  // namespace openlake::s3

// Multipart uploads: CreateMultipartUpload, UploadPart, UploadPartCopy,
// CompleteMultipartUpload, AbortMultipartUpload (see ops.h; ListParts is in list_ops.cc).
#include <charconv>

#include "absl/types/span.h"

#include "s3/api/fields.h"
#include "s3/api/ops.h"
#include "s3/api/payload.h"
#include "s3/api/xml.h"

#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

}  // namespace

io::Task<void> CreateMultipartUpload(Call& c) {
  store::PutOptions po;
  const bool options_ok = co_await WriteOptions(c, &po);
  if (!options_ok) co_return;
  S3Error err;
  if (!UploadChecksumFrom(c.req, &po, &err)) {
    co_await c.Error(std::move(err));
    co_return;
  }
  const std::map<std::string, std::string> meta = po.user_meta;
  absl::StatusOr<std::string> id =
      co_await c.store.CreateUpload(c.route.bucket, c.route.key, std::move(po));
  if (!id.ok()) {
    co_await c.Fail(id.status());
    co_return;
  }
  AddUploadChecksumHeaders(c, meta);
  XmlWriter w("InitiateMultipartUploadResult");
  w.Element("Bucket", c.route.bucket);
  w.Element("Key", c.route.key);
  w.Element("UploadId", *id);
  co_await c.Xml(200, w.Finish());
}

io::Task<void> UploadPart(Call& c) {
  const int n = PartNumber(c.route);
  if (n == 0) {
    co_await FailBadPartNumber(c);
    co_return;
  }
  PayloadReader body(c.ex, c.auth);
  if (!body.Init()) {
    co_await c.Error(body.error());
    co_return;
  }
  absl::StatusOr<std::unique_ptr<store::ObjectWriter>> w = co_await c.store.UploadPart(
      c.route.bucket, c.route.key, UploadId(c.route), n, body.size());
  co_await StoreBody(c, body, std::move(w));
}

io::Task<void> UploadPartCopy(Call& c) {
  const int n = PartNumber(c.route);
  if (n == 0) {
    co_await FailBadPartNumber(c);
    co_return;
  }
  std::string src_bucket, src_key, src_version;
  S3Error err;
  if (!ParseCopySource(c.req, &src_bucket, &src_key, &src_version, &err)) {
    co_await c.Error(std::move(err));
    co_return;
  }
  const std::string_view read_action =
      src_version.empty() ? "s3:GetObject" : "s3:GetObjectVersion";
  const bool may_read = co_await Authorize(c, src_bucket, read_action, src_key);
  if (!may_read) co_return;
  store::GetOptions go;
  go.conditions = ConditionsFrom(c.req, "x-amz-copy-source-");
  go.conditions.version_id = src_version;
  if (const http::Header* h = c.req.Find("x-amz-copy-source-range")) {
    uint64_t first = 0, last = 0;
    if (!ParseCopyRange(h->value, &first, &last)) {
      co_await c.Error("InvalidArgument", 400,
                       "The x-amz-copy-source-range value must be of the form bytes=first-last "
                       "where first and last are the zero-based offsets of the first and last "
                       "bytes to copy");
      co_return;
    }
    go.range.emplace();
    go.range->first = first;
    go.range->last = last;
  }
  const bool ranged = go.range.has_value();
  const uint64_t want_last = ranged ? *go.range->last : 0;
  absl::StatusOr<std::unique_ptr<store::ObjectReader>> r =
      co_await c.store.OpenObject(src_bucket, src_key, std::move(go));
  if (!r.ok()) {
    const store::ErrorKind k = store::ErrorKindOf(r.status());
    if (k == store::ErrorKind::kNotModified) {
      co_await c.Error("PreconditionFailed", 412,
                       "At least one of the pre-conditions you specified did not hold");
    } else {
      co_await c.Fail(r.status());
    }
    co_return;
  }
  store::ObjectReader& reader = **r;
  if (ranged && want_last >= reader.info().size) {
    // S3 refuses a copy range that runs past the source instead of shortening it.
    co_await c.Error("InvalidRange", 416, "The requested range is not satisfiable");
    co_return;
  }
  absl::StatusOr<std::unique_ptr<store::ObjectWriter>> w = co_await c.store.UploadPart(
      c.route.bucket, c.route.key, UploadId(c.route), n,
      static_cast<int64_t>(reader.length()));
  if (!w.ok()) {
    co_await c.Fail(w.status());
    co_return;
  }
  std::optional<store::ObjectInfo> info = co_await CopyInto(c, reader, **w);
  if (!info) co_return;
  if (!src_version.empty()) c.ex.AddHeader("x-amz-copy-source-version-id", src_version);
  XmlWriter x("CopyPartResult");
  x.Element("LastModified", FormatIsoTime(info->mod_time));
  x.Element("ETag", QuoteEtag(info->etag));
  co_await c.Xml(200, x.Finish());
}

io::Task<void> CompleteMultipartUpload(Call& c) {
  const bool supported = co_await WriteHeadersSupported(c, /*conditional=*/true);
  if (!supported) co_return;
  store::CompleteOptions options;
  const bool conditions_ok = co_await WriteConditionsOf(c, &options.when);
  if (!conditions_ok) co_return;
  options.versioning = co_await VersioningOf(c);
  std::string doc;
  // Current SDKs send the whole object's checksum (x-amz-checksum-*, x-amz-checksum-type) with
  // the completion: it is not the document's (CompleteChecksum checks a full-object one).
  const bool have_doc =
      co_await ReadDocument(c, c.opts.max_xml_bytes, &doc, /*header_checksums=*/false);
  if (!have_doc) co_return;
  absl::StatusOr<std::vector<CompletedPart>> parsed = ParseCompleteMultipartUpload(doc);
  if (!parsed.ok()) {
    co_await FailMalformedDocument(c, parsed.status());
    co_return;
  }
  const bool checksum_ok = co_await CompleteChecksum(c, *parsed, &options);
  if (!checksum_ok) co_return;
  std::vector<store::CompletePart> parts;
  parts.reserve(parsed->size());
  for (CompletedPart& p : *parsed) parts.push_back(store::CompletePart{p.number, p.etag});
  absl::StatusOr<store::ObjectInfo> info = co_await c.store.CompleteUpload(
      c.route.bucket, c.route.key, UploadId(c.route), std::move(parts), std::move(options));
  if (!info.ok()) {
    co_await c.Fail(info.status());
    co_return;
  }
  AddVersionHeader(c, *info);
  XmlWriter w("CompleteMultipartUploadResult");
  w.Element("Location", StrCat("/", c.route.bucket, "/", UriEncode(c.route.key, true)));
  w.Element("Bucket", c.route.bucket);
  w.Element("Key", c.route.key);
  w.Element("ETag", QuoteEtag(info->etag));
  ChecksumElements(w, info->user_meta, /*with_type=*/true);
  co_await c.Xml(200, w.Finish());
}

io::Task<void> AbortMultipartUpload(Call& c) {
  const absl::Status st =
      co_await c.store.AbortUpload(c.route.bucket, c.route.key, UploadId(c.route));
  if (!st.ok()) {
    co_await c.Fail(st);
    co_return;
  }
  co_await c.Empty(204);
}

}  // namespace openlake::s3

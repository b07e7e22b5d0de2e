// What several S3 operations share: request documents, body and copy streams into the engine,
// bucket checks, the part number of a query (see ops.h).
#include <charconv>
#include <cstddef>

#include "absl/types/span.h"

#include "s3/api/fields.h"
#include "s3/api/ops.h"

#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

io::Task<std::optional<store::ObjectInfo>> Commit(Call& c, store::ObjectWriter& w) {
  absl::StatusOr<store::ObjectInfo> info = co_await w.Commit();
  if (!info.ok()) {
    co_await c.Fail(info.status());
    co_return std::nullopt;
  }
  co_return *std::move(info);
}

}  // namespace

io::Task<bool> ReadDocument(Call& c, size_t limit, std::string* doc, bool header_checksums) {
  PayloadReader body(c.ex, c.auth);
  if (!body.Init(header_checksums)) {
    co_await c.Error(body.error());
    co_return false;
  }
  const absl::Status st = co_await body.ReadAll(limit, doc);
  if (!st.ok()) {
    co_await c.Error(body.error());
    co_return false;
  }
  co_return true;
}

io::Task<std::optional<store::ObjectInfo>> WriteBody(Call& c, PayloadReader& body,
                                                      store::ObjectWriter& w) {
  while (true) {
    absl::StatusOr<std::string_view> piece = co_await body.Next();
    if (!piece.ok()) {
      co_await c.Error(body.error());
      co_return std::nullopt;
    }
    if (piece->empty()) break;
    const absl::Span<const std::byte> bytes(reinterpret_cast<const std::byte*>(piece->data()),
                                            piece->size());
    const absl::Status st = co_await w.Write(bytes);
    if (!st.ok()) {
      co_await c.Fail(st);
      co_return std::nullopt;
    }
  }
  KeepBodyChecksum(body, w);
  co_return co_await Commit(c, w);
}

io::Task<void> StoreBody(Call& c, PayloadReader& body,
                         absl::StatusOr<std::unique_ptr<store::ObjectWriter>> w) {
  if (!w.ok()) {
    co_await c.Fail(w.status());
    co_return;
  }
  // A failed body drops the writer: nothing becomes visible.
  std::optional<store::ObjectInfo> info = co_await WriteBody(c, body, **w);
  if (!info) co_return;
  c.ex.AddHeader("ETag", QuoteEtag(info->etag));
  AddVersionHeader(c, *info);
  if (!body.checksum().first.empty()) {
    c.ex.AddHeader(body.checksum().first, body.checksum().second);
  }
  co_await c.Empty(200);
}

io::Task<std::optional<store::ObjectInfo>> CopyInto(Call& c, store::ObjectReader& r,
                                                     store::ObjectWriter& w) {
  while (true) {
    absl::StatusOr<absl::Span<const std::byte>> chunk = co_await r.Next();
    if (!chunk.ok()) {
      co_await c.Fail(chunk.status());
      co_return std::nullopt;
    }
    if (chunk->empty()) break;
    const absl::Span<const std::byte> bytes = *chunk;
    const absl::Status st = co_await w.Write(bytes);
    if (!st.ok()) {
      co_await c.Fail(st);
      co_return std::nullopt;
    }
  }
  co_return co_await Commit(c, w);
}

io::Task<void> FailMalformedDocument(Call& c, const absl::Status& parsed,
                                     std::string_view code) {
  std::string name(code);
  std::string message = StrCat("The XML you provided was not well-formed or did not validate "
                               "against our published schema: ", parsed.message());
  co_await c.Error(std::move(name), 400, std::move(message));
}

void OwnerElement(XmlWriter& w, const Call& c, std::string_view id, std::string_view element) {
  w.Open(element);
  w.Element("ID", id);
  w.Element("DisplayName", DisplayNameOf(c, id));
  w.Close();
}

io::Task<std::optional<store::ObjectInfo>> StatRouted(Call& c) {
  store::Conditions none;
  none.version_id = VersionIdParam(c.route);
  absl::StatusOr<store::ObjectInfo> info =
      co_await c.store.StatObject(c.route.bucket, c.route.key, std::move(none));
  if (!info.ok()) {
    co_await c.Fail(info.status());
    co_return std::nullopt;
  }
  co_return *std::move(info);
}

io::Task<bool> BucketExists(Call& c) {
  absl::StatusOr<store::BucketInfo> b = co_await c.store.StatBucket(c.route.bucket);
  if (!b.ok()) {
    co_await c.Fail(b.status());
    co_return false;
  }
  co_return true;
}

std::string UploadId(const Route& r) {
  const std::string* v = r.Param("uploadId");
  return v ? *v : std::string();
}

int PartNumber(const Route& r) {
  const std::string* v = r.Param("partNumber");
  int n = 0;
  if (v == nullptr) return 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || end != v->data() + v->size() || n < 1 || n > 10000) return 0;
  return n;
}

io::Task<void> FailBadPartNumber(Call& c) {
  std::string message = "Part number must be an integer between 1 and 10000, inclusive";
  co_await c.Error("InvalidArgument", 400, std::move(message));
}

io::Task<bool> WriteHeadersSupported(Call& c, bool conditional) {
  const std::string h = UnsupportedWriteHeader(c.req, conditional);
  if (h.empty()) co_return true;
  co_await c.Error("NotImplemented", 501, StrCat("The header ", h, " is not implemented."));
  co_return false;
}

io::Task<bool> WriteOptions(Call& c, store::PutOptions* po, bool conditional) {
  const bool supported = co_await WriteHeadersSupported(c, conditional);
  if (!supported) co_return false;
  S3Error err;
  if (!PutOptionsFrom(c.req, po, &err)) {
    co_await c.Error(std::move(err));
    co_return false;
  }
  const bool acl_ok = co_await ObjectAclFromHeaders(c, &po->user_meta);
  if (!acl_ok) co_return false;
  po->versioning = co_await VersioningOf(c);
  if (!conditional) co_return true;
  const bool conditions_ok = co_await WriteConditionsOf(c, &po->when);
  co_return conditions_ok;
}

io::Task<bool> WriteConditionsOf(Call& c, store::WriteConditions* when) {
  if (const http::Header* h = c.req.Find("if-none-match")) {
    if (h->value != "*") {
      co_await c.Error("NotImplemented", 501,
                       "A header you provided implies functionality that is not implemented: "
                       "If-None-Match on a write takes only *.");
      co_return false;
    }
    when->if_none_match = true;
  }
  if (const http::Header* h = c.req.Find("if-match")) when->if_match = h->value;
  co_return true;
}

}  // namespace openlake::s3

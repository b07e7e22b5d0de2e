// Object operations: PutObject, GetObject, HeadObject, CopyObject, DeleteObject,
// DeleteObjects (see ops.h). Bodies stream through: a PUT's bytes go to the engine's writer
// as they arrive, a GET's come from its reader as the client takes them.
#include <algorithm>
#include <cstddef>

#include "absl/types/span.h"

#include "s3/api/fields.h"
#include "s3/api/ops.h"
#include "s3/api/payload.h"
#include "s3/api/xml.h"

#include "openlake/log.h"
#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

std::string_view Chars(absl::Span<const std::byte> b) {
  return std::string_view(reinterpret_cast<const char*>(b.data()), b.size());
}

// A GET's or HEAD's failed read. S3's 304 and 412 for a failed condition carry the object's
// ETag and Last-Modified (caches revalidate with them), read again without the conditions.
io::Task<void> FailRead(Call& c, const absl::Status& st) {
  const store::ErrorKind kind = store::ErrorKindOf(st);
  if (kind != store::ErrorKind::kNotModified && kind != store::ErrorKind::kPreconditionFailed) {
    co_await c.Fail(st);
    co_return;
  }
  store::Conditions none;
  none.version_id = VersionIdParam(c.route);
  absl::StatusOr<store::ObjectInfo> info =
      co_await c.store.StatObject(c.route.bucket, c.route.key, std::move(none));
  if (info.ok()) {
    c.ex.AddHeader("ETag", QuoteEtag(info->etag));
    c.ex.AddHeader("Last-Modified", http::FormatHttpDate(info->mod_time));
  }
  co_await c.Fail(st);
}

// A GET's or HEAD's partNumber=N: the byte range of part N (a single PUT has part 1 only), and
// the object's part count for x-amz-mp-parts-count (0 for a single PUT); false after answering
// an error. `cond` gains the version's ETag, so that the read that follows gets that version's
// part or fails, never another version's bytes.
io::Task<bool> PartRange(Call& c, store::Conditions* cond,
                         std::optional<store::RangeSpec>* range, size_t* parts_count) {
  const int n = PartNumber(c.route);
  if (n == 0) {
    co_await FailBadPartNumber(c);
    co_return false;
  }
  if (c.req.Find("range") != nullptr) {
    co_await c.Error("InvalidRequest", 400,
                     "Cannot specify both Range header and partNumber query parameter");
    co_return false;
  }
  store::Conditions stat_cond = *cond;
  absl::StatusOr<store::ObjectInfo> info =
      co_await c.store.StatObject(c.route.bucket, c.route.key, std::move(stat_cond));
  if (!info.ok()) {
    co_await FailRead(c, info.status());
    co_return false;
  }
  if (cond->if_match.empty()) cond->if_match = info->etag;
  *parts_count = info->parts.size();
  if (static_cast<size_t>(n) > std::max<size_t>(info->parts.size(), 1)) {
    co_await c.Error("InvalidPartNumber", 416, "The requested partnumber is not satisfiable");
    co_return false;
  }
  uint64_t first = 0, size = info->size;
  if (!info->parts.empty()) {
    for (int i = 0; i + 1 < n; ++i) first += info->parts[static_cast<size_t>(i)].size;
    size = info->parts[static_cast<size_t>(n - 1)].size;
  }
  if (size > 0) {
    range->emplace();
    (*range)->first = first;
    (*range)->last = first + size - 1;
  }
  co_return true;
}

}  // namespace

io::Task<void> PutObject(Call& c) {
  store::PutOptions po;
  const bool options_ok = co_await WriteOptions(c, &po, /*conditional=*/true);
  if (!options_ok) co_return;
  PayloadReader body(c.ex, c.auth);
  if (!body.Init()) {
    co_await c.Error(body.error());
    co_return;
  }
  po.size = body.size();
  absl::StatusOr<std::unique_ptr<store::ObjectWriter>> w =
      co_await c.store.CreateObject(c.route.bucket, c.route.key, std::move(po));
  co_await StoreBody(c, body, std::move(w));
}

io::Task<void> GetObject(Call& c, bool head) {
  store::Conditions cond = ConditionsFrom(c.req);
  cond.version_id = VersionIdParam(c.route);
  std::optional<store::RangeSpec> range = ParseRange(c.req.Value("range"));
  // Checksums describe a whole object or part: a ranged read gets none, as from S3.
  const int part = c.route.Has("partNumber") ? PartNumber(c.route) : 0;
  const bool whole = !range;
  if (c.route.Has("partNumber")) {
    size_t parts_count = 0;
    const bool part_ok = co_await PartRange(c, &cond, &range, &parts_count);
    if (!part_ok) co_return;
    if (parts_count > 0) c.ex.AddHeader("x-amz-mp-parts-count", std::to_string(parts_count));
  }
  if (head) {
    absl::StatusOr<store::ObjectInfo> info =
        co_await c.store.StatObject(c.route.bucket, c.route.key, std::move(cond));
    if (!info.ok()) {
      co_await FailRead(c, info.status());
      co_return;
    }
    uint64_t first = 0;
    uint64_t length = info->size;
    const absl::Status resolved = store::ResolveRange(info->size, range, &first, &length);
    if (!resolved.ok()) {
      c.ex.AddHeader("Content-Range", StrCat("bytes */", info->size));
      co_await c.Fail(resolved);
      co_return;
    }
    AddObjectHeaders(c, *info);
    AddVersionHeader(c, *info);
    if (whole) AddChecksumHeaders(c, *info, part);
    if (range) {
      c.ex.SetStatus(206);
      c.ex.AddHeader("Content-Range",
                     StrCat("bytes ", first, "-", first + length - 1, "/", info->size));
    }
    (void)co_await c.ex.StartResponse(length);  // HEAD: the head only
    co_return;
  }
  store::GetOptions go;
  go.range = range;
  go.conditions = std::move(cond);
  absl::StatusOr<std::unique_ptr<store::ObjectReader>> r =
      co_await c.store.OpenObject(c.route.bucket, c.route.key, std::move(go));
  if (!r.ok()) {
    co_await FailRead(c, r.status());
    co_return;
  }
  store::ObjectReader& reader = **r;
  AddObjectHeaders(c, reader.info());
  AddVersionHeader(c, reader.info());
  if (whole) AddChecksumHeaders(c, reader.info(), part);
  if (range) {
    c.ex.SetStatus(206);
    c.ex.AddHeader("Content-Range",
                   StrCat("bytes ", reader.offset(), "-", reader.offset() + reader.length() - 1,
                          "/", reader.info().size));
  }
  const absl::Status started = co_await c.ex.StartResponse(reader.length());
  if (!started.ok()) co_return;
  while (true) {
    absl::StatusOr<absl::Span<const std::byte>> chunk = co_await reader.Next();
    if (!chunk.ok()) {
      // The head is gone: all that is left is to cut the body short (the client sees it).
      OL_LOG(kWarning) << "s3: GET " << c.resource << " failed after "
                      << "the response began: " << chunk.status().ToString();
      co_return;
    }
    if (chunk->empty()) break;
    const std::string_view data = Chars(*chunk);
    const absl::Status sent = co_await c.ex.Write(data);
    if (!sent.ok()) co_return;
  }
}

io::Task<void> CopyObject(Call& c) {
  const bool supported = co_await WriteHeadersSupported(c, /*conditional=*/true);
  if (!supported) co_return;
  store::WriteConditions when;
  const bool conditions_ok = co_await WriteConditionsOf(c, &when);
  if (!conditions_ok) co_return;
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
  const std::string_view directive = c.req.Value("x-amz-metadata-directive");
  if (!directive.empty() && directive != "COPY" && directive != "REPLACE") {
    co_await c.Error("InvalidArgument", 400, "Unknown metadata directive.");
    co_return;
  }
  const std::string_view tagging = c.req.Value("x-amz-tagging-directive");
  if (!tagging.empty() && tagging != "COPY" && tagging != "REPLACE") {
    co_await c.Error("InvalidArgument", 400, "Unknown tagging directive.");
    co_return;
  }
  const bool changes = directive == "REPLACE" || tagging == "REPLACE" || HasAclHeaders(c.req) ||
                       c.req.Find("x-amz-storage-class") != nullptr;
  if (src_bucket == c.route.bucket && src_key == c.route.key && src_version.empty() &&
      !changes) {
    co_await c.Error("InvalidRequest", 400,
                     "This copy request is illegal because it is trying to copy an object to "
                     "itself without changing the object's metadata, storage class, website "
                     "redirect location or encryption attributes.");
    co_return;
  }
  // The destination's metadata: the request's (REPLACE) or the source's, with the source's
  // tags unless the tagging directive replaces them, and another storage class when asked;
  // never the source's ACL (a copy is private unless the request grants more), as in S3.
  store::Conditions none;
  none.version_id = src_version;
  absl::StatusOr<store::ObjectInfo> src =
      co_await c.store.StatObject(src_bucket, src_key, std::move(none));
  if (!src.ok()) {
    if (store::ErrorKindOf(src.status()) == store::ErrorKind::kDeleteMarker &&
        !src_version.empty()) {
      co_await c.Error("InvalidRequest", 400,
                       "The source of a copy request may not specifically refer to a delete "
                       "marker by version id.");
      co_return;
    }
    co_await c.Fail(src.status());
    co_return;
  }
  store::PutOptions replace;
  if (directive == "REPLACE") {
    if (!PutOptionsFrom(c.req, &replace, &err)) {
      co_await c.Error(std::move(err));
      co_return;
    }
    if (tagging != "REPLACE") SetTags(TagsOf(src->user_meta), &replace.user_meta);
  } else {
    replace.content_type = src->content_type;
    replace.user_meta = src->user_meta;
    SetStorageClass(c.req, &replace);
    if (tagging == "REPLACE") {
      SetTags(TagSet(), &replace.user_meta);
      if (!TagsFromHeader(c.req, &replace.user_meta, &err)) {
        co_await c.Error(std::move(err));
        co_return;
      }
    }
  }
  replace.user_meta.erase(std::string(kAclMeta));
  const bool acl_ok = co_await ObjectAclFromHeaders(c, &replace.user_meta);
  if (!acl_ok) co_return;
  replace.versioning = co_await VersioningOf(c);
  store::Conditions cond = ConditionsFrom(c.req, "x-amz-copy-source-");
  cond.version_id = src_version;
  std::optional<store::PutOptions> dest(std::move(replace));
  absl::StatusOr<store::ObjectInfo> info =
      co_await c.store.CopyObject(src_bucket, src_key, c.route.bucket, c.route.key,
                                  std::move(dest), std::move(cond), std::move(when));
  if (!info.ok()) {
    if (store::ErrorKindOf(info.status()) == store::ErrorKind::kNotModified) {
      // A copy's failed If-None-Match / If-Modified-Since is 412, not 304.
      co_await c.Error("PreconditionFailed", 412,
                       "At least one of the pre-conditions you specified did not hold");
      co_return;
    }
    co_await c.Fail(info.status());
    co_return;
  }
  if (!src_version.empty()) c.ex.AddHeader("x-amz-copy-source-version-id", src_version);
  AddVersionHeader(c, *info);
  XmlWriter w("CopyObjectResult");
  w.Element("LastModified", FormatIsoTime(info->mod_time));
  w.Element("ETag", QuoteEtag(info->etag));
  co_await c.Xml(200, w.Finish());
}

io::Task<void> DeleteObject(Call& c) {
  store::DeleteOptions options;
  options.versioning = co_await VersioningOf(c);
  options.version_id = VersionIdParam(c.route);
  const absl::StatusOr<store::DeleteResult> st =
      co_await c.store.DeleteObject(c.route.bucket, c.route.key, std::move(options));
  // Deleting what is not there succeeds, as in S3.
  if (!st.ok() && store::ErrorKindOf(st.status()) != store::ErrorKind::kNoSuchKey) {
    co_await c.Fail(st.status());
    co_return;
  }
  if (st.ok() && !st->version_id.empty()) {
    c.ex.AddHeader("x-amz-version-id", st->version_id);
    if (st->delete_marker) c.ex.AddHeader("x-amz-delete-marker", "true");
  }
  co_await c.Empty(204);
}

io::Task<void> DeleteObjects(Call& c) {
  const bool exists = co_await BucketExists(c);
  if (!exists) co_return;
  std::string doc;
  const bool have_doc = co_await ReadDocument(c, c.opts.max_xml_bytes, &doc);
  if (!have_doc) co_return;
  absl::StatusOr<DeleteRequest> req = ParseDelete(doc);
  if (!req.ok()) {
    co_await FailMalformedDocument(c, req.status());
    co_return;
  }
  const store::Versioning versioning = co_await VersioningOf(c);
  XmlWriter w("DeleteResult");
  for (size_t i = 0; i < req->keys.size(); ++i) {
    const std::string& key = req->keys[i];
    const std::string& version = req->version_ids[i];
    // Each key is the owner's, or needs the bucket policy's s3:DeleteObject for it.
    const std::string_view action =
        version.empty() ? "s3:DeleteObject" : "s3:DeleteObjectVersion";
    const bool may = co_await Authorize(c, c.route.bucket, action, key, false);
    absl::StatusOr<store::DeleteResult> st = store::DeleteResult{};
    if (may) {
      store::DeleteOptions options;
      options.versioning = versioning;
      options.version_id = version;
      st = co_await c.store.DeleteObject(c.route.bucket, key, std::move(options));
    }
    if (may && (st.ok() || store::ErrorKindOf(st.status()) == store::ErrorKind::kNoSuchKey)) {
      if (req->quiet) continue;
      w.Open("Deleted");
      w.Element("Key", key);
      if (!version.empty()) w.Element("VersionId", version);
      if (st.ok() && st->delete_marker) {
        // The marker made, or the one removed.
        w.Element("DeleteMarker", "true");
        w.Element("DeleteMarkerVersionId", st->version_id);
      }
      w.Close();
      continue;
    }
    const S3Error e =
        may ? ErrorFromStatus(st.status()) : S3Error{"AccessDenied", 403, "Access Denied"};
    w.Open("Error");
    w.Element("Key", key);
    if (!version.empty()) w.Element("VersionId", version);
    w.Element("Code", e.code);
    w.Element("Message", e.message);
    w.Close();
  }
  co_await c.Xml(200, w.Finish());
}

}  // namespace openlake::s3

// Listings: ListObjects (v1 and v2), ListObjectVersions, ListMultipartUploads, ListParts (see
// ops.h).
#include <charconv>

#include "s3/api/fields.h"
#include "s3/api/ops.h"
#include "s3/api/xml.h"
#include "s3/auth/sigv4.h"

#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

// A non-negative integer query parameter capped at `cap`; `fallback` when absent. False when
// it is not a number.
bool IntParam(const Route& r, std::string_view name, int fallback, int cap, int* out) {
  const std::string* v = r.Param(name);
  if (v == nullptr) {
    *out = fallback;
    return true;
  }
  long long n = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || end != v->data() + v->size() || n < 0) return false;
  *out = static_cast<int>(std::min<long long>(n, cap));
  return true;
}

std::string ParamOr(const Route& r, std::string_view name) {
  const std::string* v = r.Param(name);
  return v ? *v : std::string();
}

// The page size (`max_name`, at most 1000) and encoding-type ("url" or none) of a listing;
// false after answering InvalidArgument.
io::Task<bool> ListingParams(Call& c, std::string_view max_name, int* max, bool* url) {
  if (!IntParam(c.route, max_name, 1000, 1000, max)) {
    co_await c.Error("InvalidArgument", 400,
                     StrCat("Provided ", max_name, " not an integer or within integer range"));
    co_return false;
  }
  const std::string* e = c.route.Param("encoding-type");
  *url = e != nullptr && *e == "url";
  if (e != nullptr && !*url) {
    co_await c.Error("InvalidArgument", 400, "Invalid Encoding Method specified in Request");
    co_return false;
  }
  co_return true;
}

// The objects' owner is the bucket's (an anonymous caller has no id of its own).
void Owner(XmlWriter& w, const Call& c, std::string_view element = "Owner") {
  OwnerElement(w, c, RoutedOwner(c), element);
}

template <typename Encode>
void CommonPrefixes(XmlWriter& w, const std::vector<std::string>& prefixes, const Encode& enc) {
  for (const std::string& p : prefixes) {
    w.Open("CommonPrefixes");
    w.Element("Prefix", enc(p));
    w.Close();
  }
}

}  // namespace

io::Task<void> ListObjects(Call& c, bool v2) {
  const Route& r = c.route;
  int max_keys = 0;
  bool url = false;
  const bool params_ok = co_await ListingParams(c, "max-keys", &max_keys, &url);
  if (!params_ok) co_return;
  auto enc = [url](std::string_view s) { return url ? UriEncode(s, true) : std::string(s); };
  store::ListOptions lo;
  lo.prefix = ParamOr(r, "prefix");
  lo.delimiter = ParamOr(r, "delimiter");
  lo.max_keys = max_keys;
  const std::string* token = v2 ? r.Param("continuation-token") : nullptr;
  if (token != nullptr && token->empty()) token = nullptr;  // an empty token lists from the start
  const std::string start_after = v2 ? ParamOr(r, "start-after") : std::string();
  if (token != nullptr) {
    std::optional<std::string> marker = Unbase64(*token);
    if (!marker || marker->substr(0, 3) != "ol:") {
      co_await c.Error("InvalidArgument", 400, "The continuation token provided is incorrect");
      co_return;
    }
    lo.marker = marker->substr(3);
  } else {
    lo.marker = v2 ? start_after : ParamOr(r, "marker");
  }
  const std::string prefix = lo.prefix, delimiter = lo.delimiter, marker = lo.marker;
  absl::StatusOr<store::ListResult> res = co_await c.store.ListObjects(r.bucket, std::move(lo));
  if (!res.ok()) {
    co_await c.Fail(res.status());
    co_return;
  }
  const bool fetch_owner = !v2 || ParamOr(r, "fetch-owner") == "true";
  XmlWriter w("ListBucketResult");
  w.Element("Name", r.bucket);
  w.Element("Prefix", enc(prefix));
  if (v2) {
    if (token != nullptr) w.Element("ContinuationToken", *token);
    if (!start_after.empty()) w.Element("StartAfter", enc(start_after));
    w.Element("KeyCount", std::to_string(res->objects.size() + res->common_prefixes.size()));
  } else {
    w.Element("Marker", enc(marker));
  }
  w.Element("MaxKeys", std::to_string(max_keys));
  if (!delimiter.empty()) w.Element("Delimiter", enc(delimiter));
  if (url) w.Element("EncodingType", "url");
  w.Element("IsTruncated", res->truncated ? "true" : "false");
  if (res->truncated) {
    if (v2) {
      w.Element("NextContinuationToken", Base64(StrCat("ol:", res->next_marker)));
    } else {
      w.Element("NextMarker", enc(res->next_marker));
    }
  }
  for (const store::ObjectInfo& o : res->objects) {
    w.Open("Contents");
    w.Element("Key", enc(o.key));
    w.Element("LastModified", FormatIsoTime(o.mod_time));
    w.Element("ETag", QuoteEtag(o.etag));
    w.Element("Size", std::to_string(o.size));
    if (fetch_owner) Owner(w, c);
    w.Element("StorageClass", StorageClassOf(o));
    w.Close();
  }
  CommonPrefixes(w, res->common_prefixes, enc);
  co_await c.Xml(200, w.Finish());
}

io::Task<void> ListObjectVersions(Call& c) {
  const Route& r = c.route;
  int max_keys = 0;
  bool url = false;
  const bool params_ok = co_await ListingParams(c, "max-keys", &max_keys, &url);
  if (!params_ok) co_return;
  auto enc = [url](std::string_view s) { return url ? UriEncode(s, true) : std::string(s); };
  store::ListVersionsOptions lo;
  lo.prefix = ParamOr(r, "prefix");
  lo.delimiter = ParamOr(r, "delimiter");
  lo.key_marker = ParamOr(r, "key-marker");
  lo.version_id_marker = ParamOr(r, "version-id-marker");
  lo.max_keys = max_keys;
  if (!lo.version_id_marker.empty() && lo.key_marker.empty()) {
    co_await c.Error("InvalidArgument", 400,
                     "A version-id marker cannot be specified without a key marker.");
    co_return;
  }
  const store::ListVersionsOptions asked = lo;
  absl::StatusOr<store::ListVersionsResult> res =
      co_await c.store.ListObjectVersions(r.bucket, std::move(lo));
  if (!res.ok()) {
    co_await c.Fail(res.status());
    co_return;
  }
  XmlWriter w("ListVersionsResult");
  w.Element("Name", r.bucket);
  w.Element("Prefix", enc(asked.prefix));
  w.Element("KeyMarker", enc(asked.key_marker));
  w.Element("VersionIdMarker", asked.version_id_marker);
  if (res->truncated) {
    w.Element("NextKeyMarker", enc(res->next_key_marker));
    if (!res->next_version_id_marker.empty()) {
      w.Element("NextVersionIdMarker", res->next_version_id_marker);
    }
  }
  w.Element("MaxKeys", std::to_string(max_keys));
  if (!asked.delimiter.empty()) w.Element("Delimiter", enc(asked.delimiter));
  if (url) w.Element("EncodingType", "url");
  w.Element("IsTruncated", res->truncated ? "true" : "false");
  for (const store::ObjectInfo& o : res->versions) {
    w.Open(o.delete_marker ? "DeleteMarker" : "Version");
    w.Element("Key", enc(o.key));
    w.Element("VersionId", o.version_id);
    w.Element("IsLatest", o.is_latest ? "true" : "false");
    w.Element("LastModified", FormatIsoTime(o.mod_time));
    if (!o.delete_marker) {
      w.Element("ETag", QuoteEtag(o.etag));
      w.Element("Size", std::to_string(o.size));
    }
    Owner(w, c);
    if (!o.delete_marker) w.Element("StorageClass", StorageClassOf(o));
    w.Close();
  }
  CommonPrefixes(w, res->common_prefixes, enc);
  co_await c.Xml(200, w.Finish());
}

io::Task<void> ListMultipartUploads(Call& c) {
  const Route& r = c.route;
  int max_uploads = 0;
  bool url = false;
  const bool params_ok = co_await ListingParams(c, "max-uploads", &max_uploads, &url);
  if (!params_ok) co_return;
  auto enc = [url](std::string_view s) { return url ? UriEncode(s, true) : std::string(s); };
  store::ListUploadsOptions lo;
  lo.prefix = ParamOr(r, "prefix");
  lo.delimiter = ParamOr(r, "delimiter");
  lo.key_marker = ParamOr(r, "key-marker");
  lo.upload_id_marker = ParamOr(r, "upload-id-marker");
  lo.max_uploads = max_uploads;
  const store::ListUploadsOptions asked = lo;
  absl::StatusOr<store::ListUploadsResult> res =
      co_await c.store.ListUploads(r.bucket, std::move(lo));
  if (!res.ok()) {
    co_await c.Fail(res.status());
    co_return;
  }
  XmlWriter w("ListMultipartUploadsResult");
  w.Element("Bucket", r.bucket);
  w.Element("KeyMarker", enc(asked.key_marker));
  w.Element("UploadIdMarker", asked.upload_id_marker);
  w.Element("NextKeyMarker", enc(res->next_key_marker));
  w.Element("NextUploadIdMarker", res->next_upload_id_marker);
  w.Element("Prefix", enc(asked.prefix));
  if (!asked.delimiter.empty()) w.Element("Delimiter", enc(asked.delimiter));
  w.Element("MaxUploads", std::to_string(max_uploads));
  if (url) w.Element("EncodingType", "url");
  w.Element("IsTruncated", res->truncated ? "true" : "false");
  for (const store::UploadInfo& u : res->uploads) {
    w.Open("Upload");
    w.Element("Key", enc(u.key));
    w.Element("UploadId", u.upload_id);
    Owner(w, c, "Initiator");
    Owner(w, c);
    w.Element("StorageClass", "STANDARD");
    w.Element("Initiated", FormatIsoTime(u.initiated));
    w.Close();
  }
  CommonPrefixes(w, res->common_prefixes, enc);
  co_await c.Xml(200, w.Finish());
}

io::Task<void> ListParts(Call& c) {
  const Route& r = c.route;
  int max_parts = 0, marker = 0;
  if (!IntParam(r, "max-parts", 1000, 1000, &max_parts) ||
      !IntParam(r, "part-number-marker", 0, 10000, &marker)) {
    co_await c.Error("InvalidArgument", 400,
                     "max-parts and part-number-marker must be non-negative integers");
    co_return;
  }
  const std::string upload_id = ParamOr(r, "uploadId");
  absl::StatusOr<store::ListPartsResult> res =
      co_await c.store.ListParts(r.bucket, r.key, upload_id, marker, max_parts);
  if (!res.ok()) {
    co_await c.Fail(res.status());
    co_return;
  }
  XmlWriter w("ListPartsResult");
  w.Element("Bucket", r.bucket);
  w.Element("Key", r.key);
  w.Element("UploadId", upload_id);
  Owner(w, c, "Initiator");
  Owner(w, c);
  w.Element("StorageClass", "STANDARD");
  w.Element("PartNumberMarker", std::to_string(marker));
  w.Element("NextPartNumberMarker", std::to_string(res->next_marker));
  w.Element("MaxParts", std::to_string(max_parts));
  w.Element("IsTruncated", res->truncated ? "true" : "false");
  for (const store::PartInfo& p : res->parts) {
    w.Open("Part");
    w.Element("PartNumber", std::to_string(p.number));
    w.Element("LastModified", FormatIsoTime(p.mod_time));
    w.Element("ETag", QuoteEtag(p.etag));
    w.Element("Size", std::to_string(p.size));
    ChecksumElements(w, p.meta, /*with_type=*/false);
    w.Close();
  }
  UploadChecksumElements(w, res->upload_meta);
  co_await c.Xml(200, w.Finish());
}

}  // namespace openlake::s3

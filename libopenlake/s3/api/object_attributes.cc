// GetObjectAttributes (GET /bucket/key?attributes, see ops.h): what x-amz-object-attributes
// names of ETag, Checksum, ObjectParts, StorageClass and ObjectSize, from the object's metadata
// alone (no byte is read); ObjectParts pages with x-amz-max-parts and x-amz-part-number-marker.
#include <algorithm>
#include <charconv>
#include <set>

#include "s3/api/fields.h"
#include "s3/api/ops.h"
#include "s3/api/xml.h"

#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

constexpr std::string_view kAttributes[] = {"ETag", "Checksum", "ObjectParts", "StorageClass",
                                            "ObjectSize"};

// The comma-separated names of x-amz-object-attributes; false when one is unknown or none is
// given.
bool ParseAttributes(std::string_view value, std::set<std::string>* out) {
  size_t start = 0;
  while (start <= value.size()) {
    size_t end = value.find(',', start);
    if (end == std::string_view::npos) end = value.size();
    std::string_view name = value.substr(start, end - start);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (!name.empty()) {
      bool known = false;
      for (std::string_view a : kAttributes) known = known || a == name;
      if (!known) return false;
      out->insert(std::string(name));
    }
    start = end + 1;
  }
  return !out->empty();
}

// A non-negative integer header, `fallback` when absent; false when malformed.
bool IntHeader(const http::Request& req, std::string_view name, int fallback, int* out) {
  const http::Header* h = req.Find(name);
  if (h == nullptr) {
    *out = fallback;
    return true;
  }
  auto [end, ec] = std::from_chars(h->value.data(), h->value.data() + h->value.size(), *out);
  return ec == std::errc() && end == h->value.data() + h->value.size() && *out >= 0;
}

}  // namespace

io::Task<void> GetObjectAttributes(Call& c) {
  std::set<std::string> want;
  if (!ParseAttributes(c.req.Value("x-amz-object-attributes"), &want)) {
    co_await c.Error("InvalidArgument", 400,
                     "Invalid attribute name specified: x-amz-object-attributes takes ETag, "
                     "Checksum, ObjectParts, StorageClass and ObjectSize.");
    co_return;
  }
  int max_parts = 0, marker = 0;
  if (!IntHeader(c.req, "x-amz-max-parts", 1000, &max_parts) ||
      !IntHeader(c.req, "x-amz-part-number-marker", 0, &marker)) {
    co_await c.Error("InvalidArgument", 400,
                     "x-amz-max-parts and x-amz-part-number-marker must be non-negative integers");
    co_return;
  }
  max_parts = std::min(max_parts == 0 ? 1000 : max_parts, 1000);
  store::Conditions cond = ConditionsFrom(c.req);
  cond.version_id = VersionIdParam(c.route);
  absl::StatusOr<store::ObjectInfo> info =
      co_await c.store.StatObject(c.route.bucket, c.route.key, std::move(cond));
  if (!info.ok()) {
    co_await c.Fail(info.status());
    co_return;
  }
  c.ex.AddHeader("Last-Modified", http::FormatHttpDate(info->mod_time));
  AddVersionHeader(c, *info);
  XmlWriter w("GetObjectAttributesResponse");
  if (want.count("ETag") != 0) w.Element("ETag", info->etag);  // S3 gives it without quotes
  if (want.count("Checksum") != 0 && HasStoredChecksum(info->user_meta)) {
    w.Open("Checksum");
    ChecksumElements(w, info->user_meta, /*with_type=*/true);
    w.Close();
  }
  if (want.count("ObjectParts") != 0 && !info->parts.empty()) {
    w.Open("ObjectParts");
    w.Element("PartsCount", std::to_string(info->parts.size()));  // TotalPartsCount in the SDKs
    w.Element("PartNumberMarker", std::to_string(marker));
    int last = marker, listed = 0;
    bool truncated = false;
    for (const store::PartSummary& p : info->parts) {
      if (p.number <= marker) continue;
      if (listed == max_parts) {
        truncated = true;
        break;
      }
      w.Open("Part");
      w.Element("PartNumber", std::to_string(p.number));
      w.Element("Size", std::to_string(p.size));
      ChecksumElements(w, p.meta, /*with_type=*/false);
      w.Close();
      last = p.number;
      ++listed;
    }
    w.Element("NextPartNumberMarker", std::to_string(last));
    w.Element("MaxParts", std::to_string(max_parts));
    w.Element("IsTruncated", truncated ? "true" : "false");
    w.Close();
  }
  if (want.count("StorageClass") != 0) w.Element("StorageClass", StorageClassOf(*info));
  if (want.count("ObjectSize") != 0) w.Element("ObjectSize", std::to_string(info->size));
  co_await c.Xml(200, w.Finish());
}

}  // namespace openlake::s3

// HTTP field values of the S3 handlers (see fields.h).
#include "s3/api/fields.h"

#include <cctype>
#include <cstring>

#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

bool ParseU64(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string FormatIsoTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
}

std::optional<absl::Time> ParseIsoDate(std::string_view text) {
  const std::string s(text);
  for (const char* format : {"%Y-%m-%dT%H:%M:%E*SZ", "%Y-%m-%dT%H:%M:%E*S%Ez", "%Y-%m-%d"}) {
    absl::Time t;
    std::string err;
    if (absl::ParseTime(format, s, &t, &err)) return t;
  }
  return std::nullopt;
}

std::optional<store::RangeSpec> ParseRange(std::string_view value) {
  value = Trim(value);
  if (value.substr(0, 6) != "bytes=") return std::nullopt;
  value.remove_prefix(6);
  if (value.find(',') != std::string_view::npos) return std::nullopt;
  const size_t dash = value.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  const std::string_view a = Trim(value.substr(0, dash));
  const std::string_view b = Trim(value.substr(dash + 1));
  store::RangeSpec r;
  uint64_t v = 0;
  if (a.empty()) {
    if (!ParseU64(b, &v)) return std::nullopt;
    r.suffix = v;
    return r;
  }
  if (!ParseU64(a, &v)) return std::nullopt;
  r.first = v;
  if (!b.empty()) {
    if (!ParseU64(b, &v) || v < *r.first) return std::nullopt;
    r.last = v;
  }
  return r;
}

bool ParseCopyRange(std::string_view value, uint64_t* first, uint64_t* last) {
  std::optional<store::RangeSpec> r = ParseRange(value);
  if (!r || !r->first || !r->last) return false;
  *first = *r->first;
  *last = *r->last;
  return true;
}

store::Conditions ConditionsFrom(const http::Request& req, std::string_view prefix) {
  store::Conditions c;
  const std::string p(prefix);
  c.if_match = std::string(Trim(req.Value(p + "if-match")));
  c.if_none_match = std::string(Trim(req.Value(p + "if-none-match")));
  if (const http::Header* h = req.Find(p + "if-modified-since")) {
    c.if_modified_since = http::ParseHttpDate(h->value);
  }
  if (const http::Header* h = req.Find(p + "if-unmodified-since")) {
    c.if_unmodified_since = http::ParseHttpDate(h->value);
  }
  return c;
}

bool UserMetaFrom(const http::Request& req, std::map<std::string, std::string>* meta,
                  std::string* error) {
  constexpr std::string_view kPrefix = "x-amz-meta-";
  size_t bytes = 0;
  for (const http::Header& h : req.headers) {
    if (h.name.size() <= kPrefix.size() || h.name.compare(0, kPrefix.size(), kPrefix) != 0) {
      continue;
    }
    std::string name = h.name.substr(kPrefix.size());
    bytes += name.size() + h.value.size();
    auto [it, fresh] = meta->emplace(std::move(name), h.value);
    if (!fresh) it->second.append(",").append(h.value);  // repeated: joined, as HTTP does
  }
  if (bytes > 2048) {
    *error = "Your metadata headers exceed the maximum allowed metadata size (2 KiB).";
    return false;
  }
  return true;
}

std::string QuoteEtag(std::string_view etag) { return StrCat("\"", etag, "\""); }

}  // namespace openlake::s3

// HTTP field values of the S3 handlers (see fields.h).
#include "s3/fields.h"

#include <openssl/evp.h>
#include <time.h>

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

std::optional<absl::Time> ParseHttpDate(std::string_view s) {
  s = Trim(s);
  if (s.empty() || s.size() > 64) return std::nullopt;
  const std::string text(s);
  // IMF-fixdate, RFC 850 and asctime (RFC 9110 §5.6.7); %a also takes full day names.
  for (const char* fmt : {"%a, %d %b %Y %H:%M:%S GMT", "%a, %d-%b-%y %H:%M:%S GMT",
                          "%a %b %e %H:%M:%S %Y"}) {
    std::tm tm{};
    const char* end = strptime(text.c_str(), fmt, &tm);
    if (end != nullptr && *end == '\0') return absl::FromTimeT(timegm(&tm));
  }
  return std::nullopt;
}

std::string FormatHttpDate(absl::Time t) {
  // strftime on gmtime_r: absl::FormatTime's time-zone machinery costs several times more,
  // and every GET and HEAD formats one.
  const time_t tt = absl::ToTimeT(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return std::string(buf, n);
}

std::string FormatIsoTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone());
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

store::Conditions ConditionsFrom(const Request& req, std::string_view prefix) {
  store::Conditions c;
  const std::string p(prefix);
  c.if_match = std::string(Trim(req.Value(p + "if-match")));
  c.if_none_match = std::string(Trim(req.Value(p + "if-none-match")));
  if (const Header* h = req.Find(p + "if-modified-since")) {
    c.if_modified_since = ParseHttpDate(h->value);
  }
  if (const Header* h = req.Find(p + "if-unmodified-since")) {
    c.if_unmodified_since = ParseHttpDate(h->value);
  }
  return c;
}

bool UserMetaFrom(const Request& req, std::map<std::string, std::string>* meta,
                  std::string* error) {
  constexpr std::string_view kPrefix = "x-amz-meta-";
  size_t bytes = 0;
  for (const Header& h : req.headers) {
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

std::string Base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(n);
  return out;
}

std::optional<std::string> Unbase64(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0 || text.size() > (1 << 20)) return std::nullopt;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool pad_ok = c == '=' && i + 2 >= text.size() &&
                        (i + 1 == text.size() || text[i + 1] == '=');
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || pad_ok)) {
      return std::nullopt;
    }
  }
  std::string out(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  size_t len = static_cast<size_t>(n);
  if (text.back() == '=') --len;  // EVP_DecodeBlock counts padding as zero bytes
  if (text[text.size() - 2] == '=') --len;
  out.resize(len);
  return out;
}

}  // namespace openlake::s3

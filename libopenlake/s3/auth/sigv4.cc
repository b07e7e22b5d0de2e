// AWS Signature Version 4 verification (see sigv4.h).
#include "s3/auth/sigv4.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <utility>

#include "absl/strings/str_join.h"

#include "common/digest.h"
#include "s3/api/fields.h"

#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";

bool IsUnreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '~';
}

bool IsDigits(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "a  b   c" → "a b c", trimmed: SigV4's canonical header value.
std::string CanonicalValue(std::string_view v) {
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

// "Credential=AK/20130524/us-east-1/s3/aws4_request" parts.
struct Credential {
  std::string access_key, date, region, service;
};

bool ParseCredential(std::string_view v, Credential* c) {
  // The access key may not contain '/', the rest are fixed: split from the right.
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t slash = v.find('/', start);
    parts.push_back(v.substr(start, slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  if (parts.size() != 5 || parts[4] != "aws4_request" || parts[0].empty() || parts[1].size() != 8 ||
      !IsDigits(parts[1]) || parts[2].empty() || parts[3].empty()) {
    return false;
  }
  c->access_key = std::string(parts[0]);
  c->date = std::string(parts[1]);
  c->region = std::string(parts[2]);
  c->service = std::string(parts[3]);
  return true;
}

std::array<uint8_t, 32> DeriveSigningKey(std::string_view secret, const Credential& c) {
  const std::string k0 = "AWS4" + std::string(secret);
  auto k1 = HmacSha256(k0, c.date);
  auto k2 = HmacSha256({reinterpret_cast<const char*>(k1.data()), k1.size()}, c.region);
  auto k3 = HmacSha256({reinterpret_cast<const char*>(k2.data()), k2.size()}, c.service);
  return HmacSha256({reinterpret_cast<const char*>(k3.data()), k3.size()}, "aws4_request");
}

// The signing key changes once a day per access key: each reactor thread keeps the last few it
// derived (four HMACs saved per request), looked up by everything that goes into them.
std::array<uint8_t, 32> SigningKey(std::string_view secret, const Credential& c) {
  struct Entry {
    std::string id;  // secret, date, region, service
    std::array<uint8_t, 32> key;
  };
  thread_local std::array<Entry, 8> cache;
  thread_local size_t next = 0;
  std::string id = StrCat(secret, "\n", c.date, "\n", c.region, "\n", c.service);
  for (const Entry& e : cache) {
    if (e.id == id) return e.key;
  }
  Entry& e = cache[next++ % cache.size()];
  e.id = std::move(id);
  e.key = DeriveSigningKey(secret, c);
  return e.key;
}

std::string Sign(const std::array<uint8_t, 32>& key, std::string_view string_to_sign) {
  auto sig = HmacSha256({reinterpret_cast<const char*>(key.data()), key.size()}, string_to_sign);
  return Hex(std::string_view(reinterpret_cast<const char*>(sig.data()), sig.size()));
}

bool SameSignature(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// What both sides build. The canonical request after its path line: the query (names and values
// SigV4-encoded, sorted by name then value; a presigned URL's own X-Amz-Signature left out),
// "name:value" per signed header (repeated headers joined by ','), the signed header list and
// the payload. `signed_headers` are lower-case names; nullopt names one missing from `headers`
// in *missing.
std::optional<std::string> CanonicalTail(
    const std::vector<std::pair<std::string, std::string>>& params, bool presigned,
    const std::vector<http::Header>& headers, const std::vector<std::string>& signed_headers,
    std::string_view payload, std::string* missing) {
  std::string rest;
  std::vector<std::pair<std::string, std::string>> query;
  for (const auto& [k, v] : params) {
    if (presigned && k == "X-Amz-Signature") continue;
    query.emplace_back(UriEncode(k, false), UriEncode(v, false));
  }
  std::sort(query.begin(), query.end());
  for (size_t i = 0; i < query.size(); ++i) {
    if (i > 0) rest.push_back('&');
    rest.append(query[i].first).append("=").append(query[i].second);
  }
  rest.append("\n");
  std::string signed_list;
  for (size_t i = 0; i < signed_headers.size(); ++i) {
    const std::string& name = signed_headers[i];
    std::string value;
    bool found = false;
    for (const http::Header& h : headers) {
      if (h.name != name) continue;
      if (found) value.push_back(',');
      value += CanonicalValue(h.value);
      found = true;
    }
    if (!found) {
      *missing = name;
      return std::nullopt;
    }
    rest.append(name).append(":").append(value).append("\n");
    if (i > 0) signed_list.push_back(';');
    signed_list += name;
  }
  rest.append("\n").append(signed_list).append("\n").append(payload);
  return rest;
}

// The hex signature of the canonical request `method`, `path`, `tail`.
std::string SignCanonical(const std::array<uint8_t, 32>& key, std::string_view method,
                          std::string_view path, std::string_view tail, std::string_view amz_date,
                          std::string_view scope) {
  std::string canonical;
  canonical.reserve(method.size() + path.size() + tail.size() + 2);
  canonical.append(method).append("\n").append(path).append("\n").append(tail);
  const std::string string_to_sign =
      StrCat(kAlgorithm, "\n", amz_date, "\n", scope, "\n", Sha256Hex(canonical));
  return Sign(key, string_to_sign);
}

}  // namespace

std::string FormatAmzDate(int64_t unix_seconds) {
  const time_t tt = static_cast<time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

// ---- Helpers

SigV4Result AuthError(std::string code, int status, std::string message) {
  SigV4Result r;
  r.code = std::move(code);
  r.http_status = status;
  r.message = std::move(message);
  return r;
}

std::string Sha256Hex(std::string_view data) {
  Digest h(Digest::kSha256);
  h.Update(data);
  return Hex(h.Final());
}

std::array<uint8_t, 32> HmacSha256(std::string_view key, std::string_view data) {
  // RFC 2104 over SHA-256 (64-byte blocks).
  // (OpenSSL 3's one-shot HMAC() looks the algorithm up and builds a MAC context per call: a
  // third of a small GET's CPU. Digest reuses one fetched SHA-256.)
  uint8_t k[64] = {};
  Digest h(Digest::kSha256);
  if (key.size() > sizeof(k)) {
    h.Update(key);
    const std::string kd = h.Final();
    std::memcpy(k, kd.data(), kd.size());
  } else {
    std::memcpy(k, key.data(), key.size());
  }
  uint8_t pad[64];
  for (size_t i = 0; i < sizeof(pad); ++i) pad[i] = k[i] ^ 0x36;
  h.Update(pad, sizeof(pad));
  h.Update(data);
  const std::string inner = h.Final();
  for (size_t i = 0; i < sizeof(pad); ++i) pad[i] = k[i] ^ 0x5c;
  h.Update(pad, sizeof(pad));
  h.Update(inner);
  const std::string outer = h.Final();
  std::array<uint8_t, 32> out{};
  std::memcpy(out.data(), outer.data(), out.size());
  return out;
}

std::string UriEncode(std::string_view raw, bool keep_slash) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  out.reserve(raw.size());
  for (char ch : raw) {
    const auto c = static_cast<unsigned char>(ch);
    if (IsUnreserved(c) || (keep_slash && c == '/')) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::optional<int64_t> ParseAmzDate(std::string_view s) {
  if (s.size() != 16 || s[8] != 'T' || s[15] != 'Z' || !IsDigits(s.substr(0, 8)) ||
      !IsDigits(s.substr(9, 6))) {
    return std::nullopt;
  }
  auto num = [&](size_t at, size_t n) {
    int v = 0;
    for (size_t i = 0; i < n; ++i) v = v * 10 + (s[at + i] - '0');
    return v;
  };
  std::tm tm{};
  tm.tm_year = num(0, 4) - 1900;
  tm.tm_mon = num(4, 2) - 1;
  tm.tm_mday = num(6, 2);
  tm.tm_hour = num(9, 2);
  tm.tm_min = num(11, 2);
  tm.tm_sec = num(13, 2);
  if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60) {
    return std::nullopt;
  }
  return static_cast<int64_t>(timegm(&tm));
}

// ---- Verification

SigV4Result VerifySigV4(const SigV4Request& req, const SecretLookup& secrets, int64_t now_unix,
                        const SigV4Options& options) {
  const std::vector<http::Header>& headers = *req.headers;
  std::vector<std::pair<std::string, std::string>> params;
  if (!http::ParseQueryString(req.query, &params)) {
    return AuthError("InvalidArgument", 400, "malformed percent-escape in the query string");
  }
  auto param = [&](std::string_view name) { return http::FindParam(params, name); };

  SigV4Result r;
  Credential cred;
  std::vector<std::string> signed_headers;
  std::string signature;
  const http::Header* authorization = http::FindHeader(headers, "authorization");
  if (authorization != nullptr) {
    std::string_view v = authorization->value;
    if (v.substr(0, kAlgorithm.size()) != kAlgorithm || v.size() == kAlgorithm.size() ||
        v[kAlgorithm.size()] != ' ') {
      return AuthError("AuthorizationHeaderMalformed", 400, "unknown authorization algorithm");
    }
    v.remove_prefix(kAlgorithm.size() + 1);
    bool have_cred = false, have_signed = false, have_sig = false;
    while (!v.empty()) {
      const size_t comma = v.find(',');
      std::string_view item = v.substr(0, comma);
      while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
      while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
      const size_t eq = item.find('=');
      const std::string_view key = item.substr(0, eq);
      const std::string_view val = eq == std::string_view::npos ? "" : item.substr(eq + 1);
      if (key == "Credential") {
        have_cred = ParseCredential(val, &cred);
      } else if (key == "SignedHeaders") {
        have_signed = true;
        size_t s = 0;
        while (s <= val.size()) {
          const size_t semi = val.find(';', s);
          signed_headers.emplace_back(val.substr(s, semi - s));
          if (semi == std::string_view::npos) break;
          s = semi + 1;
        }
      } else if (key == "Signature") {
        have_sig = true;
        signature = std::string(val);
      }
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
    if (!have_cred || !have_signed || !have_sig || signature.size() != 64) {
      return AuthError("AuthorizationHeaderMalformed", 400,
                       "the authorization header needs Credential, SignedHeaders and Signature");
    }
    const http::Header* date = http::FindHeader(headers, "x-amz-date");
    std::optional<int64_t> t;
    if (date != nullptr) {
      t = ParseAmzDate(date->value);
      r.amz_date = date->value;
    } else if (const http::Header* http_date = http::FindHeader(headers, "date");
               http_date != nullptr) {
      if (std::optional<absl::Time> d = http::ParseHttpDate(http_date->value)) {
        t = absl::ToUnixSeconds(*d);
        r.amz_date = FormatAmzDate(*t);
      }
    }
    if (!t) return AuthError("AccessDenied", 403, "missing or malformed X-Amz-Date");
    if (*t > now_unix + options.max_skew_s || *t < now_unix - options.max_skew_s) {
      return AuthError(
          "RequestTimeTooSkewed", 403,
          "The difference between the request time and the server's time is too large.");
    }
    const http::Header* payload = http::FindHeader(headers, "x-amz-content-sha256");
    if (payload == nullptr) {
      return AuthError("InvalidRequest", 400,
                       "Missing required header for this request: x-amz-content-sha256");
    }
    r.payload = payload->value;
  } else if (const std::string* alg = param("X-Amz-Algorithm"); alg != nullptr) {
    r.presigned = true;
    if (*alg != kAlgorithm) {
      return AuthError("AuthorizationQueryParametersError", 400,
                       "X-Amz-Algorithm must be " + std::string(kAlgorithm));
    }
    const std::string* c = param("X-Amz-Credential");
    const std::string* d = param("X-Amz-Date");
    const std::string* e = param("X-Amz-Expires");
    const std::string* sh = param("X-Amz-SignedHeaders");
    const std::string* sg = param("X-Amz-Signature");
    if (c == nullptr || d == nullptr || e == nullptr || sh == nullptr || sg == nullptr ||
        !ParseCredential(*c, &cred) || sg->size() != 64 || e->empty() || e->size() > 7 ||
        !IsDigits(*e)) {
      return AuthError("AuthorizationQueryParametersError", 400,
                       "a presigned URL needs X-Amz-Credential, X-Amz-Date, X-Amz-Expires, "
                       "X-Amz-SignedHeaders and X-Amz-Signature");
    }
    const int64_t expires = std::stoll(*e);
    if (expires < 1 || expires > options.max_presign_expires_s) {
      return AuthError("AuthorizationQueryParametersError", 400,
                       "X-Amz-Expires must be between 1 and 604800 seconds");
    }
    const std::optional<int64_t> t = ParseAmzDate(*d);
    if (!t) return AuthError("AuthorizationQueryParametersError", 400, "malformed X-Amz-Date");
    if (now_unix > *t + expires) return AuthError("AccessDenied", 403, "Request has expired");
    if (*t > now_unix + options.max_skew_s) {
      return AuthError("AccessDenied", 403, "Request is not valid yet");
    }
    r.amz_date = *d;
    signature = *sg;
    size_t s = 0;
    while (s <= sh->size()) {
      const size_t semi = sh->find(';', s);
      signed_headers.push_back(sh->substr(s, semi - s));
      if (semi == std::string::npos) break;
      s = semi + 1;
    }
    const std::string* p = param("X-Amz-Content-Sha256");
    const http::Header* ph = http::FindHeader(headers, "x-amz-content-sha256");
    r.payload = p != nullptr ? *p : ph != nullptr ? ph->value : std::string(kUnsignedPayload);
  } else {
    return AuthError("AccessDenied", 403, "Access Denied (the request is not signed)");
  }

  if (r.amz_date.substr(0, 8) != cred.date) {
    return AuthError(
        r.presigned ? "AuthorizationQueryParametersError" : "AuthorizationHeaderMalformed", 400,
        "the credential's date does not match the request's date");
  }
  if (std::find(signed_headers.begin(), signed_headers.end(), "host") == signed_headers.end()) {
    return AuthError(
        r.presigned ? "AuthorizationQueryParametersError" : "AuthorizationHeaderMalformed", 400,
        "the host header must be signed");
  }
  const std::optional<std::string> secret = secrets(cred.access_key);
  if (!secret) {
    return AuthError("InvalidAccessKeyId", 403,
                     "The AWS Access Key Id you provided does not exist in our records.");
  }

  // The canonical request.
  std::string path;
  if (!http::PercentDecode(req.path, &path)) {
    return AuthError("InvalidArgument", 400, "malformed percent-escape in the path");
  }
  for (const std::string& name : signed_headers) {
    if (name.empty() || http::AsciiLower(name) != name) {
      return AuthError(
          r.presigned ? "AuthorizationQueryParametersError" : "AuthorizationHeaderMalformed", 400,
          "malformed SignedHeaders");
    }
  }
  std::string missing;
  const std::optional<std::string> tail =
      CanonicalTail(params, r.presigned, headers, signed_headers, r.payload, &missing);
  if (!tail) {
    return AuthError("SignatureDoesNotMatch", 403,
                     "a signed header is missing from the request: " + missing);
  }

  r.scope = cred.date + "/" + cred.region + "/" + cred.service + "/aws4_request";
  r.signing_key = SigningKey(*secret, cred);
  // Clients differ in how they escape a path (some send '~' or '*' escaped, some not) and sign
  // what they send; AWS signs the path as sent. So the path as sent is tried first, then the
  // SigV4 encoding of its decoded form: both name the same object, and the signature must
  // match one of them exactly.
  auto matches = [&](std::string_view canonical_path) {
    return SameSignature(
        SignCanonical(r.signing_key, req.method, canonical_path, *tail, r.amz_date, r.scope),
        signature);
  };
  bool ok = matches(req.path);
  if (!ok) {
    const std::string encoded = UriEncode(path, /*keep_slash=*/true);
    ok = encoded != req.path && matches(encoded);
  }
  if (!ok) {
    return AuthError("SignatureDoesNotMatch", 403,
                     "The request signature we calculated does not match the signature you "
                     "provided. Check your key and signing method.");
  }
  r.access_key = cred.access_key;
  r.region = cred.region;
  r.seed_signature = signature;
  return r;
}

// ---- Signing

std::string SignV4(const SigV4SignInput& in) {
  const std::vector<http::Header>& headers = *in.headers;
  std::vector<std::string> names;
  for (const http::Header& h : headers) names.push_back(h.name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::vector<std::pair<std::string, std::string>> params;
  (void)http::ParseQueryString(in.query, &params);  // the caller encoded it
  const http::Header* date = http::FindHeader(headers, "x-amz-date");
  const http::Header* payload = http::FindHeader(headers, "x-amz-content-sha256");
  const std::string amz_date = date != nullptr ? date->value : "";
  std::string missing;
  const std::optional<std::string> tail = CanonicalTail(
      params, false, headers, names, payload != nullptr ? payload->value : "", &missing);
  Credential cred;
  cred.access_key = std::string(in.access_key);
  cred.date = amz_date.substr(0, 8);
  cred.region = std::string(in.region);
  cred.service = std::string(in.service);
  const std::string scope = StrCat(cred.date, "/", cred.region, "/", cred.service, "/aws4_request");
  const std::string signature = SignCanonical(SigningKey(in.secret_key, cred), in.method, in.path,
                                              tail.value_or(""), amz_date, scope);
  return StrCat(kAlgorithm, " Credential=", in.access_key, "/", scope,
                ", SignedHeaders=", absl::StrJoin(names, ";"), ", Signature=", signature);
}

std::string ChunkSignature(const SigV4Result& auth, std::string_view previous_signature,
                           std::string_view chunk_sha256_hex) {
  // SHA-256 of no bytes. A literal, not a static std::string: one of those is destroyed at exit
  // while a reactor thread may still sign (ThreadSanitizer showed it).
  constexpr std::string_view kEmpty =
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
  std::string sts = "AWS4-HMAC-SHA256-PAYLOAD\n";
  sts.append(auth.amz_date).append("\n").append(auth.scope).append("\n");
  sts.append(previous_signature).append("\n").append(kEmpty).append("\n").append(chunk_sha256_hex);
  return Sign(auth.signing_key, sts);
}

std::string TrailerSignature(const SigV4Result& auth, std::string_view previous_signature,
                             std::string_view trailer_bytes) {
  std::string sts = "AWS4-HMAC-SHA256-TRAILER\n";
  sts.append(auth.amz_date).append("\n").append(auth.scope).append("\n");
  sts.append(previous_signature).append("\n").append(Sha256Hex(trailer_bytes));
  return Sign(auth.signing_key, sts);
}

SigV4Result VerifyPostPolicySigV4(std::string_view credential, std::string_view amz_date,
                                  std::string_view policy_base64, std::string_view signature,
                                  const SecretLookup& secrets) {
  Credential cred;
  if (!ParseCredential(credential, &cred) || cred.service != "s3") {
    return AuthError("InvalidArgument", 400, "x-amz-credential is malformed");
  }
  const std::optional<int64_t> t = ParseAmzDate(amz_date);
  if (!t || amz_date.substr(0, 8) != cred.date) {
    return AuthError("InvalidArgument", 400,
                     "x-amz-date is malformed or not the day of x-amz-credential");
  }
  const std::optional<std::string> secret = secrets(cred.access_key);
  if (!secret) {
    return AuthError("InvalidAccessKeyId", 403,
                     "The AWS Access Key Id you provided does not exist in our records.");
  }
  const std::string expected = Sign(DeriveSigningKey(*secret, cred), policy_base64);
  if (!SameSignature(expected, http::AsciiLower(signature))) {
    return AuthError("SignatureDoesNotMatch", 403,
                     "The request signature we calculated does not match the signature you "
                     "provided. Check your key and signing method.");
  }
  SigV4Result r;
  r.access_key = cred.access_key;
  r.region = cred.region;
  r.amz_date = std::string(amz_date);
  return r;
}

}  // namespace openlake::s3

// SigV2 verification (see sigv2.h).
#include "s3/auth/sigv2.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

#include "s3/api/fields.h"

#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

// Sub-resources that are part of the canonical resource (with their values), sorted.
constexpr std::string_view kSubresources[] = {"acl",
                                              "cors",
                                              "delete",
                                              "lifecycle",
                                              "location",
                                              "logging",
                                              "notification",
                                              "partNumber",
                                              "policy",
                                              "requestPayment",
                                              "response-cache-control",
                                              "response-content-disposition",
                                              "response-content-encoding",
                                              "response-content-language",
                                              "response-content-type",
                                              "response-expires",
                                              "restore",
                                              "tagging",
                                              "torrent",
                                              "uploadId",
                                              "uploads",
                                              "versionId",
                                              "versioning",
                                              "versions",
                                              "website"};

std::string HmacSha1Base64(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha1(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return Base64(std::string_view(reinterpret_cast<const char*>(out), len));
}

}  // namespace

bool IsSigV2(const SigV4Request& req) {
  const http::Header* a = http::FindHeader(*req.headers, "authorization");
  if (a != nullptr) return a->value.compare(0, 4, "AWS ") == 0;
  std::vector<std::pair<std::string, std::string>> params;
  return http::ParseQueryString(req.query, &params) &&
         http::FindParam(params, "AWSAccessKeyId") != nullptr &&
         http::FindParam(params, "Signature") != nullptr;
}

SigV4Result VerifySigV2(const SigV4Request& req, std::string_view bucket_from_host,
                        const SecretLookup& secrets, int64_t now_unix, std::string_view region,
                        const SigV4Options& options) {
  const std::vector<http::Header>& headers = *req.headers;
  std::vector<std::pair<std::string, std::string>> params;
  if (!http::ParseQueryString(req.query, &params)) {
    return AuthError("InvalidArgument", 400, "malformed percent-escape in the query string");
  }
  SigV4Result r;
  std::string access_key, signature, date_field;
  const http::Header* authorization = http::FindHeader(headers, "authorization");
  if (authorization != nullptr) {
    std::string_view v = std::string_view(authorization->value).substr(4);
    const size_t colon = v.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == v.size()) {
      return AuthError("InvalidArgument", 400,
                       "Authorization header is invalid: AWS key:signature");
    }
    access_key = std::string(v.substr(0, colon));
    signature = std::string(v.substr(colon + 1));
    const http::Header* amz_date = http::FindHeader(headers, "x-amz-date");
    const http::Header* date = http::FindHeader(headers, "date");
    std::optional<absl::Time> t = http::ParseHttpDate(amz_date != nullptr ? amz_date->value
                                                      : date              ? date->value
                                                                          : "");
    if (!t) {
      return AuthError("AccessDenied", 403,
                       "AWS authentication requires a valid Date or x-amz-date header");
    }
    const int64_t ts = absl::ToUnixSeconds(*t);
    if (ts > now_unix + options.max_skew_s || ts < now_unix - options.max_skew_s) {
      return AuthError(
          "RequestTimeTooSkewed", 403,
          "The difference between the request time and the server's time is too large.");
    }
    // With x-amz-date the Date line is empty (the header is signed among the x-amz-*).
    date_field = amz_date != nullptr ? "" : date->value;
  } else {
    r.presigned = true;
    access_key = *http::FindParam(params, "AWSAccessKeyId");
    signature = *http::FindParam(params, "Signature");
    const std::string* expires = http::FindParam(params, "Expires");
    int64_t e = 0;
    bool ok = expires != nullptr && !expires->empty() && expires->size() <= 12;
    for (char ch : ok ? *expires : std::string()) {
      ok = ok && ch >= '0' && ch <= '9';
      e = e * 10 + (ch - '0');
    }
    if (!ok) return AuthError("AccessDenied", 403, "Query-string authentication requires Expires");
    if (now_unix > e) return AuthError("AccessDenied", 403, "Request has expired");
    date_field = *expires;
  }
  std::optional<std::string> secret = secrets(access_key);
  if (!secret) {
    return AuthError("InvalidAccessKeyId", 403,
                     "The AWS Access Key Id you provided does not exist in our records.");
  }
  // x-amz-* headers, lower case, sorted, repeated ones joined by commas.
  std::map<std::string, std::string> amz;
  for (const http::Header& h : headers) {
    if (h.name.compare(0, 6, "x-amz-") != 0) continue;
    auto [it, fresh] = amz.emplace(h.name, h.value);
    if (!fresh) it->second.append(",").append(h.value);
  }
  std::string sts = StrCat(req.method, "\n");
  const http::Header* md5 = http::FindHeader(headers, "content-md5");
  const http::Header* type = http::FindHeader(headers, "content-type");
  sts.append(md5 ? md5->value : "").append("\n");
  sts.append(type ? type->value : "").append("\n");
  sts.append(date_field).append("\n");
  for (const auto& [name, value] : amz) sts.append(name).append(":").append(value).append("\n");
  std::string resource;
  if (!bucket_from_host.empty()) resource.append("/").append(bucket_from_host);
  resource.append(req.path);
  std::vector<std::pair<std::string, std::string>> sub;
  for (const auto& [k, v] : params) {
    if (std::find(std::begin(kSubresources), std::end(kSubresources), k) !=
        std::end(kSubresources)) {
      sub.emplace_back(k, v);
    }
  }
  std::sort(sub.begin(), sub.end());
  std::string query;
  for (size_t i = 0; i < sub.size(); ++i) {
    query.append(i == 0 ? "?" : "&").append(sub[i].first);
    if (!sub[i].second.empty()) query.append("=").append(sub[i].second);
  }
  // S3 names a bucket "/bucket/": botocore signs a path-style bucket request ("PUT /bucket")
  // with that resource, other clients (minio-go) with the path as sent. Both are the bucket.
  bool match = false;
  const bool bare_bucket = resource.size() > 1 && resource.find('/', 1) == std::string::npos;
  for (int form = 0; form < (bare_bucket ? 2 : 1) && !match; ++form) {
    const std::string expected =
        HmacSha1Base64(*secret, StrCat(sts, resource, form == 1 ? "/" : "", query));
    match = expected.size() == signature.size() &&
            CRYPTO_memcmp(expected.data(), signature.data(), expected.size()) == 0;
  }
  if (!match) {
    return AuthError("SignatureDoesNotMatch", 403,
                     "The request signature we calculated does not match the signature you "
                     "provided. Check your key and signing method.");
  }
  r.access_key = access_key;
  r.region = std::string(region);
  r.payload = std::string(kUnsignedPayload);
  return r;
}

SigV4Result VerifyPostPolicySigV2(std::string_view access_key, std::string_view policy_base64,
                                  std::string_view signature, const SecretLookup& secrets,
                                  std::string_view region) {
  const std::optional<std::string> secret = secrets(access_key);
  if (!secret) {
    return AuthError("InvalidAccessKeyId", 403,
                     "The AWS Access Key Id you provided does not exist in our records.");
  }
  const std::string expected = HmacSha1Base64(*secret, policy_base64);
  if (expected.size() != signature.size() ||
      CRYPTO_memcmp(expected.data(), signature.data(), expected.size()) != 0) {
    return AuthError("SignatureDoesNotMatch", 403,
                     "The request signature we calculated does not match the signature you "
                     "provided. Check your key and signing method.");
  }
  SigV4Result r;
  r.access_key = std::string(access_key);
  r.region = std::string(region);
  r.payload = std::string(kUnsignedPayload);
  return r;
}

}  // namespace openlake::s3

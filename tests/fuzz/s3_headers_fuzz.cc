// Fuzz target for what the S3 server reads from a request's head before any handler runs:
// SigV4 (Authorization header and presigned query), SigV2 (header and query), the query string,
// and the field values the handlers parse (Range, x-amz-copy-source and its range, conditional
// dates, user metadata). The input is a request as text (fuzz_request.h). Beyond "no crash" it
// checks one property: a request signed by our own signer (SignV4, what the S3 client sends)
// verifies.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_request.h"
#include "http/date.h"
#include "s3/api/errors.h"
#include "s3/api/fields.h"
#include "s3/api/ops.h"
#include "s3/auth/sigv2.h"
#include "s3/auth/sigv4.h"

namespace {

constexpr char kAccess[] = "AKIDFUZZEXAMPLE";
constexpr char kSecret[] = "fuzz-secret-0123456789abcdef";
constexpr int64_t kNow = 1764547200;  // 2025-12-01T00:00:00Z

std::optional<std::string> Lookup(std::string_view key) {
  if (key == kAccess) return std::string(kSecret);
  return std::nullopt;
}

void CheckResult(const openlake::s3::SigV4Result& r) {
  if (!r.ok() && (r.http_status < 400 || r.http_status > 599)) __builtin_trap();
  if (r.ok() && r.access_key != kAccess) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace s3 = openlake::s3;
  namespace http = openlake::http;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  openlake::fuzz::RequestText t = openlake::fuzz::ParseRequestText(in);

  std::string_view path, query;
  http::SplitTarget(t.target, &path, &query);
  const s3::SigV4Request req{t.method, path, query, &t.headers};
  CheckResult(s3::VerifySigV4(req, Lookup, kNow));
  if (s3::IsSigV2(req)) CheckResult(s3::VerifySigV2(req, "", Lookup, kNow, "us-east-1"));

  std::vector<std::pair<std::string, std::string>> params;
  (void)http::ParseQueryString(query, &params);

  http::Request hr;
  hr.method = t.method;
  hr.target = t.target;
  hr.headers = t.headers;
  if (auto r = s3::ParseRange(hr.Value("range")); r && r->first && r->last && *r->first > *r->last)
    __builtin_trap();
  uint64_t first = 0, last = 0;
  if (s3::ParseCopyRange(hr.Value("x-amz-copy-source-range"), &first, &last) && first > last)
    __builtin_trap();
  (void)s3::ConditionsFrom(hr);
  (void)s3::ConditionsFrom(hr, "x-amz-copy-source-");
  (void)http::ParseHttpDate(hr.Value("if-modified-since"));
  std::map<std::string, std::string> meta;
  std::string error;
  (void)s3::UserMetaFrom(hr, &meta, &error);
  std::string bucket, key, version;
  s3::S3Error s3error;
  if (s3::ParseCopySource(hr, &bucket, &key, &version, &s3error) && bucket.empty()) {
    __builtin_trap();
  }
  (void)s3::ParseAmzDate(hr.Value("x-amz-date"));

  // The property: our signer's Authorization verifies, for any request the HTTP parser
  // accepts (which refuses, among others, header names that are not tokens and a second Host).
  std::string head = t.method + " " + t.target + " HTTP/1.1\r\n";
  for (const http::Header& x : t.headers) head += x.name + ": " + x.value + "\r\n";
  head += "\r\n";
  http::Request parsed;
  if (http::ParseRequestHead(head, http::Limits(), &parsed).state != http::HeadResult::kComplete)
    return 0;
  t.headers = parsed.headers;
  hr.headers = parsed.headers;
  const http::Header* date = hr.Find("x-amz-date");
  const std::optional<int64_t> when = date ? s3::ParseAmzDate(date->value) : std::nullopt;
  if (when && hr.Find("host") && hr.Find("x-amz-content-sha256") && !hr.Find("authorization") &&
      query.find("X-Amz-") == std::string_view::npos) {
    s3::SigV4SignInput si;
    si.method = t.method;
    si.path = path;
    si.query = query;
    si.headers = &t.headers;
    si.access_key = kAccess;
    si.secret_key = kSecret;
    si.region = "us-east-1";
    std::vector<http::Header> signed_headers = t.headers;
    signed_headers.push_back({"authorization", s3::SignV4(si)});
    const s3::SigV4Request sreq{t.method, path, query, &signed_headers};
    const s3::SigV4Result r = s3::VerifySigV4(sreq, Lookup, *when);
    // Refusing a malformed request is the verifier's right; disagreeing with the signer about
    // a request both accept is a bug in one of them.
    if (r.code == "SignatureDoesNotMatch") __builtin_trap();
  }
  return 0;
}

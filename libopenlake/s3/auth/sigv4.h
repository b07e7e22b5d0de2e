// AWS Signature Version 4 for the S3 server (docs/s3.md, "Authentication"): verifying the
// Authorization header and presigned query URLs, and the per-chunk signatures of streamed
// (aws-chunked) bodies.
//
//   s3::SigV4Request in{method, raw_path, raw_query, &headers};
//   s3::SigV4Result r = s3::VerifySigV4(in, lookup_secret, now_unix_seconds);
//   if (!r.ok()) answer r.http_status with S3 error r.code;
//   // r.payload: the x-amz-content-sha256 the client signed (a hex digest, UNSIGNED-PAYLOAD or
//   // a STREAMING-* form); r.seed_signature and r.signing_key continue a streamed body.
//
// The canonical request is rebuilt from the request as received: the path percent-decoded and
// encoded again the SigV4 way (unreserved characters kept, '/' kept, everything else %XX in
// upper case, so '%2a' and '*' sign alike), query parameters decoded, encoded, sorted by name
// then value, header values trimmed with inner runs of spaces collapsed.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/framing.h"

namespace openlake::s3 {

struct SigV4Request {
  std::string_view method;
  std::string_view path;   // the request target's path, still percent-encoded
  std::string_view query;  // after '?', still percent-encoded ("" when none)
  const std::vector<http::Header>* headers = nullptr;
};

// The secret key of an access key id, or nullopt when the id is unknown.
using SecretLookup = std::function<std::optional<std::string>(std::string_view access_key)>;

struct SigV4Options {
  int64_t max_skew_s = 15 * 60;            // header auth: |now - request time|
  int64_t max_presign_expires_s = 604800;  // seven days, as S3
};

struct SigV4Result {
  // S3 error code ("" when verified), its HTTP status and a message.
  std::string code;
  int http_status = 200;
  std::string message;

  bool presigned = false;
  std::string access_key;
  std::string amz_date;  // yyyymmddThhmmssZ
  std::string scope;     // yyyymmdd/region/service/aws4_request
  std::string region;
  std::string payload;   // the signed payload hash or its stand-in (see above)
  std::string seed_signature;           // hex: the request's own signature
  std::array<uint8_t, 32> signing_key{};  // for chunk signatures

  bool ok() const { return code.empty(); }
};

SigV4Result VerifySigV4(const SigV4Request& req, const SecretLookup& secrets, int64_t now_unix,
                        const SigV4Options& options = SigV4Options());

// A POST upload's form (docs/s3.md, "POST uploads"): the signature of the base64 policy under
// x-amz-credential and x-amz-date. On success: access_key, region, amz_date; the policy itself
// (expiry, conditions) is the caller's to check.
SigV4Result VerifyPostPolicySigV4(std::string_view credential, std::string_view amz_date,
                                  std::string_view policy_base64, std::string_view signature,
                                  const SecretLookup& secrets);

// Payload forms of x-amz-content-sha256.
inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";
inline constexpr std::string_view kStreamingPayload = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
inline constexpr std::string_view kStreamingPayloadTrailer =
    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER";
inline constexpr std::string_view kStreamingUnsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";

// The signature of one chunk of a STREAMING-AWS4-HMAC-SHA256-PAYLOAD body: chained from the
// previous chunk's signature (the request's own for the first), over the chunk's SHA-256.
std::string ChunkSignature(const SigV4Result& auth, std::string_view previous_signature,
                           std::string_view chunk_sha256_hex);
// The signature of the trailer fields of a ...-PAYLOAD-TRAILER body ("name:value\n" each).
std::string TrailerSignature(const SigV4Result& auth, std::string_view previous_signature,
                             std::string_view trailer_bytes);

// Client side: signs a request with an Authorization header (what the S3 client sends).
struct SigV4SignInput {
  std::string_view method;
  std::string_view path;   // percent-encoded as sent (UriEncode(raw, true) signs as S3 expects)
  std::string_view query;  // percent-encoded, "" when none
  // The headers to sign (names lower case). They must include host, x-amz-date and
  // x-amz-content-sha256; the last is the payload this signs.
  const std::vector<http::Header>* headers = nullptr;
  std::string_view access_key;
  std::string_view secret_key;
  std::string_view region;
  std::string_view service = "s3";
};

// The value of the Authorization header for `in` (scope date taken from its x-amz-date).
std::string SignV4(const SigV4SignInput& in);
// "20130524T000000Z" of Unix seconds.
std::string FormatAmzDate(int64_t unix_seconds);

// Helpers, exposed for the handlers and the tests.
// A refusal: the S3 error code, its HTTP status and a message.
SigV4Result AuthError(std::string code, int status, std::string message);
std::string Sha256Hex(std::string_view data);
std::array<uint8_t, 32> HmacSha256(std::string_view key, std::string_view data);
// SigV4's URI encoding: unreserved characters kept, '/' kept when `keep_slash`.
std::string UriEncode(std::string_view raw, bool keep_slash);
// "20130524T000000Z" → Unix seconds; nullopt when malformed.
std::optional<int64_t> ParseAmzDate(std::string_view s);

}  // namespace openlake::s3

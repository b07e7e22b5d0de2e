// AWS Signature Version 2 for the S3 server (docs/s3.md, "Authentication"): the
// "Authorization: AWS key:signature" header and presigned URLs with AWSAccessKeyId, Expires and
// Signature, which older SDKs and `aws s3 presign` (before botocore made SigV4 the default)
// still produce. HMAC-SHA1 over the method, Content-MD5, Content-Type, the date (or Expires),
// the x-amz-* headers and the canonical resource (the path as sent plus the sub-resources).
#pragma once

#include <cstdint>
#include <string_view>

#include "s3/auth/sigv4.h"

namespace openlake::s3 {

// True when the request is signed the SigV2 way (header or query).
bool IsSigV2(const SigV4Request& req);

// Verifies a SigV2 request. `bucket_from_host` is the bucket a virtual-host-style Host named
// ("" for path style): it leads the canonical resource. On success the result's payload is
// UNSIGNED-PAYLOAD (SigV2 signs no body) and its region is `region`.
SigV4Result VerifySigV2(const SigV4Request& req, std::string_view bucket_from_host,
                        const SecretLookup& secrets, int64_t now_unix, std::string_view region,
                        const SigV4Options& options = SigV4Options());

// Verifies the SigV2 signature of a browser form upload's policy (POST /bucket with
// AWSAccessKeyId, policy and signature fields, as boto3's generate_presigned_post makes with
// signature version "s3"): the base64 HMAC-SHA1 of the base64 policy under the key's secret.
// The result's region is `region` (SigV2 names none).
SigV4Result VerifyPostPolicySigV2(std::string_view access_key, std::string_view policy_base64,
                                  std::string_view signature, const SecretLookup& secrets,
                                  std::string_view region);

}  // namespace openlake::s3

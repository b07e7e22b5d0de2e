// SigV2 verification against requests signed by botocore's HmacV1Auth and HmacV1QueryAuth
// (Debian 12's botocore, run once to make the vectors), and its refusals.
#include "s3/auth/sigv2.h"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

constexpr int64_t kSigned = 1796084357;  // Tue, 01 Dec 2026 00:19:17 GMT
constexpr char kKey[] = "OLTESTKEY0000000001";

SecretLookup Secrets() {
  return [](std::string_view key) -> std::optional<std::string> {
    if (key == kKey) return std::string("secretsecretsecretsecretsecretsecret0001");
    return std::nullopt;
  };
}

// PUT /bucket/dir/a%20b.txt?uploadId=xyz&partNumber=2 with Content-Type and a metadata header.
std::vector<http::Header> PutHeaders(std::string signature) {
  return {{"host", "127.0.0.1:9000"},
          {"date", "Tue, 01 Dec 2026 00:19:17 GMT"},
          {"content-type", "text/plain"},
          {"x-amz-meta-color", "blue"},
          {"authorization", std::string("AWS ") + kKey + ":" + signature}};
}

SigV4Result VerifyPut(const std::vector<http::Header>& h, int64_t now,
                      std::string_view method = "PUT") {
  const SigV4Request r{method, "/bucket/dir/a%20b.txt", "uploadId=xyz&partNumber=2", &h};
  REQUIRE(IsSigV2(r));
  return VerifySigV2(r, "", Secrets(), now, "us-east-1");
}

TEST_CASE("sigv2: a header-signed request verifies; any change refuses it", "[s3]") {
  const std::vector<http::Header> good = PutHeaders("sOeqXuIId0AdQPXHoV5odo+jMVY=");
  SigV4Result r = VerifyPut(good, kSigned + 60);
  REQUIRE(r.ok());
  CHECK(r.access_key == kKey);
  CHECK(r.payload == kUnsignedPayload);
  CHECK(r.region == "us-east-1");
  CHECK_FALSE(r.presigned);

  CHECK(VerifyPut(good, kSigned, "POST").code == "SignatureDoesNotMatch");
  std::vector<http::Header> h = good;
  h[3].value = "red";  // a signed x-amz-* header changed
  CHECK(VerifyPut(h, kSigned).code == "SignatureDoesNotMatch");
  h = good;
  h[2].value = "text/html";
  CHECK(VerifyPut(h, kSigned).code == "SignatureDoesNotMatch");
  CHECK(VerifyPut(PutHeaders("AAAAAAAAAAAAAAAAAAAAAAAAAAA="), kSigned).code ==
        "SignatureDoesNotMatch");
  CHECK(VerifyPut(good, kSigned + 16 * 60).code == "RequestTimeTooSkewed");
  h = good;
  h[4].value = "AWS NOSUCHKEY:sOeqXuIId0AdQPXHoV5odo+jMVY=";
  CHECK(VerifyPut(h, kSigned).code == "InvalidAccessKeyId");
  h = good;
  h[4].value = "AWS nocolon";
  CHECK(VerifyPut(h, kSigned).code == "InvalidArgument");
  h = good;
  h.erase(h.begin() + 1);  // no Date
  CHECK(VerifyPut(h, kSigned).code == "AccessDenied");
}

TEST_CASE("sigv2: presigned URLs verify until they expire", "[s3]") {
  const std::vector<http::Header> h = {{"host", "127.0.0.1:9000"}};
  const std::string q =
      "AWSAccessKeyId=OLTESTKEY0000000001&Signature=jVSNQoIRqjRj6YPmrleM%2F%2FfziXY%3D"
      "&Expires=1796083200";
  const SigV4Request r{"GET", "/bucket/key.bin", q, &h};
  REQUIRE(IsSigV2(r));
  SigV4Result ok = VerifySigV2(r, "", Secrets(), 1796083200 - 10, "us-east-1");
  REQUIRE(ok.ok());
  CHECK(ok.presigned);
  CHECK(VerifySigV2(r, "", Secrets(), 1796083200 + 1, "us-east-1").code == "AccessDenied");
  const SigV4Request other{"GET", "/bucket/other.bin", q, &h};
  CHECK(VerifySigV2(other, "", Secrets(), 1796083200 - 10, "us-east-1").code ==
        "SignatureDoesNotMatch");
  // The same URL addressed virtual-host style signs "/bucket/key.bin" too.
  const SigV4Request vhost{"GET", "/key.bin", q, &h};
  CHECK(VerifySigV2(vhost, "bucket", Secrets(), 1796083200 - 10, "us-east-1").ok());
}

TEST_CASE("sigv2: a path-style bucket request verifies with the resource /bucket/ or /bucket",
          "[s3]") {
  // botocore signs "PUT /bucket" (CreateBucket, path style) over "/bucket/"; minio-go signs
  // the path it sends. (Vectors: HMAC-SHA1 of "PUT\n\n\n<date>\n" + each resource.)
  auto verify = [](std::string_view path, std::string_view sig) {
    const std::vector<http::Header> h = {{"host", "127.0.0.1:9000"},
                                         {"date", "Tue, 01 Dec 2026 00:19:17 GMT"},
                                         {"authorization", StrCat("AWS ", kKey, ":", sig)}};
    const SigV4Request r{"PUT", path, "", &h};
    return VerifySigV2(r, "", Secrets(), kSigned, "us-east-1");
  };
  CHECK(verify("/bucket", "gjFRw/dCMp8GaHoO02pFIHUI7BY=").ok());   // signed "/bucket/"
  CHECK(verify("/bucket", "+St1qBg9KBBoKtwSyD7GOD5R0Ic=").ok());   // signed "/bucket"
  CHECK(verify("/bucket/", "gjFRw/dCMp8GaHoO02pFIHUI7BY=").ok());  // sent "/bucket/"
  CHECK(verify("/bucket/", "+St1qBg9KBBoKtwSyD7GOD5R0Ic=").code == "SignatureDoesNotMatch");
  CHECK(verify("/bucket2", "gjFRw/dCMp8GaHoO02pFIHUI7BY=").code == "SignatureDoesNotMatch");
}

TEST_CASE("sigv2: SigV4 requests are not taken for SigV2", "[s3]") {
  const std::vector<http::Header> h = {{"authorization", "AWS4-HMAC-SHA256 Credential=x"}};
  const SigV4Request r{"GET", "/", "", &h};
  CHECK_FALSE(IsSigV2(r));
  const std::vector<http::Header> none;
  const SigV4Request q{"GET", "/", "X-Amz-Algorithm=AWS4-HMAC-SHA256", &none};
  CHECK_FALSE(IsSigV2(q));
}

}  // namespace
}  // namespace openlake::s3

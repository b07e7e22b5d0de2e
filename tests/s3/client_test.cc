// The public S3 client (openlake/s3/client.h) against an in-process S3Server over a real object
// engine: round trips of every operation (ranges, heads, multipart uploads, listings among
// them), S3 errors as statuses, wrong credentials, bodies too large for the caller's buffer,
// keep-alive across the server's idle close, and the standalone signer checked by the server's
// verifier.
#include "openlake/s3/client.h"

#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "s3/auth/sigv4.h"
#include "s3/client_fixture.h"
#include "store/store_test_util.h"

#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

TEST_CASE("s3 client: buckets and objects round-trip", "[s3][client]") {
  Server s;
  auto c = s.Connect(s.Options());

  absl::Status st = c->HeadBucket("bkt");
  CHECK(absl::IsNotFound(st));
  CHECK(ErrorCodeOf(st) == "NotFound");
  REQUIRE(c->CreateBucket("bkt").ok());
  CHECK(c->CreateBucket("bkt").ok());  // us-east-1: re-creating your own bucket succeeds
  CHECK(c->HeadBucket("bkt").ok());

  // Sizes around the inline threshold and the engine's windows; keys that need encoding.
  const std::vector<std::string> keys = {"plain", "dir/with space+plus*~.bin", "caf\xc3\xa9/x"};
  for (size_t size : {size_t{0}, size_t{1}, size_t{4096}, size_t{(1 << 20) + 17}}) {
    for (const std::string& key : keys) {
      INFO(size << " " << key);
      const std::string data = testing::RandomBytes(size, static_cast<uint32_t>(size + 7));
      auto etag = c->PutObject("bkt", key, data);
      REQUIRE(etag.ok());
      CHECK(etag->size() == 32);  // an MD5, unquoted
      auto got = c->GetObject("bkt", key);
      REQUIRE(got.ok());
      CHECK(*got == data);
      std::string buf(size + 10, '\0');
      auto n = c->GetObject("bkt", key, absl::MakeSpan(buf));
      REQUIRE(n.ok());
      CHECK(*n == size);
      CHECK(buf.substr(0, size) == data);
    }
  }

  // A buffer too small: OutOfRange, and the client goes on working.
  std::string small(100, '\0');
  auto n = c->GetObject("bkt", "plain", absl::MakeSpan(small));
  CHECK(absl::IsOutOfRange(n.status()));
  CHECK(c->GetObject("bkt", "plain").ok());

  st = c->GetObject("bkt", "absent").status();
  CHECK(absl::IsNotFound(st));
  CHECK(ErrorCodeOf(st) == "NoSuchKey");
  CHECK(std::string(st.message()).find("NoSuchKey: ") == 0);
  st = c->GetObject("nobucket", "k").status();
  CHECK(ErrorCodeOf(st) == "NoSuchBucket");

  REQUIRE(c->DeleteObject("bkt", "plain").ok());
  CHECK(absl::IsNotFound(c->GetObject("bkt", "plain").status()));
  CHECK(c->DeleteObject("bkt", "plain").ok());  // as S3: deleting nothing succeeds

  // The payload's own hash signed instead of UNSIGNED-PAYLOAD.
  ClientOptions signed_payload = s.Options();
  signed_payload.sign_payload = true;
  auto c2 = s.Connect(signed_payload);
  REQUIRE(c2->PutObject("bkt", "hashed", "signed bytes").ok());
  CHECK(*c->GetObject("bkt", "hashed") == "signed bytes");
}

TEST_CASE("s3 client: ranges, heads, multipart uploads and listings", "[s3][client]") {
  Server s;
  auto c = s.Connect(s.Options());
  REQUIRE(c->CreateBucket("bkt").ok());
  const std::string data = testing::RandomBytes((3 << 20) + 5, 11);
  REQUIRE(c->PutObject("bkt", "obj", data).ok());

  // Ranges land in place; a range past the end is cut short; one beyond it is InvalidRange.
  std::string buf(1000, '\0');
  auto n = c->GetObjectRange("bkt", "obj", 70000, absl::MakeSpan(buf));
  REQUIRE(n.ok());
  CHECK(*n == 1000);
  CHECK(buf == data.substr(70000, 1000));
  n = c->GetObjectRange("bkt", "obj", data.size() - 10, absl::MakeSpan(buf));
  REQUIRE(n.ok());
  CHECK(*n == 10);
  CHECK(buf.substr(0, 10) == data.substr(data.size() - 10));
  n = c->GetObjectRange("bkt", "obj", data.size(), absl::MakeSpan(buf));
  CHECK(absl::IsOutOfRange(n.status()));
  CHECK(ErrorCodeOf(n.status()) == "InvalidRange");
  CHECK(*c->GetObjectRange("bkt", "obj", 5, absl::Span<char>()) == 0);

  auto h = c->HeadObject("bkt", "obj");
  REQUIRE(h.ok());
  CHECK(h->size == data.size());
  CHECK(h->etag.size() == 32);
  CHECK(!h->last_modified.empty());
  CHECK(absl::IsNotFound(c->HeadObject("bkt", "absent").status()));

  // Multipart: two parts of 5 MiB and a short last one.
  const std::string big = testing::RandomBytes((10 << 20) + 333, 12);
  auto id = c->CreateMultipartUpload("bkt", "dir/multi part");
  REQUIRE(id.ok());
  std::vector<PartEtag> parts;
  for (int p = 0; p * (5 << 20) < static_cast<int>(big.size()); ++p) {
    auto etag = c->UploadPart("bkt", "dir/multi part", *id, p + 1,
                              std::string_view(big).substr(static_cast<size_t>(p) * (5 << 20), 5 << 20));
    REQUIRE(etag.ok());
    parts.push_back({p + 1, *etag});
  }
  CHECK(absl::IsNotFound(c->HeadObject("bkt", "dir/multi part").status()));  // not yet
  auto done = c->CompleteMultipartUpload("bkt", "dir/multi part", *id, parts);
  REQUIRE(done.ok());
  CHECK(done->substr(done->size() - 2) == "-3");
  CHECK(*c->GetObject("bkt", "dir/multi part") == big);
  // A completion tried again (an SDK whose answer timed out) gets the same success.
  auto again = c->CompleteMultipartUpload("bkt", "dir/multi part", *id, parts);
  REQUIRE(again.ok());
  CHECK(*again == *done);
  CHECK(ErrorCodeOf(c->UploadPart("bkt", "dir/multi part", "not-an-upload", 1, "x").status()) ==
        "NoSuchUpload");
  // An aborted upload leaves nothing.
  auto id2 = c->CreateMultipartUpload("bkt", "aborted");
  REQUIRE(id2.ok());
  REQUIRE(c->UploadPart("bkt", "aborted", *id2, 1, "x").ok());
  REQUIRE(c->AbortMultipartUpload("bkt", "aborted", *id2).ok());
  CHECK(absl::IsNotFound(c->HeadObject("bkt", "aborted").status()));

  // Listings: pages, prefixes, delimiters, keys that need encoding.
  for (int i = 0; i < 7; ++i) REQUIRE(c->PutObject("bkt", StrCat("list/a b/", i), "v").ok());
  REQUIRE(c->PutObject("bkt", "list/top", "v").ok());
  ListOptions lo;
  lo.prefix = "list/";
  lo.max_keys = 3;
  std::vector<std::string> keys;
  for (int pages = 0;; ++pages) {
    REQUIRE(pages < 10);
    auto page = c->ListObjectsV2("bkt", lo);
    REQUIRE(page.ok());
    for (const ListedObject& o : page->objects) {
      keys.push_back(o.key);
      CHECK(o.size == 1);
      CHECK(o.etag.size() == 32);
    }
    if (!page->truncated) break;
    lo.continuation_token = page->next_continuation_token;
  }
  CHECK(keys.size() == 8);
  CHECK(keys.front() == "list/a b/0");
  CHECK(keys.back() == "list/top");
  ListOptions delim;
  delim.prefix = "list/";
  delim.delimiter = "/";
  auto page = c->ListObjectsV2("bkt", delim);
  REQUIRE(page.ok());
  CHECK(page->common_prefixes == std::vector<std::string>{"list/a b/"});
  REQUIRE(page->objects.size() == 1);
  CHECK(page->objects[0].key == "list/top");
  CHECK(ErrorCodeOf(c->ListObjectsV2("nobucket", {}).status()) == "NoSuchBucket");
}

TEST_CASE("s3 client: wrong credentials come back as S3's error codes", "[s3][client]") {
  Server s;
  auto good = s.Connect(s.Options());
  REQUIRE(good->CreateBucket("bkt").ok());

  auto bad = s.Connect(s.Options("not-the-secret"));
  absl::Status st = bad->PutObject("bkt", "k", "v").status();
  CHECK(absl::IsPermissionDenied(st));
  CHECK(ErrorCodeOf(st) == "SignatureDoesNotMatch");
  CHECK(std::string(st.message()).find("SignatureDoesNotMatch: The request signature") == 0);
  // The connection survives the refusal.
  CHECK(ErrorCodeOf(bad->GetObject("bkt", "k").status()) == "SignatureDoesNotMatch");

  ClientOptions unknown = s.Options();
  unknown.credential.access_key = "nosuchkey";
  st = s.Connect(unknown)->HeadBucket("bkt");
  CHECK(absl::IsPermissionDenied(st));
  CHECK(ErrorCodeOf(st) == "Forbidden");  // a HEAD answer has no body to name the code
  st = s.Connect(unknown)->GetObject("bkt", "k").status();
  CHECK(ErrorCodeOf(st) == "InvalidAccessKeyId");
}

TEST_CASE("s3 client: a connection the server closed while idle is reopened", "[s3][client]") {
  Server s(absl::Milliseconds(200));
  auto c = s.Connect(s.Options());
  REQUIRE(c->CreateBucket("bkt").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  CHECK(c->PutObject("bkt", "k", "after idle").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  CHECK(*c->GetObject("bkt", "k") == "after idle");
}

TEST_CASE("s3 client: an endpoint that is not there", "[s3][client]") {
  ClientOptions o;
  o.endpoint = "127.0.0.1:" + std::to_string(testing::FreePort());
  CHECK(absl::IsUnavailable(Client::Connect(o).status()));
  o.endpoint = "not an endpoint";
  CHECK(absl::IsInvalidArgument(Client::Connect(o).status()));
}

TEST_CASE("s3 client: SignV4Headers signs what the server verifies", "[s3][client]") {
  RequestToSign r;
  r.method = "PUT";
  r.host = "127.0.0.1:9000";
  r.path = "/bkt/a%20b";
  r.query = "partNumber=1&uploadId=x";
  const absl::Time now = absl::FromUnixSeconds(1796084357);
  const Credential cred{kAccess, kSecret};
  const std::vector<HttpHeader> signed_headers = SignV4Headers(r, cred, "eu-west-1", now);
  REQUIRE(signed_headers.size() == 3);
  std::vector<http::Header> headers = {{"host", r.host}};
  for (const HttpHeader& h : signed_headers) headers.push_back({http::AsciiLower(h.name), h.value});
  auto lookup = [](std::string_view key) -> std::optional<std::string> {
    if (key == kAccess) return std::string(kSecret);
    return std::nullopt;
  };
  SigV4Request in{r.method, r.path, r.query, &headers};
  SigV4Result v = VerifySigV4(in, lookup, 1796084357);
  INFO(v.message);
  CHECK(v.ok());
  CHECK(v.region == "eu-west-1");
  CHECK(v.payload == "UNSIGNED-PAYLOAD");
  // Any change to what was signed breaks it.
  SigV4Request other{"GET", r.path, r.query, &headers};
  CHECK(VerifySigV4(other, lookup, 1796084357).code == "SignatureDoesNotMatch");
}

}  // namespace
}  // namespace openlake::s3

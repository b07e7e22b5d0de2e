// Routing: every operation the server implements, path and virtual-host style, decoding, and
// what it must refuse or leave unimplemented rather than mistake for a neighbour.
#include "s3/api/route.h"

#include <string>

#include <catch2/catch.hpp>

namespace openlake::s3 {
namespace {

Route R(const std::string& method, const std::string& target, std::vector<http::Header> extra = {},
        const std::string& host = "127.0.0.1:9000") {
  http::Request req;
  req.method = method;
  req.target = target;
  req.headers.push_back({"host", host});
  for (auto& h : extra) req.headers.push_back(h);
  RouteOptions o;
  o.domains = {"s3.example.com", "localhost"};
  return RouteRequest(req, o);
}

TEST_CASE("routing: each operation from method, parameters and headers", "[s3][route]") {
  const std::vector<http::Header> copy = {{"x-amz-copy-source", "/src/key"}};
  struct Case {
    std::string method, target;
    std::vector<http::Header> headers;
    Op op;
  };
  const std::vector<Case> cases = {
      {"GET", "/", {}, Op::kListBuckets},
      {"PUT", "/bkt", {}, Op::kCreateBucket},
      {"PUT", "/bkt/", {}, Op::kCreateBucket},
      {"DELETE", "/bkt", {}, Op::kDeleteBucket},
      {"HEAD", "/bkt", {}, Op::kHeadBucket},
      {"GET", "/bkt?location", {}, Op::kGetBucketLocation},
      {"GET", "/bkt?versioning", {}, Op::kGetBucketVersioning},
      {"GET", "/bkt", {}, Op::kListObjects},
      {"GET", "/bkt?prefix=a&delimiter=%2F&marker=x", {}, Op::kListObjects},
      {"GET", "/bkt?list-type=2&continuation-token=abc", {}, Op::kListObjectsV2},
      {"GET", "/bkt?uploads", {}, Op::kListMultipartUploads},
      {"POST", "/bkt?delete", {}, Op::kDeleteObjects},
      {"PUT", "/bkt/k", {}, Op::kPutObject},
      {"PUT", "/bkt/k", copy, Op::kCopyObject},
      {"GET", "/bkt/k", {}, Op::kGetObject},
      {"GET", "/bkt/k?response-content-type=text%2Fplain", {}, Op::kGetObject},
      {"HEAD", "/bkt/k", {}, Op::kHeadObject},
      {"DELETE", "/bkt/k", {}, Op::kDeleteObject},
      {"POST", "/bkt/k?uploads", {}, Op::kCreateMultipartUpload},
      {"PUT", "/bkt/k?partNumber=3&uploadId=u1", {}, Op::kUploadPart},
      {"PUT", "/bkt/k?partNumber=3&uploadId=u1", copy, Op::kUploadPartCopy},
      {"POST", "/bkt/k?uploadId=u1", {}, Op::kCompleteMultipartUpload},
      {"DELETE", "/bkt/k?uploadId=u1", {}, Op::kAbortMultipartUpload},
      {"GET", "/bkt/k?uploadId=u1&max-parts=10", {}, Op::kListParts},
  };
  for (const Case& c : cases) {
    INFO(c.method << " " << c.target);
    Route r = R(c.method, c.target, c.headers);
    CHECK(r.error_code.empty());
    CHECK(OpName(r.op) == OpName(c.op));
  }
}

TEST_CASE("routing: bucket and key, decoded, path and virtual-host style", "[s3][route]") {
  Route r = R("GET", "/bkt/dir/a%20b%2Bc+d%2F%C3%A9?prefix=x%2Fy&empty=&flag");
  CHECK(r.bucket == "bkt");
  CHECK(r.key == "dir/a b+c+d/\xc3\xa9");
  REQUIRE(r.Param("prefix") != nullptr);
  CHECK(*r.Param("prefix") == "x/y");
  CHECK(*r.Param("empty") == "");
  CHECK(r.Has("flag"));
  CHECK(!r.Has("other"));

  r = R("GET", "/bkt/folder/");  // a key ending in '/' is an object
  CHECK(r.op == Op::kGetObject);
  CHECK(r.key == "folder/");

  r = R("GET", "/dir/key.bin", {}, "mybucket.s3.example.com:9000");
  CHECK(r.bucket == "mybucket");
  CHECK(r.key == "dir/key.bin");
  r = R("GET", "/", {}, "MyBucket.LOCALHOST");
  CHECK(r.bucket == "mybucket");
  CHECK(r.op == Op::kListObjects);
  r = R("GET", "/bkt/k", {}, "s3.example.com");  // the bare domain: path style
  CHECK(r.bucket == "bkt");
  CHECK(r.key == "k");

  r = R("GET", "http://127.0.0.1:9000/bkt/k?x=1");  // absolute-form target
  CHECK(r.bucket == "bkt");
  CHECK(r.key == "k");
  CHECK(r.Has("x"));
}

TEST_CASE("routing: refusals and what is not implemented", "[s3][route]") {
  CHECK(R("GET", "/bkt/%zz").error_code == "InvalidURI");
  CHECK(R("GET", "/bkt?a=%4").error_code == "InvalidURI");
  CHECK(R("GET", "*").error_code == "InvalidURI");
  CHECK(R("PUT", "/").error_code == "MethodNotAllowed");
  CHECK(R("POST", "/bkt/k").error_code == "MethodNotAllowed");
  CHECK(R("PATCH", "/bkt").error_code == "MethodNotAllowed");
  CHECK(R("GET", "/bkt?list-type=1").error_code == "InvalidArgument");
  CHECK(R("PUT", "/bkt/k?partNumber=1").error_code == "InvalidArgument");
  CHECK(R("PUT", "/bkt/k?uploadId=u").error_code == "InvalidArgument");
  for (const char* t : {"/bkt?policyStatus", "/bkt?website", "/bkt?cors",
                        "/bkt?object-lock", "/bkt/k?retention", "/bkt/k?select&select-type=2"}) {
    for (const char* m : {"GET", "PUT", "DELETE"}) {
      INFO(m << " " << t);
      Route r = R(m, t);
      CHECK(r.op == Op::kNotImplemented);
      CHECK(!r.what.empty());
    }
  }
  // Versioning: the bucket's state, its versions, and a version of an object.
  CHECK(R("PUT", "/bkt?versioning").op == Op::kPutBucketVersioning);
  CHECK(R("DELETE", "/bkt?versioning").error_code == "MethodNotAllowed");
  CHECK(R("GET", "/bkt?versions").op == Op::kListObjectVersions);
  CHECK(R("GET", "/bkt?lifecycle").op == Op::kGetBucketLifecycle);
  CHECK(R("PUT", "/bkt?lifecycle").op == Op::kPutBucketLifecycle);
  CHECK(R("DELETE", "/bkt?lifecycle").op == Op::kDeleteBucketLifecycle);
  CHECK(R("POST", "/bkt?lifecycle").error_code == "MethodNotAllowed");
  CHECK(R("GET", "/bkt?tagging").op == Op::kGetBucketTagging);
  CHECK(R("PUT", "/bkt?tagging").op == Op::kPutBucketTagging);
  CHECK(R("DELETE", "/bkt?tagging").op == Op::kDeleteBucketTagging);
  CHECK(R("PUT", "/bkt?versions").error_code == "MethodNotAllowed");
  CHECK(R("DELETE", "/bkt?versions").error_code == "MethodNotAllowed");
  CHECK(R("GET", "/bkt/k?versionId=3").op == Op::kGetObject);
  CHECK(R("DELETE", "/bkt/k?versionId=3").op == Op::kDeleteObject);
  CHECK(R("PUT", "/bkt/k?tagging&versionId=3").op == Op::kPutObjectTagging);
  CHECK(R("POST", "/bkt").op == Op::kPostObject);  // a form upload (PostObject checks the form)
  CHECK(R("GET", "/bkt/k?attributes").op == Op::kGetObjectAttributes);
  CHECK(R("HEAD", "/bkt/k?attributes").op == Op::kHeadObject);
  CHECK(R("GET", "/bkt?policy").op == Op::kGetBucketPolicy);
  CHECK(R("GET", "/bkt?acl").op == Op::kGetBucketAcl);
  CHECK(R("PUT", "/bkt?acl").op == Op::kPutBucketAcl);
  CHECK(R("GET", "/bkt/k?acl").op == Op::kGetObjectAcl);
  CHECK(R("PUT", "/bkt/k?acl").op == Op::kPutObjectAcl);
  // A sub-resource's other methods are never the plain operation (DELETE ?acl deletes
  // nothing).
  for (const char* m : {"DELETE", "POST", "HEAD"}) {
    INFO(m);
    CHECK(R(m, "/bkt?acl").error_code == "MethodNotAllowed");
    CHECK(R(m, "/bkt/k?acl").error_code == "MethodNotAllowed");
    const bool deletes_tags = std::string(m) == "DELETE";
    CHECK(R(m, "/bkt/k?tagging").error_code == (deletes_tags ? "" : "MethodNotAllowed"));
  }
  CHECK(R("POST", "/bkt?policy").error_code == "MethodNotAllowed");
  CHECK(R("HEAD", "/bkt?policy").error_code == "MethodNotAllowed");
  CHECK(R("PUT", "/bkt?policy").op == Op::kPutBucketPolicy);
  CHECK(R("DELETE", "/bkt?policy").op == Op::kDeleteBucketPolicy);
  CHECK(R("GET", "/bkt/k?tagging").op == Op::kGetObjectTagging);
  CHECK(R("PUT", "/bkt/k?tagging").op == Op::kPutObjectTagging);
  CHECK(R("DELETE", "/bkt/k?tagging").op == Op::kDeleteObjectTagging);
  CHECK(R("POST", "/bkt/k?tagging").error_code == "MethodNotAllowed");
}

}  // namespace
}  // namespace openlake::s3

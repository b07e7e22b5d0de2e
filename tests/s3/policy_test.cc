// Bucket policies: the grammar S3 takes and how a request is judged (s3/api/policy.h).
#include "s3/api/policy.h"

#include <string>

#include <catch2/catch.hpp>

namespace openlake::s3 {
namespace {

PolicyRequest Req(std::string action, std::string resource, std::string owner = "") {
  PolicyRequest r;
  r.action = std::move(action);
  r.resource = std::move(resource);
  r.anonymous = owner.empty();
  r.owner_id = std::move(owner);
  return r;
}

TEST_CASE("policy: wildcards and addresses", "[s3][policy]") {
  CHECK(WildcardMatch("arn:aws:s3:::b/*", "arn:aws:s3:::b/models/x"));
  CHECK(WildcardMatch("arn:aws:s3:::b/models/*.safetensors", "arn:aws:s3:::b/models/a.safetensors"));
  CHECK(!WildcardMatch("arn:aws:s3:::b/models/*", "arn:aws:s3:::b/data/x"));
  CHECK(WildcardMatch("a?c", "abc"));
  CHECK(!WildcardMatch("a?c", "ac"));
  CHECK(WildcardMatch("*", ""));
  CHECK(WildcardMatch("**a*", "xxa"));
  CHECK(IpInCidr("10.1.2.3", "10.0.0.0/8"));
  CHECK(!IpInCidr("11.1.2.3", "10.0.0.0/8"));
  CHECK(IpInCidr("127.0.0.1", "127.0.0.1"));
  CHECK(IpInCidr("192.168.1.200", "192.168.1.128/25"));
  CHECK(!IpInCidr("192.168.1.100", "192.168.1.128/25"));
  CHECK(IpInCidr("2001:db8::5", "2001:db8::/32"));
  CHECK(!IpInCidr("10.0.0.1", "2001:db8::/32"));
  CHECK(!IpInCidr("10.0.0.1", "10.0.0.0/33"));
}

TEST_CASE("policy: public read of a prefix, deny wins, conditions", "[s3][policy]") {
  auto p = BucketPolicy::Parse(R"({
    "Version": "2012-10-17",
    "Statement": [
      {"Sid": "PublicModels", "Effect": "Allow", "Principal": "*",
       "Action": ["s3:GetObject"], "Resource": "arn:aws:s3:::weights/models/*"},
      {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "s3:ListBucket",
       "Resource": "arn:aws:s3:::weights",
       "Condition": {"StringLike": {"s3:prefix": "models/*"}}},
      {"Effect": "Deny", "Principal": "*", "Action": "s3:*",
       "Resource": "arn:aws:s3:::weights/models/secret/*"},
      {"Effect": "Allow", "Principal": {"AWS": ["arn:aws:iam::abc123:root"]},
       "Action": "s3:PutObject", "Resource": "arn:aws:s3:::weights/*",
       "Condition": {"IpAddress": {"aws:SourceIp": ["127.0.0.0/8"]}}}
    ]})", "weights");
  REQUIRE(p.ok());
  CHECK(p->Evaluate(Req("s3:GetObject", "arn:aws:s3:::weights/models/llama")) ==
        PolicyDecision::kAllow);
  CHECK(p->Evaluate(Req("S3:GETOBJECT", "arn:aws:s3:::weights/models/llama")) ==
        PolicyDecision::kAllow);  // action names are not case-sensitive
  CHECK(p->Evaluate(Req("s3:GetObject", "arn:aws:s3:::weights/data/x")) == PolicyDecision::kNone);
  CHECK(p->Evaluate(Req("s3:PutObject", "arn:aws:s3:::weights/models/x")) ==
        PolicyDecision::kNone);
  CHECK(p->Evaluate(Req("s3:GetObject", "arn:aws:s3:::weights/models/secret/k")) ==
        PolicyDecision::kDeny);
  PolicyRequest list = Req("s3:ListBucket", "arn:aws:s3:::weights");
  CHECK(p->Evaluate(list) == PolicyDecision::kNone);  // no prefix: the condition fails
  list.keys["s3:prefix"] = "models/";
  CHECK(p->Evaluate(list) == PolicyDecision::kAllow);
  list.keys["s3:prefix"] = "data/";
  CHECK(p->Evaluate(list) == PolicyDecision::kNone);
  PolicyRequest put = Req("s3:PutObject", "arn:aws:s3:::weights/x", "abc123");
  CHECK(p->Evaluate(put) == PolicyDecision::kNone);  // no source address
  put.keys["aws:sourceip"] = "127.0.0.1";
  CHECK(p->Evaluate(put) == PolicyDecision::kAllow);
  put.keys["aws:sourceip"] = "10.0.0.1";
  CHECK(p->Evaluate(put) == PolicyDecision::kNone);
  put.keys["aws:sourceip"] = "127.0.0.1";
  put.owner_id = "other";
  CHECK(p->Evaluate(put) == PolicyDecision::kNone);
  put.anonymous = true;
  CHECK(p->Evaluate(put) == PolicyDecision::kNone);
}

TEST_CASE("policy: NotAction, NotResource, negated and Null conditions", "[s3][policy]") {
  auto p = BucketPolicy::Parse(R"({"Statement": {
      "Effect": "Deny", "Principal": "*", "NotAction": ["s3:Get*", "s3:List*"],
      "NotResource": "arn:aws:s3:::b/scratch/*",
      "Condition": {"StringNotEquals": {"aws:username": "admin"},
                    "Null": {"aws:userid": "false"}}}})", "b");
  REQUIRE(p.ok());
  PolicyRequest r = Req("s3:PutObject", "arn:aws:s3:::b/data/x", "u1");
  r.keys = {{"aws:username", "ana"}, {"aws:userid", "u1"}};
  CHECK(p->Evaluate(r) == PolicyDecision::kDeny);
  r.keys["aws:username"] = "admin";
  CHECK(p->Evaluate(r) == PolicyDecision::kNone);
  r.keys["aws:username"] = "ana";
  r.resource = "arn:aws:s3:::b/scratch/x";
  CHECK(p->Evaluate(r) == PolicyDecision::kNone);
  r.resource = "arn:aws:s3:::b/data/x";
  r.action = "s3:GetObject";
  CHECK(p->Evaluate(r) == PolicyDecision::kNone);
  r.action = "s3:DeleteObject";
  r.keys.erase("aws:userid");  // Null false: the key must be there
  CHECK(p->Evaluate(r) == PolicyDecision::kNone);
}

TEST_CASE("policy: date conditions on the request's time", "[s3][policy]") {
  // Public read until the end of 2030, and never before 2020 (aws:CurrentTime, ISO 8601 or
  // epoch seconds on either side).
  auto p = BucketPolicy::Parse(R"({"Statement": {"Effect": "Allow", "Principal": "*",
      "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*",
      "Condition": {"DateLessThan": {"aws:CurrentTime": "2031-01-01T00:00:00Z"},
                    "DateGreaterThanEquals": {"aws:EpochTime": "1577836800"}}}})", "b");
  REQUIRE(p.ok());
  PolicyRequest r = Req("s3:GetObject", "arn:aws:s3:::b/k");
  r.keys["aws:currenttime"] = "2026-12-06T22:00:00Z";
  r.keys["aws:epochtime"] = "1796594400";
  CHECK(p->Evaluate(r) == PolicyDecision::kAllow);
  r.keys["aws:currenttime"] = "2031-01-01T00:00:00Z";
  CHECK(p->Evaluate(r) == PolicyDecision::kNone);
  r.keys["aws:currenttime"] = "2019-06-01";
  r.keys["aws:epochtime"] = "1559347200";
  CHECK(p->Evaluate(r) == PolicyDecision::kNone);
  CHECK(!BucketPolicy::Parse(R"({"Statement": {"Effect": "Allow", "Principal": "*",
      "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*",
      "Condition": {"DateLessThan": {"aws:CurrentTime": "next tuesday"}}}})", "b").ok());
}

TEST_CASE("policy: documents S3 refuses", "[s3][policy]") {
  for (const char* bad : {
           "", "not json", "[]", R"({"Version": "2012-10-17"})", R"({"Statement": []})",
           R"({"Version": "2020-01-01", "Statement": {"Effect": "Allow", "Principal": "*",
               "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*"}})",
           R"({"Statement": {"Effect": "Maybe", "Principal": "*", "Action": "s3:GetObject",
               "Resource": "arn:aws:s3:::b/*"}})",
           R"({"Statement": {"Effect": "Allow", "Action": "s3:GetObject",
               "Resource": "arn:aws:s3:::b/*"}})",
           R"({"Statement": {"Effect": "Allow", "Principal": "*", "Action": "iam:PassRole",
               "Resource": "arn:aws:s3:::b/*"}})",
           R"({"Statement": {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
               "Resource": "arn:aws:s3:::other/*"}})",
           R"({"Statement": {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject"}})",
           R"({"Statement": {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
               "NotAction": "s3:PutObject", "Resource": "arn:aws:s3:::b/*"}})",
           R"({"Statement": {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
               "Resource": "arn:aws:s3:::b/*", "Condition": {"StringSoundsLike": {"a": "b"}}}})",
           R"({"Statement": {"Effect": "Allow", "Principal": {"Robot": "x"},
               "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*"}})",
           R"({"Statement": {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
               "Resource": "arn:aws:s3:::b/*", "Extra": 1}})"}) {
    INFO(bad);
    CHECK(!BucketPolicy::Parse(bad, "b").ok());
  }
  std::string huge = R"({"Statement": {"Effect": "Allow", "Principal": "*", "Action": [)";
  for (int i = 0; i < 2000; ++i) huge += R"("s3:GetObject",)";
  huge += R"("s3:GetObject"], "Resource": "*"}})";
  CHECK(!BucketPolicy::Parse(huge, "b").ok());
  CHECK(BucketPolicy::Parse(R"({"Statement": {"Effect": "Allow", "Principal": "*",
      "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b*/*",
      "Condition": {"StringLikeIfExists": {"aws:Referer": "https://x/*"},
                    "ForAnyValue:StringEquals": {"s3:prefix": ["a", "b"]},
                    "NumericLessThanEquals": {"s3:max-keys": 10},
                    "Bool": {"aws:SecureTransport": false}}}})", "b").ok());
}

}  // namespace
}  // namespace openlake::s3

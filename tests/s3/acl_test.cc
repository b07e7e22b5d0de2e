// ACLs: canned ACLs, grant headers, the stored form and who a grant lets in (s3/api/acl.h).
#include "s3/api/acl.h"

#include <string>

#include <catch2/catch.hpp>

namespace openlake::s3 {
namespace {

http::Request WithHeaders(std::vector<http::Header> headers) {
  http::Request r;
  r.method = "PUT";
  r.target = "/b?acl";
  r.headers = std::move(headers);
  return r;
}

TEST_CASE("acl: canned ACLs", "[s3][acl]") {
  auto priv = CannedAcl("private", true, "me");
  REQUIRE(priv);
  CHECK(*priv == Acl{Grant{false, "me", Permission::kFullControl}});
  auto pub = CannedAcl("public-read", false, "me");
  REQUIRE(pub);
  REQUIRE(pub->size() == 2);
  CHECK((*pub)[1] == Grant{true, std::string(kAllUsers), Permission::kRead});
  CHECK(CannedAcl("public-read-write", true, "me")->size() == 3);
  CHECK((*CannedAcl("authenticated-read", true, "me"))[1].id == kAuthenticatedUsers);
  CHECK(CannedAcl("log-delivery-write", true, "me")->size() == 3);
  CHECK(!CannedAcl("log-delivery-write", false, "me"));
  CHECK(CannedAcl("bucket-owner-full-control", false, "me"));
  CHECK(!CannedAcl("bucket-owner-full-control", true, "me"));
  CHECK(!CannedAcl("everyone-everything", false, "me"));
}

TEST_CASE("acl: who a grant lets in", "[s3][acl]") {
  const Acl acl{Grant{false, "me", Permission::kFullControl},
                Grant{true, std::string(kAuthenticatedUsers), Permission::kRead},
                Grant{false, "bob", Permission::kWriteAcp}};
  CHECK(AclAllows(acl, Permission::kWrite, false, "me"));  // FULL_CONTROL gives all
  CHECK(AclAllows(acl, Permission::kRead, false, "carol"));
  CHECK(!AclAllows(acl, Permission::kRead, true, ""));      // not anonymous callers
  CHECK(AclAllows(acl, Permission::kWriteAcp, false, "bob"));
  CHECK(!AclAllows(acl, Permission::kReadAcp, false, "bob"));
  const Acl pub{Grant{true, std::string(kAllUsers), Permission::kRead}};
  CHECK(AclAllows(pub, Permission::kRead, true, ""));
  CHECK(!AclAllows(pub, Permission::kWrite, true, ""));
  CHECK(DecodeAcl(EncodeAcl(acl)) == acl);
  CHECK(DecodeAcl("garbage\nREAD x y\nWRITE g " + std::string(kAllUsers) + "\n") ==
        Acl{Grant{true, std::string(kAllUsers), Permission::kWrite}});
}

TEST_CASE("acl: x-amz-acl and x-amz-grant-* headers", "[s3][acl]") {
  const IsUser known = [](std::string_view id) { return id == "me" || id == "bob"; };
  CHECK(!HasAclHeaders(WithHeaders({{"x-amz-meta-acl", "x"}})));
  CHECK(HasAclHeaders(WithHeaders({{"x-amz-grant-write-acp", "id=me"}})));
  CHECK(HasAclHeaders(WithHeaders({{"x-amz-acl", "private"}})));
  std::optional<Acl> acl;
  S3Error err;
  REQUIRE(AclFromHeaders(WithHeaders({}), true, "me", known, &acl, &err));
  CHECK(!acl);
  REQUIRE(AclFromHeaders(WithHeaders({{"x-amz-acl", "public-read"}}), true, "me", known, &acl,
                         &err));
  REQUIRE(acl);
  CHECK(acl->size() == 2);
  REQUIRE(AclFromHeaders(
      WithHeaders({{"x-amz-grant-read", "id=\"bob\", uri=\"" + std::string(kAllUsers) + "\""},
                   {"x-amz-grant-full-control", "id=me"}}),
      true, "me", known, &acl, &err));
  REQUIRE(acl);
  CHECK(*acl == Acl{Grant{false, "bob", Permission::kRead},
                    Grant{true, std::string(kAllUsers), Permission::kRead},
                    Grant{false, "me", Permission::kFullControl}});
  struct Bad {
    std::vector<http::Header> headers;
    std::string code;
  };
  for (const Bad& b : std::vector<Bad>{
           {{{"x-amz-acl", "public-read"}, {"x-amz-grant-read", "id=bob"}}, "InvalidRequest"},
           {{{"x-amz-acl", "nonsense"}}, "InvalidArgument"},
           {{{"x-amz-grant-read", "id=stranger"}}, "InvalidArgument"},
           {{{"x-amz-grant-read", "uri=http://example.com/group"}}, "InvalidArgument"},
           {{{"x-amz-grant-read", "emailAddress=a@b.c"}}, "UnresolvableGrantByEmailAddress"},
           {{{"x-amz-grant-read", "bob"}}, "InvalidArgument"},
           {{{"x-amz-grant-write", "team=x"}}, "InvalidArgument"}}) {
    INFO(b.code);
    CHECK(!AclFromHeaders(WithHeaders(b.headers), true, "me", known, &acl, &err));
    CHECK(err.code == b.code);
  }
}

}  // namespace
}  // namespace openlake::s3

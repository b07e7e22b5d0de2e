// S3 XML: escaping, writing, error bodies, and reading CompleteMultipartUpload and Delete
// documents (well-formed, invalid, hostile).
#include "s3/api/xml.h"

#include <string>

#include <catch2/catch.hpp>

namespace openlake::s3 {
namespace {

TEST_CASE("xml: escaping and writing", "[s3][xml]") {
  CHECK(XmlEscape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&apos;");
  CHECK(XmlEscape(std::string("t\tn\nr\r\x01\x1f", 8)) == "t\tn\nr&#xD;&#x1;&#x1F;");
  CHECK(XmlEscape("caf\xc3\xa9") == "caf\xc3\xa9");

  XmlWriter w("ListAllMyBucketsResult");
  w.Open("Buckets");
  w.Open("Bucket");
  w.Element("Name", "b&b");
  w.Close();
  const std::string doc = w.Finish();
  CHECK(doc == "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListAllMyBucketsResult "
               "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Buckets><Bucket><Name>b&amp;b"
               "</Name></Bucket></Buckets></ListAllMyBucketsResult>");

  CHECK(ErrorXml("NoSuchKey", "The specified key does not exist.", "/bkt/a<b", "R1") ==
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchKey</Code><Message>The "
        "specified key does not exist.</Message><Resource>/bkt/a&lt;b</Resource><RequestId>R1"
        "</RequestId></Error>");
}

TEST_CASE("xml: CompleteMultipartUpload", "[s3][xml]") {
  auto parts = ParseCompleteMultipartUpload(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\n"
      "  <Part><PartNumber>1</PartNumber><ETag>\"a54357aff0632cce46d942af68356b38\"</ETag></Part>\n"
      "  <Part><ETag>&quot;0c78aef83f66abc1fa1e8477f296d394&quot;</ETag>"
      "<PartNumber> 2 </PartNumber><ChecksumCRC32>x</ChecksumCRC32></Part>\n"
      "</CompleteMultipartUpload>");
  REQUIRE(parts.ok());
  REQUIRE(parts->size() == 2);
  CHECK((*parts)[0].number == 1);
  CHECK((*parts)[0].etag == "\"a54357aff0632cce46d942af68356b38\"");
  CHECK((*parts)[1].number == 2);
  CHECK((*parts)[1].etag == "\"0c78aef83f66abc1fa1e8477f296d394\"");

  for (const char* bad :
       {"", "not xml", "<CompleteMultipartUpload>", "<Other><Part/></Other>",
        "<CompleteMultipartUpload></CompleteMultipartUpload>",
        "<CompleteMultipartUpload><Part><ETag>e</ETag></Part></CompleteMultipartUpload>",
        "<CompleteMultipartUpload><Part><PartNumber>0</PartNumber><ETag>e</ETag></Part>"
        "</CompleteMultipartUpload>",
        "<CompleteMultipartUpload><Part><PartNumber>10001</PartNumber><ETag>e</ETag></Part>"
        "</CompleteMultipartUpload>",
        "<CompleteMultipartUpload><Part><PartNumber>1x</PartNumber><ETag>e</ETag></Part>"
        "</CompleteMultipartUpload>",
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part>"
        "</CompleteMultipartUpload>",
        "<CompleteMultipartUpload><Junk/></CompleteMultipartUpload>"}) {
    INFO(bad);
    auto r = ParseCompleteMultipartUpload(bad);
    REQUIRE(!r.ok());
    CHECK(r.status().message().substr(0, 12) == "MalformedXML");
  }
}

TEST_CASE("xml: Tagging", "[s3][xml]") {
  auto t = ParseTagging(
      "<Tagging xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><TagSet>"
      "<Tag><Key>team</Key><Value>ml &amp; data</Value></Tag>"
      "<Tag><Key>empty</Key><Value></Value></Tag></TagSet></Tagging>");
  REQUIRE(t.ok());
  REQUIRE(t->size() == 2);
  CHECK((*t)[0] == std::make_pair(std::string("team"), std::string("ml & data")));
  CHECK((*t)[1] == std::make_pair(std::string("empty"), std::string()));
  auto none = ParseTagging("<Tagging><TagSet/></Tagging>");
  REQUIRE(none.ok());
  CHECK(none->empty());
  for (const char* bad : {"<Tagging/>", "<Tagging><TagSet/><TagSet/></Tagging>",
                          "<Tagging><TagSet><Tag><Key>k</Key></Tag></TagSet></Tagging>",
                          "<Tagging><TagSet><Bogus/></TagSet></Tagging>", "<Other/>", ""}) {
    INFO(bad);
    CHECK(!ParseTagging(bad).ok());
  }
}

TEST_CASE("xml: AccessControlPolicy", "[s3][xml]") {
  auto d = ParseAccessControlPolicy(
      "<AccessControlPolicy xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Owner><ID>me</ID></Owner><AccessControlList>"
      "<Grant><Grantee xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
      "xsi:type=\"CanonicalUser\"><ID>bob</ID></Grantee><Permission>READ</Permission></Grant>"
      "<Grant><Grantee xmlns:x=\"http://www.w3.org/2001/XMLSchema-instance\" x:type=\"Group\">"
      "<URI>http://acs.amazonaws.com/groups/global/AllUsers</URI></Grantee>"
      "<Permission>WRITE</Permission></Grant></AccessControlList></AccessControlPolicy>");
  REQUIRE(d.ok());
  CHECK(d->owner == "me");
  REQUIRE(d->grants.size() == 2);
  CHECK(d->grants[0].type == "CanonicalUser");
  CHECK(d->grants[0].grantee == "bob");
  CHECK(d->grants[0].permission == "READ");
  CHECK(d->grants[1].type == "Group");
  CHECK(d->grants[1].grantee == "http://acs.amazonaws.com/groups/global/AllUsers");
  for (const char* bad : {"<AccessControlPolicy/>",
                          "<AccessControlPolicy><AccessControlList><Grant><Permission>READ"
                          "</Permission></Grant></AccessControlList></AccessControlPolicy>",
                          "<AccessControlPolicy><AccessControlList><Grant><Grantee><ID>x</ID>"
                          "</Grantee><Permission>READ</Permission></Grant></AccessControlList>"
                          "</AccessControlPolicy>",
                          "<AccessControlPolicy><AccessControlList><Oops/></AccessControlList>"
                          "</AccessControlPolicy>"}) {
    INFO(bad);
    CHECK(!ParseAccessControlPolicy(bad).ok());
  }
}

TEST_CASE("xml: Delete, and hostile documents", "[s3][xml]") {
  auto d = ParseDelete(
      "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>true</Quiet>"
      "<Object><Key>a/b c</Key></Object><Object><Key>&lt;odd&gt;&amp;</Key>"
      "<VersionId>ignored</VersionId></Object></Delete>");
  REQUIRE(d.ok());
  CHECK(d->quiet);
  REQUIRE(d->keys.size() == 2);
  CHECK(d->keys[0] == "a/b c");
  CHECK(d->keys[1] == "<odd>&");

  std::string many = "<Delete>";
  for (int i = 0; i < 1001; ++i) many += "<Object><Key>k" + std::to_string(i) + "</Key></Object>";
  many += "</Delete>";
  CHECK(!ParseDelete(many).ok());
  CHECK(ParseDelete(many, 2000).ok());

  for (const char* bad : {"<Delete/>",
                          "<Delete><Quiet>yes</Quiet><Object><Key>k</Key></Object></Delete>",
                          "<Delete><Object/></Delete>",
                          "<Delete><Object><Key></Key></Object></Delete>",
                          "<Delete><Bogus/></Delete>"}) {
    INFO(bad);
    CHECK(!ParseDelete(bad).ok());
  }
  // An external entity is never fetched or expanded.
  auto xxe = ParseDelete(
      "<?xml version=\"1.0\"?><!DOCTYPE d [<!ENTITY x SYSTEM \"file:///etc/passwd\">]>"
      "<Delete><Object><Key>&x;</Key></Object></Delete>");
  if (xxe.ok()) {
    REQUIRE(xxe->keys.size() == 1);
    CHECK(xxe->keys[0].find("root:") == std::string::npos);
  }
}

}  // namespace
}  // namespace openlake::s3

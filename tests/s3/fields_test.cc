// Header values (fields.h) and S3's additional checksums (checksums.h).
#include "s3/api/fields.h"

#include <string>

#include <catch2/catch.hpp>

#include "s3/api/checksums.h"

namespace openlake::s3 {
namespace {

TEST_CASE("fields: S3's ISO times", "[s3]") {
  const absl::Time t = absl::FromUnixSeconds(784111777);  // Sun, 06 Nov 1994 08:49:37 GMT
  CHECK(FormatIsoTime(t + absl::Milliseconds(250)) == "1994-11-06T08:49:37.250Z");
}

TEST_CASE("fields: Range takes one bytes range; anything else means the whole object", "[s3]") {
  auto r = ParseRange("bytes=0-99");
  REQUIRE(r);
  CHECK(*r->first == 0);
  CHECK(*r->last == 99);
  r = ParseRange("bytes=100-");
  REQUIRE(r);
  CHECK(*r->first == 100);
  CHECK_FALSE(r->last.has_value());
  r = ParseRange("bytes=-500");
  REQUIRE(r);
  CHECK(*r->suffix == 500);
  for (const char* bad : {"", "bytes=", "bytes=5-1", "bytes=0-1,3-4", "items=0-1", "bytes=a-b",
                          "bytes=-", "bytes=99999999999999999999-"}) {
    CHECK_FALSE(ParseRange(bad).has_value());
  }
  uint64_t first = 0, last = 0;
  CHECK(ParseCopyRange("bytes=5-9", &first, &last));
  CHECK((first == 5 && last == 9));
  CHECK_FALSE(ParseCopyRange("bytes=5-", &first, &last));
  CHECK_FALSE(ParseCopyRange("bytes=-5", &first, &last));
}

TEST_CASE("fields: user metadata is capped at 2 KiB", "[s3]") {
  http::Request req;
  req.headers = {{"x-amz-meta-color", "blue"}, {"x-amz-meta-color", "red"}, {"x-amz-date", "x"}};
  std::map<std::string, std::string> meta;
  std::string why;
  REQUIRE(UserMetaFrom(req, &meta, &why));
  CHECK(meta.size() == 1);
  CHECK(meta["color"] == "blue,red");
  req.headers = {{"x-amz-meta-big", std::string(2100, 'x')}};
  meta.clear();
  CHECK_FALSE(UserMetaFrom(req, &meta, &why));
  CHECK_FALSE(why.empty());
}

std::string Hex(const std::string& raw) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

std::string Sum(ChecksumAlgo a, const std::string& data, size_t piece) {
  Checksummer c(a);
  for (size_t at = 0; at < data.size(); at += piece) c.Update(data.substr(at, piece));
  return c.Final();
}

TEST_CASE("checksums: every algorithm's check value, whole or in pieces", "[s3]") {
  const std::string check = "123456789";
  CHECK(Hex(Sum(ChecksumAlgo::kCrc32, check, 9)) == "cbf43926");
  CHECK(Hex(Sum(ChecksumAlgo::kCrc32c, check, 9)) == "e3069283");
  CHECK(Hex(Sum(ChecksumAlgo::kCrc64Nvme, check, 9)) == "ae8b14860a799888");
  CHECK(Hex(Sum(ChecksumAlgo::kSha1, "abc", 3)) == "a9993e364706816aba3e25717850c26c9cd0d89d");
  CHECK(Hex(Sum(ChecksumAlgo::kSha256, "abc", 3)) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string data(100003, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + (i >> 7));
  for (ChecksumAlgo a : {ChecksumAlgo::kCrc32, ChecksumAlgo::kCrc32c, ChecksumAlgo::kCrc64Nvme,
                         ChecksumAlgo::kSha1, ChecksumAlgo::kSha256}) {
    INFO(ChecksumAlgoName(a));
    const std::string whole = Sum(a, data, data.size());
    CHECK(whole.size() == ChecksumBytes(a));
    CHECK(Sum(a, data, 1) == Sum(a, data, 7));
    CHECK(Sum(a, data, 4096) == whole);
    CHECK(ChecksumAlgoFromName(ChecksumAlgoName(a)) == a);
  }
  CHECK_FALSE(ChecksumAlgoFromName("md5").has_value());
}

TEST_CASE("checksums: CRCs of parts combine into the whole's, SHAs do not", "[s3]") {
  std::string data(70001, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 37 + (i >> 5));
  for (ChecksumAlgo a : {ChecksumAlgo::kCrc32, ChecksumAlgo::kCrc32c, ChecksumAlgo::kCrc64Nvme}) {
    INFO(ChecksumAlgoName(a));
    const std::string whole = Sum(a, data, data.size());
    for (size_t cut : {size_t{0}, size_t{1}, size_t{8}, size_t{4096}, size_t{69999},
                       data.size()}) {
      INFO(cut);
      const std::string head = Sum(a, data.substr(0, cut), data.size());
      const std::string tail = Sum(a, data.substr(cut), data.size());
      CHECK(CombineCrc(a, head, tail, data.size() - cut) == whole);
    }
    // Three pieces, as a three-part upload combines them.
    const std::string p1 = Sum(a, data.substr(0, 1000), 1000);
    const std::string p2 = Sum(a, data.substr(1000, 30000), 30000);
    const std::string p3 = Sum(a, data.substr(31000), data.size());
    CHECK(CombineCrc(a, *CombineCrc(a, p1, p2, 30000), p3, data.size() - 31000) == whole);
    CHECK_FALSE(CombineCrc(a, "x", whole, 1).has_value());
  }
  CHECK_FALSE(CombineCrc(ChecksumAlgo::kSha256, std::string(32, 'a'), std::string(32, 'b'), 1)
                  .has_value());
}

}  // namespace
}  // namespace openlake::s3

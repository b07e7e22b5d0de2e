// Bucket lifecycle rules: the document's checks, S3's day counting, the decisions for a key's
// versions and for uploads, and the scanner applying them to a real store at a chosen time
// (rounds bounded by their budget going on where the last stopped).
#include <catch2/catch.hpp>

#include "s3/api/lifecycle.h"
#include "s3/api/lifecycle_scan.h"
#include "store/store_test_util.h"

namespace openlake::s3 {
namespace {

using testing::StoreFixture;

absl::Time Day(int y, int m, int d, int h = 0) {
  return absl::FromCivil(absl::CivilHour(y, m, d, h), absl::UTCTimeZone());
}

// The checked configuration of `rules` (Rule elements), or the S3 error code.
std::string Check(const std::string& rules, LifecycleConfig* out = nullptr) {
  absl::StatusOr<LifecycleDocument> doc =
      ParseLifecycleConfiguration("<LifecycleConfiguration>" + rules + "</LifecycleConfiguration>");
  if (!doc.ok()) return "MalformedXML";
  LifecycleConfig config;
  S3Error err;
  if (!LifecycleFromDocument(*doc, &config, &err)) return err.code;
  if (out != nullptr) *out = config;
  return "ok";
}

TEST_CASE("lifecycle documents are checked as S3 checks them", "[s3][lifecycle]") {
  const std::string expire = "<Expiration><Days>7</Days></Expiration>";
  LifecycleConfig c;
  REQUIRE(Check("<Rule><ID>keep-7</ID><Filter><Prefix>ckpt/</Prefix></Filter><Status>Enabled"
                "</Status>" + expire + "</Rule>", &c) == "ok");
  REQUIRE(c.rules.size() == 1);
  CHECK(c.rules[0].prefix == "ckpt/");
  CHECK(*c.rules[0].expiration_days == 7);
  // The legacy Prefix, an And of prefix, tags and sizes, and every action.
  REQUIRE(Check("<Rule><Prefix>a</Prefix><Status>Disabled</Status>" + expire + "</Rule>", &c) ==
          "ok");
  CHECK(!c.rules[0].enabled);
  REQUIRE(Check("<Rule><Filter><And><Prefix>p</Prefix><Tag><Key>k</Key><Value>v</Value></Tag>"
                "<ObjectSizeGreaterThan>10</ObjectSizeGreaterThan></And></Filter>"
                "<Status>Enabled</Status>"
                "<NoncurrentVersionExpiration><NoncurrentDays>3</NoncurrentDays>"
                "<NewerNoncurrentVersions>2</NewerNoncurrentVersions>"
                "</NoncurrentVersionExpiration></Rule>"
                "<Rule><Filter></Filter><Status>Enabled</Status>"
                "<AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation>"
                "</AbortIncompleteMultipartUpload>"
                "<Expiration><Date>2030-01-01T00:00:00Z</Date></Expiration></Rule>", &c) == "ok");
  CHECK(c.rules[0].tags == TagSet{{"k", "v"}});
  CHECK(*c.rules[0].size_greater == 10);
  CHECK(*c.rules[0].newer_noncurrent_versions == 2);
  CHECK(*c.rules[1].expiration_date == Day(2030, 1, 1));
  // What comes back parses to the same rules.
  absl::StatusOr<LifecycleConfig> kept = ParseKeptLifecycle(LifecycleXml(c));
  REQUIRE(kept.ok());
  REQUIRE(kept->rules.size() == 2);
  CHECK(kept->rules[0].tags == c.rules[0].tags);
  CHECK(*kept->rules[1].expiration_date == Day(2030, 1, 1));

  CHECK(Check("<Rule><Status>Enabled</Status></Rule>") == "InvalidRequest");  // no action
  CHECK(Check("<Rule><Status>On</Status>" + expire + "</Rule>") == "MalformedXML");
  CHECK(Check("<Rule>" + expire + "</Rule>") == "MalformedXML");  // no Status
  CHECK(Check("<Rule><Status>Enabled</Status><Expiration><Days>0</Days></Expiration></Rule>") ==
        "InvalidArgument");
  CHECK(Check("<Rule><Status>Enabled</Status><Expiration><Days>1</Days><Date>2030-01-01</Date>"
              "</Expiration></Rule>") == "MalformedXML");
  CHECK(Check("<Rule><Status>Enabled</Status><Expiration><Date>2030-01-01T05:00:00Z</Date>"
              "</Expiration></Rule>") == "InvalidArgument");  // not midnight
  CHECK(Check("<Rule><Prefix>a</Prefix><Filter><Prefix>a</Prefix></Filter>"
              "<Status>Enabled</Status>" + expire + "</Rule>") == "MalformedXML");
  CHECK(Check("<Rule><Filter><Prefix>a</Prefix><Tag><Key>k</Key><Value>v</Value></Tag></Filter>"
              "<Status>Enabled</Status>" + expire + "</Rule>") == "MalformedXML");  // no And
  CHECK(Check("<Rule><ID>x</ID><Status>Enabled</Status>" + expire + "</Rule><Rule><ID>x</ID>"
              "<Status>Enabled</Status>" + expire + "</Rule>") == "InvalidArgument");
  CHECK(Check("<Rule><Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled"
              "</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>1"
              "</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>") ==
        "InvalidRequest");
  CHECK(Check("<Rule><Status>Enabled</Status><Transition><Days>1</Days><StorageClass>GLACIER"
              "</StorageClass></Transition></Rule>") == "NotImplemented");
  CHECK(Check("<Rule><Status>Enabled</Status><Bogus/></Rule>") == "MalformedXML");
}

TEST_CASE("lifecycle days end at the next midnight UTC", "[s3][lifecycle]") {
  CHECK(ExpiryAfter(Day(2026, 3, 1, 15), 1) == Day(2026, 3, 3));
  CHECK(ExpiryAfter(Day(2026, 3, 1), 1) == Day(2026, 3, 2));
  CHECK(ExpiryAfter(Day(2026, 12, 31, 23), 7) == Day(2027, 1, 8));
}

store::ObjectInfo Version(std::string key, std::string id, absl::Time t, bool marker = false,
                          uint64_t size = 10) {
  store::ObjectInfo v;
  v.key = std::move(key);
  v.version_id = std::move(id);
  v.mod_time = t;
  v.delete_marker = marker;
  v.size = size;
  return v;
}

TEST_CASE("lifecycle decisions for a key's versions and for uploads", "[s3][lifecycle]") {
  LifecycleConfig c;
  REQUIRE(Check("<Rule><Filter><Prefix>ckpt/</Prefix></Filter><Status>Enabled</Status>"
                "<Expiration><Days>7</Days></Expiration>"
                "<NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays>"
                "<NewerNoncurrentVersions>1</NewerNoncurrentVersions>"
                "</NoncurrentVersionExpiration>"
                "<AbortIncompleteMultipartUpload><DaysAfterInitiation>2</DaysAfterInitiation>"
                "</AbortIncompleteMultipartUpload></Rule>"
                "<Rule><Filter><Tag><Key>tmp</Key><Value>yes</Value></Tag></Filter>"
                "<Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>"
                "<Rule><Status>Enabled</Status><Expiration>"
                "<ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>",
                &c) == "ok");
  const absl::Time t0 = Day(2026, 1, 1, 12);
  // The current version: seven days, counted to midnight.
  std::vector<store::ObjectInfo> one{Version("ckpt/a", "v1", t0)};
  CHECK(!Evaluate(c, one, Day(2026, 1, 8, 23)).expire_current);
  CHECK(Evaluate(c, one, Day(2026, 1, 9)).expire_current);
  CHECK(!Evaluate(c, {Version("other", "v1", t0)}, Day(2027, 1, 1)).expire_current);
  // Tags select too.
  std::vector<store::ObjectInfo> tagged{Version("other", "v1", t0)};
  tagged[0].user_meta["tag:set"] = "tmp=yes";
  CHECK(Evaluate(c, tagged, Day(2026, 1, 3)).expire_current);
  // Noncurrent versions: one day after the next newer one came, keeping one newer noncurrent.
  std::vector<store::ObjectInfo> history{
      Version("ckpt/a", "v4", t0 + absl::Hours(72)), Version("ckpt/a", "v3", t0 + absl::Hours(48)),
      Version("ckpt/a", "v2", t0 + absl::Hours(24)), Version("ckpt/a", "v1", t0)};
  KeyActions a = Evaluate(c, history, Day(2026, 1, 10));
  CHECK(a.remove_versions == std::vector<std::string>{"v2", "v1"});  // v3 is the one kept
  a = Evaluate(c, history, Day(2026, 1, 3, 1));
  CHECK(a.remove_versions.empty());  // v1 became noncurrent on the 2nd: gone from the 4th
  CHECK(Evaluate(c, history, Day(2026, 1, 4)).remove_versions == std::vector<std::string>{"v1"});
  // A lone delete marker goes; one with versions behind it stays.
  CHECK(Evaluate(c, {Version("x", "m", t0, true)}, t0).remove_versions ==
        std::vector<std::string>{"m"});
  CHECK(Evaluate(c, {Version("x", "m", t0, true), Version("x", "v", t0)}, t0)
            .remove_versions.empty());
  // Uploads under the prefix, two days on.
  CHECK(!AbortsUpload(c, "ckpt/big", t0, Day(2026, 1, 3, 23)));
  CHECK(AbortsUpload(c, "ckpt/big", t0, Day(2026, 1, 4)));
  CHECK(!AbortsUpload(c, "other", t0, Day(2027, 1, 1)));
}

TEST_CASE("the lifecycle scanner applies the rules to a store", "[s3][lifecycle]") {
  StoreFixture f(4);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("plain").ok());
  REQUIRE(f.MakeBucket("vers").ok());
  REQUIRE(f.MakeBucket("none").ok());
  REQUIRE(f.Run([&] { return f.st().SetBucketVersioning("vers", store::Versioning::kEnabled); })
              .ok());
  LifecycleConfig c;
  REQUIRE(Check("<Rule><Filter><Prefix>old/</Prefix></Filter><Status>Enabled</Status>"
                "<Expiration><Days>1</Days></Expiration>"
                "<NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays>"
                "</NoncurrentVersionExpiration>"
                "<AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation>"
                "</AbortIncompleteMultipartUpload></Rule>", &c) == "ok");
  for (const char* b : {"plain", "vers"}) {
    REQUIRE(f.Run([&] { return f.st().SetBucketLifecycle(b, LifecycleXml(c)); }).ok());
  }
  store::PutOptions versioned;
  versioned.versioning = store::Versioning::kEnabled;
  for (int i = 0; i < 30; ++i) {
    const std::string n = std::to_string(i);
    REQUIRE(f.Put("plain", "old/" + n, "x").ok());
    REQUIRE(f.Put("plain", "new/" + n, "x").ok());
    REQUIRE(f.Put("none", "old/" + n, "x").ok());
    REQUIRE(f.Put("vers", "old/" + n, "1", versioned).ok());
    REQUIRE(f.Put("vers", "old/" + n, "2", versioned).ok());
  }
  auto upload = f.Run([&] {
    store::PutOptions o;
    return f.st().CreateUpload("plain", "old/big", o);
  });
  REQUIRE(upload.ok());

  LifecycleLimits limits;
  limits.keys_per_round = 25;
  limits.keys_per_second = 0;
  LifecycleScanner scanner(f.st(), limits);
  // Today nothing is due.
  bool done = false;
  for (int i = 0; i < 10 && !done; ++i) {
    done = *f.Run([&]() -> io::Task<absl::StatusOr<bool>> {
      const bool d = co_await scanner.RunRound(absl::Now());
      co_return d;
    });
  }
  REQUIRE(done);
  CHECK(scanner.totals().expired == 0);
  CHECK(scanner.totals().keys_scanned == 90);  // plain's 60 and vers' 30 (none has no rules)
  // Three days on: every round does at most 25 keys; passes go on until all is done.
  const absl::Time later = absl::Now() + absl::Hours(72);
  int rounds = 0;
  for (done = false; !done && rounds < 20; ++rounds) {
    done = *f.Run([&]() -> io::Task<absl::StatusOr<bool>> {
      const bool d = co_await scanner.RunRound(later);
      co_return d;
    });
  }
  CHECK(rounds >= 4);
  store::ListOptions all;
  auto plain = f.List("plain", all);
  REQUIRE(plain.ok());
  CHECK(plain->objects.size() == 30);  // new/ only
  CHECK(plain->objects.front().key.rfind("new/", 0) == 0);
  CHECK(f.List("none", all)->objects.size() == 30);  // no rules
  // The versioned bucket: each key got a delete marker over its newer version, and the older
  // one (noncurrent for three days by then) went.
  store::ListVersionsOptions vo;
  auto vers = f.Run([&] { return f.st().ListObjectVersions("vers", vo); });
  REQUIRE(vers.ok());
  CHECK(vers->versions.size() == 60);
  CHECK(vers->versions[0].delete_marker);
  CHECK(scanner.totals().expired == 60);
  CHECK(scanner.totals().versions_removed == 30);
  CHECK(scanner.totals().uploads_aborted == 1);
  CHECK(scanner.totals().errors == 0);
  auto uploads = f.Run([&] {
    store::ListUploadsOptions uo;
    return f.st().ListUploads("plain", uo);
  });
  REQUIRE(uploads.ok());
  CHECK(uploads->uploads.empty());
}

}  // namespace
}  // namespace openlake::s3

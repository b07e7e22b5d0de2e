// Names, the metadata envelope and placement.
#include <map>
#include <set>
#include <vector>

#include <catch2/catch.hpp>

#include "store/meta.h"
#include "store/names.h"
#include "store/placement.h"

#include "openlake/store/store.h"

using namespace openlake::store;

TEST_CASE("bucket names follow S3's rules", "[store][names]") {
  for (const char* ok : {"abc", "my-bucket", "my.bucket.01", "a1b", "123"}) {
    INFO(ok);
    CHECK(ValidateBucketName(ok).ok());
  }
  for (const char* bad : {"ab", "Abc", "-abc", "abc-", "a..b", "a.-b", "a-.b", "192.168.1.1",
                          "openlake", "a_b", "abc/"}) {
    INFO(bad);
    absl::Status s = ValidateBucketName(bad);
    CHECK(ErrorKindOf(s) == ErrorKind::kInvalidBucketName);
    CHECK(absl::IsInvalidArgument(s));
  }
  CHECK(!ValidateBucketName(std::string(64, 'a')).ok());
  CHECK(ValidateBucketName(std::string(63, 'a')).ok());
}

TEST_CASE("any S3 key is valid but for its length and UTF-8", "[store][names]") {
  for (const std::string& ok : std::vector<std::string>{
           "a", "a/b/c", "dir/", "a/b/", "x.y", ".hidden", "a/..b/c", "...", "%25", "%", "a%2F",
           "日本語/キー", "sp ace", "xl.meta", "%meta", "../etc/passwd", "a/../../b", "a/./b",
           "..", ".", "/abs", "/", "//", "a//b", std::string("a\0b", 3), std::string(1024, 'k'),
           "a/" + std::string(1000, 's'), std::string(1024, '%')}) {
    INFO(ok);
    CHECK(ValidateObjectKey(ok).ok());
  }
  const std::map<std::string, std::string> bad = {
      {"", "empty"},
      {std::string(1025, 'k'), "1024"},
      {"\xff\xfe", "UTF-8"},
      {"\xc0\xaf", "UTF-8"},  // overlong '/'
  };
  for (const auto& [key, why] : bad) {
    absl::Status s = ValidateObjectKey(key);
    INFO(s);
    CHECK(ErrorKindOf(s) == ErrorKind::kInvalidObjectName);
    CHECK(std::string(s.message()).find(why) != std::string::npos);
  }
}

TEST_CASE("key segments escape so they never name the engine's entries", "[store][names]") {
  std::string seg;
  CHECK(EscapeSegment("plain") == "plain");
  CHECK(EscapeSegment("%meta") == "%25meta");
  CHECK(EscapeSegment("") == "%");
  CHECK(!UnescapeSegment("%meta", &seg));
  CHECK(!UnescapeSegment("%data.0123", &seg));
  CHECK(UnescapeSegment("%25meta", &seg));
  CHECK(seg == "%meta");
  CHECK(UnescapeSegment("%", &seg));
  CHECK(seg.empty());
  for (const std::string& s : std::vector<std::string>{"a", "%", "%%", "100%", "%25", "a%b%c", "", ".", "..", "...",
                              ".a", "%2E", std::string("\0", 1), std::string("n\0%", 3)}) {
    std::string back;
    REQUIRE(UnescapeSegment(EscapeSegment(s), &back));
    CHECK(back == s);
  }
  // Nothing a segment escapes to is a name a path walk would follow out of the folder.
  CHECK(EscapeSegment(".") == "%2E");
  CHECK(EscapeSegment("..") == "%2E%2E");
  CHECK(EscapeSegment(std::string("\0", 1)) == "%00");
  CHECK(!UnescapeSegment(".", &seg));
  CHECK(!UnescapeSegment("..", &seg));
  CHECK(!UnescapeSegment("%2e", &seg));
  CHECK(ObjectDir("b", "a//c") == "b/a/%/c");
  CHECK(ObjectDir("b", "/a") == "b/%/a");
  CHECK(ObjectDir("b", "../x") == "b/%2E%2E/x");
  // A segment too long for a file name: pieces of at most 200 bytes, never cut inside an
  // escape, each but the last in a "%+" folder.
  CHECK(ObjectDir("b", std::string(255, 'x')) == "b/" + std::string(255, 'x'));
  CHECK(ObjectDir("b", std::string(256, 'x') + "/y") ==
        "b/%+" + std::string(200, 'x') + "/" + std::string(56, 'x') + "/y");
  auto escapes = [](int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += "%25";
    return out;
  };
  CHECK(ObjectDir("b", std::string(199, 'x') + std::string(100, '%')) ==
        "b/%+" + std::string(199, 'x') + "/%+" + escapes(66) + "/" + escapes(34));
  for (size_t len : {256, 600, 1024}) {
    const std::string dir = ObjectDir("b", std::string(len, 'q'));
    size_t start = 0;
    while (start < dir.size()) {
      size_t end = dir.find('/', start);
      if (end == std::string::npos) end = dir.size();
      CHECK(end - start <= kMaxSegmentBytes);
      start = end + 1;
    }
  }
  CHECK(ObjectDir("b", "a/b") == "b/a/b");
  CHECK(ObjectDir("b", "a/") == "b/a/%");
  CHECK(ObjectDir("b", "%meta") == "b/%25meta");
  CHECK(MetaPath("b", "k") == "b/k/%meta");
  CHECK(PrefixDir("b", "") == "b");
  CHECK(PrefixDir("b", "x/y/") == "b/x/y");
}

TEST_CASE("metadata records round-trip and every damage is detected", "[store][meta]") {
  pb::ObjectMeta m;
  m.set_bucket("bkt");
  m.set_key("some/key");
  pb::ObjectVersion* v = m.add_versions();
  v->set_version_id(NewVersionId());
  v->set_mod_time_ns(123456789);
  v->set_size(1 << 20);
  v->set_etag("d41d8cd98f00b204e9800998ecf8427e");
  v->set_content_type("text/plain");
  (*v->mutable_user_meta())["color"] = "blue";
  v->set_data_shards(2);
  v->set_parity_shards(2);
  v->set_block_size(1 << 20);
  v->set_inline_data(true);
  v->set_inline_shard(std::string(1000, 'x'));
  v->add_parts()->add_block_crc(42);
  const std::string rec = EncodeRecord(RecordType::kObjectMeta, m);

  pb::ObjectMeta back;
  REQUIRE(DecodeRecord(RecordType::kObjectMeta, rec, &back).ok());
  CHECK(back.SerializeAsString() == m.SerializeAsString());
  CHECK(SameVersion(back.versions(0), m.versions(0)));

  // Every single-bit flip anywhere, header or body or inline data, is refused.
  for (size_t i = 0; i < rec.size(); i += (i < 64 ? 1 : 37)) {
    std::string bad = rec;
    bad[i] = static_cast<char>(bad[i] ^ 0x04);
    pb::ObjectMeta out;
    INFO(i);
    CHECK(absl::IsDataLoss(DecodeRecord(RecordType::kObjectMeta, bad, &out)));
  }
  // Torn: any prefix.
  for (size_t n : {size_t{0}, size_t{5}, size_t{19}, size_t{20}, rec.size() / 2, rec.size() - 1}) {
    pb::ObjectMeta out;
    CHECK(absl::IsDataLoss(DecodeRecord(RecordType::kObjectMeta, rec.substr(0, n), &out)));
  }
  // Extra bytes, and a record of another type.
  pb::ObjectMeta out;
  CHECK(absl::IsDataLoss(DecodeRecord(RecordType::kObjectMeta, rec + "x", &out)));
  pb::BucketMeta bm;
  CHECK(absl::IsDataLoss(DecodeRecord(RecordType::kBucketMeta, rec, &bm)));
}

TEST_CASE("a version whose fields do not add up is refused before it is believed",
          "[store][meta]") {
  // A sharded 2+2 version of 200 KiB in one part: 64 KiB blocks, so two windows of 128 KiB.
  pb::ObjectVersion good;
  good.set_version_id(NewVersionId());
  good.set_size(200 << 10);
  good.set_data_shards(2);
  good.set_parity_shards(2);
  good.set_block_size(64 << 10);
  good.set_shard_index(3);
  good.set_rotation(1);
  pb::Part* p = good.add_parts();
  p->set_number(1);
  p->set_size(200 << 10);
  p->add_block_crc(1);
  p->add_block_crc(2);
  p->set_file("part.1");
  REQUIRE(CheckVersion(good, 4).ok());
  CHECK(absl::IsDataLoss(CheckVersion(good, 6)));  // k + m is not the set's size

  struct Damage {
    const char* what;
    void (*apply)(pb::ObjectVersion*);
  };
  const Damage damages[] = {
      {"no parts (the reader once indexed past them)",
       [](pb::ObjectVersion* v) { v->clear_parts(); }},
      {"no data shards", [](pb::ObjectVersion* v) { v->set_data_shards(0); }},
      {"block size 0", [](pb::ObjectVersion* v) { v->set_block_size(0); }},
      {"shard index beyond the set", [](pb::ObjectVersion* v) { v->set_shard_index(4); }},
      {"rotation beyond the set", [](pb::ObjectVersion* v) { v->set_rotation(7); }},
      {"parts larger than the object", [](pb::ObjectVersion* v) { v->set_size(100); }},
      {"parts smaller than the object", [](pb::ObjectVersion* v) { v->set_size(v->size() + 1); }},
      {"a block checksum missing",
       [](pb::ObjectVersion* v) { v->mutable_parts(0)->mutable_block_crc()->RemoveLast(); }},
      {"a file name with a path",
       [](pb::ObjectVersion* v) { v->mutable_parts(0)->set_file("../../etc/passwd"); }},
      {"no file name", [](pb::ObjectVersion* v) { v->mutable_parts(0)->clear_file(); }},
  };
  for (const Damage& d : damages) {
    INFO(d.what);
    pb::ObjectVersion bad = good;
    d.apply(&bad);
    CHECK(absl::IsDataLoss(CheckVersion(bad, 4)));
  }
  // Tombstones and inline versions carry no part files to check.
  pb::ObjectVersion tomb;
  tomb.set_deleted(true);
  CHECK(CheckVersion(tomb, 4).ok());
  pb::ObjectVersion small = good;
  small.clear_parts();
  small.set_inline_data(true);
  CHECK(CheckVersion(small, 4).ok());
}

TEST_CASE("content type and user metadata may hold bytes that are not UTF-8", "[store][meta]") {
  pb::ObjectMeta m;
  m.set_bucket("bkt");
  m.set_key("k");
  pb::ObjectVersion* v = m.add_versions();
  v->set_content_type("text/plain; charset=caf\xe9");
  (*v->mutable_user_meta())["name"] = "r\xe9sum\xe9";
  pb::ObjectMeta back;
  REQUIRE(
      DecodeRecord(RecordType::kObjectMeta, EncodeRecord(RecordType::kObjectMeta, m), &back).ok());
  CHECK(back.versions(0).content_type() == "text/plain; charset=caf\xe9");
  CHECK(back.versions(0).user_meta().at("name") == "r\xe9sum\xe9");
}

TEST_CASE("placement is stable, keyed and spread", "[store][placement]") {
  SipKey zero{};
  // SipHash-2-4 reference vector (the paper's key 00..0f over the empty message).
  SipKey ref;
  for (int i = 0; i < 16; ++i) ref[i] = static_cast<uint8_t>(i);
  CHECK(SipHash24(ref, "") == 0x726fdb47dd0e0e31ULL);
  std::string msg;
  for (int i = 0; i < 15; ++i) msg += static_cast<char>(i);
  CHECK(SipHash24(ref, msg) == 0xa129ca6149be45e5ULL);

  // Stable: the same input, the same place, every time.
  const Placement a = Place(ref, 8, 16, "bucket", "key");
  for (int i = 0; i < 10; ++i) {
    const Placement b = Place(ref, 8, 16, "bucket", "key");
    CHECK(a.set == b.set);
    CHECK(a.rotation == b.rotation);
  }
  // Keyed: another deployment places differently (over many keys, not all the same).
  int differ = 0;
  for (int i = 0; i < 100; ++i) {
    const std::string key = "k" + std::to_string(i);
    differ += Place(ref, 8, 16, "b", key).set != Place(zero, 8, 16, "b", key).set ? 1 : 0;
  }
  CHECK(differ > 50);
  // Spread: 16,000 keys over 8 sets and 16 rotations, each within 25% of even.
  std::map<uint32_t, int> sets, rots;
  for (int i = 0; i < 16000; ++i) {
    const Placement p = Place(ref, 8, 16, "b", "obj/" + std::to_string(i));
    ++sets[p.set];
    ++rots[p.rotation];
  }
  REQUIRE(sets.size() == 8);
  REQUIRE(rots.size() == 16);
  for (auto& [s, n] : sets) CHECK(std::abs(n - 2000) < 500);
  for (auto& [r, n] : rots) CHECK(std::abs(n - 1000) < 250);
  // Shard positions and their inverse.
  for (uint32_t rot = 0; rot < 6; ++rot) {
    std::set<uint32_t> used;
    for (uint32_t s = 0; s < 6; ++s) {
      const uint32_t p = ShardPosition(rot, s, 6);
      CHECK(ShardAt(rot, p, 6) == s);
      used.insert(p);
    }
    CHECK(used.size() == 6);
  }
}

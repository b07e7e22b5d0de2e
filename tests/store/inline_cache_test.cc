// The inline cache: small objects read once are served from memory, and every change of an
// object (overwrite, delete, copy onto it, a completed upload, a heal) is seen by the next read.
#include <catch2/catch.hpp>

#include "store/pack.h"
#include "store/store_test_util.h"

namespace openlake::testing {
namespace {

using store::ErrorKind;
using store::ErrorKindOf;

// Reads served from the cache touch no drive: the drives' read counters stay put (file reads,
// and reads of records in the drives' packs).
int Reads(StoreFixture& f) {
  int n = 0;
  for (int i = 0; i < f.drives(); ++i) {
    n += f.faults(i).reads.load();
    auto pack = store::MetaPack::For(f.drive_path(i));
    REQUIRE(pack.ok());
    n += static_cast<int>((*pack)->stats().reads);
  }
  return n;
}

TEST_CASE("inline cache: hits touch no drive; every change is seen by the next read",
          "[store]") {
  StoreFixture f(4, 4, 2, /*block_size=*/16 << 10);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  const std::string v1 = RandomBytes(3000, 1), v2 = RandomBytes(5000, 2);
  REQUIRE(f.Put("bkt", "k", v1).ok());
  REQUIRE(*f.Get("bkt", "k") == v1);  // a miss fills the cache
  const int before = Reads(f);
  REQUIRE(*f.Get("bkt", "k") == v1);
  CHECK(f.Stat("bkt", "k")->size == v1.size());
  CHECK(Reads(f) == before);

  SECTION("overwrite") {
    REQUIRE(f.Put("bkt", "k", v2).ok());
    CHECK(*f.Get("bkt", "k") == v2);
    CHECK(f.Stat("bkt", "k")->size == v2.size());
  }
  SECTION("delete") {
    REQUIRE(f.Delete("bkt", "k").ok());
    CHECK(ErrorKindOf(f.Get("bkt", "k").status()) == ErrorKind::kNoSuchKey);
    CHECK(ErrorKindOf(f.Stat("bkt", "k").status()) == ErrorKind::kNoSuchKey);
  }
  SECTION("copy onto it") {
    REQUIRE(f.Put("bkt", "other", v2).ok());
    REQUIRE(f.Run([&] { return f.st().CopyObject("bkt", "other", "bkt", "k", {}, {}, {}); }).ok());
    CHECK(*f.Get("bkt", "k") == v2);
  }
  SECTION("a completed multipart upload") {
    auto id = f.Run([&] { return f.st().CreateUpload("bkt", "k", {}); });
    REQUIRE(id.ok());
    auto part = f.PutPart("bkt", "k", *id, 1, v2);
    REQUIRE(part.ok());
    std::vector<store::CompletePart> parts = {{1, part->etag}};
    REQUIRE(f.Run([&] { return f.st().CompleteUpload("bkt", "k", *id, parts, {}); }).ok());
    CHECK(*f.Get("bkt", "k") == v2);
  }
  SECTION("conditions and ranges apply to cached objects") {
    store::GetOptions o;
    o.range = store::RangeSpec{10, 19, std::nullopt};
    CHECK(*f.Get("bkt", "k", o) == v1.substr(10, 10));
    store::GetOptions none;
    none.conditions.if_none_match = f.Stat("bkt", "k")->etag;
    CHECK(ErrorKindOf(f.Get("bkt", "k", none).status()) == ErrorKind::kNotModified);
  }
}

TEST_CASE("inline cache: off with inline_cache_bytes = 0", "[store]") {
  StoreFixture f(4, 4, 2, /*block_size=*/16 << 10);
  f.options().inline_cache_bytes = 0;
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  REQUIRE(f.Put("bkt", "k", "tiny").ok());
  REQUIRE(*f.Get("bkt", "k") == "tiny");
  const int before = Reads(f);
  REQUIRE(*f.Get("bkt", "k") == "tiny");
  CHECK(Reads(f) > before);
}

}  // namespace
}  // namespace openlake::testing

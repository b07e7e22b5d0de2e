// Reduced redundancy: objects written with PutOptions::reduced_redundancy are coded with the
// set's reduced parity (RS(3+1) on four drives where the set codes RS(2+2)), read with their
// own layout's quorum, rebuilt by healing, and multipart uploads keep the layout they began
// with.
#include <catch2/catch.hpp>

#include <filesystem>

#include "store/store_test_util.h"

namespace openlake::testing {
namespace {

store::PutOptions Reduced() {
  store::PutOptions o;
  o.reduced_redundancy = true;
  return o;
}

// Data shards of the version a drive holds, from the bytes of its shard file: a 3+1 object's
// shard is a third of it, a 2+2 object's a half.
uint64_t ShardFileBytes(StoreFixture& f, int d, const std::string& object_dir) {
  uint64_t total = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(f.drive_path(d) + "/" +
                                                                     object_dir)) {
    if (e.is_regular_file() && e.path().filename().string().rfind("part.", 0) == 0) {
      total += e.file_size();
    }
  }
  return total;
}

TEST_CASE("reduced redundancy objects use the reduced layout", "[store][rrs]") {
  StoreFixture f(4);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  const std::string big = RandomBytes(3 << 20, 11), small = RandomBytes(1000, 12);
  REQUIRE(f.Put("bkt", "std", big).ok());
  REQUIRE(f.Put("bkt", "rrs", big, Reduced()).ok());
  REQUIRE(f.Put("bkt", "rrs-small", small, Reduced()).ok());
  // 3 MiB in 1 MiB blocks: a 2+2 shard file holds 1.5 MiB, a 3+1 one 1 MiB.
  for (int d = 0; d < 4; ++d) {
    CHECK(ShardFileBytes(f, d, "bkt/std") == (3u << 20) / 2);
    CHECK(ShardFileBytes(f, d, "bkt/rrs") == 1u << 20);
  }
  CHECK(*f.Get("bkt", "rrs") == big);
  CHECK(*f.Get("bkt", "rrs-small") == small);
  // One drive lost: the reduced objects read from the other three (k = 3).
  f.faults(1).fail_all = true;
  CHECK(*f.Get("bkt", "rrs") == big);
  CHECK(*f.Get("bkt", "rrs-small") == small);
  // ... and still take writes (MinIO's quorum for a reduced layout: k).
  CHECK(f.Put("bkt", "rrs-degraded", small, Reduced()).ok());
  // Two lost: the set's own layout reads, the reduced one cannot.
  f.faults(2).fail_all = true;
  CHECK(*f.Get("bkt", "std") == big);
  CHECK(!f.Get("bkt", "rrs").ok());
  f.faults(1).fail_all = false;
  f.faults(2).fail_all = false;
  // The write made while drive 1 was down reaches it by healing; until then it survives no
  // further loss (three holders, k = 3).
  REQUIRE(f.Heal("bkt").ok());

  // A drive wiped is rebuilt with the object's own layout.
  f.Close();
  std::filesystem::remove_all(f.drive_path(3) + "/bkt");
  std::filesystem::create_directories(f.drive_path(3) + "/bkt");
  REQUIRE(f.Open().ok());
  auto healed = f.Heal("bkt");
  REQUIRE(healed.ok());
  CHECK(healed->objects_failed == 0);
  CHECK(ShardFileBytes(f, 3, "bkt/rrs") == 1u << 20);
  f.faults(0).fail_all = true;
  CHECK(*f.Get("bkt", "rrs") == big);
  CHECK(*f.Get("bkt", "rrs-small") == small);
  CHECK(*f.Get("bkt", "rrs-degraded") == small);
  f.faults(0).fail_all = false;
}

TEST_CASE("a reduced redundancy upload keeps its layout to the end", "[store][rrs]") {
  StoreFixture f(4);
  f.options().min_part_size = 1 << 20;
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  auto upload = f.Run([&] { return f.st().CreateUpload("bkt", "mp", Reduced()); });
  REQUIRE(upload.ok());
  const std::string p1 = RandomBytes(3 << 20, 21), p2 = RandomBytes(12345, 22);
  auto a = f.PutPart("bkt", "mp", *upload, 1, p1);
  auto b = f.PutPart("bkt", "mp", *upload, 2, p2);
  REQUIRE((a.ok() && b.ok()));
  std::vector<store::CompletePart> parts{{1, a->etag}, {2, b->etag}};
  auto done = f.Run([&] {
    store::CompleteOptions o;
    return f.st().CompleteUpload("bkt", "mp", *upload, parts, o);
  });
  REQUIRE(done.ok());
  CHECK(*f.Get("bkt", "mp") == p1 + p2);
  f.faults(2).fail_all = true;
  CHECK(*f.Get("bkt", "mp") == p1 + p2);
}

TEST_CASE("the reduced parity is checked", "[store][rrs]") {
  StoreFixture f(4);
  f.options().reduced_parity = 3;  // more than the set's 2
  CHECK(!f.Open().ok());
  f.options().reduced_parity = 2;  // the same as the set's: one layout
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  REQUIRE(f.Put("bkt", "k", "same", Reduced()).ok());
  f.faults(0).fail_all = true;
  f.faults(1).fail_all = true;
  CHECK(*f.Get("bkt", "k") == "same");
}

}  // namespace
}  // namespace openlake::testing

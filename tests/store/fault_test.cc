// Fault injection through the file-backend seam and on the drive folders themselves: a drive
// missing, a drive returning errors, flipped bits in shards and metadata, torn metadata writes,
// and a replaced drive rebuilt by heal. In every case a read returns the right bytes or a clear
// error, never wrong bytes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "store/store_test_util.h"

namespace openlake {
namespace {

using testing::RandomBytes;
using testing::StoreFixture;
namespace fs = std::filesystem;

// The objects every case writes: inline (in the metadata), one block, many blocks with a
// partial last stripe.
struct Corpus {
  std::vector<std::pair<std::string, std::string>> objects;

  explicit Corpus(uint32_t seed) {
    objects = {{"small", RandomBytes(3000, seed)},
               {"dir/one-block", RandomBytes(60000, seed + 1)},
               {"dir/many", RandomBytes(700001, seed + 2)},
               {"z/last", RandomBytes(128 << 10, seed + 3)}};
  }

  void Put(StoreFixture& f, const std::string& bucket) const {
    for (const auto& [k, v] : objects) REQUIRE(f.Put(bucket, k, v).ok());
  }

  // Every object reads back exactly (whole and a range crossing a block boundary).
  void Verify(StoreFixture& f, const std::string& bucket) const {
    for (const auto& [k, v] : objects) {
      INFO("key " << k);
      auto got = f.Get(bucket, k);
      INFO(got.status());
      REQUIRE(got.ok());
      CHECK(*got == v);
      if (v.size() > 70000) {
        store::GetOptions o;
        o.range = store::RangeSpec{65000, 70000, {}};
        auto part = f.Get(bucket, k, o);
        REQUIRE(part.ok());
        CHECK(*part == v.substr(65000, 5001));
      }
    }
  }
};

// Files of one object on one drive: its metadata and its data parts.
std::vector<std::string> ObjectFiles(const std::string& drive, const std::string& bucket,
                                     const std::string& key, bool data) {
  std::vector<std::string> out;
  const fs::path dir = fs::path(drive) / bucket / key;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    if (data ? name.rfind("part.", 0) == 0 : name == "%meta") out.push_back(e.path().string());
  }
  return out;
}

// Where the packed record (store/pack.h) of `key` sits on a drive: the segment file and the
// offset of the key's bytes inside the record. Empty when no segment holds it.
std::pair<std::string, uint64_t> PackedRecord(const std::string& drive, const std::string& key) {
  const fs::path dir = fs::path(drive) / ".openlake.sys" / "pack";
  // The JournalEntry's key field: tag 4, length-delimited.
  const std::string needle = std::string(1, '\x22') + static_cast<char>(key.size()) + key;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    const std::string bytes(std::istreambuf_iterator<char>(in), {});
    const size_t at = bytes.find(needle);
    if (at != std::string::npos) return {e.path().string(), at + 2};
  }
  return {"", 0};
}

void FlipByte(const std::string& path, uint64_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  REQUIRE(f.good());
  f.seekg(static_cast<std::streamoff>(at));
  char c = 0;
  f.read(&c, 1);
  REQUIRE(f.good());
  c = static_cast<char>(c ^ 0x01);
  f.seekp(static_cast<std::streamoff>(at));
  f.write(&c, 1);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_CASE("a missing drive: reads and writes go on, heal rebuilds it", "[store][fault]") {
  StoreFixture f(4, 4, 2, 64 << 10);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  const Corpus c(10);
  c.Put(f, "bkt");
  f.Close();

  fs::remove_all(f.drive_path(1));  // gone, folder and all
  REQUIRE(f.Open().ok());
  CHECK(!f.st().Drives()[1].online);
  c.Verify(f, "bkt");
  // Writes reach their quorum (k + 1 = 3 of 4) without it.
  const std::string late = RandomBytes(300000, 99);
  REQUIRE(f.Put("bkt", "late", late).ok());
  CHECK(*f.Get("bkt", "late") == late);
  // Listing is whole.
  store::ListOptions lo;
  auto l = f.List("bkt", lo);
  REQUIRE(l.ok());
  CHECK(l->objects.size() == c.objects.size() + 1);
  f.Close();

  // An empty folder in its place is a replacement: heal writes everything back onto it.
  fs::create_directories(f.drive_path(1));
  REQUIRE(f.Open().ok());
  CHECK(f.st().Drives()[1].state == "replaced");
  auto h = f.Heal();
  REQUIRE(h.ok());
  CHECK(h->objects_healed == c.objects.size() + 1);
  CHECK(h->objects_failed == 0);
  CHECK(h->buckets_healed >= 1);
  CHECK(fs::exists(fs::path(f.drive_path(1)) / "bkt" / "dir" / "many" / "%meta"));

  // The rebuilt drive now carries its share: with two other drives gone (RS(2+2) keeps any
  // two), every read needs what heal wrote on drive 1.
  for (int lost : {0, 2}) {
    f.faults(lost).fail_all = true;
  }
  c.Verify(f, "bkt");
  CHECK(*f.Get("bkt", "late") == late);
  // With parity equal to data the write quorum is k + 1 (MinIO's rule): two drives do not take
  // a write, since losing either of them would lose it after it was acknowledged.
  const std::string two = RandomBytes(150000, 98);
  CHECK_FALSE(f.Put("bkt", "two", two).ok());
  CHECK_FALSE(f.Get("bkt", "two").ok());
  f.faults(0).fail_all = false;
  f.faults(2).fail_all = false;
  for (int lost : {2, 3}) {
    f.faults(lost).fail_all = true;
  }
  c.Verify(f, "bkt");
}

TEST_CASE("a drive that lost a bucket's folder under a running store: heal recreates it",
          "[store][fault]") {
  // What a drive emptied again just after a heal pass recreated its bucket folders looks like:
  // the object heal itself (here HealObject, with no bucket pass before it) must bring the
  // folder back from the bucket's record and write the object's shard, not fail every pass.
  StoreFixture f(4, 4, 2, 64 << 10);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  const std::string v = RandomBytes(200000, 21);
  REQUIRE(f.Put("bkt", "dir/obj", v).ok());
  fs::remove_all(fs::path(f.drive_path(2)) / "bkt");
  auto h = f.Run([&] { return f.st().HealObject("bkt", "dir/obj"); });
  REQUIRE(h.ok());
  CHECK(h->objects_healed == 1);
  CHECK(fs::exists(fs::path(f.drive_path(2)) / "bkt" / "dir" / "obj" / "%meta"));
  // Drive 2's shard is needed now: two others gone, RS(2+2) reads from the remaining two.
  f.faults(0).fail_all = true;
  f.faults(1).fail_all = true;
  CHECK(*f.Get("bkt", "dir/obj") == v);
}

TEST_CASE("drives returning errors: right bytes or a clear error, the old object kept",
          "[store][fault]") {
  // RS(4+2): reads need 4 drives, writes 5 (k + 1).
  StoreFixture f(6, 6, 2, 64 << 10);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  const Corpus c(20);
  c.Put(f, "bkt");

  SECTION("one drive failing every call") {
    f.faults(3).fail_all = true;
    c.Verify(f, "bkt");
    const std::string v = RandomBytes(200000, 5);
    REQUIRE(f.Put("bkt", "dir/many", v).ok());  // 5 of 6 is the quorum
    CHECK(*f.Get("bkt", "dir/many") == v);
    f.faults(3).fail_all = false;
    // Back: the drive holds the old version; the quorum's newer one wins, and heal fixes it.
    CHECK(*f.Get("bkt", "dir/many") == v);
    auto h = f.Run([&] { return f.st().HealObject("bkt", "dir/many"); });
    REQUIRE(h.ok());
    CHECK(h->objects_healed == 1);
    f.faults(0).fail_all = true;
    f.faults(1).fail_all = true;
    CHECK(*f.Get("bkt", "dir/many") == v);  // read from drives 2-5: 3 was rebuilt
  }

  SECTION("two drives failing: writes refused, reads served") {
    f.faults(0).fail_all = true;
    f.faults(2).fail_all = true;
    c.Verify(f, "bkt");  // k = 4 drives are enough to read
    auto put = f.Put("bkt", "dir/many", RandomBytes(200000, 6));
    REQUIRE(!put.ok());
    CHECK(store::ErrorKindOf(put.status()) == store::ErrorKind::kInsufficientDrives);
    f.faults(0).fail_all = false;
    f.faults(2).fail_all = false;
    c.Verify(f, "bkt");  // the old object, whole
  }

  SECTION("data writes failing on two drives: the write fails, nothing changes") {
    f.faults(1).fail_writes = true;
    f.faults(2).fail_writes = true;
    auto put = f.Put("bkt", "z/last", RandomBytes(300000, 7));
    REQUIRE(!put.ok());
    f.faults(1).fail_writes = false;
    f.faults(2).fail_writes = false;
    c.Verify(f, "bkt");
  }

  SECTION("three drives failing: a clear error, never bytes") {
    for (int d : {0, 1, 2}) f.faults(d).fail_all = true;
    for (const auto& [k, v] : c.objects) {
      auto got = f.Get("bkt", k);
      REQUIRE(!got.ok());
      CHECK(store::ErrorKindOf(got.status()) == store::ErrorKind::kInsufficientDrives);
    }
  }
}

TEST_CASE("flipped bits: reads return the right bytes, and heal repairs the shard",
          "[store][fault]") {
  StoreFixture f(4, 4, 2, 64 << 10);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  const Corpus c(30);
  c.Put(f, "bkt");

  SECTION("bits flipped on the way from one drive") {
    // Enough objects that drive 0 surely holds a data shard of some (reads skip parity).
    std::vector<std::string> more;
    for (int i = 0; i < 24; ++i) {
      more.push_back(RandomBytes(40000, 300 + i));
      REQUIRE(f.Put("bkt", "more/" + std::to_string(i), more.back()).ok());
    }
    f.faults(0).flip_reads = 1 << 20;
    c.Verify(f, "bkt");
    for (int i = 0; i < 24; ++i) CHECK(*f.Get("bkt", "more/" + std::to_string(i)) == more[i]);
    CHECK(f.st().heal_backlog() > 0);
    // The damage is counted against drive 0 alone (metrics, `cluster topology --probe`).
    const auto drives = f.st().Drives();
    CHECK(drives[0].errors > 0);
    for (size_t d = 1; d < drives.size(); ++d) CHECK(drives[d].errors == 0);
  }

  SECTION("flipped bytes in stored shards, then heal") {
    // Every drive's shard file of the big object damaged, each in another block: every stripe
    // keeps three good shards, and whichever hold data, reads meet damage.
    std::vector<std::string> parts;
    for (int d = 0; d < 4; ++d) {
      for (const auto& p : ObjectFiles(f.drive_path(d), "bkt", "dir/many", true)) {
        parts.push_back(p);
      }
    }
    REQUIRE(parts.size() == 4);
    std::vector<std::string> before;
    for (size_t i = 0; i < parts.size(); ++i) {
      before.push_back(ReadFile(parts[i]));
      REQUIRE(before[i].size() > 4 * (64 << 10));
      FlipByte(parts[i], i * (64 << 10) + 100);
    }
    CHECK(*f.Get("bkt", "dir/many") == c.objects[2].second);
    CHECK(f.st().heal_backlog() == 1);
    auto h = f.Drain();
    REQUIRE(h.ok());
    CHECK(h->objects_healed == 1);
    CHECK(f.st().heal_backlog() == 0);
    // Four damaged blocks of 64 KiB / k rebuilt, one per drive: the bytes written say so.
    CHECK(h->shards_written == 4);
    CHECK(h->bytes_written >= 4 * (64 << 10) / 2);
    for (size_t i = 0; i < parts.size(); ++i) CHECK(ReadFile(parts[i]) == before[i]);  // whole

    // Two damaged shards of the same stripe are still within parity ...
    FlipByte(parts[0], 100);
    FlipByte(parts[3], 100);
    CHECK(*f.Get("bkt", "dir/many") == c.objects[2].second);
    // ... three are not: a clear error, never wrong bytes.
    FlipByte(parts[1], 100);
    auto bad = f.Get("bkt", "dir/many");
    REQUIRE(!bad.ok());
    CHECK(store::ErrorKindOf(bad.status()) == store::ErrorKind::kCorrupt);
  }

  SECTION("damaged metadata on one drive, inline data included") {
    // The big object's metadata file, and the small one's record in the drive's pack.
    auto metas = ObjectFiles(f.drive_path(2), "bkt", "dir/many", false);
    REQUIRE(metas.size() == 1);
    FlipByte(metas[0], ReadFile(metas[0]).size() - 3);
    CHECK(ObjectFiles(f.drive_path(2), "bkt", "small", false).empty());
    const auto [segment, at] = PackedRecord(f.drive_path(2), "small");
    REQUIRE(!segment.empty());
    FlipByte(segment, at + 1);
    c.Verify(f, "bkt");
    auto h = f.Heal("bkt");
    REQUIRE(h.ok());
    CHECK(h->objects_healed == 2);
    f.faults(0).fail_all = true;
    f.faults(1).fail_all = true;
    c.Verify(f, "bkt");  // drives 2 and 3 alone: the repaired metadata serves
  }
}

TEST_CASE("torn metadata writes leave the old object or the new one", "[store][fault]") {
  StoreFixture f(6, 6, 2, 64 << 10);  // RS(4+2): the write quorum is 5 of 6
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  const Corpus c(40);
  c.Put(f, "bkt");
  const std::string v2 = RandomBytes(500000, 41);

  SECTION("one drive tears: the write still reaches its quorum") {
    f.faults(1).tear_next_meta = true;
    REQUIRE(f.Put("bkt", "dir/many", v2).ok());
    CHECK(*f.Get("bkt", "dir/many") == v2);
    f.Close();  // and after a restart
    REQUIRE(f.Open().ok());
    CHECK(*f.Get("bkt", "dir/many") == v2);
    REQUIRE(f.Heal("bkt").ok());
    f.faults(0).fail_all = true;
    f.faults(2).fail_all = true;
    CHECK(*f.Get("bkt", "dir/many") == v2);  // drive 1's metadata was rewritten by heal
  }

  SECTION("two drives tear: the write fails and the old object stays") {
    f.faults(0).tear_next_meta = true;
    f.faults(3).tear_next_meta = true;
    auto put = f.Put("bkt", "dir/many", v2);
    REQUIRE(!put.ok());
    c.Verify(f, "bkt");
    f.Close();
    REQUIRE(f.Open().ok());
    c.Verify(f, "bkt");
  }

  SECTION("a torn inline object") {
    f.faults(2).tear_next_meta = true;
    const std::string small2 = RandomBytes(4000, 42);
    REQUIRE(f.Put("bkt", "small", small2).ok());
    CHECK(*f.Get("bkt", "small") == small2);
  }
}

TEST_CASE("a drive taken offline while running comes back when it works again", "[store][fault]") {
  StoreFixture f(4, 4, 2, 64 << 10);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  const Corpus c(10);
  c.Put(f, "bkt");
  // Drive 1's copy of an object is damaged, and the drive has turned read-only: the heal that
  // would rewrite it cannot, and takes the drive offline.
  const auto parts = ObjectFiles(f.drive_path(1), "bkt", "dir/many", true);
  REQUIRE(parts.size() == 1);
  FlipByte(parts[0], 100);
  f.faults(1).no_new_dirs = true;
  auto h = f.Heal();
  INFO(h.status());
  REQUIRE_FALSE(f.st().Drives()[1].online);
  CHECK(f.st().Drives()[1].state == "error");
  // Objects written meanwhile miss it.
  const std::string late = RandomBytes(200000, 77);
  REQUIRE(f.Put("bkt", "late", late).ok());
  // Still read-only: the probe leaves it offline.
  CHECK(*f.st().RestoreDrives() == 0);
  CHECK_FALSE(f.st().Drives()[1].online);
  // It works again (the remount undone): the next check returns it, and a heal writes what it
  // missed and repairs what was damaged.
  f.faults(1).no_new_dirs = false;
  CHECK(*f.st().RestoreDrives() == 1);
  CHECK(f.st().Drives()[1].online);
  CHECK(f.st().Drives()[1].state == "ok");
  h = f.Heal();
  REQUIRE(h.ok());
  CHECK(h->objects_failed == 0);
  CHECK(h->objects_healed >= 2);
  CHECK(ReadFile(parts[0]).size() > 0);
  // With two other drives gone, reads need what drive 1 now holds.
  f.faults(0).fail_all = true;
  f.faults(2).fail_all = true;
  CHECK(*f.Get("bkt", "late") == late);
  c.Verify(f, "bkt");
}

}  // namespace
}  // namespace openlake

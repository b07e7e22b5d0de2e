// A drive's pack of small objects' records: what is put, removed and dropped reads back the
// same after a reload; walks page through keys as the folder walk does; a torn tail is cut and
// never read back; compaction keeps every live record, frees dead ones and never lets a removed
// key come back; a pack whose folder was removed under it forgets what it held.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "store/meta.h"
#include "store/names.h"
#include "store/pack.h"
#include "store/store_test_util.h"

namespace openlake::testing {
namespace {

namespace fs = std::filesystem;
using store::MetaPack;

std::string PackDir(const TempDir& d) { return d.path() + "/.openlake.sys/pack"; }

std::vector<fs::path> Segments(const TempDir& d) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(PackDir(d))) out.push_back(e.path());
  std::sort(out.begin(), out.end(), [](const fs::path& a, const fs::path& b) {
    return std::stoull(a.filename().string()) < std::stoull(b.filename().string());
  });
  return out;
}

std::shared_ptr<MetaPack> Load(const TempDir& d, MetaPack::Options o = {}) {
  fs::create_directories(d.path() + "/.openlake.sys");  // a formatted drive's
  auto p = MetaPack::For(d.path(), o);
  INFO(p.status());
  REQUIRE(p.ok());
  return *std::move(p);
}

std::string Read(MetaPack& p, const std::string& bucket, const std::string& key) {
  auto r = p.Read(store::MetaPath(bucket, key));
  if (absl::IsNotFound(r.status())) return "<none>";
  REQUIRE(r.ok());
  return *r;
}

std::vector<std::string> Names(const std::vector<store::WalkItem>& items) {
  std::vector<std::string> out;
  for (const auto& i : items) out.push_back(i.is_prefix ? i.key + "*" : i.key);
  return out;
}

store::WalkRequest Req(std::string prefix, std::string delimiter = "", std::string marker = "",
                       uint32_t limit = 1000) {
  store::WalkRequest r;
  r.bucket = "bkt";
  r.prefix = std::move(prefix);
  r.delimiter = std::move(delimiter);
  r.marker = std::move(marker);
  r.limit = limit;
  return r;
}

TEST_CASE("pack: put, remove and drop read back the same after a reload", "[store][pack]") {
  TempDir d;
  {
    auto p = Load(d);
    // One instance per folder in the process, however its path is spelled.
    CHECK(Load(d).get() == p.get());
    CHECK(MetaPack::For(d.path() + "/.openlake.sys/..").value().get() == p.get());
    REQUIRE(p->Put("bkt", "a", "A1", false).ok());
    REQUIRE(p->Put("bkt", "b", "B1", false).ok());
    REQUIRE(p->Put("bkt", "a", "A2", true).ok());
    REQUIRE(p->Put("other", "x", "X1", false).ok());
    REQUIRE(p->Put("gone", "y", "Y1", false).ok());
    REQUIRE(p->Remove("bkt", "b", false).ok());
    REQUIRE(p->Remove("bkt", "never", false).ok());  // nothing to remove: fine
    REQUIRE(p->DropBucket("gone", false).ok());
    REQUIRE(p->Put("gone", "z", "Z1", false).ok());  // the bucket made again
    CHECK(Read(*p, "bkt", "a") == "A2");
    CHECK(Read(*p, "bkt", "b") == "<none>");
    CHECK(p->Holds(store::MetaPath("other", "x")));
    CHECK_FALSE(p->Holds(store::MetaPath("bkt", "b")));
    CHECK(p->stats().objects == 3);
  }
  auto p = Load(d);  // the last holder went: read from the segments again
  CHECK(Read(*p, "bkt", "a") == "A2");
  CHECK(Read(*p, "bkt", "b") == "<none>");
  CHECK(Read(*p, "other", "x") == "X1");
  CHECK(Read(*p, "gone", "y") == "<none>");
  CHECK(Read(*p, "gone", "z") == "Z1");
  const auto st = p->stats();
  CHECK(st.objects == 3);
  CHECK(st.dead_bytes > 0);
}

TEST_CASE("pack: walks page through keys and common prefixes in key order", "[store][pack]") {
  TempDir d;
  auto p = Load(d);
  for (const std::string k : {"a", "a-b", "a/1", "a/2", "a/x/3", "b", "b/1", "c%d", "z"}) {
    REQUIRE(p->Put("bkt", k, "m", false).ok());
  }
  REQUIRE(p->Put("bkt2", "a0", "m", false).ok());  // another bucket, next in index order
  CHECK(Names(p->Walk(Req(""))) ==
        std::vector<std::string>{"a", "a-b", "a/1", "a/2", "a/x/3", "b", "b/1", "c%d", "z"});
  CHECK(Names(p->Walk(Req("", "/"))) ==
        std::vector<std::string>{"a", "a-b", "a/*", "b", "b/*", "c%d", "z"});
  CHECK(Names(p->Walk(Req("a/", "/"))) == std::vector<std::string>{"a/1", "a/2", "a/x/*"});
  CHECK(Names(p->Walk(Req("a", "", "a/1"))) == std::vector<std::string>{"a/2", "a/x/3"});
  // A marker inside a common prefix: the prefix was returned before.
  CHECK(Names(p->Walk(Req("", "/", "a/1"))) ==
        std::vector<std::string>{"b", "b/*", "c%d", "z"});
  CHECK(Names(p->Walk(Req("", "/", "", 3))) == std::vector<std::string>{"a", "a-b", "a/*"});
  CHECK(Names(p->Walk(Req("q"))).empty());
  CHECK(Names(p->Walk(Req("", "", "zz"))).empty());
}

TEST_CASE("pack: a torn tail is never read back, nor appended over", "[store][pack]") {
  TempDir d;
  std::string whole;
  {
    auto p = Load(d);
    REQUIRE(p->Put("bkt", "a", "A1", false).ok());
    REQUIRE(p->Put("bkt", "b", std::string(5000, 'b'), false).ok());
  }
  const auto segs = Segments(d);
  REQUIRE(segs.size() == 1);
  {
    std::ifstream in(segs[0], std::ios::binary);
    whole.assign(std::istreambuf_iterator<char>(in), {});
  }
  // The second record torn, followed by its bytes whole (what a file system that kept a later
  // page and not an earlier one leaves): neither is read, and no record is appended over them,
  // which would let the whole one be read back at a later load.
  const size_t first = store::RecordSizeAt(whole);
  REQUIRE(first > 0);
  std::string torn = whole.substr(0, first) + whole.substr(first, 100) +
                     whole.substr(first);  // torn bytes, then the whole record again
  {
    std::ofstream out(segs[0], std::ios::binary | std::ios::trunc);
    out << torn;
  }
  {
    auto p = Load(d);
    CHECK(Read(*p, "bkt", "a") == "A1");
    CHECK(Read(*p, "bkt", "b") == "<none>");
    CHECK(fs::file_size(segs[0]) == torn.size());  // nothing removed
    REQUIRE(p->Put("bkt", "c", "C1", false).ok());
    CHECK(Segments(d).size() == 2);  // a new segment took it
  }
  CHECK(fs::file_size(segs[0]) == torn.size());
  auto p = Load(d);
  CHECK(Read(*p, "bkt", "a") == "A1");
  CHECK(Read(*p, "bkt", "b") == "<none>");
  CHECK(Read(*p, "bkt", "c") == "C1");
}

TEST_CASE("pack: a damaged record is skipped, the records after it kept", "[store][pack]") {
  TempDir d;
  {
    auto p = Load(d);
    REQUIRE(p->Put("bkt", "a", "A1", false).ok());
    REQUIRE(p->Put("bkt", "b", "B-damaged", false).ok());
    REQUIRE(p->Put("bkt", "c", "C1", false).ok());
  }
  const auto segs = Segments(d);
  REQUIRE(segs.size() == 1);
  std::string bytes;
  {
    std::ifstream in(segs[0], std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t at = bytes.find("B-damaged");
  REQUIRE(at != std::string::npos);
  bytes[at] ^= 0x04;
  {
    std::ofstream out(segs[0], std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  auto p = Load(d);
  CHECK(Read(*p, "bkt", "a") == "A1");
  CHECK(Read(*p, "bkt", "b") == "<none>");
  CHECK(Read(*p, "bkt", "c") == "C1");
  REQUIRE(p->Put("bkt", "d", "D1", false).ok());
  CHECK(Segments(d).size() == 1);  // the segment parses to its end: appended to as before
}

TEST_CASE("pack: compaction keeps live records and frees dead ones", "[store][pack]") {
  TempDir d;
  MetaPack::Options o;
  o.segment_bytes = 16 << 10;
  o.min_garbage = 1;
  o.background = false;
  const std::string big(1000, 'v');
  {
    auto p = Load(d, o);
    // Keys removed early, in the oldest segments, with their tombstones later on.
    for (int i = 0; i < 10; ++i) REQUIRE(p->Put("bkt", "rm/" + std::to_string(i), big, false).ok());
    for (int i = 0; i < 10; ++i) REQUIRE(p->Remove("bkt", "rm/" + std::to_string(i), false).ok());
    // Overwritten many times: most of the pack is dead.
    for (int round = 0; round < 8; ++round) {
      for (int i = 0; i < 20; ++i) {
        REQUIRE(p->Put("bkt", "k/" + std::to_string(i), big + std::to_string(round), false).ok());
      }
    }
    REQUIRE(p->Put("bkt", "keep", "K", false).ok());
    const auto before = p->stats();
    CHECK(before.segments > 5);
    CHECK(before.dead_bytes > before.live_bytes);
    REQUIRE(p->Compact().ok());
    const auto after = p->stats();
    CHECK(after.compactions > 0);
    CHECK(after.segments < before.segments);
    CHECK(after.dead_bytes <= after.live_bytes);
    CHECK(after.live_bytes == before.live_bytes);
    CHECK(Segments(d).size() == after.segments);
    for (int i = 0; i < 20; ++i) CHECK(Read(*p, "bkt", "k/" + std::to_string(i)) == big + "7");
    CHECK(Read(*p, "bkt", "keep") == "K");
    // Forced: every segment but the newest, whatever the garbage.
    REQUIRE(p->Compact(/*force=*/true).ok());
    CHECK(p->stats().live_bytes == before.live_bytes);
  }
  auto p = Load(d, o);
  for (int i = 0; i < 20; ++i) CHECK(Read(*p, "bkt", "k/" + std::to_string(i)) == big + "7");
  for (int i = 0; i < 10; ++i) CHECK(Read(*p, "bkt", "rm/" + std::to_string(i)) == "<none>");
  CHECK(Read(*p, "bkt", "keep") == "K");
  CHECK(p->stats().objects == 21);
}

TEST_CASE("pack: its folder removed under it, it forgets and starts over", "[store][pack]") {
  TempDir d;
  auto p = Load(d);
  REQUIRE(p->Put("bkt", "a", "A1", false).ok());
  fs::remove_all(PackDir(d));
  CHECK(Read(*p, "bkt", "a") == "<none>");
  CHECK(p->stats().objects == 0);
  REQUIRE(p->Put("bkt", "b", "B1", true).ok());
  CHECK(Read(*p, "bkt", "b") == "B1");
  CHECK(Segments(d).size() == 1);
}

TEST_CASE("pack: a reset reads the folder again; new segments skip numbers taken",
          "[store][pack]") {
  TempDir d;
  MetaPack::Options o;
  o.segment_bytes = 1;  // every record opens a segment
  o.background = false;
  auto p = Load(d, o);
  REQUIRE(p->Put("bkt", "a", "A1", false).ok());
  // Only the drive's identity was lost: the folder and its segments are still there.
  p->Reset();
  CHECK(Read(*p, "bkt", "a") == "A1");
  // A file the index does not know holds the next number.
  { std::ofstream(PackDir(d) + "/2") << "not ours"; }
  REQUIRE(p->Put("bkt", "b", "B1", false).ok());
  CHECK(Read(*p, "bkt", "b") == "B1");
  CHECK(fs::exists(PackDir(d) + "/3"));
}

}  // namespace
}  // namespace openlake::testing

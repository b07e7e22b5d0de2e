// The KV pool's disk tier end to end: a real `openlaked` with [kv_disk], client processes, a
// working set larger than the slab, kill -9 and SIGTERM restarts, a path taken away.
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <thread>

#include <catch2/catch.hpp>

#include "kv_daemon.h"

using namespace openlake::kv;
using openlake::testing::Connect;
using openlake::testing::Daemon;
using openlake::testing::Fill;
using openlake::testing::Fp;
using openlake::testing::FreePort;
using openlake::testing::InChild;
using openlake::testing::KeyOf;
using openlake::testing::KvConfig;
using openlake::testing::TempDir;
using openlake::testing::WaitFor;

namespace {

constexpr uint32_t kBlock = 256 << 10;
constexpr int kBatch = 16;

// A 32 MiB slab over a 256 MiB disk tier in `dir`/tier.
std::string TierConfig(const TempDir& dir, uint16_t port, const std::string& disk_extra = "") {
  return KvConfig(dir, port, 1.0 / 32, 4) + "[kv_disk]\npaths = [\"" + dir.File("tier") +
         "\"]\ncapacity_gb = 0.25\n" + disk_extra;
}

// A folder of its own for a second daemon's output (its config names the same tier).
std::string Sub(const TempDir& dir, const std::string& name) {
  std::filesystem::create_directories(dir.File(name));
  return dir.File(name);
}

PoolStats StatsOf(const Daemon& d) {
  auto st = Connect(d.tcp())->Stats();
  REQUIRE(st.ok());
  return *st;
}

// Writes blocks [first, first+n) of writer 1 in batches. With `paced`, waits after each batch
// until the disk tier has caught up (a writer that respects the tier's rate loses nothing).
int WriteBlocks(const std::string& addr, int first, int n, bool paced) {
  auto c = Client::Connect(addr);
  if (!c.ok() || !(*c)->has_slab()) return 10;
  auto ns = (*c)->OpenNamespace("tier", Fp(), kBlock);
  if (!ns.ok()) return 11;
  std::vector<std::vector<uint8_t>> in(kBatch, std::vector<uint8_t>(kBlock));
  for (int b = first; b < first + n; b += kBatch) {
    std::vector<BlockKey> keys;
    std::vector<const void*> src;
    for (int i = 0; i < kBatch && b + i < first + n; ++i) {
      Fill(in[i], 1, b + i);
      keys.push_back(KeyOf(1, b + i));
      src.push_back(in[i].data());
    }
    auto put = (*c)->Put(*ns, keys, src);
    if (!put.ok() || put->stored != keys.size()) return 12;
    if (!paced) continue;
    const bool caught_up = WaitFor(
        [&] {
          auto st = (*c)->Stats();
          return st.ok() && st->dirty_blocks <= 32;
        },
        30);
    if (!caught_up) return 13;
  }
  return 0;
}

struct ReadBack {
  int hits = 0;
  int wrong = 0;
  int errors = 0;
};

// Reads `blocks` (writer 1's indexes), `per_get` to a Get: counts those served, and any served
// wrong. A Get's answer is its leading hits: a miss ends what that Get serves.
ReadBack ReadBlocks(const std::string& addr, const std::vector<int>& blocks, size_t per_get) {
  ReadBack r;
  auto c = Client::Connect(addr);
  REQUIRE(c.ok());
  auto ns = (*c)->OpenNamespace("tier", Fp(), kBlock);
  REQUIRE(ns.ok());
  std::vector<std::vector<uint8_t>> got(per_get, std::vector<uint8_t>(kBlock));
  std::vector<uint8_t> want(kBlock);
  for (size_t b = 0; b < blocks.size(); b += per_get) {
    std::vector<BlockKey> k;
    std::vector<void*> dst;
    for (size_t i = 0; i < per_get && b + i < blocks.size(); ++i) {
      k.push_back(KeyOf(1, blocks[b + i]));
      dst.push_back(got[i].data());
    }
    auto g = (*c)->Get(*ns, k, dst);
    if (!g.ok()) {
      ++r.errors;
      continue;
    }
    for (size_t i = 0; i < g->loaded; ++i) {
      Fill(want, 1, blocks[b + i]);
      if (got[i] == want) {
        ++r.hits;
      } else {
        ++r.wrong;
      }
    }
  }
  return r;
}

// Reads blocks [first, first+n) one at a time.
ReadBack ReadBlocks(const std::string& addr, int first, int n) {
  std::vector<int> blocks(n);
  for (int i = 0; i < n; ++i) blocks[i] = first + i;
  return ReadBlocks(addr, blocks, 1);
}

// Reads blocks [0, n) in a shuffled order, kBatch per Get: most batches mix blocks the slab
// still holds with blocks only the disk has.
ReadBack ReadShuffled(const std::string& addr, int n) {
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(11));
  return ReadBlocks(addr, order, kBatch);
}

}  // namespace

TEST_CASE("a working set 4x the slab reads back byte-exact, most of it from disk",
          "[integration][disk]") {
  TempDir dir;
  Daemon d(TierConfig(dir, FreePort()));
  REQUIRE(d.Start(dir.path()));
  INFO(d.Output());
  constexpr int kBlocks = 512;  // 128 MiB through a 32 MiB slab
  REQUIRE(InChild([&] { return WriteBlocks(d.tcp(), 0, kBlocks, /*paced=*/true); }) == 0);
  PoolStats st = StatsOf(d);
  CHECK(st.spill_drops == 0);
  CHECK(st.disk_blocks >= kBlocks * 3 / 4);
  // Another process reads every block; those that left the slab come back from disk.
  CHECK(InChild([&] {
          ReadBack r = ReadBlocks(d.tcp(), 0, kBlocks);
          return r.hits == kBlocks && r.wrong == 0 && r.errors == 0 ? 0 : 1;
        }) == 0);
  st = StatsOf(d);
  CHECK(st.disk_hits >= kBlocks / 2);
  CHECK(st.promoted_blocks >= kBlocks / 2);
  CHECK(st.disk_checksum_errors == 0);
  CHECK(st.disk_errors == 0);
  CHECK(st.pinned_slots == 0);
  // Exists sees both tiers.
  auto c = Connect(d.tcp());
  auto ns = c->OpenNamespace("tier", Fp(), kBlock);
  REQUIRE(ns.ok());
  std::vector<BlockKey> keys;
  for (int b = 0; b < kBlocks; ++b) keys.push_back(KeyOf(1, b));
  auto ex = c->Exists(*ns, keys);
  REQUIRE(ex.ok());
  CHECK(ex->prefix == kBlocks);
  // Reset clears both tiers.
  REQUIRE(c->Reset(*ns).ok());
  ex = c->Exists(*ns, keys);
  REQUIRE(ex.ok());
  CHECK(ex->prefix == 0);
  CHECK(d.Stop() == 0);
}

TEST_CASE("batched Gets that mix slab-resident and disk-resident blocks hit every block",
          "[integration][disk]") {
  // A Lookup reads the disk's blocks back into slots it reserves, which evicts the slab's
  // oldest blocks: those between the read-back ones in the same Lookup must stay.
  TempDir dir;
  Daemon d(TierConfig(dir, FreePort()));
  REQUIRE(d.Start(dir.path()));
  INFO(d.Output());
  constexpr int kBlocks = 512;
  REQUIRE(InChild([&] { return WriteBlocks(d.tcp(), 0, kBlocks, /*paced=*/true); }) == 0);
  CHECK(InChild([&] {
          ReadBack r = ReadShuffled(d.tcp(), kBlocks);
          return r.hits == kBlocks && r.wrong == 0 && r.errors == 0 ? 0 : 1;
        }) == 0);
  PoolStats st = StatsOf(d);
  CHECK(st.disk_hits >= kBlocks / 2);
  CHECK(st.pinned_slots == 0);
  CHECK(st.disk_checksum_errors == 0);
  CHECK(d.Stop() == 0);
}

TEST_CASE("kill -9 while spilling: after a restart every key is byte-exact or a miss",
          "[integration][disk][crash]") {
  TempDir dir;
  const uint16_t port = FreePort();
  {
    Daemon d(TierConfig(dir, port));
    REQUIRE(d.Start(dir.path()));
    // Unpaced: the slab fills and spills as fast as the writer goes; kill in the middle.
    const pid_t writer = fork();
    if (writer == 0) _exit(WriteBlocks(d.tcp(), 0, 768, /*paced=*/false));
    // Mid-spill: some blocks are on disk, more are being written.
    REQUIRE(WaitFor([&] { return StatsOf(d).spilled_blocks >= 96; }, 30));
    kill(d.pid(), SIGKILL);
    waitpid(writer, nullptr, 0);
  }
  Daemon again(TierConfig(dir, port));
  REQUIRE(again.Start(Sub(dir, "again")));
  INFO(again.Output());
  const PoolStats st = StatsOf(again);
  CHECK(st.recovered_blocks > 0);
  CHECK(InChild([&] {
          ReadBack r = ReadBlocks(again.tcp(), 0, 768);
          return r.wrong == 0 && r.errors == 0 && r.hits > 0 ? 0 : 1;
        }) == 0);
  CHECK(StatsOf(again).disk_checksum_errors == 0);
  CHECK(again.Stop() == 0);
}

TEST_CASE("SIGTERM writes the slab out; the restarted daemon serves it", "[integration][disk]") {
  TempDir dir;
  const uint16_t port = FreePort();
  // Spill off: nothing reaches the disk before the planned stop.
  const std::string cfg = TierConfig(dir, port, "spill = false\n");
  {
    Daemon d(cfg);
    REQUIRE(d.Start(dir.path()));
    REQUIRE(InChild([&] { return WriteBlocks(d.tcp(), 0, 64, /*paced=*/false); }) == 0);
    CHECK(StatsOf(d).disk_blocks == 0);
    CHECK(d.Stop() == 0);
    CHECK(d.Output().find("wrote 64 blocks from the slab before stopping") != std::string::npos);
  }
  Daemon again(cfg);
  REQUIRE(again.Start(Sub(dir, "again")));
  INFO(again.Output());
  CHECK(StatsOf(again).recovered_blocks == 64);
  CHECK(InChild([&] {
          ReadBack r = ReadBlocks(again.tcp(), 0, 64);
          return r.hits == 64 && r.wrong == 0 ? 0 : 1;
        }) == 0);
  const PoolStats st = StatsOf(again);
  CHECK(st.disk_hits == 64);
  // A namespace comes back with its fingerprint: another layout under its name is refused.
  auto c = Connect(again.tcp());
  CHECK(absl::IsFailedPrecondition(c->OpenNamespace("tier", Fp("float16"), kBlock).status()));
  CHECK(again.Stop() == 0);
}

TEST_CASE("a disk path deleted while serving goes offline; the RAM tier keeps serving",
          "[integration][disk][fault]") {
  TempDir dir;
  Daemon d(TierConfig(dir, FreePort()));
  REQUIRE(d.Start(dir.path()));
  REQUIRE(InChild([&] { return WriteBlocks(d.tcp(), 0, 64, /*paced=*/true); }) == 0);
  std::filesystem::remove_all(dir.File("tier"));
  REQUIRE(WaitFor([&] { return StatsOf(d).disk_paths_online == 0; }, 10));
  INFO(d.Output());
  CHECK(d.Output().find("is offline: kv-blocks.dat was deleted") != std::string::npos);
  // What the slab holds is still served, and new blocks go in and out as before.
  CHECK(InChild([&] {
          ReadBack r = ReadBlocks(d.tcp(), 0, 64);
          return r.wrong == 0 && r.hits == 64 ? 0 : 1;
        }) == 0);
  CHECK(InChild([&] { return WriteBlocks(d.tcp(), 1000, 32, /*paced=*/false); }) == 0);
  CHECK(InChild([&] {
          ReadBack r = ReadBlocks(d.tcp(), 1000, 32);
          return r.wrong == 0 && r.hits == 32 ? 0 : 1;
        }) == 0);
  CHECK(d.Stop() == 0);
}

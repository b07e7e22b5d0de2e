// The KV pool's disk tier: its index log (cut anywhere), spill and read back with checksums,
// recovery after a restart and after a torn log, prefix-aware eviction, Reset and Drop, a path
// that goes away, and the pool's side of spilling.
#include "kv/disk_tier.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <random>

#include <catch2/catch.hpp>

#include "io/test_util.h"
#include "kv/disk_log.h"
#include "kv/kv_test_util.h"
#include "kv/pool.h"
#include "kv/slab.h"

#include "openlake/checksum.h"
#include "openlake/io/buffer.h"

namespace kv = openlake::kv;
namespace disklog = openlake::kv::disklog;
using openlake::io::AlignedBuffer;
using openlake::kv::BlockKey;
using openlake::kv::DiskTier;
using openlake::testing::TempDir;

namespace {

constexpr uint32_t kNs = 3;

BlockKey Key(int i) { return BlockKey("blk-" + std::to_string(i)); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

// Blocks of random bytes, with their CRC-64.
struct Blocks {
  std::vector<AlignedBuffer> data;
  std::vector<uint64_t> crc;
  Blocks(int n, uint32_t bytes, uint32_t seed = 1) {
    std::mt19937_64 rng(seed);
    for (int i = 0; i < n; ++i) {
      AlignedBuffer b(bytes);
      auto* w = reinterpret_cast<uint64_t*>(b.data());
      for (uint32_t j = 0; j < bytes / 8; ++j) w[j] = rng();
      crc.push_back(openlake::Crc64(b.data(), bytes));
      data.push_back(std::move(b));
    }
  }
};

// A disk tier on one path of a temporary folder, served on a one-reactor runtime.
struct Env {
  TempDir dir;
  std::unique_ptr<openlake::io::Runtime> rt = openlake::testing::StartRuntime(1);
  std::unique_ptr<DiskTier> tier;
  uint32_t block;
  uint64_t capacity;
  uint32_t evict_sample = 16;
  uint64_t min_segment = 0;

  explicit Env(uint32_t block_bytes, uint64_t capacity_bytes = 64ull << 20, uint32_t sample = 16,
               uint64_t min_segment_bytes = 0)
      : block(block_bytes),
        capacity(capacity_bytes),
        evict_sample(sample),
        min_segment(min_segment_bytes) {
    Reopen(/*bind=*/true);
  }
  kv::DiskTierOptions Options() const {
    kv::DiskTierOptions o;
    o.paths = {dir.path() + "/tier"};
    o.capacity_bytes = capacity;
    o.evict_sample = evict_sample;
    o.min_segment_bytes = min_segment;
    return o;
  }
  // Closes the tier (if open) and opens it again; binds the recovered namespace to kNs.
  void Reopen(bool bind) {
    if (tier) {
      REQUIRE(openlake::testing::WaitFor([&] { return Busy() == 0; }));
      REQUIRE(rt->RunOn(0, [&] { tier.reset(); }).ok());
    }
    auto t = DiskTier::Open(Options());
    REQUIRE(t.ok());
    tier = *std::move(t);
    bool bound = false;
    for (size_t i = 0; i < tier->recovered().size(); ++i) {
      if (bind && tier->recovered()[i].name == "ns") {
        CHECK(tier->recovered()[i].fingerprint == openlake::testing::TestFingerprint());
        CHECK(tier->recovered()[i].block_bytes == block);
        tier->BindRecovered(i, kNs);
        bound = true;
      }
    }
    REQUIRE(tier->Attach(rt->reactor(0)).ok());
    if (bind && !bound) {
      REQUIRE(rt->RunOn(0, [&] {
                  tier->BindNamespace(kNs, "ns", openlake::testing::TestFingerprint(), block, 1000);
                }).ok());
    }
  }
  size_t Busy() {
    size_t b = 0;
    (void)rt->RunOn(0, [&] { b = tier->busy(); });
    return b;
  }
  // Spills blocks [first, first+n) of `b` with depth = index, in one batch; returns stored flags.
  std::vector<bool> Spill(Blocks& b, int first, int n) {
    std::atomic<bool> done{false};
    std::vector<bool> stored(n, false);
    REQUIRE(rt->RunOn(0, [&] {
                std::vector<DiskTier::SpillItem> items;
                for (int i = first; i < first + n; ++i) {
                  DiskTier::SpillItem it;
                  it.ns = kNs;
                  it.key = Key(i);
                  it.checksum = b.crc[i];
                  it.depth = static_cast<uint32_t>(i);
                  it.data = b.data[i].data();
                  it.length = block;
                  it.token = static_cast<uint64_t>(i - first);
                  items.push_back(it);
                }
                tier->Spill(std::move(items), [&](std::vector<std::pair<uint64_t, bool>> r) {
                  for (auto [tok, ok] : r) stored[tok] = ok;
                  done = true;
                });
              }).ok());
    REQUIRE(openlake::testing::WaitFor([&] { return done.load(); }, 20));
    return stored;
  }
  // Reads keys [first, first+n) back; results in order, bytes into `out`.
  std::vector<DiskTier::ReadResult> Read(int first, int n, std::vector<AlignedBuffer>* out) {
    out->clear();
    for (int i = 0; i < n; ++i) out->emplace_back(block);
    std::atomic<bool> done{false};
    std::vector<DiskTier::ReadResult> res;
    REQUIRE(rt->RunOn(0, [&] {
                std::vector<DiskTier::ReadItem> items;
                for (int i = 0; i < n; ++i) {
                  items.push_back(DiskTier::ReadItem{kNs, Key(first + i), (*out)[i].data(), block});
                }
                tier->Read(std::move(items), [&](std::vector<DiskTier::ReadResult> r) {
                  res = std::move(r);
                  done = true;
                });
              }).ok());
    REQUIRE(openlake::testing::WaitFor([&] { return done.load(); }, 20));
    return res;
  }
  bool Contains(int i) {
    bool c = false;
    REQUIRE(rt->RunOn(0, [&] { c = tier->Contains(kNs, Key(i)); }).ok());
    return c;
  }
  kv::DiskTierStats Stats() {
    kv::DiskTierStats s;
    REQUIRE(rt->RunOn(0, [&] { s = tier->Stats(); }).ok());
    return s;
  }
  ~Env() {
    if (tier) {
      openlake::testing::WaitFor([&] { return Busy() == 0; });
      (void)rt->RunOn(0, [&] { tier.reset(); });
    }
    rt->Stop();
  }
};

}  // namespace

TEST_CASE("disk log: a cut at any offset keeps exactly the frames before it", "[kv][disk]") {
  std::string log;
  std::vector<size_t> ends;
  disklog::AppendHeader(disklog::Header{disklog::kDiskLogVersion, 1 << 26, 1 << 22, 42}, &log);
  ends.push_back(log.size());
  disklog::AppendNamespace(disklog::NamespaceRec{1, 65536, 1000, "ns", "fp-bytes"}, &log);
  ends.push_back(log.size());
  for (int i = 0; i < 5; ++i) {
    disklog::AppendPut(
        disklog::PutRec{1, static_cast<uint32_t>(i), uint64_t(i) * 65536, uint64_t(i) * 7, Key(i)},
        &log);
    ends.push_back(log.size());
  }
  disklog::AppendFree(65536, &log);
  ends.push_back(log.size());
  disklog::AppendReset(1, &log);
  ends.push_back(log.size());

  disklog::Parsed whole = disklog::ParseLog(log);
  REQUIRE(whole.records.size() == ends.size());
  CHECK_FALSE(whole.torn);
  CHECK(whole.records[1].ns.name == "ns");
  CHECK(whole.records[1].ns.fingerprint == "fp-bytes");
  CHECK(whole.records[4].put.key == Key(2));
  CHECK(whole.records[4].put.checksum == 14);
  CHECK(whole.records[7].offset == 65536);
  CHECK(whole.records[8].reset_ns == 1);

  for (size_t cut = 0; cut <= log.size(); ++cut) {
    disklog::Parsed p = disklog::ParseLog(std::string_view(log).substr(0, cut));
    const size_t complete = std::upper_bound(ends.begin(), ends.end(), cut) - ends.begin();
    REQUIRE(p.records.size() == complete);
    REQUIRE(p.valid_bytes == (complete ? ends[complete - 1] : 0));
    REQUIRE(p.torn == (p.valid_bytes != cut));
  }
  // A flipped bit anywhere in a frame ends the log just before that frame.
  for (size_t pos = ends[5]; pos < ends[6]; ++pos) {
    std::string bad = log;
    bad[pos] ^= 0x10;
    REQUIRE(disklog::ParseLog(bad).records.size() == 6);
  }
}

TEST_CASE("disk tier: spilled blocks read back byte-exact, and survive a reopen", "[kv][disk]") {
  Env env(64 << 10);
  Blocks b(12, 64 << 10);
  auto stored = env.Spill(b, 0, 12);
  for (bool s : stored) REQUIRE(s);
  for (int i = 0; i < 12; ++i) REQUIRE(env.Contains(i));
  CHECK_FALSE(env.Contains(12));
  std::vector<AlignedBuffer> out;
  auto res = env.Read(0, 12, &out);
  for (int i = 0; i < 12; ++i) {
    REQUIRE(res[i].ok);
    CHECK(res[i].checksum == b.crc[i]);
    CHECK(res[i].depth == static_cast<uint32_t>(i));
    REQUIRE(std::memcmp(out[i].data(), b.data[i].data(), 64 << 10) == 0);
  }
  CHECK(env.Stats().spilled_blocks == 12);

  env.Reopen(/*bind=*/true);
  CHECK(env.Stats().recovered_blocks == 12);
  res = env.Read(0, 12, &out);
  for (int i = 0; i < 12; ++i) {
    REQUIRE(res[i].ok);
    REQUIRE(std::memcmp(out[i].data(), b.data[i].data(), 64 << 10) == 0);
  }

  SECTION("a block whose bytes changed on disk is a miss and an error, never wrong bytes") {
    const int fd = open((env.dir.path() + "/tier/kv-blocks.dat").c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    // Every 64 KiB slot of the file: one of them holds each block; scribble on all of them.
    for (uint64_t off = 0; off < (64ull << 20); off += 64 << 10) {
      REQUIRE(pwrite(fd, "garbage!", 8, static_cast<off_t>(off + 100)) == 8);
    }
    close(fd);
    res = env.Read(0, 12, &out);
    for (int i = 0; i < 12; ++i) CHECK_FALSE(res[i].ok);
    CHECK(env.Stats().checksum_errors == 12);
    for (int i = 0; i < 12; ++i) CHECK_FALSE(env.Contains(i));
  }
  SECTION("a namespace nobody binds after a restart is forgotten") {
    env.Reopen(/*bind=*/false);
    CHECK(env.Stats().blocks == 0);
  }
}

TEST_CASE("disk tier: segments hold the largest block the slab can hold", "[kv][disk]") {
  // 64 MiB would be cut to 4 MiB segments (16 of them); the slab's 16 MiB segments say blocks
  // may be that large, so the tier's segments stay 16 MiB and an 8 MiB block fits.
  const uint32_t block = 8 << 20;
  Env env(block, 64ull << 20, 16, /*min_segment_bytes=*/16ull << 20);
  Blocks b(4, block);
  auto stored = env.Spill(b, 0, 4);
  for (bool s : stored) CHECK(s);
  std::vector<AlignedBuffer> out;
  auto res = env.Read(0, 4, &out);
  for (int i = 0; i < 4; ++i) {
    REQUIRE(res[i].ok);
    CHECK(std::memcmp(out[i].data(), b.data[i].data(), block) == 0);
  }
  // A path that cannot hold one such segment is refused, with the reason.
  kv::DiskTierOptions o = env.Options();
  o.paths = {env.dir.path() + "/small"};
  o.min_segment_bytes = 128ull << 20;
  auto small = DiskTier::Open(o);
  REQUIRE_FALSE(small.ok());
  CHECK(small.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(small.status().message()).find("less than one segment") != std::string::npos);
}

TEST_CASE("disk tier: recovery from a log cut at every offset of its last records",
          "[kv][disk][recovery]") {
  Env env(64 << 10);
  Blocks b(6, 64 << 10);
  for (int i = 0; i < 6; ++i) REQUIRE(env.Spill(b, i, 1)[0]);
  REQUIRE(openlake::testing::WaitFor([&] { return env.Busy() == 0; }));
  REQUIRE(env.rt->RunOn(0, [&] { env.tier.reset(); }).ok());
  const std::string log_path = env.dir.path() + "/tier/kv-index.log";
  const std::string log = ReadFile(log_path);
  disklog::Parsed p = disklog::ParseLog(log);
  REQUIRE(p.records.size() == 1 + 1 + 6);  // header, namespace, six puts
  // Where each frame ends.
  std::vector<size_t> ends;
  for (size_t cut = 0, n = 0; cut <= log.size(); ++cut) {
    const size_t c = disklog::ParseLog(std::string_view(log).substr(0, cut)).records.size();
    if (c != n) {
      ends.push_back(cut);
      n = c;
    }
  }
  REQUIRE(ends.size() == 8);
  for (size_t cut = ends[4]; cut <= log.size(); ++cut) {
    WriteFile(log_path, log.substr(0, cut));
    auto t = DiskTier::Open(env.Options());
    REQUIRE(t.ok());
    REQUIRE((*t)->recovered().size() == 1);
    (*t)->BindRecovered(0, kNs);
    const int complete =
        static_cast<int>(std::upper_bound(ends.begin(), ends.end(), cut) - ends.begin()) -
        2;  // puts wholly before the cut
    for (int i = 0; i < 6; ++i) {
      REQUIRE((*t)->Contains(kNs, Key(i)) == (i < complete));
    }
  }
  // And the last cut, opened for real, serves its blocks byte-exact.
  WriteFile(log_path, log.substr(0, ends[6] + 5));
  env.Reopen(/*bind=*/true);
  std::vector<AlignedBuffer> out;
  auto res = env.Read(0, 6, &out);
  for (int i = 0; i < 6; ++i) {
    REQUIRE(res[i].ok == (i < 5));
    if (i < 5) REQUIRE(std::memcmp(out[i].data(), b.data[i].data(), 64 << 10) == 0);
  }
}

TEST_CASE("disk tier: a full tier evicts the coldest, a chain's tail before its head",
          "[kv][disk][evict]") {
  // 64 MiB in 4 MiB segments: 32 slots of 2 MiB. The eviction sample covers them all, so the
  // order is exact (by default it is the best of 16 the clock hand passes).
  Env env(2 << 20, 64ull << 20, 64);
  Blocks b(40, 2 << 20);
  auto first = env.Spill(b, 0, 32);  // one batch: equally old, depths 0..31
  for (bool s : first) REQUIRE(s);
  // No room: this batch finds no slot, and eviction frees the deepest ahead of the next ones.
  auto none = env.Spill(b, 32, 4);
  for (bool s : none) CHECK_FALSE(s);
  REQUIRE(openlake::testing::WaitFor([&] { return env.Busy() == 0; }));
  auto later = env.Spill(b, 32, 4);
  for (bool s : later) REQUIRE(s);
  for (int i = 0; i < 24; ++i) CHECK(env.Contains(i));
  for (int i = 24; i < 32; ++i) CHECK_FALSE(env.Contains(i));
  for (int i = 32; i < 36; ++i) CHECK(env.Contains(i));
  CHECK(env.Stats().evictions == 8);
}

TEST_CASE("disk tier: Reset and Drop clear blocks, also across a restart", "[kv][disk]") {
  Env env(64 << 10);
  Blocks b(8, 64 << 10);
  for (bool s : env.Spill(b, 0, 8)) REQUIRE(s);
  REQUIRE(env.rt->RunOn(0, [&] { env.tier->Drop(kNs, Key(3)); }).ok());
  CHECK_FALSE(env.Contains(3));
  env.Reopen(true);
  CHECK_FALSE(env.Contains(3));
  CHECK(env.Contains(4));
  REQUIRE(env.rt->RunOn(0, [&] { env.tier->Reset(kNs); }).ok());
  for (int i = 0; i < 8; ++i) CHECK_FALSE(env.Contains(i));
  env.Reopen(true);
  for (int i = 0; i < 8; ++i) CHECK_FALSE(env.Contains(i));
  CHECK(env.Stats().used_bytes == 0);
  // And the space is reusable.
  for (bool s : env.Spill(b, 0, 8)) REQUIRE(s);
}

TEST_CASE("disk tier: a path whose file is deleted goes offline; nothing wrong is served",
          "[kv][disk][fault]") {
  Env env(64 << 10);
  Blocks b(4, 64 << 10);
  for (bool s : env.Spill(b, 0, 4)) REQUIRE(s);
  std::filesystem::remove_all(env.dir.path() + "/tier");
  REQUIRE(env.rt->RunOn(0, [&] { env.tier->Tick(); }).ok());
  const auto st = env.Stats();
  CHECK(st.paths == 1);
  CHECK(st.paths_online == 0);
  CHECK(st.blocks == 0);
  for (int i = 0; i < 4; ++i) CHECK_FALSE(env.Contains(i));
  for (bool s : env.Spill(b, 0, 4)) CHECK_FALSE(s);
  bool can = true;
  REQUIRE(env.rt->RunOn(0, [&] { can = env.tier->CanSpill(); }).ok());
  CHECK_FALSE(can);
}

TEST_CASE("disk tier: a path that cannot be created is offline from the start", "[kv][disk]") {
  kv::DiskTierOptions o;
  o.paths = {"/proc/openlake-no-such-place"};
  o.capacity_bytes = 64ull << 20;
  auto t = DiskTier::Open(o);
  REQUIRE(t.ok());
  CHECK((*t)->Stats().paths_online == 0);
  o.capacity_bytes = 1 << 20;
  CHECK(absl::IsInvalidArgument(DiskTier::Open(o).status()));
}

TEST_CASE("pool: spill hands out dirty blocks, eviction prefers clean ones", "[kv][pool][disk]") {
  auto slab = *kv::SlabMapping::Create((2ull << 20) + (2ull << 20), 1u << 20);
  kv::PoolOptions po;
  po.spill = true;
  kv::Pool pool(slab->base(), po);
  auto ns = *pool.OpenNamespace("ns", openlake::testing::TestFingerprint(), 256 << 10);
  const kv::NsRef ref{ns.id, ns.digest};
  // Two segments of 1 MiB: 3 slots of 256 KiB each (the header takes a page).
  auto put = [&](int first, int n) {
    auto g = pool.Reserve(1, ref, static_cast<uint32_t>(n), false, 0);
    REQUIRE(g.ok());
    std::vector<kv::CommitEntry> e;
    for (int i = 0; i < n; ++i) {
      e.push_back({(*g)[i].slot, Key(first + i), uint64_t(first + i), uint32_t(first + i)});
    }
    REQUIRE(pool.Commit(1, ref, e, 0).ok());
  };
  put(0, 6);
  CHECK(pool.dirty_blocks() == 6);
  std::vector<kv::SpillBlock> taken;
  REQUIRE(pool.TakeSpill(4, 1ull << 30, &taken) == 4);
  REQUIRE(pool.CheckInvariants().ok());
  CHECK(taken[0].key == Key(0));
  CHECK(taken[0].checksum == 0);
  CHECK(pool.Stats().pinned_slots == 4);
  // A taken block cannot be evicted: the pool is full with 2 evictable dirty blocks left.
  for (int i = 0; i < 3; ++i) pool.EndSpill(taken[i].slot, taken[i].generation, true);
  pool.EndSpill(taken[3].slot, taken[3].generation, false);  // not stored: queued again
  REQUIRE(pool.CheckInvariants().ok());
  CHECK(pool.dirty_blocks() == 3);
  // Three new blocks evict the three clean ones (all equally old), dropping nothing.
  put(10, 3);
  REQUIRE(pool.CheckInvariants().ok());
  CHECK(pool.Stats().spill_drops == 0);
  for (int i = 0; i < 3; ++i) CHECK_FALSE(pool.Contains(ns.id, Key(i)));
  CHECK(pool.Contains(ns.id, Key(3)));
  // Now only dirty blocks are left: evicting one is a counted drop.
  put(20, 1);
  CHECK(pool.Stats().spill_drops == 1);
  REQUIRE(pool.CheckInvariants().ok());
  // A block overwritten while taken is no longer current; ending its spill leaves it alone.
  std::vector<kv::SpillBlock> again;
  REQUIRE(pool.TakeSpill(16, 1ull << 30, &again) > 0);
  const kv::SpillBlock t0 = again[0];
  CHECK(pool.SpillCurrent(t0.slot, t0.generation));
  REQUIRE(pool.Remove(ref, std::vector<BlockKey>{t0.key}).ok());
  CHECK_FALSE(pool.SpillCurrent(t0.slot, t0.generation));
  for (const auto& s : again) pool.EndSpill(s.slot, s.generation, true);
  REQUIRE(pool.CheckInvariants().ok());
  CHECK(pool.dirty_blocks() == 0);
  // Blocks read back from disk are committed clean; a key present already is kept.
  auto g = pool.Reserve(kv::Pool::kInternalSession, ref, 2, true, 0);
  REQUIRE(g.ok());
  REQUIRE(g->size() == 2);
  const BlockKey present = Key(10);
  REQUIRE(pool.Contains(ns.id, present));
  std::vector<kv::CommitEntry> e = {{(*g)[0].slot, Key(99), 5, 0}, {(*g)[1].slot, present, 6, 1}};
  auto bound = pool.Promote(kv::Pool::kInternalSession, ref, e, 0);
  REQUIRE(bound.ok());
  CHECK(*bound == 1);
  CHECK(pool.Contains(ns.id, Key(99)));
  CHECK(pool.dirty_blocks() == 0);
  REQUIRE(pool.CheckInvariants().ok());
}

#include "openlake/kv/service.h"

#include <unistd.h>

#include <cstring>
#include <random>

#include <catch2/catch.hpp>

#include "io/test_util.h"
#include "kv/kv_test_util.h"

#include "openlake/checksum.h"
#include "openlake/kv/client.h"

using namespace openlake::kv;
using openlake::testing::TempDir;
using openlake::testing::WaitFor;

namespace {

LayoutFingerprint Fp(std::string dtype = "bfloat16") {
  return openlake::testing::TestFingerprint(std::move(dtype));
}

struct Service {
  TempDir dir;
  std::unique_ptr<openlake::io::Runtime> rt = openlake::testing::StartRuntime(2);
  std::unique_ptr<KvService> svc;
  explicit Service(uint64_t slab = 64ull << 20, uint32_t reserved_percent = 25,
                   uint64_t disk_bytes = 0) {
    REQUIRE(rt);
    KvServiceOptions o;
    if (disk_bytes != 0) {
      o.disk.paths = {dir.File("disk")};
      o.disk.capacity_bytes = disk_bytes;
    }
    o.tcp_address = "127.0.0.1:0";
    o.unix_socket = dir.File("run/kv.sock");
    o.slab_bytes = slab;
    o.segment_bytes = 4ull << 20;
    o.reactor = 1;
    o.max_reserved_percent = reserved_percent;
    auto s = KvService::Start(*rt, o);
    REQUIRE(s.ok());
    svc = *std::move(s);
  }
  ~Service() {
    svc->Stop();
    rt->Stop();
  }
  std::unique_ptr<Client> Connect(bool map = true) {
    ClientOptions o;
    o.map_slab = map;
    auto c = Client::Connect(svc->tcp_address(), o);
    REQUIRE(c.ok());
    return *std::move(c);
  }
};

std::vector<BlockKey> Keys(int n, const std::string& prefix) {
  std::vector<BlockKey> k;
  for (int i = 0; i < n; ++i) k.emplace_back(prefix + std::to_string(i));
  return k;
}

}  // namespace

TEST_CASE("a local client moves to the unix socket, maps the slab, round-trips bytes",
          "[kv][service]") {
  Service s;
  CHECK(s.svc->unix_socket() == s.dir.File("run/kv.sock"));
  auto c = s.Connect();
  REQUIRE(c->has_slab());
  CHECK(c->slab_bytes() == s.svc->slab_bytes());
  CHECK(c->lease() == absl::Seconds(60));
  const uint32_t block = 64 << 10;
  auto ns = c->OpenNamespace("m/tp0", Fp(), block);
  REQUIRE(ns.ok());
  std::mt19937_64 rng(1);
  std::vector<std::vector<uint8_t>> data(32, std::vector<uint8_t>(block));
  for (auto& d : data)
    for (auto& b : d) b = static_cast<uint8_t>(rng());
  std::vector<const void*> src;
  for (auto& d : data) src.push_back(d.data());
  auto keys = Keys(32, "h");
  auto put = c->Put(*ns, keys, src);
  INFO(put.status().message());
  REQUIRE(put.ok());
  CHECK(put->stored == 32);

  std::vector<std::vector<uint8_t>> out(32, std::vector<uint8_t>(block));
  std::vector<void*> dst;
  for (auto& d : out) dst.push_back(d.data());
  auto got = c->Get(*ns, keys, dst);
  REQUIRE(got.ok());
  CHECK(got->loaded == 32);
  const bool same_bytes = out == data;
  CHECK(same_bytes);

  // Pieces: stored in three pieces, read back in two.
  std::vector<std::vector<ConstPiece>> in3 = {{{data[0].data(), 1000},
                                               {data[0].data() + 1000, 30000},
                                               {data[0].data() + 31000, block - 31000}}};
  auto k = Keys(1, "pieces");
  REQUIRE(c->Put(*ns, k, in3)->stored == 1);
  std::vector<uint8_t> a(5), b(block - 5);
  std::vector<std::vector<Piece>> out2 = {{{a.data(), 5}, {b.data(), block - 5}}};
  REQUIRE(c->Get(*ns, k, out2)->loaded == 1);
  CHECK(std::memcmp(a.data(), data[0].data(), 5) == 0);
  CHECK(std::memcmp(b.data(), data[0].data() + 5, block - 5) == 0);

  // Exists, a miss in the middle, stats.
  std::vector<BlockKey> mixed = {keys[0], keys[1], BlockKey("absent"), keys[3]};
  auto ex = c->Exists(*ns, mixed);
  REQUIRE(ex.ok());
  CHECK(ex->prefix == 2);
  CHECK(ex->present == std::vector<bool>{true, true, false, true});
  std::vector<void*> dst4(dst.begin(), dst.begin() + 4);
  auto partial = c->Get(*ns, mixed, dst4);
  REQUIRE(partial.ok());
  CHECK(partial->loaded == 2);
  CHECK(partial->state[2] == BlockState::kMissing);
  auto st = c->Stats();
  REQUIRE(st.ok());
  CHECK(st->committed_blocks == 33);
  CHECK(st->namespaces == 1);
  REQUIRE(st->per_namespace.size() == 1);
  CHECK(st->per_namespace[0].name == "m/tp0");
  CHECK(st->hits >= 34);

  // Bad sizes are refused before anything happens.
  std::vector<std::vector<ConstPiece>> wrong = {{{data[0].data(), 100}}};
  CHECK(c->Put(*ns, k, wrong).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("a wrong fingerprint is refused with a clear error", "[kv][service]") {
  Service s;
  auto a = s.Connect();
  auto b = s.Connect();
  REQUIRE(a->OpenNamespace("shared-name", Fp(), 4096).ok());
  auto other = b->OpenNamespace("shared-name", Fp("float32"), 4096);
  REQUIRE(!other.ok());
  CHECK(other.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(other.status().message()).find("dtype: float32 requested vs bfloat16 stored") !=
        std::string::npos);
}

TEST_CASE("a corrupted block is detected and not served", "[kv][service]") {
  Service s;
  auto c = s.Connect();
  auto ns = *c->OpenNamespace("m", Fp(), 4096);
  std::vector<std::vector<uint8_t>> data(3, std::vector<uint8_t>(4096, 7));
  std::vector<const void*> src = {data[0].data(), data[1].data(), data[2].data()};
  auto keys = Keys(3, "c");
  REQUIRE(c->Put(ns, keys, src)->stored == 3);
  // Flip one byte of block 1 in the shared slab.
  auto pins = c->Lookup(ns, keys);
  REQUIRE(pins.ok());
  REQUIRE(pins->hits.size() == 3);
  c->slab_base()[pins->hits[1].offset + 100] ^= std::byte{1};
  REQUIRE(c->Release({pins->batch}, {}).ok());
  std::vector<std::vector<uint8_t>> out(3, std::vector<uint8_t>(4096));
  std::vector<void*> dst = {out[0].data(), out[1].data(), out[2].data()};
  auto got = c->Get(ns, keys, dst);
  REQUIRE(got.ok());
  CHECK(got->loaded == 1);
  CHECK(got->state ==
        std::vector<BlockState>{BlockState::kLoaded, BlockState::kCorrupt, BlockState::kLoaded});
}

TEST_CASE("a large Get is looked up in parts: every byte, the prefix rule and no pins left",
          "[kv][service]") {
  // 80 blocks of 256 KiB: parts of 16 blocks (4 MiB), two asked for ahead of the copy (an
  // eighth of the 64 MiB slab).
  Service s;
  auto c = s.Connect();
  const uint32_t block = 256 << 10;
  const int n = 80;
  auto ns = *c->OpenNamespace("big", Fp(), block);
  std::mt19937_64 rng(5);
  std::vector<std::vector<uint8_t>> data(n, std::vector<uint8_t>(block));
  for (auto& d : data)
    for (auto& b : d) b = static_cast<uint8_t>(rng());
  std::vector<const void*> src;
  for (auto& d : data) src.push_back(d.data());
  auto keys = Keys(n, "big");
  REQUIRE(c->Put(ns, keys, src)->stored == n);
  std::vector<std::vector<uint8_t>> out(n, std::vector<uint8_t>(block));
  std::vector<void*> dst;
  for (auto& d : out) dst.push_back(d.data());
  auto lookups = [&] { return c->Stats()->lookups; };

  const uint64_t before = lookups();
  auto got = c->Get(ns, keys, dst);
  REQUIRE(got.ok());
  CHECK(got->loaded == n);
  CHECK(lookups() - before == 5);
  CHECK(out == data);

  SECTION("a key missing in the third part ends the prefix; later parts are not asked for") {
    REQUIRE(*c->Remove(ns, {&keys[37], 1}) == 1);
    const uint64_t at = lookups();
    auto partial = c->Get(ns, keys, dst);
    REQUIRE(partial.ok());
    CHECK(partial->loaded == 37);
    for (int i = 0; i < n; ++i) {
      CHECK(partial->state[i] == (i < 37 ? BlockState::kLoaded : BlockState::kMissing));
    }
    // The first four parts were asked for (two ahead), the fifth never.
    CHECK(lookups() - at == 4);
  }
  SECTION("a corrupt block ends the loaded prefix; the blocks after it are still copied") {
    auto pins = c->Lookup(ns, {&keys[3], 1});
    REQUIRE(pins->hits.size() == 1);
    c->slab_base()[pins->hits[0].offset + 9] ^= std::byte{1};
    REQUIRE(c->Release({pins->batch}, {}).ok());
    for (auto& d : out) std::fill(d.begin(), d.end(), 0);
    auto bad = c->Get(ns, keys, dst);
    REQUIRE(bad.ok());
    CHECK(bad->loaded == 3);
    CHECK(bad->state[3] == BlockState::kCorrupt);
    for (int i = 4; i < n; ++i) CHECK(bad->state[i] == BlockState::kLoaded);
    CHECK(out[n - 1] == data[n - 1]);
  }
  // Every part's pins were released (the releases are one-way: the Stats call reads them).
  CHECK(WaitFor([&] { return c->Stats()->pinned_slots == 0; }));
}

TEST_CASE(
    "a parted Get copies parts in the order they are answered, and settles them in key "
    "order",
    "[kv][service][disk]") {
  // A 32 MiB slab over a disk tier; 48 blocks of 256 KiB are Gets of three 4 MiB parts. The
  // first and third parts come back from disk, the second is in the slab: its answer comes
  // first and is copied first (the first is still being read).
  Service s(32ull << 20, 50, 256ull << 20);
  auto c = s.Connect();
  const uint32_t block = 256 << 10;
  const int n = 48;
  auto ns = *c->OpenNamespace("order", Fp(), block);
  std::mt19937_64 rng(9);
  auto fill = [&](int count, const std::string& prefix, std::vector<std::vector<uint8_t>>* data) {
    data->assign(count, std::vector<uint8_t>(block));
    for (auto& d : *data)
      for (auto& b : d) b = static_cast<uint8_t>(rng());
    std::vector<const void*> src;
    for (auto& d : *data) src.push_back(d.data());
    auto keys = Keys(count, prefix);
    for (int i = 0; i < count; i += 8) {  // in batches the slab always has room for
      const int m = std::min(8, count - i);
      REQUIRE(c->Put(ns, absl::MakeConstSpan(keys).subspan(i, m),
                     absl::MakeConstSpan(src).subspan(i, m))
                  ->stored == static_cast<size_t>(m));
    }
    return keys;
  };
  std::vector<std::vector<uint8_t>> data, filler;
  auto keys = fill(n, "order", &data);
  // Everything reaches the disk, then a slab's worth of other blocks pushes it out of RAM.
  REQUIRE(WaitFor([&] { return c->Stats()->dirty_blocks == 0; }));
  auto gone = fill(160, "filler", &filler);
  REQUIRE(WaitFor([&] { return c->Stats()->dirty_blocks == 0; }));
  // Then the other blocks go, so reading back needs no evictions.
  REQUIRE(c->Remove(ns, gone).ok());
  std::vector<std::vector<uint8_t>> out(n, std::vector<uint8_t>(block));
  std::vector<void*> dst;
  for (auto& d : out) dst.push_back(d.data());
  // The second part into the slab (a Get of it alone reads it back).
  REQUIRE(c->Get(ns, absl::MakeConstSpan(keys).subspan(16, 16),
                 absl::MakeConstSpan(dst).subspan(16, 16))
              ->loaded == 16);
  for (auto& d : out) std::fill(d.begin(), d.end(), 0);

  SECTION("every block arrives, byte-exact") {
    const uint64_t hits = c->Stats()->disk_hits;
    auto got = c->Get(ns, keys, dst);
    REQUIRE(got.ok());
    CHECK(got->loaded == n);
    std::vector<int> wrong;
    for (int i = 0; i < n; ++i) {
      if (out[i] != data[i]) wrong.push_back(i);
    }
    CHECK(wrong == std::vector<int>{});
    CHECK(c->Stats()->disk_hits - hits >= 16);  // the other parts came from disk
  }
  SECTION(
      "a first part that stops short: the second, copied before it was answered, is not "
      "served") {
    REQUIRE(*c->Remove(ns, {&keys[10], 1}) == 1);
    auto got = c->Get(ns, keys, dst);
    REQUIRE(got.ok());
    CHECK(got->loaded == 10);
    for (int i = 0; i < n; ++i) {
      CHECK(got->state[i] == (i < 10 ? BlockState::kLoaded : BlockState::kMissing));
    }
    int wrong = 0;
    for (int i = 0; i < 10; ++i) wrong += out[i] != data[i];
    CHECK(wrong == 0);
  }
  CHECK(WaitFor([&] { return c->Stats()->pinned_slots == 0; }));
}

TEST_CASE("a client without the slab can still do control calls", "[kv][service]") {
  Service s;
  auto c = s.Connect(/*map=*/false);
  CHECK(!c->has_slab());
  auto ns = c->OpenNamespace("m", Fp(), 4096);
  REQUIRE(ns.ok());
  std::vector<uint8_t> d(4096);
  std::vector<const void*> src = {d.data()};
  CHECK(c->Put(*ns, Keys(1, "x"), src).status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(c->Exists(*ns, Keys(1, "x")).ok());
  CHECK(c->Reset(*ns).ok());
  CHECK(c->Stats().ok());
}

TEST_CASE("a client that goes away gives back its reservations and pins", "[kv][service]") {
  Service s;
  auto writer = s.Connect();
  auto ns = *writer->OpenNamespace("m", Fp(), 4096);
  std::vector<uint8_t> d(4096, 1);
  std::vector<const void*> src(10, d.data());
  REQUIRE(writer->Put(ns, Keys(10, "g"), src)->stored == 10);
  {
    auto reader = s.Connect();
    auto rns = *reader->OpenNamespace("m", Fp(), 4096);
    REQUIRE(reader->Lookup(rns, Keys(10, "g"))->hits.size() == 10);
    REQUIRE(reader->Reserve(rns, 5, false)->size() == 5);
    auto st = *s.svc->Stats();
    CHECK(st.pinned_slots == 10);
    CHECK(st.reserved_slots == 5);
  }
  CHECK(WaitFor([&] {
    auto st = *s.svc->Stats();
    return st.pinned_slots == 0 && st.reserved_slots == 0;
  }));
  CHECK(s.svc->Stats()->committed_blocks == 10);
}

TEST_CASE("a full pool answers ResourceExhausted; a partial put stores a prefix",
          "[kv][service][full]") {
  // 10 MiB: the service picks 1 MiB segments (at least eight) → 8 segments × 3 slots of 256 KiB.
  Service s(/*slab=*/(2ull << 20) + (8ull << 20), /*reserved_percent=*/100);
  CHECK(s.svc->segment_bytes() == 1u << 20);
  auto c = s.Connect();
  const uint32_t block = 256 << 10;
  auto ns = *c->OpenNamespace("m", Fp(), block);
  std::vector<uint8_t> d(block, 3);
  std::vector<const void*> src(30, d.data());
  auto keys = Keys(30, "f");
  auto put = c->Put(ns, keys, src);
  REQUIRE(put.ok());
  CHECK(put->stored == 24);
  auto pins = c->Lookup(ns, keys);
  REQUIRE(pins->hits.size() == 24);
  std::vector<const void*> one(1, d.data());
  auto full = c->Put(ns, Keys(1, "more"), one);
  CHECK(full.status().code() == absl::StatusCode::kResourceExhausted);
  // Nothing stored was touched.
  std::vector<std::vector<uint8_t>> out(24, std::vector<uint8_t>(block));
  std::vector<void*> dst;
  for (auto& o : out) dst.push_back(o.data());
  std::vector<BlockKey> first(keys.begin(), keys.begin() + 24);
  auto got = c->Get(ns, first, dst);
  REQUIRE(got.ok());
  CHECK(got->loaded == 24);
  bool all_same = true;
  for (auto& o : out) all_same = all_same && o == d;
  CHECK(all_same);
}

TEST_CASE("service metrics record per-method latency", "[kv][service]") {
  Service s;
  auto c = s.Connect();
  auto ns = *c->OpenNamespace("m", Fp(), 4096);
  for (int i = 0; i < 10; ++i) (void)c->Exists(ns, Keys(100, "e"));
  auto m = s.svc->Metrics();
  const auto* h = m.Histogram("kv_exists_us");
  REQUIRE(h != nullptr);
  CHECK(h->count == 10);
}

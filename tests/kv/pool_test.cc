#include "kv/pool.h"

#include <cstring>
#include <map>
#include <random>

#include <catch2/catch.hpp>

#include "kv/kv_test_util.h"
#include "kv/slab.h"

#include "openlake/checksum.h"

using openlake::kv::BlockKey;
using openlake::kv::CommitEntry;
using openlake::kv::LayoutFingerprint;
using openlake::kv::Namespace;
using openlake::kv::NsRef;
using openlake::kv::Pool;
using openlake::kv::PoolOptions;
using openlake::kv::SlabMapping;

namespace {

constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kLease = 60 * kSec;

LayoutFingerprint Fp(std::string dtype = "bfloat16") {
  return openlake::testing::TestFingerprint(std::move(dtype));
}

BlockKey Key(int i, const std::string& prefix = "k") {
  return BlockKey(prefix + std::to_string(i));
}
NsRef Ref(const Namespace& ns) { return NsRef{ns.id, ns.digest}; }

// A small slab (`segments` segments of 1 MiB) and a pool over it.
struct Env {
  std::unique_ptr<SlabMapping> slab;
  std::unique_ptr<Pool> pool;
  explicit Env(uint32_t segments, uint32_t sample = 16) {
    slab = *SlabMapping::Create((2ull << 20) + (uint64_t{segments} << 20), 1u << 20);
    pool = std::make_unique<Pool>(slab->base(), PoolOptions{kLease, sample});
  }
  Namespace Open(const std::string& name, uint32_t block, LayoutFingerprint fp = Fp()) {
    auto ns = pool->OpenNamespace(name, fp, block);
    REQUIRE(ns.ok());
    return *ns;
  }
  // Reserve + commit keys[first..first+n) with depth = index; returns the slots.
  std::vector<uint64_t> Put(uint64_t session, const Namespace& ns, int first, int n,
                            int64_t now = 0, const std::string& prefix = "k") {
    auto g = pool->Reserve(session, Ref(ns), static_cast<uint32_t>(n), false, now);
    REQUIRE(g.ok());
    std::vector<CommitEntry> e;
    std::vector<uint64_t> slots;
    for (int i = 0; i < n; ++i) {
      e.push_back({(*g)[i].slot, Key(first + i, prefix), static_cast<uint64_t>(first + i),
                   static_cast<uint32_t>(first + i)});
      slots.push_back((*g)[i].slot);
    }
    REQUIRE(pool->Commit(session, Ref(ns), e, now).ok());
    REQUIRE(pool->CheckInvariants().ok());
    return slots;
  }
  std::vector<BlockKey> Keys(int first, int n, const std::string& prefix = "k") {
    std::vector<BlockKey> k;
    for (int i = 0; i < n; ++i) k.push_back(Key(first + i, prefix));
    return k;
  }
};

}  // namespace

TEST_CASE("reserve, commit, lookup, release", "[kv][pool]") {
  Env env(8);
  Namespace ns = env.Open("m/tp0", 64 << 10);
  CHECK(ns.slot_bytes == 64u << 10);
  auto g = env.pool->Reserve(1, Ref(ns), 10, false, 0);
  REQUIRE(g.ok());
  REQUIRE(g->size() == 10);
  std::set<uint64_t> offsets;
  for (const auto& x : *g) {
    CHECK(x.offset % 4096 == 0);
    CHECK(x.offset + (64 << 10) <= env.slab->size());
    CHECK(x.generation >= 1);
    offsets.insert(x.offset);
  }
  CHECK(offsets.size() == 10);
  // Reserved but uncommitted: invisible.
  CHECK(env.pool->Lookup(2, Ref(ns), env.Keys(0, 1), 0)->hits.empty());
  std::vector<CommitEntry> e;
  for (int i = 0; i < 10; ++i)
    e.push_back({(*g)[i].slot, Key(i), 1000u + i, static_cast<uint32_t>(i)});
  REQUIRE(env.pool->Commit(1, Ref(ns), e, 0).ok());
  auto pinned = env.pool->Lookup(2, Ref(ns), env.Keys(0, 10), 0);
  REQUIRE(pinned.ok());
  const auto& hits = pinned->hits;
  REQUIRE(hits.size() == 10);
  CHECK(pinned->batch != 0);
  for (int i = 0; i < 10; ++i) {
    CHECK(hits[i].offset == (*g)[i].offset);
    CHECK(hits[i].checksum == 1000u + i);
    CHECK(hits[i].generation == (*g)[i].generation);
  }
  auto st = env.pool->Stats();
  CHECK(st.committed_blocks == 10);
  CHECK(st.pinned_slots == 10);
  CHECK(st.hits == 10);
  REQUIRE(env.pool->Release(2, {pinned->batch}, {}).ok());
  CHECK(env.pool->Stats().pinned_slots == 0);
  // Releasing again, or from another session: nothing held, InvalidArgument.
  CHECK(env.pool->Release(2, {pinned->batch}, {}).code() == absl::StatusCode::kInvalidArgument);
  auto again = env.pool->Lookup(2, Ref(ns), env.Keys(0, 10), 0);
  CHECK(env.pool->Release(3, {again->batch}, {}).code() == absl::StatusCode::kInvalidArgument);
  CHECK(env.pool->Stats().pinned_slots == 10);
  REQUIRE(env.pool->CheckInvariants().ok());
  REQUIRE(env.pool->Release(2, {again->batch}, {}).ok());
  REQUIRE(env.pool->CheckInvariants().ok());
}

TEST_CASE("lookup returns the longest contiguous prefix", "[kv][pool]") {
  Env env(4);
  Namespace ns = env.Open("m", 4096);
  env.Put(1, ns, 0, 2);
  env.Put(1, ns, 3, 2);  // k2 missing
  auto hits = env.pool->Lookup(1, Ref(ns), env.Keys(0, 5), 0);
  REQUIRE(hits.ok());
  CHECK(hits->hits.size() == 2);
  auto ex = env.pool->Exists(Ref(ns), env.Keys(0, 5));
  REQUIRE(ex.ok());
  CHECK(ex->prefix == 2);
  CHECK(ex->present == std::vector<bool>{true, true, false, true, true});
  // Exists does not pin.
  CHECK(env.pool->Stats().pinned_slots == 2);
  CHECK(env.pool->Lookup(1, Ref(ns), env.Keys(2, 3), 0)->hits.empty());
}

TEST_CASE("commit is all or nothing and checks ownership and leases", "[kv][pool]") {
  Env env(4);
  Namespace a = env.Open("a", 4096);
  Namespace b = env.Open("b", 4096, Fp("float16"));
  auto g = *env.pool->Reserve(1, Ref(a), 3, false, 0);
  std::vector<CommitEntry> e = {{g[0].slot, Key(0), 1, 0}, {g[1].slot, Key(1), 2, 1}};

  SECTION("another session") {
    CHECK(env.pool->Commit(2, Ref(a), e, 0).code() == absl::StatusCode::kFailedPrecondition);
  }
  SECTION("another namespace") {
    CHECK(env.pool->Commit(1, Ref(b), e, 0).code() == absl::StatusCode::kFailedPrecondition);
  }
  SECTION("expired lease") {
    auto st = env.pool->Commit(1, Ref(a), e, kLease + 1);
    CHECK(st.code() == absl::StatusCode::kFailedPrecondition);
    CHECK(std::string(st.message()).find("expired") != std::string::npos);
  }
  SECTION("duplicate slot") {
    e.push_back({g[0].slot, Key(9), 3, 2});
    CHECK(env.pool->Commit(1, Ref(a), e, 0).code() == absl::StatusCode::kInvalidArgument);
  }
  SECTION("duplicate key") {
    e.push_back({g[2].slot, Key(0), 3, 2});
    CHECK(env.pool->Commit(1, Ref(a), e, 0).code() == absl::StatusCode::kInvalidArgument);
  }
  SECTION("unknown slot") {
    e.push_back({0xdeadbeefull << 32, Key(9), 3, 2});
    CHECK(env.pool->Commit(1, Ref(a), e, 0).code() == absl::StatusCode::kFailedPrecondition);
  }
  CHECK(env.pool->Exists(Ref(a), env.Keys(0, 2))->prefix == 0);
  CHECK(env.pool->Stats().reserved_slots == 3);
  REQUIRE(env.pool->CheckInvariants().ok());
}

TEST_CASE("a key committed again replaces the old block", "[kv][pool]") {
  Env env(4);
  Namespace ns = env.Open("m", 4096);
  auto first = env.Put(1, ns, 0, 1);
  auto g = *env.pool->Reserve(1, Ref(ns), 1, false, 0);
  REQUIRE(env.pool->Commit(1, Ref(ns), {{g[0].slot, Key(0), 77, 0}}, 0).ok());
  auto hits = env.pool->Lookup(1, Ref(ns), env.Keys(0, 1), 0)->hits;
  REQUIRE(hits.size() == 1);
  CHECK(hits[0].slot == g[0].slot);
  CHECK(hits[0].checksum == 77);
  CHECK(env.pool->Stats().committed_blocks == 1);
  REQUIRE(env.pool->CheckInvariants().ok());
}

TEST_CASE("leases: reservations and pins end by themselves", "[kv][pool][lease]") {
  Env env(1);
  Namespace ns = env.Open("m", 256 << 10);
  const auto cap = env.pool->Reserve(1, Ref(ns), 1000, true, 0)->size();  // everything
  REQUIRE(cap == 3);  // 1 MiB segment: header page + three 256 KiB slots
  CHECK(env.pool->Reserve(2, Ref(ns), 1, false, 0).status().code() ==
        absl::StatusCode::kResourceExhausted);
  // Session 1 "dies" silently: once its lease passes, Reserve finds the slots again.
  auto later = env.pool->Reserve(2, Ref(ns), 3, false, kLease + 1);
  REQUIRE(later.ok());
  CHECK(env.pool->Stats().expired_reservations == 3);
  std::vector<CommitEntry> e;
  for (int i = 0; i < 3; ++i) e.push_back({(*later)[i].slot, Key(i), 0, static_cast<uint32_t>(i)});
  REQUIRE(env.pool->Commit(2, Ref(ns), e, kLease + 1).ok());

  // A reader pins everything, then vanishes: no room until its pins lapse.
  REQUIRE(env.pool->Lookup(3, Ref(ns), env.Keys(0, 3), kLease + 2)->hits.size() == 3);
  CHECK(env.pool->Reserve(4, Ref(ns), 1, false, kLease + 3).status().code() ==
        absl::StatusCode::kResourceExhausted);
  CHECK(env.pool->ExpireLeases(2 * kLease + 2) == 3);
  CHECK(env.pool->Stats().pinned_slots == 0);
  auto evicting = env.pool->Reserve(4, Ref(ns), 1, false, 2 * kLease + 3);
  REQUIRE(evicting.ok());
  CHECK(env.pool->Stats().evictions == 1);
  REQUIRE(env.pool->CheckInvariants().ok());
}

TEST_CASE("closing a session returns its reservations and pins", "[kv][pool][lease]") {
  Env env(2);
  Namespace ns = env.Open("m", 4096);
  env.Put(1, ns, 0, 20);
  REQUIRE(env.pool->Lookup(7, Ref(ns), env.Keys(0, 20), 0)->hits.size() == 20);
  REQUIRE(env.pool->Reserve(7, Ref(ns), 5, false, 0).ok());
  CHECK(env.pool->Stats().pinned_slots == 20);
  CHECK(env.pool->Stats().reserved_slots == 5);
  env.pool->CloseSession(7);
  auto st = env.pool->Stats();
  CHECK(st.pinned_slots == 0);
  CHECK(st.reserved_slots == 0);
  CHECK(st.committed_blocks == 20);  // committed data outlives the reader
  REQUIRE(env.pool->CheckInvariants().ok());
  // Their lease entries come due later and are ignored.
  CHECK(env.pool->ExpireLeases(10 * kLease) == 0);
}

TEST_CASE("eviction: least recent first, a chain's tail before its head", "[kv][pool][evict]") {
  Env env(1);  // one segment of 7 slots: the clock hand sees them all
  Namespace ns = env.Open("m", 128 << 10);
  // 1 MiB segment: 7 slots of 128 KiB.
  env.Put(1, ns, 0, 4);  // chain a (depths 0..3) at t = 0
  SECTION("the oldest go first, and of those the chain's tail") {
    env.Put(1, ns, 4, 3, 2 * kSec);  // chain b, two seconds later: fills the slab
    auto g = env.pool->Reserve(1, Ref(ns), 2, false, 2 * kSec);
    REQUIRE(g.ok());
    // Chain a is older: its two deepest blocks (k3, then k2) went; its head stays.
    auto ex = *env.pool->Exists(Ref(ns), env.Keys(0, 7));
    CHECK(ex.present == std::vector<bool>{true, true, false, false, true, true, true});
  }
  SECTION("blocks of the same moment: the deepest goes first") {
    env.Put(1, ns, 4, 3);  // committed in the same second as chain a
    REQUIRE(env.pool->Reserve(1, Ref(ns), 1, false, 0).ok());
    CHECK(env.pool->Exists(Ref(ns), env.Keys(6, 1))->prefix == 0);  // depth 6
    CHECK(env.pool->Exists(Ref(ns), env.Keys(0, 6))->prefix == 6);
  }
  SECTION("a looked-up prefix outlives untouched blocks") {
    env.Put(1, ns, 100, 3, 2 * kSec);  // another chain, newer than a
    // Reading chain a later makes it the most recent.
    auto pins = env.pool->Lookup(2, Ref(ns), env.Keys(0, 4), 4 * kSec);
    REQUIRE(pins->hits.size() == 4);
    REQUIRE(env.pool->Release(2, {pins->batch}, {}).ok());
    auto g = env.pool->Reserve(1, Ref(ns), 3, false, 4 * kSec);
    REQUIRE(g.ok());
    auto ex = *env.pool->Exists(Ref(ns), env.Keys(0, 4));
    CHECK(ex.prefix == 4);
    CHECK(env.pool->Exists(Ref(ns), env.Keys(100, 3))->prefix == 0);
  }
  REQUIRE(env.pool->CheckInvariants().ok());
}

TEST_CASE("a full pool with everything pinned refuses, never overwrites", "[kv][pool][full]") {
  Env env(2);
  Namespace ns = env.Open("m", 256 << 10);
  env.Put(1, ns, 0, 6);  // 2 segments × 3 slots
  REQUIRE(env.pool->Lookup(2, Ref(ns), env.Keys(0, 6), 0)->hits.size() == 6);
  auto full = env.pool->Reserve(3, Ref(ns), 1, false, 0);
  CHECK(full.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(std::string(full.status().message()).find("pinned") != std::string::npos);
  CHECK(env.pool->Stats().reserve_failures == 1);
  CHECK(env.pool->Exists(Ref(ns), env.Keys(0, 6))->prefix == 6);
  // Partial: what can be had, when something can.
  env.pool->CloseSession(2);
  REQUIRE(env.pool->Lookup(2, Ref(ns), env.Keys(0, 4), 0)->hits.size() == 4);
  // All-or-nothing that cannot be met: refused before evicting anything.
  CHECK(env.pool->Reserve(3, Ref(ns), 5, false, 0).status().code() ==
        absl::StatusCode::kResourceExhausted);
  CHECK(env.pool->Stats().evictions == 0);
  CHECK(env.pool->Exists(Ref(ns), env.Keys(0, 6))->prefix == 6);
  auto part = env.pool->Reserve(3, Ref(ns), 5, true, 0);
  REQUIRE(part.ok());
  CHECK(part->size() == 2);
  CHECK(env.pool->Stats().evictions == 2);
  CHECK(env.pool->Reserve(4, Ref(ns), 5, false, 0).status().code() ==
        absl::StatusCode::kResourceExhausted);
  REQUIRE(env.pool->CheckInvariants().ok());
}

TEST_CASE("namespaces: fingerprints, isolation, reset", "[kv][pool][ns]") {
  Env env(8);
  Namespace a = env.Open("model/tp0", 4096);
  SECTION("same name, other fingerprint: refused with the fields that differ") {
    auto again = env.pool->OpenNamespace("model/tp0", Fp("float16"), 4096);
    REQUIRE(!again.ok());
    CHECK(again.status().code() == absl::StatusCode::kFailedPrecondition);
    const std::string msg(again.status().message());
    CHECK(msg.find("dtype: float16 requested vs bfloat16 stored") != std::string::npos);
    CHECK(env.pool->OpenNamespace("model/tp0", Fp(), 8192).status().code() ==
          absl::StatusCode::kFailedPrecondition);
    auto same = env.pool->OpenNamespace("model/tp0", Fp(), 4096);
    REQUIRE(same.ok());
    CHECK(same->id == a.id);
  }
  SECTION("a request with a stale digest is refused") {
    NsRef bad{a.id, a.digest ^ 1};
    CHECK(env.pool->Lookup(1, bad, env.Keys(0, 1), 0).status().code() ==
          absl::StatusCode::kFailedPrecondition);
    CHECK(env.pool->Reserve(1, bad, 1, false, 0).status().code() ==
          absl::StatusCode::kFailedPrecondition);
    CHECK(env.pool->Lookup(1, NsRef{999, 0}, env.Keys(0, 1), 0).status().code() ==
          absl::StatusCode::kNotFound);
  }
  SECTION("same keys in two namespaces never mix; reset clears only one") {
    LayoutFingerprint fp1 = Fp();
    fp1.tp_rank = 1;
    Namespace b = env.Open("model/tp1", 4096, fp1);
    env.Put(1, a, 0, 5);
    env.Put(1, b, 0, 5);
    auto ha = env.pool->Lookup(1, Ref(a), env.Keys(0, 5), 0)->hits;
    auto hb = env.pool->Lookup(1, Ref(b), env.Keys(0, 5), 0)->hits;
    for (int i = 0; i < 5; ++i) CHECK(ha[i].slot != hb[i].slot);
    // Reset a while a reader still holds its pins: b untouched, a's pinned slots stay readable
    // until released, then are freed.
    REQUIRE(env.pool->Reset(Ref(a)).ok());
    CHECK(env.pool->Exists(Ref(a), env.Keys(0, 5))->prefix == 0);
    CHECK(env.pool->Exists(Ref(b), env.Keys(0, 5))->prefix == 5);
    REQUIRE(env.pool->CheckInvariants().ok());
    CHECK(env.pool->Stats().pinned_slots == 10);
    env.pool->CloseSession(1);
    CHECK(env.pool->Stats().pinned_slots == 0);
    CHECK(env.pool->Stats().committed_blocks == 5);
  }
  SECTION("block sizes that fit no segment are refused") {
    CHECK(env.pool->OpenNamespace("huge", Fp(), 2u << 20).status().code() ==
          absl::StatusCode::kInvalidArgument);
    CHECK(env.pool->OpenNamespace("tiny", Fp(), 8).status().code() ==
          absl::StatusCode::kInvalidArgument);
  }
  REQUIRE(env.pool->CheckInvariants().ok());
}

TEST_CASE("size classes share the slab; a cold segment is reclaimed for another class",
          "[kv][pool][evict]") {
  Env env(2);
  Namespace small = env.Open("small", 4096);
  LayoutFingerprint fp = Fp();
  fp.extra = "big";
  Namespace big = env.Open("big", 256 << 10, fp);
  // Fill both segments with small blocks (252 slots of 4 KiB per 1 MiB segment).
  for (int n = 0; n < 2 * 252; ++n) {
    auto g = env.pool->Reserve(1, Ref(small), 1, false, 0);
    REQUIRE(g.ok());
    REQUIRE(env.pool->Commit(1, Ref(small), {{(*g)[0].slot, Key(n), 0, 0}}, 0).ok());
  }
  CHECK(env.pool->Stats().evictions == 0);
  CHECK(env.pool->Stats().segments_used == 2);
  auto g = env.pool->Reserve(2, Ref(big), 1, false, 0);
  REQUIRE(g.ok());
  CHECK(env.pool->Stats().evictions > 0);
  REQUIRE(env.pool->CheckInvariants().ok());
}

TEST_CASE("storm: random operations keep every invariant and never serve a wrong block",
          "[kv][pool][storm]") {
  Env env(6, 8);
  std::vector<Namespace> ns = {env.Open("a", 4096), env.Open("b", 64 << 10)};
  // Reference model: the checksum last committed for each (namespace, key). A hit must match.
  std::map<std::pair<uint32_t, int>, uint64_t> model;
  struct Held {
    uint64_t session;
    std::vector<uint64_t> pinned;
    std::vector<uint64_t> reserved;
    uint32_t ns;
  };
  std::vector<Held> held;
  std::mt19937_64 rng(12345);
  int64_t now = 0;
  uint64_t next_checksum = 1;
  for (int op = 0; op < 40000; ++op) {
    now += static_cast<int64_t>(rng() % (kSec / 10));
    const uint64_t session = 1 + rng() % 5;
    const auto which = static_cast<uint32_t>(rng() % 2);
    const Namespace& n = ns[which];
    switch (rng() % 7) {
      case 0:
      case 1: {  // reserve (and maybe commit)
        const uint32_t count = 1 + static_cast<uint32_t>(rng() % 8);
        auto g = env.pool->Reserve(session, Ref(n), count, rng() % 2, now);
        if (!g.ok()) {
          CHECK(g.status().code() == absl::StatusCode::kResourceExhausted);
          break;
        }
        if (rng() % 4 == 0) {  // keep it reserved for now
          Held h{session, {}, {}, which};
          for (auto& x : *g) h.reserved.push_back(x.slot);
          held.push_back(h);
          break;
        }
        std::vector<CommitEntry> e;
        const int base = static_cast<int>(rng() % 200);
        for (size_t i = 0; i < g->size(); ++i) {
          e.push_back({(*g)[i].slot, Key(base + static_cast<int>(i)), next_checksum++,
                       static_cast<uint32_t>(base + i)});
        }
        REQUIRE(env.pool->Commit(session, Ref(n), e, now).ok());
        for (auto& x : e) model[{n.id, base + static_cast<int>(&x - e.data())}] = x.checksum;
        break;
      }
      case 2:
      case 3: {  // lookup, maybe hold the pins
        const int base = static_cast<int>(rng() % 200);
        auto hits = env.pool->Lookup(session, Ref(n), env.Keys(base, 8), now);
        REQUIRE(hits.ok());
        Held h{session, {}, {}, which};
        for (size_t i = 0; i < hits->hits.size(); ++i) {
          auto it = model.find({n.id, base + static_cast<int>(i)});
          REQUIRE(it != model.end());
          CHECK(it->second == hits->hits[i].checksum);
        }
        if (hits->batch != 0) h.pinned.push_back(hits->batch);
        if (rng() % 3 == 0) {
          REQUIRE(env.pool->Release(session, h.pinned, {}).ok());
        } else {
          held.push_back(h);
        }
        break;
      }
      case 4: {  // release something held (may have expired: InvalidArgument is fine)
        if (held.empty()) break;
        const size_t i = rng() % held.size();
        auto st = env.pool->Release(held[i].session, held[i].pinned, held[i].reserved);
        CHECK((st.ok() || st.code() == absl::StatusCode::kInvalidArgument));
        held.erase(held.begin() + static_cast<long>(i));
        break;
      }
      case 5: {
        if (rng() % 50 == 0) {
          env.pool->CloseSession(session);
        } else if (rng() % 200 == 0) {
          REQUIRE(env.pool->Reset(Ref(n)).ok());
          for (auto it = model.begin(); it != model.end();) {
            it = it->first.first == n.id ? model.erase(it) : std::next(it);
          }
        }
        break;
      }
      case 6: {  // presence is a subset of the model
        const int base = static_cast<int>(rng() % 200);
        auto ex = env.pool->Exists(Ref(n), env.Keys(base, 8));
        REQUIRE(ex.ok());
        for (int i = 0; i < 8; ++i) {
          if (ex->present[i]) CHECK(model.count({n.id, base + i}) == 1);
        }
        break;
      }
    }
    if (op % 500 == 0) {
      env.pool->ExpireLeases(now);
      auto st = env.pool->CheckInvariants();
      INFO("after op " << op << ": " << st.message());
      REQUIRE(st.ok());
    }
  }
  REQUIRE(env.pool->CheckInvariants().ok());
  env.pool->ExpireLeases(now + 2 * kLease);
  auto st = env.pool->Stats();
  CHECK(st.pinned_slots == 0);
  CHECK(st.reserved_slots == 0);
  CHECK(st.evictions > 0);
}

TEST_CASE("segments that stay free give their memory back", "[kv][pool]") {
  Env env(4);
  Namespace ns = env.Open("m", 256 << 10);
  env.Put(1, ns, 0, 6, 0);  // two segments
  CHECK(env.pool->Stats().segments_used == 2);
  REQUIRE(env.pool->Reset(Ref(ns)).ok());
  CHECK(env.pool->Stats().segments_used == 0);
  CHECK(env.pool->TrimFreeSegments(kSec) == 0);       // freed too recently
  CHECK(env.pool->TrimFreeSegments(20 * kSec) == 2);  // idle long enough: both trimmed
  CHECK(env.pool->TrimFreeSegments(30 * kSec) == 0);  // nothing left to trim
  // Trimmed memory reads back as zeroes and is usable again.
  env.Put(1, ns, 10, 6, 31 * kSec);
  CHECK(env.pool->Exists(Ref(ns), env.Keys(10, 6))->prefix == 6);
  REQUIRE(env.pool->CheckInvariants().ok());
}

TEST_CASE("find a namespace by name; remove single keys", "[kv][pool][ns]") {
  Env env(4);
  Namespace ns = env.Open("model/tp0", 4096);
  std::string fp;
  auto found = env.pool->FindNamespace("model/tp0", &fp);
  REQUIRE(found.ok());
  CHECK(found->id == ns.id);
  CHECK(found->digest == ns.digest);
  CHECK(fp.find("dtype=bfloat16") != std::string::npos);
  CHECK(env.pool->FindNamespace("other", nullptr).status().code() == absl::StatusCode::kNotFound);

  env.Put(1, ns, 0, 4);
  auto pins = env.pool->Lookup(2, Ref(ns), env.Keys(1, 1), 0);  // a reader holds k1
  REQUIRE(pins->hits.size() == 1);
  auto removed = env.pool->Remove(Ref(ns), env.Keys(0, 3));
  REQUIRE(removed.ok());
  CHECK(*removed == 3);
  CHECK(env.pool->Exists(Ref(ns), env.Keys(0, 4))->present ==
        std::vector<bool>{false, false, false, true});
  CHECK(*env.pool->Remove(Ref(ns), env.Keys(0, 1)) == 0);  // already gone
  REQUIRE(env.pool->CheckInvariants().ok());
  CHECK(env.pool->Stats().pinned_slots == 1);  // the reader's slot lives on, unbound
  REQUIRE(env.pool->Release(2, {pins->batch}, {}).ok());
  CHECK(env.pool->Stats().pinned_slots == 0);
  REQUIRE(env.pool->CheckInvariants().ok());
}

TEST_CASE("one session may hold only its share reserved; others' blocks stay", "[kv][pool][cap]") {
  auto slab = *SlabMapping::Create((2ull << 20) + (8ull << 20), 1u << 20);
  PoolOptions o{kLease, 16};
  o.max_reserved_bytes_per_session = 2ull << 20;  // a quarter of the slab
  Pool pool(slab->base(), o);
  Namespace ns = *pool.OpenNamespace("m", Fp(), 64 << 10);
  // Session 1 fills the pool with committed blocks.
  std::vector<CommitEntry> e;
  uint32_t committed = 0;
  for (int round = 0; round < 8; ++round) {
    auto g = pool.Reserve(1, Ref(ns), 16, true, 0);
    if (!g.ok()) break;
    e.clear();
    for (const auto& s : *g) e.push_back({s.slot, Key(committed, "a"), committed, committed++});
    REQUIRE(pool.Commit(1, Ref(ns), e, 0).ok());
  }
  REQUIRE(committed > 64);
  const uint64_t evicted_before = pool.Stats().evictions;

  // Session 2 asks for everything: refused whole, before anything is evicted.
  auto all = pool.Reserve(2, Ref(ns), 48, false, 0);
  REQUIRE(all.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(std::string(all.status().message()).find("at most 2097152 bytes") != std::string::npos);
  CHECK(pool.Stats().evictions == evicted_before);
  CHECK(pool.Exists(Ref(ns), {Key(0, "a")})->prefix == 1);

  // With allow_partial it gets its share and no more.
  auto part = pool.Reserve(2, Ref(ns), 48, true, 0);
  REQUIRE(part.ok());
  CHECK(part->size() * ns.slot_bytes <= o.max_reserved_bytes_per_session);
  CHECK(part->size() * ns.slot_bytes > o.max_reserved_bytes_per_session - ns.slot_bytes);
  CHECK(pool.Reserve(2, Ref(ns), 1, false, 0).status().code() ==
        absl::StatusCode::kResourceExhausted);
  // Another session is not held back by session 2's share.
  auto other = pool.Reserve(3, Ref(ns), 4, false, 0);
  REQUIRE(other.ok());
  // Releasing gives the share back.
  std::vector<uint64_t> slots;
  for (const auto& s : *part) slots.push_back(s.slot);
  REQUIRE(pool.Release(2, {}, slots).ok());
  CHECK(pool.Reserve(2, Ref(ns), 4, false, 0).ok());
  REQUIRE(pool.CheckInvariants().ok());
}

TEST_CASE("a namespace belongs to its creator; admins may change any", "[kv][pool][ns]") {
  Env env(4);
  const openlake::kv::Caller alice{1001, false}, bob{1002, false}, admin{0, true};
  auto ns = env.pool->OpenNamespace("alice/model", Fp(), 4096, alice);
  REQUIRE(ns.ok());
  CHECK(env.pool->MayWrite(Ref(*ns), alice).ok());
  CHECK(env.pool->MayWrite(Ref(*ns), admin).ok());
  absl::Status denied = env.pool->MayWrite(Ref(*ns), bob);
  CHECK(denied.code() == absl::StatusCode::kPermissionDenied);
  CHECK(std::string(denied.message()).find("belongs to uid 1001") != std::string::npos);
  // Opening it again (as bob) does not change its owner.
  REQUIRE(env.pool->OpenNamespace("alice/model", Fp(), 4096, bob).ok());
  CHECK(env.pool->MayWrite(Ref(*ns), bob).code() == absl::StatusCode::kPermissionDenied);
  // One an admin opened belongs to the default owner (uid 0 here).
  auto shared = env.pool->OpenNamespace("shared", Fp(), 4096, admin);
  CHECK(env.pool->MayWrite(Ref(*shared), alice).code() == absl::StatusCode::kPermissionDenied);
}

TEST_CASE("a granted slot no longer holds what its last block left", "[kv][pool][scrub]") {
  Env env(4);
  Namespace ns = env.Open("m", 4096);
  auto g = env.pool->Reserve(1, Ref(ns), 1, false, 0);
  REQUIRE(g.ok());
  auto* base = static_cast<unsigned char*>(env.slab->base());
  unsigned char* block = base + (*g)[0].offset;
  std::memset(block, 0xab, ns.block_bytes);
  const uint64_t crc = openlake::Crc64(block, ns.block_bytes);
  REQUIRE(env.pool->Commit(1, Ref(ns), {{(*g)[0].slot, Key(0), crc, 0}}, 0).ok());
  // Replay: remove K0, reserve again (the same slot comes back), commit K1 with K0's checksum
  // without writing. A reader of K1 must not find K0's bytes under that checksum.
  REQUIRE(*env.pool->Remove(Ref(ns), env.Keys(0, 1)) == 1);
  auto again = env.pool->Reserve(1, Ref(ns), 1, false, 0);
  REQUIRE(again.ok());
  REQUIRE((*again)[0].slot == (*g)[0].slot);
  REQUIRE(env.pool->Commit(1, Ref(ns), {{(*again)[0].slot, Key(1), crc, 0}}, 0).ok());
  auto pins = env.pool->Lookup(2, Ref(ns), env.Keys(1, 1), 0);
  REQUIRE(pins->hits.size() == 1);
  CHECK(openlake::Crc64(base + pins->hits[0].offset, ns.block_bytes) != pins->hits[0].checksum);
}

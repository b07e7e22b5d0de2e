// The discovery directory's pieces: stable directory keys, rendezvous homes that move little
// under churn, the homes' soft state and the owners' batched announcements.
#include "cluster/directory.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include <catch2/catch.hpp>

using namespace openlake;
using cluster::Announcement;
using cluster::Announcer;
using cluster::Directory;
using cluster::LiveSet;

namespace {

LiveSet Nodes(uint32_t first, uint32_t last, uint64_t epoch = 1) {
  LiveSet s;
  s.epoch = epoch;
  for (uint32_t id = first; id <= last; ++id) s.members.push_back({id, "n" + std::to_string(id)});
  return s;
}

auto Anyone = [](uint32_t) { return true; };

}  // namespace

TEST_CASE("DirectoryKey: the same for the same namespace and head, different otherwise",
          "[cluster]") {
  const uint64_t k = cluster::DirectoryKey("llama-8b", 42, "block-0");
  CHECK(k == cluster::DirectoryKey("llama-8b", 42, "block-0"));
  CHECK(k != cluster::DirectoryKey("llama-8b", 43, "block-0"));
  CHECK(k != cluster::DirectoryKey("llama-8c", 42, "block-0"));
  CHECK(k != cluster::DirectoryKey("llama-8b", 42, "block-1"));
  // The name's length is encoded: moving a byte between name and key changes the key.
  CHECK(cluster::DirectoryKey("ab", 1, "c") != cluster::DirectoryKey("a", 1, "bc"));
}

TEST_CASE("Homes: the top weights, spread evenly, and only the lost node's heads move",
          "[cluster]") {
  const LiveSet all = Nodes(1, 64);
  std::map<uint32_t, int> first_home;
  std::map<uint64_t, absl::InlinedVector<uint32_t, 4>> before;
  constexpr int kHeads = 64000;
  for (uint64_t h = 0; h < kHeads; ++h) {
    const uint64_t head = cluster::RendezvousWeight(h, 0);  // any spread of heads
    auto homes = cluster::Homes(head, all, 2);
    REQUIRE(homes.size() == 2);
    REQUIRE(homes[0] != homes[1]);
    CHECK(cluster::RendezvousWeight(head, homes[0]) >= cluster::RendezvousWeight(head, homes[1]));
    ++first_home[homes[0]];
    before[head] = homes;
  }
  // Even: every node is the first home of about 1/64 of the heads.
  for (const auto& [node, n] : first_home) {
    CHECK(n > kHeads / 64 * 0.8);
    CHECK(n < kHeads / 64 * 1.2);
  }
  // Node 17 leaves: a head's first home changes only when it was 17.
  LiveSet less = all;
  less.members.erase(less.members.begin() + 16);
  REQUIRE(less.members[16].id == 18);
  int moved = 0;
  for (const auto& [head, homes] : before) {
    auto now = cluster::Homes(head, less, 2);
    if (now[0] != homes[0]) {
      CHECK(homes[0] == 17);
      CHECK(now[0] == homes[1]);  // the second home takes over: it already has the entries
      ++moved;
    }
  }
  CHECK(moved == first_home[17]);
  // Fewer live nodes than homes asked for: all of them.
  CHECK(cluster::Homes(5, Nodes(1, 1), 2).size() == 1);
  CHECK(cluster::Homes(5, LiveSet{}, 2).empty());
}

TEST_CASE("Directory: entries expire, withdraw, drop with their owner, and filter by usable",
          "[cluster]") {
  Directory d({.ttl = absl::Seconds(30), .owners_per_head = 2, .max_heads = 1000});
  const absl::Time t0 = absl::FromUnixSeconds(5000);
  d.Announce(7, {100, 101}, t0);
  d.Announce(8, {100}, t0 + absl::Seconds(10));
  CHECK(d.heads() == 2);
  auto owners = d.Find(100, t0 + absl::Seconds(11), Anyone, 4);
  REQUIRE(owners.size() == 2);
  CHECK(owners[0] == 8);  // freshest first
  CHECK(owners[1] == 7);
  CHECK(d.Find(
             100, t0, [](uint32_t n) { return n != 8; }, 4)
            .size() == 1);
  CHECK(d.Find(100, t0, Anyone, 1).size() == 1);
  // 7's entry expires at t0+30, 8's at t0+40.
  owners = d.Find(100, t0 + absl::Seconds(35), Anyone, 4);
  REQUIRE(owners.size() == 1);
  CHECK(owners[0] == 8);
  CHECK(d.Find(101, t0 + absl::Seconds(35), Anyone, 4).empty());
  // A refresh extends an entry; no duplicates.
  d.Announce(7, {100}, t0 + absl::Seconds(29));
  CHECK(d.Find(100, t0 + absl::Seconds(35), Anyone, 4).size() == 2);
  // A full head replaces the entry nearest to expiry.
  d.Announce(9, {100}, t0 + absl::Seconds(30));
  owners = d.Find(100, t0 + absl::Seconds(31), Anyone, 4);
  REQUIRE(owners.size() == 2);
  CHECK(std::count(owners.begin(), owners.end(), 9) == 1);
  CHECK(std::count(owners.begin(), owners.end(), 8) == 0);  // 8 expired first (t0+40 < t0+59)
  d.Withdraw(9, {100});
  owners = d.Find(100, t0 + absl::Seconds(31), Anyone, 4);
  REQUIRE(owners.size() == 1);
  CHECK(owners[0] == 7);
  // 101's only entry (7's, until t0+30) has expired: Expire drops it and its head.
  CHECK(d.heads() == 2);
  CHECK(d.Expire(t0 + absl::Seconds(31)) == 1);
  CHECK(d.heads() == 1);
  d.DropOwner(7);
  CHECK(d.Find(100, t0 + absl::Seconds(31), Anyone, 4).empty());
  CHECK(d.heads() == 0);
}

TEST_CASE("Directory: bounded in heads, keeping the freshest", "[cluster]") {
  Directory d({.ttl = absl::Seconds(30), .owners_per_head = 2, .max_heads = 800});
  const absl::Time t0 = absl::FromUnixSeconds(5000);
  for (uint64_t h = 0; h < 2000; ++h) d.Announce(1, {h}, t0 + absl::Milliseconds(h));
  CHECK(d.heads() <= 800);
  CHECK(d.Find(1999, t0, Anyone, 1).size() == 1);
  CHECK(d.Find(0, t0, Anyone, 1).empty());
}

TEST_CASE("Announcer: batches per home, refreshes everything when due or the live set changed",
          "[cluster]") {
  Announcer a(1, {.homes = 2, .refresh = absl::Seconds(10), .settle = absl::Seconds(1)});
  const absl::Time t0 = absl::FromUnixSeconds(9000);
  LiveSet live = Nodes(1, 8, 1);
  std::vector<Announcement> local;
  auto keep_local = [&](const Announcement& x) { local.push_back(x); };
  // The first flush is a refresh of nothing.
  CHECK(a.Flush(live, t0, keep_local).empty());
  for (uint64_t h = 1; h <= 100; ++h) a.Add(h * 7919);
  a.Add(7919);  // twice: once
  CHECK(a.held() == 100);
  auto out = a.Flush(live, t0 + absl::Seconds(1), keep_local);
  // Every head went to its two homes: one message per home, never to this node.
  size_t announced = 0;
  std::set<uint32_t> homes;
  for (const Announcement& m : out) {
    CHECK(m.home != 1);
    CHECK(homes.insert(m.home).second);
    for (uint64_t h : m.announce) {
      auto hs = cluster::Homes(h, live, 2);
      CHECK(std::find(hs.begin(), hs.end(), m.home) != hs.end());
    }
    announced += m.announce.size();
  }
  size_t kept_here = 0;
  for (const Announcement& m : local) kept_here += m.announce.size();
  CHECK(announced + kept_here == 200);
  // Nothing new: nothing to send until the refresh.
  local.clear();
  CHECK(a.Flush(live, t0 + absl::Seconds(2), keep_local).empty());
  // A removal is withdrawn from its homes.
  a.Remove(7919);
  a.Remove(12345);  // never held: nothing
  out = a.Flush(live, t0 + absl::Seconds(3), keep_local);
  size_t withdrawn = 0;
  for (const Announcement& m : out) withdrawn += m.withdraw.size();
  for (const Announcement& m : local) withdrawn += m.withdraw.size();
  CHECK(withdrawn == 2);
  // Due: every held head again.
  local.clear();
  out = a.Flush(live, t0 + absl::Seconds(12), keep_local);
  announced = 0;
  for (const Announcement& m : out) announced += m.announce.size();
  for (const Announcement& m : local) announced += m.announce.size();
  CHECK(announced == 99 * 2);
  // A new live set (a node joined): once it has settled for a second, to the homes it gives.
  local.clear();
  live = Nodes(1, 9, 2);
  CHECK(a.Flush(live, t0 + absl::Seconds(13), keep_local).empty());
  live.epoch = 3;  // another change within the second: the same refresh covers it
  CHECK(a.Flush(live, t0 + absl::Milliseconds(13500), keep_local).empty());
  out = a.Flush(live, t0 + absl::Seconds(14), keep_local);
  announced = 0;
  for (const Announcement& m : out) announced += m.announce.size();
  for (const Announcement& m : local) announced += m.announce.size();
  CHECK(announced == 99 * 2);
}

TEST_CASE("Announcer: routes each head to the homes of the live set it is given", "[cluster]") {
  Announcer a(1, {});
  const LiveSet live = Nodes(1, 16, 1);
  for (uint64_t h = 1; h <= 50; ++h) a.Add(h);
  std::map<uint32_t, std::set<uint64_t>> told;
  auto keep = [&](const Announcement& m) {
    told[m.home].insert(m.announce.begin(), m.announce.end());
  };
  for (const Announcement& m : a.Flush(live, absl::FromUnixSeconds(1), keep)) keep(m);
  for (uint64_t h = 1; h <= 50; ++h) {
    for (uint32_t home : cluster::Homes(h, live, 2)) CHECK(told[home].count(h) == 1);
  }
}

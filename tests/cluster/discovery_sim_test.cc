// The discovery directory at scale, in one process: hundreds of simulated nodes, each with its
// own membership view (which learns of a death only after the probes' detection delay), its own
// Directory shard and Announcer, and a pool of whole chains. Lookups from random nodes for
// random chains go the way the daemons' do: the chain head's first home by the asker's view
// (a message unless the asker is that home; the second home only when the first does not
// answer), then the owners it names (a message each, two at most). Measured: messages per
// lookup, announcement messages, and the hit rate among lookups whose chain some live node holds
// — in steady state, through the loss of a tenth of the nodes and the start of new ones, after
// an owner restarts empty faster than its peers notice (its entries are then stale), and with
// garbage entries injected. The owner always answers from its own pool, so a wrong entry can
// only cost a miss; the simulation checks every hit's bytes against the chain's truth anyway.
#include <cstdio>
#include <deque>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/container/flat_hash_map.h"

#include "cluster/directory.h"

using namespace openlake;
using cluster::Announcement;
using cluster::LiveSet;

namespace {

struct Chain {
  uint64_t head = 0;
  uint64_t content = 0;  // stands for the chain's bytes
};

uint64_t ContentOf(uint64_t head) { return cluster::RendezvousWeight(head, 0xc0ffee); }

struct Node {
  uint32_t id = 0;
  bool up = false;
  LiveSet view;
  cluster::Directory dir{{}};
  cluster::Announcer ann{0, {}};
  absl::flat_hash_map<uint64_t, uint64_t> pool;  // head → content
  std::deque<uint64_t> order;                    // oldest first, for eviction
};

struct Counters {
  uint64_t lookups = 0;        // remote ones: missed in the asker's own pool
  uint64_t findable = 0;       // ... whose chain a live node held
  uint64_t hits = 0;           // ... found (all findable by definition)
  uint64_t messages = 0;       // lookup messages: to homes and owners
  uint64_t timeouts = 0;       // of those, to a node that was down
  uint64_t stale = 0;          // owners named by a home that did not hold the chain
  uint64_t wrong = 0;          // hits whose bytes were not the chain's
  uint64_t announcements = 0;  // owner → home messages

  double hit_rate() const { return findable == 0 ? 1.0 : double(hits) / double(findable); }
  double per_lookup() const { return lookups == 0 ? 0.0 : double(messages) / double(lookups); }
};

struct SimOptions {
  uint32_t members = 288;   // in the config
  uint32_t start_up = 256;  // running at the start
  uint32_t chains_per_node = 64;
  size_t pool_chains = 256;  // each node's pool, in whole chains
  uint32_t lookups_per_tick = 100;
  absl::Duration detect = absl::Seconds(3);  // three missed one-second probes
};

class Sim {
 public:
  explicit Sim(SimOptions o) : o_(o), rng_(20261204) {
    nodes_.resize(o_.members);
    for (uint32_t i = 0; i < o_.members; ++i) nodes_[i].id = i;
    for (uint32_t i = 0; i < o_.start_up; ++i) Start(i, /*settled=*/true);
    for (uint32_t i = 0; i < o_.start_up; ++i) {
      for (uint32_t c = 0; c < o_.chains_per_node; ++c) Save(i, rng_());
    }
  }

  absl::Time now() const { return now_; }
  Counters& counters() { return c_; }
  uint32_t members() const { return o_.members; }
  Node& node(uint32_t id) { return nodes_[id]; }

  // A node starts with an empty pool. It hears its peers' answers within a probe interval and
  // they hear its (settled: everyone already agrees, as at the start of the run).
  void Start(uint32_t id, bool settled) {
    Node& n = nodes_[id];
    n.up = true;
    n.dir = cluster::Directory({});
    n.ann = cluster::Announcer(id, {});
    n.pool.clear();
    n.order.clear();
    n.view = LiveSet{};
    n.view.members.push_back({id, ""});
    for (uint32_t p = 0; p < o_.members; ++p) {
      if (p == id || !nodes_[p].up) continue;
      if (settled) {
        SetView(n, p, true);
        SetView(nodes_[p], id, true);
      } else {
        Later(Jitter(absl::Seconds(1)), id, p, true);
        Later(Jitter(absl::Seconds(1)), p, id, true);
      }
    }
  }

  // A node dies (its pool with it); each live peer notices after the detection delay.
  void Kill(uint32_t id) {
    nodes_[id].up = false;
    for (uint32_t p = 0; p < o_.members; ++p) {
      if (p != id && nodes_[p].up) Later(o_.detect + Jitter(absl::Seconds(1)), p, id, false);
    }
  }

  // A node restarts empty within one probe interval: no peer ever sees it down.
  void QuickRestart(uint32_t id) {
    Node& n = nodes_[id];
    n.dir = cluster::Directory({});
    n.ann = cluster::Announcer(id, {});
    n.pool.clear();
    n.order.clear();
  }

  // A worker on `id` saved a chain.
  void Save(uint32_t id, uint64_t head) {
    chains_.push_back({head, ContentOf(head)});
    Hold(nodes_[id], head, ContentOf(head));
  }

  // Garbage: `count` entries on random homes naming random owners for real heads.
  void InjectGarbage(size_t count) {
    for (size_t i = 0; i < count; ++i) {
      const uint64_t head = chains_[rng_() % chains_.size()].head;
      Node& home = nodes_[RandomUp()];
      home.dir.Announce(static_cast<uint32_t>(rng_() % o_.members), {head}, now_);
    }
  }

  // Advances by `d` in 100 ms ticks: view changes, announcements, expiry, lookups.
  void Run(absl::Duration d) {
    const absl::Time end = now_ + d;
    while (now_ < end) {
      now_ += absl::Milliseconds(100);
      ApplyViews();
      for (Node& n : nodes_) {
        if (!n.up) continue;
        auto out = n.ann.Flush(n.view, now_, [&](const Announcement& a) { Deliver(n.id, a); });
        for (const Announcement& a : out) {
          ++c_.announcements;
          if (nodes_[a.home].up) Deliver(n.id, a);
        }
        if (tick_ % 10 == 0) n.dir.Expire(now_);
      }
      for (uint32_t i = 0; i < o_.lookups_per_tick; ++i)
        Lookup(RandomUp(), chains_[rng_() % chains_.size()]);
      ++tick_;
    }
  }

 private:
  struct ViewChange {
    absl::Time at;
    uint32_t observer, member;
    bool up;
  };

  absl::Duration Jitter(absl::Duration max) { return max * (double(rng_() % 1000) / 1000.0); }
  void Later(absl::Duration after, uint32_t observer, uint32_t member, bool up) {
    pending_.push_back({now_ + after, observer, member, up});
  }
  static void SetView(Node& n, uint32_t member, bool up) {
    auto& ms = n.view.members;
    auto it = std::lower_bound(ms.begin(), ms.end(), member,
                               [](const cluster::Member& m, uint32_t v) { return m.id < v; });
    const bool present = it != ms.end() && it->id == member;
    if (up == present) return;
    if (up) {
      ms.insert(it, {member, ""});
    } else {
      ms.erase(it);
    }
    ++n.view.epoch;
  }
  void ApplyViews() {
    std::vector<ViewChange> keep;
    for (const ViewChange& v : pending_) {
      if (v.at > now_) {
        keep.push_back(v);
      } else if (nodes_[v.observer].up) {
        // An answer only comes from a node that is up at that moment.
        SetView(nodes_[v.observer], v.member, v.up && nodes_[v.member].up);
      }
    }
    pending_.swap(keep);
  }
  uint32_t RandomUp() {
    for (;;) {
      const uint32_t id = static_cast<uint32_t>(rng_() % o_.members);
      if (nodes_[id].up) return id;
    }
  }
  void Hold(Node& n, uint64_t head, uint64_t content) {
    if (!n.pool.emplace(head, content).second) return;
    n.order.push_back(head);
    n.ann.Add(head);
    if (n.order.size() > o_.pool_chains) {
      const uint64_t old = n.order.front();
      n.order.pop_front();
      n.pool.erase(old);
      n.ann.Remove(old);
    }
  }
  void Deliver(uint32_t owner, const Announcement& a) {
    Node& home = nodes_[a.home];
    if (!a.announce.empty()) home.dir.Announce(owner, a.announce, now_);
    if (!a.withdraw.empty()) home.dir.Withdraw(owner, a.withdraw);
  }
  bool HeldByLive(uint64_t head) const {
    for (const Node& n : nodes_) {
      if (n.up && n.pool.contains(head)) return true;
    }
    return false;
  }

  void Lookup(uint32_t asker_id, const Chain& chain) {
    Node& asker = nodes_[asker_id];
    if (asker.pool.contains(chain.head)) return;  // a local hit: no messages
    ++c_.lookups;
    const bool findable = HeldByLive(chain.head);
    if (findable) ++c_.findable;
    auto homes = cluster::Homes(chain.head, asker.view, 2);
    for (uint32_t h : homes) {
      if (h != asker_id) ++c_.messages;
      Node& home = nodes_[h];
      if (!home.up) {
        ++c_.timeouts;
        continue;  // no answer by the deadline: try the second home
      }
      auto owners = home.dir.Find(
          chain.head, now_, [&](uint32_t o) { return o != asker_id && home.view.Contains(o); }, 2);
      for (uint32_t o : owners) {
        ++c_.messages;
        Node& owner = nodes_[o];
        if (!owner.up) {
          ++c_.timeouts;
          continue;
        }
        auto it = owner.pool.find(chain.head);
        if (it == owner.pool.end()) {
          ++c_.stale;
          continue;
        }
        if (it->second != chain.content) ++c_.wrong;
        ++c_.hits;
        Hold(asker, chain.head, it->second);  // the pulled copy, committed near its reader
        return;
      }
      return;  // the home answered: its answer stands
    }
  }

  SimOptions o_;
  std::mt19937_64 rng_;
  std::vector<Node> nodes_;
  std::vector<Chain> chains_;
  std::vector<ViewChange> pending_;
  absl::Time now_ = absl::FromUnixSeconds(1'000'000);
  uint64_t tick_ = 0;
  Counters c_;
};

void Print(const char* phase, uint32_t nodes, const Counters& c, absl::Duration over) {
  std::printf(
      "discovery sim %3u nodes  %-28s lookups %7llu  hit rate %.4f  msgs/lookup %.2f  "
      "timeouts %llu  stale %llu  wrong %llu  announce msgs/node/s %.2f\n",
      nodes, phase, static_cast<unsigned long long>(c.lookups), c.hit_rate(), c.per_lookup(),
      static_cast<unsigned long long>(c.timeouts), static_cast<unsigned long long>(c.stale),
      static_cast<unsigned long long>(c.wrong),
      double(c.announcements) / nodes / absl::ToDoubleSeconds(over));
}

}  // namespace

TEST_CASE("Discovery at 64, 256 and 512 nodes: two messages a lookup, whatever the size",
          "[cluster][sim]") {
  for (uint32_t n : {64u, 256u, 512u}) {
    Sim sim({.members = n, .start_up = n, .chains_per_node = 32, .pool_chains = 128});
    sim.Run(absl::Seconds(2));  // the first announcements land
    sim.counters() = Counters{};
    sim.Run(absl::Seconds(20));
    const Counters c = sim.counters();
    Print("steady", n, c, absl::Seconds(20));
    CHECK(c.lookups > 10000);
    CHECK(c.hit_rate() > 0.99);
    CHECK(c.per_lookup() <= 2.0);
    CHECK(c.wrong == 0);
    // Announcements: a refresh of each held head to its two homes every 10 s, batched per home.
    CHECK(double(c.announcements) / n / 20.0 < 60.0);
  }
}

TEST_CASE(
    "Discovery through churn: a tenth of the nodes die and new ones start; hits come back "
    "once the views settle",
    "[cluster][sim]") {
  Sim sim({});
  sim.Run(absl::Seconds(2));
  sim.counters() = Counters{};
  sim.Run(absl::Seconds(10));
  const Counters steady = sim.counters();
  Print("before churn", sim.members(), steady, absl::Seconds(10));
  CHECK(steady.hit_rate() > 0.99);

  // 26 of the 256 die (every tenth), and the 32 spare members start, empty.
  for (uint32_t id = 5; id < 256; id += 10) sim.Kill(id);
  for (uint32_t id = 256; id < 288; ++id) sim.Start(id, /*settled=*/false);
  sim.counters() = Counters{};
  sim.Run(absl::Seconds(5));  // detection: the dead still look alive to most views
  const Counters during = sim.counters();
  Print("churn, first 5 s", sim.members(), during, absl::Seconds(5));
  CHECK(during.wrong == 0);
  // Lookups never spend more than two homes and two owners.
  CHECK(during.per_lookup() <= 4.0);

  sim.counters() = Counters{};
  sim.Run(absl::Seconds(15));
  const Counters after = sim.counters();
  Print("churn, 5 to 20 s after", sim.members(), after, absl::Seconds(15));
  CHECK(after.hit_rate() > 0.99);
  CHECK(after.per_lookup() <= 2.05);
  CHECK(after.timeouts == 0);
  CHECK(after.wrong == 0);
}

TEST_CASE("Discovery: stale and garbage directory entries cost misses, never wrong bytes",
          "[cluster][sim]") {
  Sim sim({});
  sim.Run(absl::Seconds(2));
  // Eight owners restart empty faster than anyone notices: their entries stay until the ttl.
  for (uint32_t id = 3; id < 256; id += 32) sim.QuickRestart(id);
  sim.InjectGarbage(20000);
  sim.counters() = Counters{};
  sim.Run(absl::Seconds(10));
  const Counters stale = sim.counters();
  Print("stale + garbage entries", sim.members(), stale, absl::Seconds(10));
  CHECK(stale.stale > 0);
  CHECK(stale.wrong == 0);
  CHECK(stale.hit_rate() > 0.9);  // a stale first owner falls through to a second one

  // After the ttl (30 s) every stale entry has expired; what stays is the ordinary staleness of
  // an eviction whose withdrawal is still on its way (under a tick).
  sim.Run(absl::Seconds(25));
  sim.counters() = Counters{};
  sim.Run(absl::Seconds(10));
  const Counters later = sim.counters();
  Print("35 s later", sim.members(), later, absl::Seconds(10));
  CHECK(later.stale * 20 < stale.stale);
  CHECK(later.wrong == 0);
  CHECK(later.hit_rate() > 0.99);
}

// The cluster pool end to end: several openlaked processes on loopback with the same [[nodes]],
// a client that saves into one daemon and clients of the others that get hits for those blocks,
// pulled over UCX (TCP on lo, then shared memory) into their own daemon's slab.
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <sstream>

#include "kv_daemon.h"

#include "openlake/net/ucx.h"
#include "openlake/node/status.h"

namespace openlake::testing {
namespace {

constexpr uint32_t kBlock = 64 << 10;
constexpr int kChain = 24;

struct Cluster {
  Cluster(const TempDir& dir, int n, const std::string& tls) {
    setenv("UCX_TLS", tls.c_str(), 1);
    if (tls.find("tcp") != std::string::npos) {
      setenv("UCX_NET_DEVICES", "lo", 1);
    } else {
      unsetenv("UCX_NET_DEVICES");
    }
    for (int i = 0; i < n; ++i) ports.push_back(FreePort());
    for (int i = 0; i < n; ++i) {
      const std::string cwd = dir.File("n" + std::to_string(i));
      REQUIRE(mkdir(cwd.c_str(), 0700) == 0);
      std::ostringstream c;
      c << "mode = \"kv\"\nself_id = " << i << "\nrpc_addr = \"127.0.0.1:" << ports[i]
        << "\"\nadmin_addr = \"off\"\nkv_socket = \"" << cwd << "/sock/kv.sock\"\n"
        << "[kv_slab]\ncapacity_gb = 0.0625\nsegment_mb = 4\nreserve_ttl_secs = 60\n";
      for (int p = 0; p < n; ++p) {
        c << "[[nodes]]\nid = " << p << "\nrpc_addr = \"127.0.0.1:" << ports[p] << "\"\n";
      }
      cwds.push_back(cwd);
      daemons.push_back(std::make_unique<Daemon>(c.str()));
    }
  }
  ~Cluster() {
    unsetenv("UCX_TLS");
    unsetenv("UCX_NET_DEVICES");
  }
  bool Start(int i) { return daemons[i]->Start(cwds[i]); }
  std::string Address(int i) const { return "127.0.0.1:" + std::to_string(ports[i]); }
  // Node `at` sees every other node up.
  bool AllUp(int at) const {
    auto st = node::QueryStatus(Address(at), {{}, absl::Seconds(2)});
    if (!st.ok()) return false;
    for (const auto& p : st->peers) {
      if (p.state != "up") return false;
    }
    return st->peers.size() + 1 == ports.size();
  }
  std::string Logs() const {
    std::string all;
    for (size_t i = 0; i < daemons.size(); ++i) {
      all += "---- node " + std::to_string(i) + "\n" + daemons[i]->Output();
    }
    return all;
  }
  std::vector<uint16_t> ports;
  std::vector<std::string> cwds;
  std::vector<std::unique_ptr<Daemon>> daemons;
};

std::vector<BlockKey> ChainKeys(int writer) {
  std::vector<BlockKey> keys;
  for (int b = 0; b < kChain; ++b) keys.push_back(KeyOf(writer, b));
  return keys;
}

// Saves writer `w`'s chain through node `at`'s daemon.
void Save(const Cluster& c, int at, int w) {
  auto client = Connect(c.Address(at));
  auto ns = client->OpenNamespace("cluster", Fp(), kBlock);
  REQUIRE(ns.ok());
  std::vector<std::vector<uint8_t>> data(kChain, std::vector<uint8_t>(kBlock));
  std::vector<const void*> src;
  for (int b = 0; b < kChain; ++b) {
    Fill(data[b], w, b);
    src.push_back(data[b].data());
  }
  const std::vector<BlockKey> keys = ChainKeys(w);
  auto put = client->Put(*ns, keys, src);
  REQUIRE(put.ok());
  REQUIRE(put->stored == keys.size());
}

struct Loaded {
  size_t loaded = 0;
  int wrong = 0;
  absl::Duration took;
};

// Gets writer `w`'s chain through node `at`'s daemon; counts blocks with wrong bytes.
Loaded Load(const Cluster& c, int at, int w) {
  auto client = Connect(c.Address(at));
  auto ns = client->OpenNamespace("cluster", Fp(), kBlock);
  REQUIRE(ns.ok());
  std::vector<std::vector<uint8_t>> got(kChain, std::vector<uint8_t>(kBlock));
  std::vector<void*> dst;
  for (auto& g : got) dst.push_back(g.data());
  const absl::Time t0 = absl::Now();
  auto r = client->Get(*ns, ChainKeys(w), dst);
  Loaded out;
  out.took = absl::Now() - t0;
  REQUIRE(r.ok());
  out.loaded = r->loaded;
  std::vector<uint8_t> want(kBlock);
  for (size_t b = 0; b < r->loaded; ++b) {
    Fill(want, w, static_cast<int>(b));
    if (got[b] != want) ++out.wrong;
  }
  return out;
}

size_t ExistsPrefix(const Cluster& c, int at, int w) {
  auto client = Connect(c.Address(at));
  auto ns = client->OpenNamespace("cluster", Fp(), kBlock);
  REQUIRE(ns.ok());
  auto r = client->Exists(*ns, ChainKeys(w));
  REQUIRE(r.ok());
  return r->prefix;
}

// Loads writer `w`'s chain through node `at` until all of it comes (never a wrong byte).
bool WaitForHit(const Cluster& c, int at, int w) {
  return WaitFor(
      [&] {
        Loaded l = Load(c, at, w);
        CHECK(l.wrong == 0);
        return l.loaded == kChain;
      },
      20);
}

void RemoteHits(const std::string& tls) {
  TempDir dir;
  Cluster c(dir, 3, tls);
  for (int i = 0; i < 3; ++i) REQUIRE(c.Start(i));
  INFO(c.Logs());
  for (int i = 0; i < 3; ++i) REQUIRE(WaitFor([&] { return c.AllUp(i); }, 15));
  Save(c, 0, 1);
  // The head's homes learn of it at node 0's next announcement (within a second or two).
  REQUIRE(WaitFor([&] { return ExistsPrefix(c, 1, 1) == kChain; }, 10));
  // Node 1's daemon pulls the chain from node 0 into its own slab and serves it from there.
  Loaded l = Load(c, 1, 1);
  CHECK(l.loaded == kChain);
  CHECK(l.wrong == 0);
  auto st = Connect(c.Address(1))->Stats();
  REQUIRE(st.ok());
  CHECK(st->committed_blocks == kChain);
  // Another chain nobody saved is a miss, answered at once.
  l = Load(c, 2, 7);
  CHECK(l.loaded == 0);
  CHECK(l.took < absl::Seconds(2));
  // Node 0 dies: node 2 still finds the chain, at node 1's copy (node 1 announced it).
  kill(c.daemons[0]->pid(), SIGKILL);
  REQUIRE(WaitForHit(c, 2, 1));
  for (int i = 1; i < 3; ++i) CHECK(c.daemons[i]->Stop() == 0);
}

}  // namespace

TEST_CASE("Cluster pool over UCX on TCP (lo): a chain saved on one node is a hit on the others",
          "[kv][cluster]") {
  if (!net::UcxBuilt()) return;  // the build has no UCX (Debian ships it: deps.sh installs it)
  RemoteHits("tcp,self");
}

TEST_CASE("Cluster pool over UCX shared memory: a chain saved on one node is a hit on the others",
          "[kv][cluster]") {
  if (!net::UcxBuilt()) return;  // the build has no UCX (Debian ships it: deps.sh installs it)
  RemoteHits("sm,self");
}

TEST_CASE("Cluster pool: a stopped owner costs a miss within the deadline, never a hang",
          "[kv][cluster]") {
  if (!net::UcxBuilt()) return;  // the build has no UCX (Debian ships it: deps.sh installs it)
  TempDir dir;
  Cluster c(dir, 2, "tcp,self");
  for (int i = 0; i < 2; ++i) REQUIRE(c.Start(i));
  INFO(c.Logs());
  for (int i = 0; i < 2; ++i) REQUIRE(WaitFor([&] { return c.AllUp(i); }, 15));
  Save(c, 0, 3);
  REQUIRE(WaitFor([&] { return ExistsPrefix(c, 1, 3) == kChain; }, 10));
  kill(c.daemons[0]->pid(), SIGSTOP);
  const absl::Time t0 = absl::Now();
  CHECK(ExistsPrefix(c, 1, 3) == 0);
  Loaded l = Load(c, 1, 3);
  CHECK(l.loaded == 0);
  CHECK(absl::Now() - t0 < absl::Seconds(5));
  kill(c.daemons[0]->pid(), SIGCONT);
  // Once it answers again, the chain is a hit again, byte-exact.
  REQUIRE(WaitForHit(c, 1, 3));
  for (int i = 0; i < 2; ++i) CHECK(c.daemons[i]->Stop() == 0);
}

}  // namespace openlake::testing

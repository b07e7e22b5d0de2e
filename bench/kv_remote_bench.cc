// kv_remote_bench: the cluster pool's pulls between two daemons against UCX's own limit, measured
// in one run.
//
//   kv_remote_bench [--json] [--quick] [--openlaked PATH] [--transport tcp|sm]
//                   [--ucx-perftest PATH] [--chains N] [--passes N]
//
// Two openlaked on loopback form a cluster ([[nodes]] on both); UCX runs over TCP on `lo`
// (UCX_TLS=tcp,self UCX_NET_DEVICES=lo) or over shared memory (sm,self). For 2 MiB and then
// 256 KiB blocks:
//   setup   a client of node A stores `chains` chains of 64 blocks there; node B's Exists waits
//           until the directory has them.
//   pulls   a client of node B looks each chain up: B's daemon finds the owner (the head's
//           home, then A), reserves 64 slots, reads the 64 blocks from A's slab with one batched
//           one-sided UCX get straight into its own slab, checks every CRC-64 and A's lease,
//           commits them, and answers. Then the client releases the pins and removes the blocks
//           from B, so that the next pass pulls again. A first pass is not measured (B's slab
//           pages take their first faults). Two figures:
//             remote_get   the gets alone (B's own clock around each batch, from the pull_get
//                          counters in its stats): the transport as the daemon drives it;
//             remote_hit   the whole remote hit as the client sees it (lookup + find + gets +
//                          verify + commit + answer), bytes ÷ the Lookup calls' time.
//           A pull that comes back short (its gets past the pull deadline, on a slow transport)
//           is counted in short_pulls, and only what came counts. A Get at B of the last chain
//           must then load byte-exact whatever it loads (the run fails otherwise).
//   ucx     ucx_perftest (Debian's ucx-utils) with the same transport and devices, message size
//           and 64 outstanding operations: ucp_get and ucp_put_bw, each run before and after the
//           pulls (their mean is the baseline). UCX 1.13's TCP transport has no RDMA: a get is
//           emulated by an active message that the owner's worker answers with the bytes, so
//           ucp_get is the honest ceiling for remote_get there (ucp_put_bw is reported too;
//           over TCP it is the slower of the two on this machine).
// Then, once (4 KiB blocks, a chain of 1,000 keys stored on A):
//   lookup1000   Exists of the 1,000 keys at B, which holds none of them: B asks the head's
//                home for owners and A for the prefix it holds (no bytes move): p50 and p99,
//                against the same Exists at A (local) and a one-key Exists at A (the round trip
//                of a call on loopback). The bar (PERF.md): ≤ 2 × local + one round trip.
//   pull1000     a Lookup of the same 1,000 keys at B that pulls all of them (4 MiB), p50.
// Output: human-readable lines; with --json one JSON object per block size, the last one for
// 256 KiB. Exit status: 0 on success, 1 when the KV path failed, 2 on bad arguments.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "bench_util.h"

#include "openlake/io/buffer.h"
#include "openlake/kv/client.h"
#include "openlake/node/status.h"
#include "openlake/status.h"

#ifndef OL_BENCH_OPENLAKED
#define OL_BENCH_OPENLAKED "openlaked"
#endif

namespace openlake::bench {
namespace {

constexpr size_t kBatch = 64;
constexpr size_t kLookupKeys = 1000;
constexpr double kGB = 1e9;

struct Options {
  bool json = false;
  bool quick = false;
  std::string openlaked = OL_BENCH_OPENLAKED;
  std::string transport = "tcp";
  std::string perftest = "ucx_perftest";
  int chains = 4;
  int passes = 3;
  int lookups = 300;
  bool keep = false;
  std::string ucx_tls;  // overrides the transport's UCX_TLS
};

struct Node {
  Child child;
  std::string address;
};

// Two daemons with the same [[nodes]]; the slab of A holds every chain, B's one chain at a time.
absl::StatusOr<std::vector<Node>> StartCluster(const Options& o, const std::string& dir,
                                               uint64_t slab_a, uint64_t slab_b) {
  const std::string path = FindProgram(o.openlaked);
  if (path.empty()) return absl::NotFoundError("openlaked not found: " + o.openlaked);
  std::vector<uint16_t> ports(2);
  for (uint16_t& p : ports) {
    OL_ASSIGN_OR_RETURN(p, FreeLoopbackPort());
  }
  std::vector<Node> nodes(2);
  for (int i = 0; i < 2; ++i) {
    const std::string cfg = dir + "/node" + std::to_string(i) + ".toml";
    std::ofstream f(cfg);
    f << "mode = \"kv\"\nself_id = " << i << "\nrpc_addr = \"127.0.0.1:" << ports[i]
      << "\"\nadmin_addr = \"off\"\nkv_socket = \"" << dir << "/kv" << i << ".sock\"\n"
      // A core each (on a machine with two or more): the two daemons stand for two hosts, and
      // each pool's reactor (which runs its UCX worker) must not wait for the other's.
      << "cores = [" << i % std::max(1u, std::thread::hardware_concurrency()) << "]\n"
      << "[kv_slab]\ncapacity_gb = "
      << static_cast<double>(i == 0 ? slab_a : slab_b) / (1ull << 30) << "\nsegment_mb = 16\n";
    for (int p = 0; p < 2; ++p) {
      f << "[[nodes]]\nid = " << p << "\nrpc_addr = \"127.0.0.1:" << ports[p] << "\"\n";
    }
    f.close();
    nodes[i].address = "127.0.0.1:" + std::to_string(ports[i]);
    OL_ASSIGN_OR_RETURN(nodes[i].child,
                        Child::Spawn({path, "--config", cfg, "--log-level", "warning"},
                                     dir + "/node" + std::to_string(i) + ".log", -1));
  }
  // Each sees the other up.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (Node& n : nodes) {
    for (;;) {
      auto st = node::QueryStatus(n.address, {{}, absl::Seconds(2)});
      if (st.ok() && st->peers.size() == 1 && st->peers[0].state == "up") break;
      if (!n.child.Alive()) {
        return absl::UnavailableError("openlaked exited during start-up:\n" + n.child.LogTail());
      }
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError("the two daemons did not see each other up:\n" +
                                           n.child.LogTail());
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  }
  return nodes;
}

kv::BlockKey MakeKey(uint64_t i) { return MixedKey(i * 4 + 0x7e57); }

kv::LayoutFingerprint Fingerprint() {
  kv::LayoutFingerprint fp;
  fp.model = "kv_remote_bench";
  fp.dtype = "bfloat16";
  return fp;
}

// ucx_perftest's overall bandwidth (GB/s) for `test` with `size`-byte messages and 64
// outstanding, on the transport of this process's environment.
absl::StatusOr<double> RunPerftest(const Options& o, const std::string& dir,
                                   const std::string& test, uint32_t size, uint64_t bytes) {
  const std::string path = FindProgram(o.perftest);
  if (path.empty()) return absl::NotFoundError("ucx_perftest not found (Debian's ucx-utils)");
  OL_ASSIGN_OR_RETURN(uint16_t port, FreeLoopbackPort());
  OL_ASSIGN_OR_RETURN(Child server, Child::Spawn({path, "-p", std::to_string(port)},
                                                 dir + "/perftest-server.log", -1));
  absl::SleepFor(absl::Milliseconds(300));  // listening
  const uint64_t iters = std::max<uint64_t>(64, bytes / size);
  const std::string out = dir + "/perftest.out";
  OL_ASSIGN_OR_RETURN(
      Child client,
      Child::Spawn({path, "127.0.0.1", "-p", std::to_string(port), "-t", test, "-s",
                    std::to_string(size), "-n", std::to_string(iters), "-w",
                    std::to_string(std::max<uint64_t>(8, iters / 10)), "-O",
                    std::to_string(kBatch), "-f"},
                   out, -1));
  const int st = client.Wait(absl::Seconds(120), absl::Seconds(2));
  server.Stop(absl::Seconds(2));
  // The final line: iterations, latency p50/avg/overall, bandwidth avg/overall (MB/s = 2^20
  // bytes/s), message rate avg/overall.
  std::ifstream in(out);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty() && line.find_first_not_of(" 0123456789.") == std::string::npos) last = line;
  }
  std::vector<std::string> f = absl::StrSplit(last, ' ', absl::SkipEmpty());
  if (st != 0 || f.size() < 8) {
    return absl::InternalError("ucx_perftest " + test + " failed (status " + std::to_string(st) +
                               "):\n" + client.LogTail());
  }
  return std::strtod(f[5].c_str(), nullptr) * 1048576.0 / kGB;
}

struct Figures {
  uint32_t block_bytes = 0;
  double remote_get_GBps = NAN;  // the gets alone, as B's daemon timed them
  double remote_hit_GBps = NAN;  // the client's Lookups at B, each pulling a whole chain
  double ucx_get_GBps = NAN, ucx_put_GBps = NAN;
  uint64_t pulls = 0, rejected = 0;
  uint64_t short_pulls = 0;  // measured or not: pulls that brought less than the whole chain
  bool verified = false;    // what a Get at B loaded of a chain is byte-exact
  size_t final_loaded = 0;  // how much of it that Get loaded
};

struct LookupFigures {
  double remote_p50 = NAN, remote_p99 = NAN;  // Exists of 1,000 keys at B (all on A)
  double local_p50 = NAN, local_p99 = NAN;    // the same at A
  double rtt_p50 = NAN;                       // one-key Exists at A
  double pull_p50 = NAN;                      // Lookup at B pulling the 1,000 blocks
};

absl::StatusOr<std::unique_ptr<kv::Client>> Connect(const std::string& address) {
  return kv::Client::Connect(address, {});
}

// Waits until node B's Exists finds the whole of `keys` (on A: the directory has the chain).
absl::Status WaitFound(kv::Client& b, const kv::Namespace& ns,
                       const std::vector<kv::BlockKey>& keys) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (;;) {
    OL_ASSIGN_OR_RETURN(kv::ExistsResult r, b.Exists(ns, keys));
    if (r.prefix == keys.size()) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("node B never found the chain on node A");
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

absl::StatusOr<Figures> RunOne(const Options& o, const std::vector<Node>& nodes,
                               const std::string& dir, uint32_t block, int ns_index) {
  Figures f;
  f.block_bytes = block;
  OL_ASSIGN_OR_RETURN(auto a, Connect(nodes[0].address));
  OL_ASSIGN_OR_RETURN(auto b, Connect(nodes[1].address));
  const std::string name = "remote-bench-" + std::to_string(ns_index);
  OL_ASSIGN_OR_RETURN(kv::Namespace ns_a, a->OpenNamespace(name, Fingerprint(), block));
  OL_ASSIGN_OR_RETURN(kv::Namespace ns_b, b->OpenNamespace(name, Fingerprint(), block));

  io::AlignedBuffer src(uint64_t{block} * kBatch), dst(uint64_t{block} * kBatch);
  std::vector<std::vector<kv::BlockKey>> chains(o.chains);
  for (int c = 0; c < o.chains; ++c) {
    FillRandom(src.data(), src.size(), uint64_t{block} * 1000 + c);
    std::vector<const void*> ptrs;
    for (size_t i = 0; i < kBatch; ++i) {
      chains[c].push_back(MakeKey((uint64_t{block} << 20) + c * kBatch + i));
      ptrs.push_back(src.data() + i * block);
    }
    OL_ASSIGN_OR_RETURN(kv::PutResult put, a->Put(ns_a, chains[c], ptrs));
    if (put.stored != kBatch) return absl::ResourceExhaustedError("node A's slab is too small");
  }
  for (const auto& keys : chains) OL_RETURN_IF_ERROR(WaitFound(*b, ns_b, keys));

  const uint64_t pull_bytes = uint64_t{block} * kBatch * o.chains * o.passes;
  OL_ASSIGN_OR_RETURN(double get_before, RunPerftest(o, dir, "ucp_get", block, pull_bytes / 2));
  OL_ASSIGN_OR_RETURN(double put_before, RunPerftest(o, dir, "ucp_put_bw", block, pull_bytes / 2));

  // One pull of a chain at B, timed; then B forgets it, so that the next one pulls again.
  int64_t lookup_ns = 0;
  uint64_t moved = 0;
  auto pull = [&](const std::vector<kv::BlockKey>& keys) -> absl::Status {
    const int64_t t0 = NowNs();
    OL_ASSIGN_OR_RETURN(kv::Pins pins, b->Lookup(ns_b, keys));
    lookup_ns += NowNs() - t0;
    // A pull that fell short (its gets past the pull deadline on a slow transport) is counted,
    // and only what came counts as moved.
    if (pins.from_peers != keys.size()) ++f.short_pulls;
    moved += uint64_t{block} * pins.from_peers;
    OL_RETURN_IF_ERROR(b->Release({&pins.batch, 1}, {}));
    return b->Remove(ns_b, keys).status();
  };
  // Unmeasured: the first pulls into B's slab pay its pages' first faults (a long-running daemon
  // has touched them long since).
  for (const auto& keys : chains) OL_RETURN_IF_ERROR(pull(keys));
  lookup_ns = 0;
  moved = 0;
  OL_ASSIGN_OR_RETURN(kv::PoolStats s0, b->Stats());
  for (int pass = 0; pass < o.passes; ++pass) {
    for (const auto& keys : chains) OL_RETURN_IF_ERROR(pull(keys));
  }
  OL_ASSIGN_OR_RETURN(kv::PoolStats s1, b->Stats());

  OL_ASSIGN_OR_RETURN(double get_after, RunPerftest(o, dir, "ucp_get", block, pull_bytes / 2));
  OL_ASSIGN_OR_RETURN(double put_after, RunPerftest(o, dir, "ucp_put_bw", block, pull_bytes / 2));
  f.ucx_get_GBps = (get_before + get_after) / 2;
  f.ucx_put_GBps = (put_before + put_after) / 2;
  const double get_s = s1.pull_get_seconds - s0.pull_get_seconds;
  f.remote_get_GBps = static_cast<double>(s1.pulled_bytes - s0.pulled_bytes) / get_s / kGB;
  f.remote_hit_GBps = static_cast<double>(moved) / (static_cast<double>(lookup_ns) / 1e9) / kGB;
  f.pulls = s1.pulls - s0.pulls;
  f.rejected = s1.pull_rejected_blocks - s0.pull_rejected_blocks;

  // The last chain once more, pulled and read out at B: byte-exact.
  FillRandom(src.data(), src.size(), uint64_t{block} * 1000 + (o.chains - 1));
  std::vector<void*> out;
  for (size_t i = 0; i < kBatch; ++i) out.push_back(dst.data() + i * block);
  OL_ASSIGN_OR_RETURN(kv::GetResult g, b->Get(ns_b, chains.back(), out));
  // Whatever it loaded must be the bytes stored (a slow transport may bring fewer in time).
  f.verified = std::memcmp(src.data(), dst.data(), uint64_t{block} * g.loaded) == 0;
  f.final_loaded = g.loaded;
  OL_RETURN_IF_ERROR(a->Reset(ns_a));
  OL_RETURN_IF_ERROR(b->Reset(ns_b));
  return f;
}

absl::StatusOr<LookupFigures> RunLookups(const Options& o, const std::vector<Node>& nodes) {
  LookupFigures f;
  constexpr uint32_t kSmall = 4096;
  OL_ASSIGN_OR_RETURN(auto a, Connect(nodes[0].address));
  OL_ASSIGN_OR_RETURN(auto b, Connect(nodes[1].address));
  OL_ASSIGN_OR_RETURN(kv::Namespace ns_a, a->OpenNamespace("remote-lookup", Fingerprint(), kSmall));
  OL_ASSIGN_OR_RETURN(kv::Namespace ns_b, b->OpenNamespace("remote-lookup", Fingerprint(), kSmall));
  std::vector<kv::BlockKey> keys;
  io::AlignedBuffer src(uint64_t{kSmall} * kLookupKeys);
  FillRandom(src.data(), src.size(), 42);
  std::vector<const void*> ptrs;
  for (size_t i = 0; i < kLookupKeys; ++i) {
    keys.push_back(MakeKey((uint64_t{1} << 40) + i));
    ptrs.push_back(src.data() + i * kSmall);
  }
  OL_ASSIGN_OR_RETURN(kv::PutResult put, a->Put(ns_a, keys, ptrs));
  if (put.stored != kLookupKeys) return absl::ResourceExhaustedError("node A is too small");
  OL_RETURN_IF_ERROR(WaitFound(*b, ns_b, keys));
  auto time_exists = [&](kv::Client& c, const kv::Namespace& ns,
                         absl::Span<const kv::BlockKey> ks, int n,
                         std::vector<double>* us) -> absl::Status {
    for (int i = 0; i < n; ++i) {
      const int64_t t0 = NowNs();
      OL_ASSIGN_OR_RETURN(kv::ExistsResult r, c.Exists(ns, ks));
      us->push_back(static_cast<double>(NowNs() - t0) / 1e3);
      if (r.prefix != ks.size()) return absl::InternalError("Exists lost the chain");
    }
    return absl::OkStatus();
  };
  // Interleaved, so that both see the same minute.
  std::vector<double> remote, local, rtt;
  for (int round = 0; round < 3; ++round) {
    OL_RETURN_IF_ERROR(time_exists(*b, ns_b, keys, o.lookups / 3, &remote));
    OL_RETURN_IF_ERROR(time_exists(*a, ns_a, keys, o.lookups / 3, &local));
    OL_RETURN_IF_ERROR(time_exists(*a, ns_a, absl::MakeConstSpan(keys).subspan(0, 1),
                                   o.lookups / 3, &rtt));
  }
  f.remote_p50 = Median(remote);
  f.remote_p99 = Percentile(remote, 99);
  f.local_p50 = Median(local);
  f.local_p99 = Percentile(local, 99);
  f.rtt_p50 = Median(rtt);
  std::vector<double> pull;
  for (int i = 0; i < std::max(3, o.lookups / 20); ++i) {
    const int64_t t0 = NowNs();
    OL_ASSIGN_OR_RETURN(kv::Pins pins, b->Lookup(ns_b, keys));
    pull.push_back(static_cast<double>(NowNs() - t0) / 1e3);
    if (pins.hits.size() != keys.size()) return absl::InternalError("a pull of 1,000 fell short");
    OL_RETURN_IF_ERROR(b->Release({&pins.batch, 1}, {}));
    OL_RETURN_IF_ERROR(b->Remove(ns_b, keys).status());
  }
  f.pull_p50 = Median(pull);
  return f;
}

int Main(int argc, char** argv) {
  Options o;
  CLI::App app{"kv_remote_bench: pulls between two daemons against ucx_perftest"};
  app.add_flag("--json", o.json, "end with one JSON line per block size");
  app.add_flag("--quick", o.quick, "a small run (a smoke run, not a measurement)");
  app.add_option("--openlaked", o.openlaked, "the daemon to run");
  app.add_option("--transport", o.transport, "UCX over 'tcp' (on lo) or 'sm' (shared memory)")
      ->check(CLI::IsMember({"tcp", "sm"}));
  app.add_option("--ucx-perftest", o.perftest, "ucx_perftest");
  app.add_option("--chains", o.chains, "chains of 64 blocks stored on node A")
      ->check(CLI::Range(1, 64));
  app.add_option("--passes", o.passes, "passes of pulls over the chains")
      ->check(CLI::Range(1, 100));
  app.add_option("--ucx-tls", o.ucx_tls, "UCX_TLS instead of the transport's own");
  app.add_flag("--keep", o.keep, "keep the scratch folder (the daemons' configs and logs)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (o.quick) {
    o.chains = 2;
    o.passes = 1;
    o.lookups = 30;
  }
  // The daemons and ucx_perftest all take their transport from the environment.
  if (o.transport == "tcp") {
    setenv("UCX_TLS", "tcp,self", 1);
    setenv("UCX_NET_DEVICES", "lo", 1);
  } else {
    setenv("UCX_TLS", "sm,self", 1);
    unsetenv("UCX_NET_DEVICES");
  }
  if (!o.ucx_tls.empty()) setenv("UCX_TLS", o.ucx_tls.c_str(), 1);
  const std::string transport = std::string("ucx ") + getenv("UCX_TLS") +
                                (o.transport == "tcp" ? " on lo" : "");
  PrintMachine(ProbeMachine(0));
  PrintBackgroundLoad(BackgroundLoad(absl::Milliseconds(300)));
  auto scratch = TempDir::Create("/tmp", "openlake-remotebench-");
  if (!scratch.ok()) {
    std::fprintf(stderr, "kv_remote_bench: %s\n", std::string(scratch.status().message()).c_str());
    return 1;
  }
  if (o.keep) {
    scratch->Keep();
    std::printf("scratch folder (kept): %s\n", scratch->path().c_str());
  }
  const uint64_t largest = uint64_t{2} << 20;
  auto nodes = StartCluster(o, scratch->path(), largest * kBatch * o.chains + (256ull << 20),
                            largest * kBatch * 2 + (128ull << 20));
  if (!nodes.ok()) {
    std::fprintf(stderr, "kv_remote_bench: %s\n", std::string(nodes.status().message()).c_str());
    return 1;
  }
  auto lookups = RunLookups(o, *nodes);
  if (!lookups.ok()) {
    std::fprintf(stderr, "kv_remote_bench: lookups: %s\n",
                 std::string(lookups.status().message()).c_str());
    return 1;
  }
  // The bar (PERF.md) for each percentile: twice the local figure plus one round trip.
  const double bar = 2 * lookups->local_p50 + lookups->rtt_p50;
  const double bar99 = 2 * lookups->local_p99 + lookups->rtt_p50;
  std::printf(
      "Exists of 1,000 keys held by the peer: p50 %.1f µs, p99 %.1f µs (local %.1f / %.1f µs, "
      "one-key round trip %.1f µs: bar 2 × local + round trip = %.1f / %.1f µs, %.2f / %.2f "
      "of it)\n"
      "Lookup of 1,000 4 KiB blocks pulled from the peer: p50 %.1f µs\n",
      lookups->remote_p50, lookups->remote_p99, lookups->local_p50, lookups->local_p99,
      lookups->rtt_p50, bar, bar99, lookups->remote_p50 / bar, lookups->remote_p99 / bar99,
      lookups->pull_p50);
  std::vector<std::string> lines;
  int index = 0;
  for (uint32_t block : {2u << 20, 256u << 10}) {
    auto f = RunOne(o, *nodes, scratch->path(), block, index++);
    if (!f.ok()) {
      std::fprintf(stderr, "kv_remote_bench: %u KiB blocks: %s\n", block >> 10,
                   std::string(f.status().message()).c_str());
      for (Node& n : *nodes) std::fprintf(stderr, "%s\n", n.child.LogTail().c_str());
      return 1;
    }
    std::printf(
        "%4u KiB blocks, batches of %zu, %s, %llu pulls:\n"
        "  remote get %6.2f GB/s (ucx_perftest ucp_get %6.2f, ucp_put_bw %6.2f GB/s): %.2f of "
        "ucp_get\n"
        "  remote hit %6.2f GB/s (lookup, find, gets, CRC-64, commit, answer)\n"
        "  %llu blocks rejected, %llu pulls short; a chain read back at B: %zu of %zu blocks, "
        "%s\n",
        block >> 10, kBatch, transport.c_str(), static_cast<unsigned long long>(f->pulls),
        f->remote_get_GBps, f->ucx_get_GBps, f->ucx_put_GBps,
        Ratio(f->remote_get_GBps, f->ucx_get_GBps), f->remote_hit_GBps,
        static_cast<unsigned long long>(f->rejected),
        static_cast<unsigned long long>(f->short_pulls), f->final_loaded, kBatch,
        f->verified ? "byte-exact" : "DIFFERENT BYTES");
    std::fflush(stdout);
    if (!f->verified) return 1;
    JsonLine j;
    j.Add("bench", "kv_remote")
        .Add("block_bytes", uint64_t{block})
        .Add("batch", static_cast<uint64_t>(kBatch))
        .Add("transport", transport)
        .Add("remote_get_GBps", f->remote_get_GBps)
        .Add("remote_hit_GBps", f->remote_hit_GBps)
        .Add("ucx_get_GBps", f->ucx_get_GBps)
        .Add("ucx_put_GBps", f->ucx_put_GBps)
        .Add("remote_get_over_ucx", Ratio(f->remote_get_GBps, f->ucx_get_GBps))
        .Add("remote_hit_over_ucx", Ratio(f->remote_hit_GBps, f->ucx_get_GBps))
        .Add("remote_lookup1000_p50_us", lookups->remote_p50, 1)
        .Add("remote_lookup1000_p99_us", lookups->remote_p99, 1)
        .Add("local_lookup1000_p50_us", lookups->local_p50, 1)
        .Add("local_lookup1000_p99_us", lookups->local_p99, 1)
        .Add("rtt_p50_us", lookups->rtt_p50, 1)
        .Add("remote_lookup_over_bar", lookups->remote_p50 / bar)
        .Add("remote_lookup_p99_over_bar", lookups->remote_p99 / bar99)
        .Add("remote_pull1000_p50_us", lookups->pull_p50, 1)
        .Add("pull_rejected_blocks", f->rejected)
        .Add("short_pulls", f->short_pulls);
    lines.push_back(j.str());
  }
  for (Node& n : *nodes) n.child.Stop(absl::Seconds(20));
  if (o.json) {
    for (const std::string& l : lines) std::printf("%s\n", l.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace openlake::bench

int main(int argc, char** argv) { return openlake::bench::Main(argc, argv); }

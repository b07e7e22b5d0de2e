// kv_bench: the KV pool's data and control paths against their limits, measured in one run.
//
//   kv_bench [--json] [--quick] [--openlaked PATH | --target ADDR] [--redis-server PATH]
//
// For 2 MiB and then 256 KiB blocks, in batches of 64:
//   put   kv::Client::Put of contiguous blocks into a running openlaked (Reserve → copy with
//         CRC-64 → Commit: the real path, checksums included);
//   get   kv::Client::Get back into separate buffers (Lookup → copy, CRC verified → Release);
//   memcpy  the same bytes, same block size, copied by one core into a separate buffer: the
//         limit a local put or get can reach;
//   redis   the store a user would pick instead: redis-server (started here, loopback, no
//         persistence), 64 pipelined SETs then 64 pipelined GETs on one connection.
// Then the control plane: Lookup of 1,000 keys in one call (then Release), p50 and p99, and
// alternating with it a Lookup of one key: the round trip's fixed cost (the RPC, two wake-ups),
// so that the 1,000-key figure splits into that floor and the cost per key.
//
// Every figure is taken in steady state: Put repeats until a whole pass takes no page fault (the
// slab pages are mapped), one warm-up round of every path touches the buffers and Redis's memory,
// and each figure is the median over the measured rounds; the rounds interleave put, get, memcpy
// and Redis so that noise on the shared machine hits all of them alike. The page faults taken
// during the measured rounds and the CPU share other processes took are printed with them.
//
// The bench starts its own openlaked (a temporary config: mode "kv", a free loopback port, a
// socket in a temporary folder, a slab sized to the working set) and stops it with SIGTERM,
// unless --target names a daemon that is already running. Output: human-readable lines, then
// with --json one JSON object per block size; the last line holds the 256 KiB figures.
// Exit status: 0 on success, 1 when the KV path itself failed, 2 on bad arguments.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

#include "bench_util.h"
#include "resp_client.h"

#include "openlake/io/buffer.h"
#include "openlake/io/reactor.h"
#include "openlake/kv/client.h"
#include "openlake/kv/types.h"
#include "openlake/status.h"

#ifndef OL_BENCH_OPENLAKED
#define OL_BENCH_OPENLAKED "openlaked"
#endif

namespace openlake::bench {
namespace {

constexpr size_t kBatch = 64;
constexpr uint32_t kLookupKeys = 1000;
constexpr uint32_t kLookupBlockBytes = 4096;
constexpr double kGB = 1e9;

struct Options {
  bool json = false;
  bool quick = false;
  std::string openlaked = OL_BENCH_OPENLAKED;
  std::string target;  // a running daemon; empty: start one
  std::string redis_server = "redis-server";
  bool no_redis = false;
  bool verbose = false;           // print every round
  uint64_t working_set_mb = 256;  // per block size
  double seconds = 2.0;           // measured time per block size, at least
  int min_rounds = 3;
  int max_rounds = 40;
  int lookup_iters = 1000;
  int client_cpu = -2;  // -2: choose; -1: do not pin
  int server_cpu = -2;
  std::string tmp_parent = "/tmp";
};

// ---- Servers

// Members die in reverse order: the daemon stops before its folder is removed.
struct Daemon {
  TempDir dir;
  Child child;  // not running when --target was given
  std::string address;
};

// A TOML config for a throwaway KV daemon on a free loopback port.
std::string DaemonConfig(uint16_t port, const std::string& socket, double capacity_gb, int cpu) {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "mode = \"kv\"\n"
                "rpc_addr = \"127.0.0.1:%u\"\n"
                "kv_socket = \"%s\"\n"
                "%s"
                "[kv_slab]\n"
                "capacity_gb = %.4f\n"
                "segment_mb = 64\n"
                "reserve_ttl_secs = 60\n",
                port, socket.c_str(),
                cpu >= 0 ? ("cores = [" + std::to_string(cpu) + "]\n").c_str() : "", capacity_gb);
  return buf;
}

// Slab GiB for `working_set` bytes of each block size: the working set, two batches of headroom
// (a re-put reserves new slots before the old ones are freed), two segments of rounding per
// size, and 256 MiB for the lookup namespace and the slab's headers.
double SlabGiB(uint64_t working_set, const std::vector<uint32_t>& block_sizes) {
  uint64_t bytes = 256ull << 20;
  for (uint32_t b : block_sizes) bytes += working_set + 2 * kBatch * b + (128ull << 20);
  return static_cast<double>(bytes) / static_cast<double>(1ull << 30);
}

absl::StatusOr<Daemon> StartDaemon(const Options& o, int cpu, double capacity_gb) {
  Daemon d;
  OL_ASSIGN_OR_RETURN(d.dir, TempDir::Create(o.tmp_parent, "openlake-kvbench-"));
  OL_ASSIGN_OR_RETURN(uint16_t port, FreeLoopbackPort());
  const std::string config_path = d.dir.path() + "/openlaked.toml";
  {
    std::ofstream f(config_path);
    f << DaemonConfig(port, d.dir.path() + "/kv.sock", capacity_gb, cpu);
    if (!f) return absl::InternalError("cannot write " + config_path);
  }
  const std::string path = FindProgram(o.openlaked);
  if (path.empty()) return absl::NotFoundError("openlaked not found: " + o.openlaked);
  OL_ASSIGN_OR_RETURN(d.child,
                      Child::Spawn({path, "--config", config_path, "--log-level", "warning"},
                                   d.dir.path() + "/openlaked.log", cpu));
  d.address = "127.0.0.1:" + std::to_string(port);
  return d;
}

// Connects, retrying while a daemon we started is coming up (at most `wait`).
absl::StatusOr<std::unique_ptr<kv::Client>> ConnectKv(Daemon& d, absl::Duration wait) {
  const int64_t deadline = NowNs() + absl::ToInt64Nanoseconds(wait);
  kv::ClientOptions co;
  co.connect_timeout = absl::Seconds(2);
  for (;;) {
    auto c = kv::Client::Connect(d.address, co);
    if (c.ok()) return c;
    const bool ours = d.child.pid() >= 0;
    if (ours && !d.child.Alive()) {
      return absl::UnavailableError("openlaked exited during start-up:\n" + d.child.LogTail());
    }
    if (!ours || NowNs() > deadline) return c.status();
    usleep(20000);
  }
}

struct Redis {
  Child child;
  RespClient conn;
};

absl::StatusOr<Redis> StartRedis(const std::string& path, const std::string& dir, int cpu) {
  Redis r;
  OL_ASSIGN_OR_RETURN(uint16_t port, FreeLoopbackPort());
  OL_ASSIGN_OR_RETURN(r.child, Child::Spawn({path, "--save", "", "--appendonly", "no", "--port",
                                             std::to_string(port), "--bind", "127.0.0.1", "--dir",
                                             dir, "--daemonize", "no"},
                                            dir + "/redis.log", cpu));
  const int64_t deadline = NowNs() + 10'000'000'000;
  for (;;) {
    auto conn = RespClient::Connect(port, absl::Seconds(30));
    if (conn.ok()) {
      auto pong = conn->Simple({"PING"});
      if (pong.ok() && *pong == "PONG") {
        r.conn = *std::move(conn);
        return r;
      }
    }
    if (!r.child.Alive()) {
      return absl::UnavailableError("redis-server exited during start-up:\n" + r.child.LogTail());
    }
    if (NowNs() > deadline) return absl::DeadlineExceededError("redis-server did not answer");
    usleep(20000);
  }
}

// ---- One block size

// The blocks of one block size: sources, destinations, keys.
struct Blocks {
  uint32_t block_bytes = 0;
  size_t count = 0;  // a multiple of kBatch
  io::AlignedBuffer src, dst, copy_dst;
  std::vector<kv::BlockKey> keys;
  std::vector<std::string> redis_keys;
  std::vector<const void*> src_ptrs;
  std::vector<void*> dst_ptrs;

  size_t batches() const { return count / kBatch; }
  uint64_t bytes() const { return uint64_t{block_bytes} * count; }
};

// 32-byte keys, as an engine's block hashes are.
kv::BlockKey MakeKey(uint64_t space, uint64_t i) {
  return MixedKey(space * 0x100000001b3ull + i * 4);
}

absl::StatusOr<Blocks> MakeBlocks(uint32_t block_bytes, uint64_t working_set) {
  Blocks b;
  b.block_bytes = block_bytes;
  const uint64_t batch_bytes = uint64_t{block_bytes} * kBatch;
  b.count = std::max<uint64_t>(1, working_set / batch_bytes) * kBatch;
  b.src = io::AlignedBuffer(b.bytes());
  b.dst = io::AlignedBuffer(b.bytes());
  b.copy_dst = io::AlignedBuffer(b.bytes());
  if (!b.src.data() || !b.dst.data() || !b.copy_dst.data()) {
    return absl::ResourceExhaustedError("cannot allocate the bench buffers");
  }
  FillRandom(b.src.data(), b.bytes(), block_bytes);
  for (size_t i = 0; i < b.count; ++i) {
    b.keys.push_back(MakeKey(block_bytes, i));
    b.redis_keys.push_back("kvbench:" + std::to_string(block_bytes) + ":" + std::to_string(i));
    b.src_ptrs.push_back(b.src.data() + i * block_bytes);
    b.dst_ptrs.push_back(b.dst.data() + i * block_bytes);
  }
  return b;
}

// Seconds to Put every batch.
absl::StatusOr<double> PutAll(kv::Client& c, const kv::Namespace& ns, const Blocks& b) {
  const int64_t t0 = NowNs();
  for (size_t i = 0; i < b.batches(); ++i) {
    const size_t first = i * kBatch;
    OL_ASSIGN_OR_RETURN(kv::PutResult r,
                        c.Put(ns, absl::MakeConstSpan(b.keys).subspan(first, kBatch),
                              absl::MakeConstSpan(b.src_ptrs).subspan(first, kBatch)));
    if (r.stored != kBatch) {
      return absl::ResourceExhaustedError("Put stored " + std::to_string(r.stored) + " of " +
                                          std::to_string(kBatch) + " blocks");
    }
  }
  return static_cast<double>(NowNs() - t0) / 1e9;
}

// Seconds to Get every batch back into b.dst.
absl::StatusOr<double> GetAll(kv::Client& c, const kv::Namespace& ns, Blocks& b) {
  const int64_t t0 = NowNs();
  for (size_t i = 0; i < b.batches(); ++i) {
    const size_t first = i * kBatch;
    OL_ASSIGN_OR_RETURN(kv::GetResult r,
                        c.Get(ns, absl::MakeConstSpan(b.keys).subspan(first, kBatch),
                              absl::MakeConstSpan(b.dst_ptrs).subspan(first, kBatch)));
    if (r.loaded != kBatch) {
      return absl::DataLossError("Get loaded " + std::to_string(r.loaded) + " of " +
                                 std::to_string(kBatch) + " blocks");
    }
  }
  return static_cast<double>(NowNs() - t0) / 1e9;
}

// Seconds for one core to memcpy the same bytes, block by block, into a separate buffer.
double MemcpyAll(Blocks& b) {
  const int64_t t0 = NowNs();
  for (size_t i = 0; i < b.count; ++i) {
    std::memcpy(b.copy_dst.data() + i * b.block_bytes, b.src_ptrs[i], b.block_bytes);
  }
  // Keep the compiler from dropping copies nobody reads.
  asm volatile("" : : "r"(b.copy_dst.data()) : "memory");
  return static_cast<double>(NowNs() - t0) / 1e9;
}

// Seconds to SET (first) and GET (second) every batch through Redis.
absl::StatusOr<std::pair<double, double>> RedisAll(RespClient& r, Blocks& b) {
  const int64_t t0 = NowNs();
  for (size_t i = 0; i < b.batches(); ++i) {
    const size_t first = i * kBatch;
    OL_RETURN_IF_ERROR(r.SetBatch(absl::MakeConstSpan(b.redis_keys).subspan(first, kBatch),
                                  absl::MakeConstSpan(b.src_ptrs).subspan(first, kBatch),
                                  b.block_bytes));
  }
  const int64_t t1 = NowNs();
  for (size_t i = 0; i < b.batches(); ++i) {
    const size_t first = i * kBatch;
    OL_RETURN_IF_ERROR(r.GetBatch(absl::MakeConstSpan(b.redis_keys).subspan(first, kBatch),
                                  absl::MakeConstSpan(b.dst_ptrs).subspan(first, kBatch),
                                  b.block_bytes));
  }
  const int64_t t2 = NowNs();
  return std::make_pair(static_cast<double>(t1 - t0) / 1e9, static_cast<double>(t2 - t1) / 1e9);
}

// GB/s figures of every measured round.
struct Rates {
  std::vector<double> put, get, copy, redis_put, redis_get;
};

struct BlockResult {
  uint32_t block_bytes = 0;
  uint64_t working_set = 0;
  int rounds = 0;
  double put = NAN, get = NAN, copy = NAN, redis_put = NAN, redis_get = NAN;
  double putget = NAN;  // both directions: 2 × bytes ÷ (put + get time), median of rounds
  std::string redis_note;
  double other_load = NAN;  // CPU share other processes took during the measured rounds
  uint64_t faults = 0;      // page faults this process took during the measured rounds
  int warmup_puts = 0;      // warm-up passes of Put before the first measured round
};

absl::Status CheckSame(const Blocks& b, const char* what) {
  if (std::memcmp(b.src.data(), b.dst.data(), b.bytes()) != 0) {
    return absl::DataLossError(std::string(what) + " returned bytes that differ from those put");
  }
  return absl::OkStatus();
}

// One measured (or warm-up) round of every path. Redis failures disable Redis (noted), KV
// failures end the bench.
absl::Status RunRound(kv::Client& c, const kv::Namespace& ns, Blocks& b, Redis* redis, bool verbose,
                      BlockResult& out, Rates* rates) {
  const double gb = static_cast<double>(b.bytes()) / kGB;
  OL_ASSIGN_OR_RETURN(double put_s, PutAll(c, ns, b));
  std::memset(b.dst.data(), 0, b.bytes());
  OL_ASSIGN_OR_RETURN(double get_s, GetAll(c, ns, b));
  if (rates == nullptr || rates->put.empty()) OL_RETURN_IF_ERROR(CheckSame(b, "Client::Get"));
  const double copy_s = MemcpyAll(b);
  std::optional<std::pair<double, double>> redis_s;
  if (redis != nullptr && out.redis_note.empty()) {
    auto rs = RedisAll(redis->conn, b);
    if (!rs.ok()) {
      out.redis_note = "redis failed: " + std::string(rs.status().message());
    } else {
      redis_s = *rs;
      if (rates == nullptr && std::memcmp(b.src.data(), b.dst.data(), b.bytes()) != 0) {
        out.redis_note = "redis returned different bytes";
      }
    }
  }
  if (rates == nullptr) return absl::OkStatus();
  if (verbose) {
    std::printf("    round %zu: put %.2f get %.2f memcpy %.2f", rates->put.size() + 1, gb / put_s,
                gb / get_s, gb / copy_s);
    if (redis_s) std::printf(" redis SET %.2f GET %.2f", gb / redis_s->first, gb / redis_s->second);
    std::printf("\n");
  }
  rates->put.push_back(gb / put_s);
  rates->get.push_back(gb / get_s);
  rates->copy.push_back(gb / copy_s);
  if (redis_s) {
    rates->redis_put.push_back(gb / redis_s->first);
    rates->redis_get.push_back(gb / redis_s->second);
  }
  return absl::OkStatus();
}

// Puts every block until a pass takes no page fault, at least twice and at most kMaxWarmUpPuts
// times; returns the number of passes.
constexpr int kMaxWarmUpPuts = 10;
absl::StatusOr<int> WarmUpPuts(kv::Client& c, const kv::Namespace& ns, const Blocks& b) {
  for (int pass = 1;; ++pass) {
    const uint64_t faults = MinorFaults();
    OL_RETURN_IF_ERROR(PutAll(c, ns, b).status());
    if ((pass >= 2 && MinorFaults() == faults) || pass == kMaxWarmUpPuts) return pass;
  }
}

double MedianOrNan(const std::vector<double>& v) { return v.empty() ? NAN : Median(v); }

kv::LayoutFingerprint BenchFingerprint(uint32_t block_bytes) {
  kv::LayoutFingerprint fp;
  fp.model = "openlake-bench";
  fp.dtype = "bfloat16";
  fp.layout = "NHD";
  fp.num_layers = 1;
  fp.block_tokens = 16;
  fp.extra = "kv_bench block_bytes=" + std::to_string(block_bytes);
  return fp;
}

absl::StatusOr<BlockResult> BenchBlockSize(const Options& o, kv::Client& c, Redis* redis,
                                           const std::vector<pid_t>& servers,
                                           uint32_t block_bytes) {
  BlockResult out;
  out.block_bytes = block_bytes;
  OL_ASSIGN_OR_RETURN(Blocks b, MakeBlocks(block_bytes, o.working_set_mb << 20));
  out.working_set = b.bytes();
  OL_ASSIGN_OR_RETURN(kv::Namespace ns,
                      c.OpenNamespace("openlake-bench/kv-" + std::to_string(block_bytes),
                                      BenchFingerprint(block_bytes), block_bytes));
  OL_RETURN_IF_ERROR(c.Reset(ns));  // a --target daemon may hold a previous run's blocks
  if (redis != nullptr) {
    auto flushed = redis->conn.Simple({"FLUSHALL"});
    if (!flushed.ok())
      out.redis_note = "redis FLUSHALL: " + std::string(flushed.status().message());
  }
  // Warm-up: re-put until a whole pass takes no page fault (the slab pages a re-put cycles
  // through are all mapped and the pool has stopped releasing and re-forming segments), then one
  // round of everything.
  OL_ASSIGN_OR_RETURN(out.warmup_puts, WarmUpPuts(c, ns, b));
  OL_RETURN_IF_ERROR(RunRound(c, ns, b, redis, o.verbose, out, nullptr));

  Rates rates;
  const LoadMeter load(servers);
  const uint64_t faults0 = MinorFaults();
  const int64_t deadline = NowNs() + static_cast<int64_t>(o.seconds * 1e9);
  while (out.rounds < o.max_rounds && (out.rounds < o.min_rounds || NowNs() < deadline)) {
    OL_RETURN_IF_ERROR(RunRound(c, ns, b, redis, o.verbose, out, &rates));
    ++out.rounds;
  }
  out.other_load = load.OtherLoad();
  out.faults = MinorFaults() - faults0;
  out.put = MedianOrNan(rates.put);
  out.get = MedianOrNan(rates.get);
  out.copy = MedianOrNan(rates.copy);
  std::vector<double> both;
  for (size_t i = 0; i < rates.put.size(); ++i) {
    both.push_back(2 / (1 / rates.put[i] + 1 / rates.get[i]));
  }
  out.putget = MedianOrNan(both);
  if (out.redis_note.empty() && redis != nullptr) {
    out.redis_put = MedianOrNan(rates.redis_put);
    out.redis_get = MedianOrNan(rates.redis_get);
  }
  OL_RETURN_IF_ERROR(c.Reset(ns));
  if (redis != nullptr) (void)redis->conn.Simple({"FLUSHALL"});
  return out;
}

// ---- Lookup of 1,000 keys

struct LookupResult {
  int iters = 0;
  double other_load = NAN;
  double p50_us = NAN, p99_us = NAN;                            // Lookup alone
  double with_release_p50_us = NAN, with_release_p99_us = NAN;  // Lookup + Release
  double one_key_p50_us = NAN;                                  // Lookup of one key
};

absl::StatusOr<LookupResult> BenchLookup(const Options& o, kv::Client& c,
                                         const std::vector<pid_t>& servers) {
  OL_ASSIGN_OR_RETURN(kv::Namespace ns,
                      c.OpenNamespace("openlake-bench/lookup", BenchFingerprint(kLookupBlockBytes),
                                      kLookupBlockBytes));
  OL_RETURN_IF_ERROR(c.Reset(ns));
  io::AlignedBuffer data(uint64_t{kLookupKeys} * kLookupBlockBytes);
  FillRandom(data.data(), data.size(), 7);
  std::vector<kv::BlockKey> keys;
  std::vector<const void*> ptrs;
  for (uint32_t i = 0; i < kLookupKeys; ++i) {
    keys.push_back(MakeKey(kLookupBlockBytes, i));
    ptrs.push_back(data.data() + uint64_t{i} * kLookupBlockBytes);
  }
  OL_ASSIGN_OR_RETURN(kv::PutResult put, c.Put(ns, keys, ptrs));
  if (put.stored != kLookupKeys) return absl::ResourceExhaustedError("lookup keys not all stored");

  LookupResult out;
  std::vector<double> lookup_us, total_us, one_us;
  const int warmup = std::max(20, o.lookup_iters / 10);
  const LoadMeter load(servers);
  const absl::Span<const kv::BlockKey> first(keys.data(), 1);
  for (int i = 0; i < warmup + o.lookup_iters; ++i) {
    const int64_t t0 = NowNs();
    OL_ASSIGN_OR_RETURN(kv::Pins pins, c.Lookup(ns, keys));
    const int64_t t1 = NowNs();
    if (pins.hits.size() != kLookupKeys) {
      return absl::DataLossError("Lookup found " + std::to_string(pins.hits.size()) +
                                 " of 1000 keys");
    }
    OL_RETURN_IF_ERROR(c.Release({pins.batch}, {}, /*wait=*/true));
    const int64_t t2 = NowNs();
    OL_ASSIGN_OR_RETURN(kv::Pins one, c.Lookup(ns, first));
    const int64_t t3 = NowNs();
    if (one.hits.size() != 1) return absl::DataLossError("Lookup of one stored key missed");
    OL_RETURN_IF_ERROR(c.Release({one.batch}, {}, /*wait=*/true));
    if (i < warmup) continue;
    lookup_us.push_back(static_cast<double>(t1 - t0) / 1e3);
    total_us.push_back(static_cast<double>(t2 - t0) / 1e3);
    one_us.push_back(static_cast<double>(t3 - t2) / 1e3);
  }
  out.one_key_p50_us = Percentile(one_us, 50);
  out.other_load = load.OtherLoad();
  out.iters = o.lookup_iters;
  out.p50_us = Percentile(lookup_us, 50);
  out.p99_us = Percentile(lookup_us, 99);
  out.with_release_p50_us = Percentile(total_us, 50);
  out.with_release_p99_us = Percentile(total_us, 99);
  OL_RETURN_IF_ERROR(c.Reset(ns));
  return out;
}

// ---- Output

void PrintBlock(const BlockResult& r) {
  std::printf(
      "%u KiB blocks, batches of %zu, %.0f MiB working set, %d warm-up puts, median of "
      "%d rounds (GB/s):\n",
      r.block_bytes >> 10, kBatch, static_cast<double>(r.working_set) / (1 << 20), r.warmup_puts,
      r.rounds);
  std::printf("  openlake put %7.2f   get %7.2f   put+get %7.2f\n", r.put, r.get, r.putget);
  std::printf("  memcpy       %7.2f   (one core, same bytes)\n", r.copy);
  if (std::isfinite(r.redis_put)) {
    std::printf("  redis    SET %7.2f   GET %7.2f   (pipelined 64 per batch, one connection)\n",
                r.redis_put, r.redis_get);
  } else {
    std::printf("  redis        skipped: %s\n", r.redis_note.c_str());
  }
  std::printf("  other processes took %.0f%% of the CPUs meanwhile%s; %lu page faults here\n",
              r.other_load * 100, r.other_load > 0.10 ? " (WARNING: figures skewed)" : "",
              static_cast<unsigned long>(r.faults));
  std::printf("  ratios: put/memcpy %.2f  get/memcpy %.2f  put+get/memcpy %.2f  (bar >= 0.8)\n",
              Ratio(r.put, r.copy), Ratio(r.get, r.copy), Ratio(r.putget, r.copy));
  std::printf("          put/redis  %.1f   get/redis  %.1f   (bar >= 5)\n",
              Ratio(r.put, r.redis_put), Ratio(r.get, r.redis_get));
}

std::string JsonFor(const Options& o, const BlockResult& r, const LookupResult& l) {
  JsonLine j;
  j.Add("bench", "kv_put_get")
      .Add("block_bytes", uint64_t{r.block_bytes})
      .Add("batch", uint64_t{kBatch})
      .Add("working_set_bytes", r.working_set)
      .Add("rounds", r.rounds)
      .Add("warmup_puts", r.warmup_puts)
      .Add("page_faults", r.faults)
      .Add("quick", o.quick)
      .Add("put_GBps", r.put)
      .Add("get_GBps", r.get)
      .Add("putget_GBps", r.putget)
      .Add("memcpy_GBps", r.copy)
      .Add("redis_put_GBps", r.redis_put)
      .Add("redis_get_GBps", r.redis_get)
      .Add("put_over_memcpy", Ratio(r.put, r.copy))
      .Add("get_over_memcpy", Ratio(r.get, r.copy))
      .Add("putget_over_memcpy", Ratio(r.putget, r.copy))
      .Add("put_over_redis", Ratio(r.put, r.redis_put), 2)
      .Add("get_over_redis", Ratio(r.get, r.redis_get), 2)
      .Add("lookup1000_p50_us", l.p50_us, 1)
      .Add("lookup1000_p99_us", l.p99_us, 1)
      .Add("lookup1000_release_p50_us", l.with_release_p50_us, 1)
      .Add("lookup1000_release_p99_us", l.with_release_p99_us, 1)
      .Add("lookup1_p50_us", l.one_key_p50_us, 1)
      .Add("lookup_iters", l.iters)
      .Add("other_load", std::max(r.other_load, l.other_load), 2);
  if (!r.redis_note.empty()) j.Add("redis_note", r.redis_note);
  return j.str();
}

void PrintLookup(const LookupResult& l) {
  std::printf(
      "Lookup of 1000 keys in one call, %d calls: p50 %.1f us, p99 %.1f us "
      "(bar: p50 <= 50, p99 <= 200); with Release: p50 %.1f us, p99 %.1f us\n"
      "  Lookup of 1 key (the round trip alone): p50 %.1f us; so %.0f ns per key beyond it\n"
      "  other processes took %.0f%% of the CPUs meanwhile%s\n",
      l.iters, l.p50_us, l.p99_us, l.with_release_p50_us, l.with_release_p99_us, l.one_key_p50_us,
      (l.p50_us - l.one_key_p50_us) * 1e3 / (kLookupKeys - 1), l.other_load * 100,
      l.other_load > 0.10 ? " (WARNING: figures skewed)" : "");
}

// ---- Driver

// Starts redis-server unless disabled or missing; on any of those `note` says why.
std::optional<Redis> MaybeStartRedis(const Options& o, const std::string& dir, std::string* note) {
  const std::string path = o.no_redis ? "" : FindProgram(o.redis_server);
  if (o.no_redis) {
    *note = "disabled by --no-redis";
  } else if (path.empty()) {
    *note = "redis-server not found (apt-get install redis-server)";
  } else {
    auto r = StartRedis(path, dir, o.server_cpu);
    if (r.ok()) {
      std::printf("redis: %s on loopback, no persistence, pid %d\n", path.c_str(), r->child.pid());
      return *std::move(r);
    }
    *note = "could not start redis-server: " + std::string(r.status().message());
  }
  std::printf("redis baseline skipped: %s\n", note->c_str());
  return std::nullopt;
}

// SIGTERM to a daemon this bench started; its exit status is reported when not 0.
void StopDaemon(Daemon& d) {
  if (d.child.pid() < 0) return;
  const int st = d.child.Stop(absl::Seconds(10));
  if (st != 0) {
    std::printf("note: openlaked exit status %d (log: %s)\n", st, d.child.log_path().c_str());
  }
}

void ChooseCpus(Options& o) {
  const std::vector<int> cpus = io::AllowedCpus();
  if (o.client_cpu == -2) o.client_cpu = cpus.empty() ? -1 : cpus.front();
  if (o.server_cpu == -2) o.server_cpu = cpus.size() >= 2 ? cpus[1] : o.client_cpu;
}

int Fail(const std::string& what, const absl::Status& st) {
  std::fprintf(stderr, "kv_bench: %s: %s\n", what.c_str(), std::string(st.message()).c_str());
  return 1;
}

int Run(Options o) {
  ChooseCpus(o);
  const MachineInfo machine = ProbeMachine(o.client_cpu >= 0 ? o.client_cpu : 0);
  PrintMachine(machine);
  PrintBackgroundLoad(BackgroundLoad(absl::Milliseconds(500)));
  PinThisThread(o.client_cpu);
  const std::vector<uint32_t> sizes = {2u << 20, 256u << 10};  // 256 KiB last: the last line

  Daemon daemon;
  const double slab_gib = SlabGiB(o.working_set_mb << 20, sizes);
  if (o.target.empty()) {
    auto d = StartDaemon(o, o.server_cpu, slab_gib);
    if (!d.ok()) return Fail("starting openlaked", d.status());
    daemon = *std::move(d);
  } else {
    daemon.address = o.target;
    // A private folder still holds Redis's files.
    auto d = TempDir::Create(o.tmp_parent, "openlake-kvbench-");
    if (!d.ok()) return Fail("creating a temporary folder", d.status());
    daemon.dir = *std::move(d);
  }
  auto client = ConnectKv(daemon, absl::Seconds(15));
  if (!client.ok()) return Fail("connecting to openlaked at " + daemon.address, client.status());
  if (!(*client)->has_slab()) {
    return Fail("openlaked at " + daemon.address,
                absl::FailedPreconditionError("the client could not map the slab (not local?)"));
  }
  std::printf(
      "openlaked %s at %s (%s), slab %.2f GiB mapped; client on CPU %d, servers on CPU "
      "%d\n",
      (*client)->server_version().c_str(), daemon.address.c_str(),
      o.target.empty() ? "started by this bench" : "already running",
      static_cast<double>((*client)->slab_bytes()) / (1ull << 30), o.client_cpu, o.server_cpu);

  std::string redis_note;
  std::optional<Redis> redis = MaybeStartRedis(o, daemon.dir.path(), &redis_note);

  const std::vector<pid_t> servers = {daemon.child.pid(), redis ? redis->child.pid() : -1};
  std::vector<BlockResult> results;
  for (uint32_t size : sizes) {
    auto r = BenchBlockSize(o, **client, redis ? &*redis : nullptr, servers, size);
    if (!r.ok()) return Fail("KV put/get of " + std::to_string(size) + "-byte blocks", r.status());
    if (r->redis_note.empty() && !redis) r->redis_note = redis_note;
    PrintBlock(*r);
    results.push_back(*r);
  }
  auto lookup = BenchLookup(o, **client, servers);
  if (!lookup.ok()) return Fail("Lookup of 1000 keys", lookup.status());
  PrintLookup(*lookup);
  std::printf(
      "steady state: Put repeats until a pass takes no page fault, then one warm-up round of "
      "every path; figures are medians of the measured rounds\n");

  client->reset();
  if (redis) redis->child.Stop(absl::Seconds(10));
  StopDaemon(daemon);
  if (o.json) {
    for (const BlockResult& r : results) std::printf("%s\n", JsonFor(o, r, *lookup).c_str());
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace openlake::bench

int main(int argc, char** argv) {
  openlake::bench::Options o;
  CLI::App app{"kv_bench: openlake KV put/get vs memcpy and Redis; Lookup latency"};
  app.add_flag("--json", o.json, "end with one JSON object per block size (256 KiB last)");
  app.add_flag("--quick", o.quick, "tiny run for smoke tests (one batch, one round)");
  app.add_option("--openlaked", o.openlaked, "openlaked to start (default: the one built here)");
  app.add_option("--target", o.target, "use this running daemon (host:port or unix:/path)");
  app.add_option("--redis-server", o.redis_server, "redis-server binary (default: from PATH)");
  app.add_flag("--no-redis", o.no_redis, "skip the Redis baseline");
  app.add_flag("-v,--verbose", o.verbose, "print the figures of every round");
  app.add_option("--working-set-mb", o.working_set_mb, "MiB of blocks per block size")
      ->check(CLI::Range(1, 1024));
  app.add_option("--seconds", o.seconds, "measured time per block size, at least")
      ->check(CLI::Range(0.0, 60.0));
  app.add_option("--max-rounds", o.max_rounds, "measured rounds per block size, at most")
      ->check(CLI::Range(1, 1000));
  app.add_option("--lookup-iters", o.lookup_iters, "measured Lookup calls")
      ->check(CLI::Range(10, 100000));
  app.add_option("--client-cpu", o.client_cpu, "CPU for this process (-1: unpinned)");
  app.add_option("--server-cpu", o.server_cpu, "CPU for openlaked and redis (-1: unpinned)");
  app.add_option("--tmp", o.tmp_parent, "parent folder of the temporary config and socket");
  CLI11_PARSE(app, argc, argv);
  if (o.quick) {
    o.working_set_mb = 1;  // one batch of each size
    o.seconds = 0;
    o.min_rounds = 1;
    o.max_rounds = 1;
    o.lookup_iters = 200;
  }
  return openlake::bench::Run(o);
}

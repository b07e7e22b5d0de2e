// c_api_bench: KV put+get through the C API (openlake/c/openlake.h), against single-core memcpy of
// the same bytes (the KV bar, ≥ 0.8, /work/shared/PERF.md) and against the C++ client it wraps
// (what the C layer costs: ≈ 1), in the same run, 256 KiB and 2 MiB blocks in batches of 64.
//
//   c_api_bench [--json] [--quick] [--openlaked PATH] [--working-set-mb N] [--rounds N]
//
// Starts its own openlaked (pinned beside this process where there are two CPUs), fills the
// working set once, then alternates rounds of: C API put+get, C++ client put+get, memcpy;
// prints the median of each and the ratios. Every get is compared with what was put.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_util.h"

#include "openlake/c/openlake.h"
#include "openlake/io/buffer.h"
#include "openlake/kv/client.h"
#include "openlake/status.h"

namespace openlake::bench {
namespace {

constexpr size_t kBatch = 64;

struct Options {
  bool json = false;
  bool quick = false;
  std::string openlaked = OL_BENCH_OPENLAKED;
  uint64_t working_set_mb = 128;
  int rounds = 7;
};

struct Result {
  uint32_t block_bytes = 0;
  double c_api_GBps = 0, cxx_GBps = 0, memcpy_GBps = 0;
};

kv::LayoutFingerprint Fingerprint(uint32_t block_bytes) {
  kv::LayoutFingerprint fp;
  fp.model = "c-api-bench";
  fp.dtype = "bfloat16";
  fp.layout = "NHD";
  fp.num_layers = 1;
  fp.block_tokens = block_bytes / 4096;
  return fp;
}

int Fail(const std::string& what, const std::string& why) {
  std::fprintf(stderr, "c_api_bench: %s: %s\n", what.c_str(), why.c_str());
  return 1;
}

// Seconds for put then get of every batch through the C API; false on any error or short batch.
bool CApiRound(openlake_client* c, openlake_namespace* ns, const std::vector<openlake_key>& keys,
               const std::vector<const void*>& src, const std::vector<void*>& dst, double* s) {
  const int64_t t0 = NowNs();
  for (size_t i = 0; i < keys.size(); i += kBatch) {
    size_t stored = 0;
    if (openlake_put(c, ns, &keys[i], &src[i], kBatch, 0, &stored) != OPENLAKE_OK ||
        stored != kBatch) {
      return false;
    }
  }
  for (size_t i = 0; i < keys.size(); i += kBatch) {
    size_t loaded = 0;
    if (openlake_get(c, ns, &keys[i], &dst[i], kBatch, nullptr, &loaded, nullptr) !=
            OPENLAKE_OK ||
        loaded != kBatch) {
      return false;
    }
  }
  *s = static_cast<double>(NowNs() - t0) / 1e9;
  return true;
}

absl::StatusOr<double> CxxRound(kv::Client& c, const kv::Namespace& ns,
                                const std::vector<kv::BlockKey>& keys,
                                const std::vector<const void*>& src,
                                const std::vector<void*>& dst) {
  const int64_t t0 = NowNs();
  for (size_t i = 0; i < keys.size(); i += kBatch) {
    OL_ASSIGN_OR_RETURN(kv::PutResult p, c.Put(ns, absl::MakeConstSpan(keys).subspan(i, kBatch),
                                               absl::MakeConstSpan(src).subspan(i, kBatch)));
    if (p.stored != kBatch) return absl::ResourceExhaustedError("short put");
  }
  for (size_t i = 0; i < keys.size(); i += kBatch) {
    OL_ASSIGN_OR_RETURN(kv::GetResult g, c.Get(ns, absl::MakeConstSpan(keys).subspan(i, kBatch),
                                               absl::MakeConstSpan(dst).subspan(i, kBatch)));
    if (g.loaded != kBatch) return absl::DataLossError("short get");
  }
  return static_cast<double>(NowNs() - t0) / 1e9;
}

// Seconds for one core to memcpy the bytes twice (a put and a get move each byte once each).
double MemcpyRound(const std::vector<const void*>& src, std::vector<std::byte*>& copy,
                   const std::vector<void*>& dst, uint32_t block_bytes) {
  const int64_t t0 = NowNs();
  for (size_t i = 0; i < src.size(); ++i) std::memcpy(copy[i], src[i], block_bytes);
  for (size_t i = 0; i < src.size(); ++i) std::memcpy(dst[i], copy[i], block_bytes);
  asm volatile("" : : "r"(copy.data()) : "memory");
  return static_cast<double>(NowNs() - t0) / 1e9;
}

int BenchSize(const Options& o, openlake_client* c, kv::Client& cxx, uint32_t block_bytes,
              Result* out) {
  const size_t count = std::max<uint64_t>(1, (o.working_set_mb << 20) / (kBatch * block_bytes)) *
                       kBatch;
  const uint64_t bytes = uint64_t{block_bytes} * count;
  io::AlignedBuffer src(bytes), dst(bytes), copy(bytes);
  if (!src.data() || !dst.data() || !copy.data()) return Fail("allocating", "out of memory");
  FillRandom(src.data(), bytes, block_bytes);
  std::vector<openlake_key> ckeys(count);
  std::vector<kv::BlockKey> keys(count);
  std::vector<const void*> srcs(count);
  std::vector<void*> dsts(count);
  std::vector<std::byte*> copies(count);
  for (size_t i = 0; i < count; ++i) {
    keys[i] = MixedKey(uint64_t{block_bytes} * 0x9E3779B9u + i);
    ckeys[i].len = static_cast<uint32_t>(keys[i].size());
    std::memcpy(ckeys[i].bytes, keys[i].bytes().data(), keys[i].size());
    srcs[i] = src.data() + i * block_bytes;
    dsts[i] = dst.data() + i * block_bytes;
    copies[i] = copy.data() + i * block_bytes;
  }
  const std::string name = "c-api-bench/" + std::to_string(block_bytes);
  openlake_fingerprint fp;
  openlake_fingerprint_init(&fp);
  const kv::LayoutFingerprint f = Fingerprint(block_bytes);
  fp.model = f.model.c_str();
  fp.dtype = f.dtype.c_str();
  fp.layout = f.layout.c_str();
  fp.num_layers = f.num_layers;
  fp.block_tokens = f.block_tokens;
  openlake_namespace* ns = nullptr;
  if (openlake_namespace_open(c, name.c_str(), &fp, block_bytes, &ns) != OPENLAKE_OK) {
    return Fail("opening " + name, openlake_last_error());
  }
  std::unique_ptr<openlake_namespace, void (*)(openlake_namespace*)> ns_guard(
      ns, openlake_namespace_free);
  auto cxx_ns = cxx.OpenNamespace(name, f, block_bytes);
  if (!cxx_ns.ok()) return Fail("opening " + name, std::string(cxx_ns.status().message()));

  std::vector<double> c_api, cxx_s, mem;
  for (int round = 0; round < o.rounds + 1; ++round) {  // round 0 warms up
    double s = 0;
    std::memset(dst.data(), 0, bytes);
    if (!CApiRound(c, ns, ckeys, srcs, dsts, &s)) return Fail("C API round", openlake_last_error());
    if (std::memcmp(src.data(), dst.data(), bytes) != 0) return Fail("C API round", "bytes differ");
    if (round > 0) c_api.push_back(s);
    std::memset(dst.data(), 0, bytes);
    auto x = CxxRound(cxx, *cxx_ns, keys, srcs, dsts);
    if (!x.ok()) return Fail("C++ round", std::string(x.status().message()));
    if (std::memcmp(src.data(), dst.data(), bytes) != 0) return Fail("C++ round", "bytes differ");
    if (round > 0) cxx_s.push_back(*x);
    const double m = MemcpyRound(srcs, copies, dsts, block_bytes);
    if (round > 0) mem.push_back(m);
  }
  const double moved = 2.0 * static_cast<double>(bytes) / 1e9;  // put and get
  out->block_bytes = block_bytes;
  out->c_api_GBps = moved / Median(c_api);
  out->cxx_GBps = moved / Median(cxx_s);
  out->memcpy_GBps = moved / Median(mem);
  std::printf("%4u KiB blocks, batches of %zu, %zu blocks: C API %.2f GB/s, C++ client %.2f GB/s, "
              "memcpy %.2f GB/s; C API/memcpy %.2f (bar 0.8), C API/C++ %.2f\n",
              block_bytes >> 10, kBatch, count, out->c_api_GBps, out->cxx_GBps, out->memcpy_GBps,
              out->c_api_GBps / out->memcpy_GBps, out->c_api_GBps / out->cxx_GBps);
  (void)cxx.Reset(*cxx_ns);
  return 0;
}

int Run(const Options& o) {
  const MachineInfo machine = ProbeMachine(0);
  PrintMachine(machine);
  PrintBackgroundLoad(BackgroundLoad(absl::Milliseconds(300)));
  const bool two = machine.cpus >= 2;
  PinThisThread(two ? 0 : -1);
  auto dir = TempDir::Create("/tmp", "openlake-capibench-");
  if (!dir.ok()) return Fail("temporary folder", std::string(dir.status().message()));
  auto port = FreeLoopbackPort();
  if (!port.ok()) return Fail("port", std::string(port.status().message()));
  const double gib = 2.5 * static_cast<double>(o.working_set_mb) / 1024.0 + 0.5;
  char cfg[512];
  std::snprintf(cfg, sizeof(cfg),
                "mode = \"kv\"\nrpc_addr = \"127.0.0.1:%u\"\nkv_socket = \"%s/kv.sock\"\n%s"
                "[kv_slab]\ncapacity_gb = %.3f\nsegment_mb = 64\nreserve_ttl_secs = 60\n",
                *port, dir->path().c_str(), two ? "cores = [1]\n" : "", gib);
  const std::string cfg_path = dir->path() + "/openlaked.toml";
  std::ofstream(cfg_path) << cfg;
  auto child = Child::Spawn({FindProgram(o.openlaked), "--config", cfg_path, "--log-level",
                             "warning"},
                            dir->path() + "/openlaked.log", two ? 1 : -1);
  if (!child.ok()) return Fail("starting openlaked", std::string(child.status().message()));
  const std::string address = "127.0.0.1:" + std::to_string(*port);
  openlake_client* c = nullptr;
  for (int i = 0; i < 500 && openlake_connect(address.c_str(), nullptr, &c) != OPENLAKE_OK; ++i) {
    usleep(20000);
  }
  if (c == nullptr) return Fail("connecting", openlake_last_error());
  std::unique_ptr<openlake_client, void (*)(openlake_client*)> guard(c, openlake_close);
  if (openlake_slab_base(c) == nullptr) return Fail("connecting", "the slab is not mapped");
  auto cxx = kv::Client::Connect(address);
  if (!cxx.ok()) return Fail("connecting (C++)", std::string(cxx.status().message()));
  std::printf("openlaked %s at %s; C API %s, ABI %d\n", openlake_server_version(c),
              address.c_str(), openlake_version(), openlake_abi_version());
  std::vector<Result> results;
  for (uint32_t size : {2u << 20, 256u << 10}) {
    Result r;
    if (int rc = BenchSize(o, c, **cxx, size, &r); rc != 0) return rc;
    results.push_back(r);
  }
  guard.reset();
  cxx->reset();
  child->Stop(absl::Seconds(10));
  if (o.json) {
    for (const Result& r : results) {
      JsonLine j;
      j.Add("bench", "c_api_put_get").Add("block_bytes", uint64_t{r.block_bytes})
          .Add("batch", uint64_t{kBatch}).Add("c_api_GBps", r.c_api_GBps)
          .Add("cxx_GBps", r.cxx_GBps).Add("memcpy_GBps", r.memcpy_GBps)
          .Add("ratio", r.c_api_GBps / r.memcpy_GBps)
          .Add("c_api_over_cxx", r.c_api_GBps / r.cxx_GBps)
          .Add("bar", 0.8);
      std::printf("%s\n", j.str().c_str());
    }
  }
  return 0;
}

}  // namespace
}  // namespace openlake::bench

int main(int argc, char** argv) {
  openlake::bench::Options o;
  CLI::App app{"c_api_bench: KV put+get through the C API vs memcpy and the C++ client"};
  app.add_flag("--json", o.json, "end with one JSON object per block size (256 KiB last)");
  app.add_flag("--quick", o.quick, "tiny run for smoke tests");
  app.add_option("--openlaked", o.openlaked, "openlaked to start (default: the one built here)");
  app.add_option("--working-set-mb", o.working_set_mb, "MiB of blocks per block size")
      ->check(CLI::Range(1, 1024));
  app.add_option("--rounds", o.rounds, "measured rounds")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  if (o.quick) {
    o.working_set_mb = 1;
    o.rounds = 1;
  }
  return openlake::bench::Run(o);
}

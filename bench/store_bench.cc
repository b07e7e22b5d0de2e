// store_bench: the object engine streaming one large object in and out, RS(2+2) over four drive
// folders on one disk, against fio writing and reading the same bytes × (k+m)/k sequentially in
// the same run; and 4 KiB objects put and got per second.
//
//   store_bench [--json] [--quick] [--size-mib 256] [--rounds 3] [--dir /var/tmp] [--fio fio]
//               [--small-seconds 1] [--small-concurrency 16] [--no-md5]
//
// Large objects: each round puts one --size-mib object (1 MiB writes, through the writer's
// windows: MD5 on the second reactor, encode, CRC-64 per shard block, parallel O_DIRECT writes,
// fsyncs, two-phase metadata commit), drops the drives' files from the page cache, and reads it
// back whole (CRC checks, no reconstruction). Baseline, same round: fio with one job per drive
// folder (io_uring, O_DIRECT, blocks of the shard block size, depth 4, end_fsync), writing then
// reading size × (k+m)/k bytes in all; its figure is expressed per byte of object (× k/(k+m)).
// Rounds alternate which side goes first; figures are medians. Bar (PERF.md): ratio >= 0.7 each
// way.
// A put's MD5 (the ETag) is serial: one core's MD5 rate, printed beside, caps it; --no-md5
// measures the store with CRC-derived ETags (StoreOptions::etag_md5 = false).
//
// Small objects: --small-concurrency writers on the reactor put 4 KiB objects (inline in their
// metadata) for --small-seconds, then as many readers get them: operations per second and
// p50/p99 latency. Then 4 KiB PUTs of new keys at 16 and 64 in flight against fio doing 4 KiB
// writes each followed by fdatasync (io_uring, --rw=randwrite --fdatasync=1) at the same depth,
// one job per folder on the same file system; fio's figure is writes per second per folder,
// since a PUT makes one durable write on each drive. Bar: 0.5 (JSON small_put_over_fio at 16,
// small_put_over_fio_64). --no-journal measures commits without the drives' commit journal.
//
// --cluster: the store over three nodes (issue 18). Six drive folders, RS(4+2): first one engine
// over all six (the single-node baseline), then, over the same folders wiped, three in-process
// nodes of two folders each, every node with its own runtime, RPC listener on 127.0.0.1 and
// cluster services, every request made through node 1 (whose engine reaches the others' drives
// over the drive RPC and takes each lock on a quorum of the three lock tables). The same large
// and small phases run on both; the figures are printed side by side with the ratio, fio's ×
// (k+m)/k beside, and the lock rounds (one request to each node) per operation.
#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <openssl/evp.h>

#include "bench_util.h"

#include "openlake/io/reactor.h"
#include "openlake/io/task.h"
#include "openlake/status.h"
#include "openlake/net/rpc.h"
#include "openlake/store/cluster.h"
#include "openlake/store/store.h"

namespace openlake::bench {
namespace {

struct Options {
  bool json = false;
  bool quick = false;
  int size_mib = 256;
  int rounds = 3;
  std::string dir = "/var/tmp";
  std::string fio = "fio";
  double small_seconds = 1.0;
  int small_concurrency = 16;
  bool no_md5 = false;
  bool no_journal = false;
  bool cluster = false;
};

// RS(2+2) on one node; --cluster: RS(4+2) over six folders.
int kData = 2, kParity = 2;
constexpr uint32_t kBlock = 1 << 20;

absl::Span<const std::byte> Bytes(const std::string& s, size_t at, size_t n) {
  return absl::MakeConstSpan(reinterpret_cast<const std::byte*>(s.data()) + at, n);
}

// ---- Ours

// `commit_ns`, when given, receives the time Commit took (the last window, fdatasyncs and the
// metadata's two-phase commit).
io::Task<absl::Status> PutObject(store::Store& st, std::string bucket, std::string key,
                                 const std::string& data, size_t chunk,
                                 int64_t* commit_ns = nullptr) {
  // The size is declared, as an S3 PUT's Content-Length declares it: the writer sizes its
  // buffers to the body instead of faulting in whole windows for 4 KiB.
  store::PutOptions opts;
  opts.size = static_cast<int64_t>(data.size());
  OL_CO_ASSIGN_OR_RETURN(auto w, co_await st.CreateObject(bucket, key, opts));
  for (size_t at = 0; at < data.size(); at += chunk) {
    const size_t n = std::min(chunk, data.size() - at);
    OL_CO_RETURN_IF_ERROR(co_await w->Write(Bytes(data, at, n)));
  }
  const int64_t t0 = NowNs();
  OL_CO_RETURN_IF_ERROR((co_await w->Commit()).status());
  if (commit_ns != nullptr) *commit_ns = NowNs() - t0;
  co_return absl::OkStatus();
}

// Reads the object whole; checks its length and a sample of its bytes against `data`.
io::Task<absl::Status> GetObject(store::Store& st, std::string bucket, std::string key,
                                 const std::string& data) {
  const store::GetOptions opts;
  OL_CO_ASSIGN_OR_RETURN(auto r, co_await st.OpenObject(bucket, key, opts));
  size_t got = 0;
  while (true) {
    OL_CO_ASSIGN_OR_RETURN(absl::Span<const std::byte> chunk, co_await r->Next());
    if (chunk.empty()) break;
    if (got + chunk.size() > data.size() ||
        std::memcmp(chunk.data(), data.data() + got, std::min<size_t>(chunk.size(), 4096)) != 0) {
      co_return absl::DataLossError("store_bench: the object read back differs");
    }
    got += chunk.size();
  }
  if (got != data.size()) co_return absl::DataLossError("store_bench: short read");
  co_return absl::OkStatus();
}

// Drops every file under `dir` from the page cache, so reads come from the disk.
void DropCache(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (!e.is_regular_file(ec)) continue;
    const int fd = open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
}

// Single-core MD5 of `data` (OpenSSL), MB/s: the ceiling of one stream's MD5 ETag.
double Md5Rate(const std::string& data) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  const int64_t t0 = NowNs();
  EVP_Digest(data.data(), data.size(), d, &n, EVP_md5(), nullptr);
  return static_cast<double>(data.size()) / 1e6 / (static_cast<double>(NowNs() - t0) / 1e9);
}

// ---- fio

// fio over `drives`, one job per folder on a file `file` in it, each job with `job`'s options
// (plus io_uring, reports grouped, JSON out): the number `key` of the jobs' write (or read)
// section.
absl::StatusOr<double> FioFigure(const Options& o, const std::vector<std::string>& drives,
                                 const std::string& scratch, const std::string& file,
                                 const std::vector<std::string>& job, bool write,
                                 const std::string& key, absl::Duration timeout) {
  const std::string out_path = scratch + "/" + file + ".json";
  const std::string fio = FindProgram(o.fio);
  if (fio.empty()) return absl::NotFoundError(o.fio + " not found (apt-get install fio)");
  std::vector<std::string> argv = {fio, "--ioengine=io_uring"};
  argv.insert(argv.end(), job.begin(), job.end());
  argv.insert(argv.end(), {"--group_reporting", "--output-format=json", "--output=" + out_path});
  for (size_t i = 0; i < drives.size(); ++i) {
    argv.push_back("--name=d" + std::to_string(i));
    argv.push_back("--filename=" + drives[i] + "/" + file);
  }
  OL_ASSIGN_OR_RETURN(Child child, Child::Spawn(argv, scratch + "/" + file + ".log", /*cpu=*/-1));
  const int st = child.Wait(timeout, absl::Seconds(5));
  std::ifstream in(out_path);
  const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The job's section ("write" : {), not the option ("rw" : "write").
  const size_t sec = json.find(write ? "\"write\" : {" : "\"read\" : {");
  const double v = sec == std::string::npos ? NAN : JsonNumberAfter(json, key, sec);
  if (st != 0 || std::isnan(v) || v <= 0) {
    return absl::InternalError("fio failed (status " + std::to_string(st) + "):\n" +
                               child.LogTail());
  }
  return v;
}

// The large-object baseline: fio's aggregate bandwidth (bytes/s) of one sequential pass over
// one file per drive folder.
absl::StatusOr<double> RunFio(const Options& o, const std::vector<std::string>& drives,
                              const std::string& scratch, bool write, uint64_t per_file) {
  return FioFigure(o, drives, scratch, "fio.bin",
                   {"--direct=1", "--bs=" + std::to_string(kBlock / kData), "--iodepth=4",
                    write ? "--rw=write" : "--rw=read", "--size=" + std::to_string(per_file),
                    "--end_fsync=1"},
                   write, "bw_bytes", absl::Seconds(300));
}

// ---- Small objects

// fio's 4 KiB writes each followed by fdatasync, one job per drive folder at `depth`, for
// --small-seconds: writes per second per folder (each PUT makes one durable write per drive).
absl::StatusOr<double> RunFioSync(const Options& o, const std::vector<std::string>& drives,
                                  const std::string& scratch, int depth) {
  auto iops = FioFigure(o, drives, scratch, "fio-sync.bin",
                        {"--rw=randwrite", "--bs=4k", "--fdatasync=1",
                         "--iodepth=" + std::to_string(depth), "--size=16m", "--time_based",
                         "--runtime=" + std::to_string(std::max(1.0, o.small_seconds))},
                        /*write=*/true, "iops", absl::Seconds(120));
  for (const std::string& d : drives) std::filesystem::remove(d + "/fio-sync.bin");
  if (!iops.ok()) return iops.status();
  return *iops / static_cast<double>(drives.size());
}

struct SmallFigures {
  int puts = 0, gets = 0;  // operations made
  double put_ops = NAN, get_ops = NAN;
  double put_p50_us = NAN, put_p99_us = NAN, get_p50_us = NAN, get_p99_us = NAN;
};

io::Task<absl::Status> SmallWorker(store::Store& st, const std::string* tag, int id, bool put,
                                   int64_t end_ns, const std::string* body,
                                   std::vector<double>* lat, int* count, int limit) {
  const std::string bucket = "bench";
  for (int i = 0; put ? NowNs() < end_ns : i < limit; ++i) {
    const std::string key = *tag + "/" + std::to_string(id) + "/" + std::to_string(i);
    const int64_t t0 = NowNs();
    if (put) {
      OL_CO_RETURN_IF_ERROR(co_await PutObject(st, bucket, key, *body, body->size()));
    } else {
      OL_CO_RETURN_IF_ERROR(co_await GetObject(st, bucket, key, *body));
    }
    lat->push_back(static_cast<double>(NowNs() - t0) / 1e3);
    ++*count;
  }
  co_return absl::OkStatus();
}

// New keys under `tag`, `n` in flight; then (with `gets`) as many readers get them.
absl::StatusOr<SmallFigures> MeasureSmall(io::Runtime& rt, store::Store& st, const Options& o,
                                          int n, const std::string& tag, bool gets) {
  SmallFigures f;
  const std::string body(4096, 'x');
  std::vector<std::vector<double>> lat(static_cast<size_t>(n));
  std::vector<int> counts(static_cast<size_t>(n), 0);
  for (bool put : {true, false}) {
    if (!put && !gets) break;
    for (auto& l : lat) l.clear();
    std::vector<int> done(static_cast<size_t>(n), 0);
    const int64_t t0 = NowNs();
    const int64_t end = t0 + static_cast<int64_t>(o.small_seconds * 1e9);
    // The workers spread over the reactors, as the daemon's S3 connections are.
    const unsigned reactors = rt.size();
    std::vector<absl::Status> outcome(reactors);
    std::vector<std::thread> drivers;
    for (unsigned r = 0; r < reactors; ++r) {
      drivers.emplace_back([&, r] {
        outcome[r] = io::BlockOn(rt, r, [&, r]() -> io::Task<absl::Status> {
          std::vector<io::Task<absl::Status>> workers;
          for (int i = static_cast<int>(r); i < n; i += static_cast<int>(reactors)) {
            const auto u = static_cast<size_t>(i);
            workers.push_back(
                SmallWorker(st, &tag, i, put, end, &body, &lat[u], &done[u], counts[u]));
          }
          auto results = co_await io::WhenAll(std::move(workers));
          for (auto& res : results) OL_CO_RETURN_IF_ERROR(res);
          co_return absl::OkStatus();
        });
      });
    }
    for (std::thread& t : drivers) t.join();
    for (const absl::Status& s : outcome) OL_RETURN_IF_ERROR(s);
    const double secs = static_cast<double>(NowNs() - t0) / 1e9;
    std::vector<double> all;
    int total = 0;
    for (int i = 0; i < n; ++i) {
      const auto u = static_cast<size_t>(i);
      all.insert(all.end(), lat[u].begin(), lat[u].end());
      total += done[u];
      if (put) counts[u] = done[u];
    }
    const double ops = total / secs;
    (put ? f.puts : f.gets) = total;
    if (put) {
      f.put_ops = ops;
      f.put_p50_us = Percentile(all, 50);
      f.put_p99_us = Percentile(all, 99);
    } else {
      f.get_ops = ops;
      f.get_p50_us = Percentile(all, 50);
      f.get_p99_us = Percentile(all, 99);
    }
  }
  return f;
}

// What one store did: the large object's rates (medians over the rounds) and the small
// objects'.
struct StoreFigures {
  double put = NAN, get = NAN, commit_ms = NAN, put_cpu = NAN;
  SmallFigures small;
};

// The large and small phases on `st`, with fio (when asked, per round, alternating which goes
// first) over `fio_dirs`.
absl::StatusOr<StoreFigures> MeasureStore(const Options& o, io::Runtime& rt, store::Store& st,
                                          const std::string& scratch, const std::string& data,
                                          const std::vector<std::string>& fio_dirs,
                                          std::vector<double>* fio_w, std::vector<double>* fio_r,
                                          std::string* fio_note) {
  const std::string bucket = "bench";
  OL_RETURN_IF_ERROR(io::BlockOn(rt, 0, [&] { return st.MakeBucket(bucket); }));
  const size_t size = data.size();
  const uint64_t per_file = size / static_cast<uint64_t>(kData);  // × (k+m) files
  std::vector<double> put_mbps, get_mbps, commit_ms, put_cpu;
  for (int round = 0; round < o.rounds; ++round) {
    auto ours = [&]() -> absl::Status {
      const std::string key = "big/" + std::to_string(round);
      int64_t t0 = NowNs();
      const double cpu0 = ProcessCpuSeconds();
      int64_t commit_ns = 0;
      OL_RETURN_IF_ERROR(io::BlockOn(rt, 0, [&] {
        return PutObject(st, bucket, key, data, 1 << 20, &commit_ns);
      }));
      put_mbps.push_back(static_cast<double>(size) / 1e6 /
                         (static_cast<double>(NowNs() - t0) / 1e9));
      commit_ms.push_back(static_cast<double>(commit_ns) / 1e6);
      put_cpu.push_back((ProcessCpuSeconds() - cpu0) / (static_cast<double>(NowNs() - t0) / 1e9));
      DropCache(scratch);
      t0 = NowNs();
      OL_RETURN_IF_ERROR(io::BlockOn(rt, 0, [&] { return GetObject(st, bucket, key, data); }));
      get_mbps.push_back(static_cast<double>(size) / 1e6 /
                         (static_cast<double>(NowNs() - t0) / 1e9));
      return io::BlockOn(rt, 0, [&] { return st.DeleteObject(bucket, key); });
    };
    auto theirs = [&] {
      if (fio_dirs.empty() || !fio_note->empty()) return;
      auto w = RunFio(o, fio_dirs, scratch, true, per_file);
      auto r = w.ok() ? RunFio(o, fio_dirs, scratch, false, per_file) : w;
      if (!w.ok() || !r.ok()) {
        *fio_note = std::string((w.ok() ? r : w).status().message());
        return;
      }
      // Per byte of object: fio moved (k+m)/k bytes for each.
      fio_w->push_back(*w / 1e6 * kData / (kData + kParity));
      fio_r->push_back(*r / 1e6 * kData / (kData + kParity));
    };
    if (round % 2 == 0) {
      OL_RETURN_IF_ERROR(ours());
      theirs();
    } else {
      theirs();
      OL_RETURN_IF_ERROR(ours());
    }
    std::printf("  round %d: put %.0f MB/s (commit %.1f ms, %.0f%% of a core), get %.0f MB/s",
                round + 1, put_mbps.back(), commit_ms.back(), 100 * put_cpu.back(),
                get_mbps.back());
    // fio runs in the single-node phase only (the cluster's rounds are compared with those).
    if (!fio_w->empty() && fio_w->size() == static_cast<size_t>(round + 1)) {
      std::printf("; fio (per object byte) write %.0f, read %.0f MB/s", fio_w->back(),
                  fio_r->back());
    }
    std::printf("\n");
  }
  StoreFigures f;
  f.put = Median(put_mbps);
  f.get = Median(get_mbps);
  f.commit_ms = Median(commit_ms);
  f.put_cpu = Median(put_cpu);
  OL_ASSIGN_OR_RETURN(f.small,
                      MeasureSmall(rt, st, o, o.small_concurrency, "small", /*gets=*/true));
  return f;
}

void PrintSmall(const char* who, const Options& o, const SmallFigures& s) {
  std::printf("%s4 KiB objects, %d at a time: put %.0f ops/s (p50 %.0f µs, p99 %.0f µs), get %.0f "
              "ops/s (p50 %.0f µs, p99 %.0f µs)\n", who, o.small_concurrency, s.put_ops,
              s.put_p50_us, s.put_p99_us, s.get_ops, s.get_p50_us, s.get_p99_us);
}

absl::StatusOr<std::unique_ptr<io::Runtime>> StartRuntime(std::vector<int> cpus, bool pin) {
  io::RuntimeOptions ro;
  ro.cpus = std::move(cpus);
  ro.pin = pin;
  OL_ASSIGN_OR_RETURN(std::unique_ptr<io::Runtime> rt, io::Runtime::Create(ro));
  OL_RETURN_IF_ERROR(rt->Start());
  return rt;
}

// RS(kData+kParity) over `drives`, as the bench measures it.
store::StoreOptions BenchStoreOptions(const Options& o, std::vector<std::string> drives) {
  store::StoreOptions so;
  so.drives = std::move(drives);
  so.set_drive_count = kData + kParity;
  so.parity = kParity;
  so.block_size = kBlock;
  so.etag_md5 = !o.no_md5;
  so.commit_journal = !o.no_journal;
  return so;
}

std::vector<int> DaemonCpus() {
  // As in the daemon, one reactor per CPU (two here at most): the writer hashes on the second.
  return std::thread::hardware_concurrency() > 1 ? std::vector<int>{0, 1} : std::vector<int>{0};
}

int Fail(const std::string& what, const absl::Status& st) {
  std::fprintf(stderr, "store_bench: %s: %s\n", what.c_str(), std::string(st.message()).c_str());
  return 1;
}

// ---- --cluster

// One in-process node: its runtime, RPC listener with the cluster services, its engine.
struct ClusterNode {
  uint32_t id = 0;
  std::vector<std::string> drives;
  std::unique_ptr<io::Runtime> rt;
  std::unique_ptr<net::RpcServer> server;
  std::unique_ptr<store::ClusterServices> services;
  std::string address;
  std::unique_ptr<store::Store> st;

  void Close() {
    st.reset();
    if (server) {
      (void)rt->RunOn(0, [&] {
        server->Stop();
        services.reset();
        server.reset();
      });
    }
    if (rt) rt->Stop();
  }
};

int RunCluster(const Options& o, const std::string& scratch, const std::string& data) {
  std::vector<std::string> drives, fio_dirs;
  for (int i = 0; i < kData + kParity; ++i) {
    drives.push_back(scratch + "/d" + std::to_string(i));
    fio_dirs.push_back(scratch + "/fio" + std::to_string(i));
    std::filesystem::create_directories(drives.back());
    std::filesystem::create_directories(fio_dirs.back());
  }
  std::vector<double> fio_w, fio_r;
  std::string fio_note;

  // The single node: one engine over the six folders.
  std::printf("single node: one engine over %d folders, RS(%d+%d)\n", kData + kParity, kData,
              kParity);
  StoreFigures single;
  {
    auto rt = StartRuntime(DaemonCpus(), true);
    if (!rt.ok()) return Fail("runtime", rt.status());
    store::StoreOptions so = BenchStoreOptions(o, drives);
    so.inline_cache_bytes = 0;  // as in a cluster, where it is off
    auto opened = store::Store::Open(so);
    if (!opened.ok()) return Fail("open the store", opened.status());
    auto f = MeasureStore(o, **rt, **opened, scratch, data, fio_dirs, &fio_w, &fio_r, &fio_note);
    if (!f.ok()) return Fail("single node", f.status());
    single = *f;
    opened->reset();
    (*rt)->Stop();
  }
  for (const std::string& d : drives) {
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
  }

  // The cluster: three nodes of two of the same folders.
  std::printf("cluster: three nodes of two folders each over loopback TCP, RS(%d+%d), every "
              "request through node 1\n", kData, kParity);
  std::vector<ClusterNode> nodes(3);
  store::ClusterSpec spec;
  for (size_t i = 0; i < nodes.size(); ++i) {
    ClusterNode& n = nodes[i];
    n.id = static_cast<uint32_t>(i + 1);
    n.drives = {drives[2 * i], drives[2 * i + 1]};
    // Node 1 as the daemon runs; the others on one unpinned reactor each (they share the cores).
    auto rt = i == 0 ? StartRuntime(DaemonCpus(), true) : StartRuntime({0}, false);
    if (!rt.ok()) return Fail("runtime", rt.status());
    n.rt = *std::move(rt);
    absl::Status listened;
    (void)n.rt->RunOn(0, [&] {
      auto server = net::RpcServer::Create(n.rt->reactor(0), {});
      if (!server.ok()) {
        listened = server.status();
        return;
      }
      n.server = *std::move(server);
      auto bound = n.server->Listen(*io::SocketAddress::Parse("127.0.0.1:0"), {});
      if (!bound.ok()) {
        listened = bound.status();
        return;
      }
      n.address = bound->ToString();
    });
    if (!listened.ok()) return Fail("listen", listened);
    spec.nodes.push_back({n.id, n.address, 2});
  }
  const std::string digest = store::LayoutDigest(spec.nodes, kData + kParity, kParity);
  for (ClusterNode& n : nodes) {
    (void)n.rt->RunOn(0, [&] {
      store::ClusterServiceOptions co;
      co.node_id = n.id;
      co.drives = n.drives;
      co.layout_digest = digest;
      n.services = store::ClusterServices::Attach(*n.server, co);
    });
  }
  std::vector<absl::Status> opened(nodes.size());
  std::vector<std::thread> openers;
  for (size_t i = 0; i < nodes.size(); ++i) {
    openers.emplace_back([&, i] {
      store::StoreOptions so = BenchStoreOptions(o, nodes[i].drives);
      store::ClusterSpec c = spec;
      c.self_id = nodes[i].id;
      c.runtime = nodes[i].rt.get();
      c.boot_timeout = absl::Seconds(60);
      so.cluster = std::move(c);
      auto st = store::Store::Open(so);
      if (st.ok()) {
        nodes[i].st = *std::move(st);
      } else {
        opened[i] = st.status();
      }
    });
  }
  for (auto& t : openers) t.join();
  for (const absl::Status& s : opened) {
    if (!s.ok()) return Fail("open the cluster", s);
  }
  store::Store& via = *nodes[0].st;
  std::vector<double> no_fio_w, no_fio_r;
  std::string no_note = "skip";  // fio ran in the single-node phase
  const store::ClusterCounters before = via.cluster_counters();
  auto measured = MeasureStore(o, *nodes[0].rt, via, scratch, data, {}, &no_fio_w, &no_fio_r,
                               &no_note);
  const store::ClusterCounters after = via.cluster_counters();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) it->Close();
  if (!measured.ok()) return Fail("cluster", measured.status());
  const StoreFigures& cl = *measured;
  // Operations the phases made: per round a large PUT, GET and DELETE; the small PUTs and GETs;
  // the bucket.
  const double ops = 3.0 * o.rounds + cl.small.puts + cl.small.gets + 1;
  const double rounds_per_op =
      static_cast<double>(after.lock_rounds - before.lock_rounds) / ops;

  const double fw = fio_w.empty() ? NAN : Median(fio_w), fr = fio_r.empty() ? NAN : Median(fio_r);
  if (!fio_note.empty()) std::printf("fio could not run: %s\n", fio_note.c_str());
  std::printf("large object of %d MiB, RS(%d+%d):\n", o.size_mib, kData, kParity);
  std::printf("  put: single node %.0f MB/s, cluster %.0f MB/s = %.2f of it; fio write %.0f MB/s "
              "per object byte (cluster %.2f of it)\n", single.put, cl.put,
              Ratio(cl.put, single.put), fw, Ratio(cl.put, fw));
  std::printf("  get: single node %.0f MB/s, cluster %.0f MB/s = %.2f of it; fio read %.0f MB/s "
              "per object byte (cluster %.2f of it)\n", single.get, cl.get,
              Ratio(cl.get, single.get), fr, Ratio(cl.get, fr));
  PrintSmall("single node: ", o, single.small);
  PrintSmall("cluster:     ", o, cl.small);
  std::printf("  4 KiB put %.2f and get %.2f of the single node's rate\n",
              Ratio(cl.small.put_ops, single.small.put_ops),
              Ratio(cl.small.get_ops, single.small.get_ops));
  std::printf("lock rounds per operation (each one request to each of the 3 nodes): %.2f "
              "(%llu rounds, %llu requests)\n", rounds_per_op,
              static_cast<unsigned long long>(after.lock_rounds - before.lock_rounds),
              static_cast<unsigned long long>(after.lock_requests - before.lock_requests));
  if (o.json) {
    JsonLine j;
    j.Add("bench", "store_cluster")
        .Add("object_MiB", o.size_mib)
        .Add("k", kData)
        .Add("m", kParity)
        .Add("nodes", 3)
        .Add("rounds", o.rounds)
        .Add("single_put_MBps", single.put, 1)
        .Add("single_get_MBps", single.get, 1)
        .Add("cluster_put_MBps", cl.put, 1)
        .Add("cluster_get_MBps", cl.get, 1)
        .Add("put_ratio_vs_single", Ratio(cl.put, single.put))
        .Add("get_ratio_vs_single", Ratio(cl.get, single.get))
        .Add("fio_write_MBps_per_object_byte", fw, 1)
        .Add("fio_read_MBps_per_object_byte", fr, 1)
        .Add("single_small_put_ops", single.small.put_ops, 0)
        .Add("single_small_get_ops", single.small.get_ops, 0)
        .Add("cluster_small_put_ops", cl.small.put_ops, 0)
        .Add("cluster_small_get_ops", cl.small.get_ops, 0)
        .Add("cluster_small_get_p50_us", cl.small.get_p50_us, 0)
        .Add("cluster_small_put_p50_us", cl.small.put_p50_us, 0)
        .Add("lock_rounds_per_op", rounds_per_op, 2);
    if (!fio_note.empty()) j.Add("fio_error", fio_note);
    std::printf("%s\n", j.str().c_str());
  }
  return 0;
}

// ---- Driver

int Run(const Options& o) {
  PrintMachine(ProbeMachine(0));
  PrintBackgroundLoad(BackgroundLoad(absl::Milliseconds(300)));
  auto scratch = TempDir::Create(o.dir, "store-bench-");
  if (!scratch.ok()) return Fail("scratch folder", scratch.status());
  const size_t size = static_cast<size_t>(o.size_mib) << 20;
  std::string data(size, '\0');
  FillRandom(data.data(), data.size(), 42);
  if (o.cluster) return RunCluster(o, scratch->path(), data);

  std::vector<std::string> drives, fio_dirs;
  for (int i = 0; i < kData + kParity; ++i) {
    drives.push_back(scratch->path() + "/d" + std::to_string(i));
    std::filesystem::create_directories(drives.back());
    fio_dirs.push_back(scratch->path() + "/fio" + std::to_string(i));
    std::filesystem::create_directories(fio_dirs.back());
  }
  auto rt = StartRuntime(DaemonCpus(), true);
  if (!rt.ok()) return Fail("runtime", rt.status());
  auto opened = store::Store::Open(BenchStoreOptions(o, drives));
  if (!opened.ok()) return Fail("open the store", opened.status());
  const double md5_mbps = Md5Rate(data);
  std::printf("object of %d MiB, RS(%d+%d), %u KiB blocks, 4 drive folders under %s\n",
              o.size_mib, kData, kParity, kBlock >> 10, o.dir.c_str());
  std::vector<double> fio_w, fio_r;
  std::string fio_note;
  auto f = MeasureStore(o, **rt, **opened, scratch->path(), data, fio_dirs, &fio_w, &fio_r,
                        &fio_note);
  if (!f.ok()) return Fail("store", f.status());
  if (!fio_note.empty()) std::printf("fio could not run: %s\n", fio_note.c_str());
  const double put = f->put, get = f->get;
  const double fw = fio_w.empty() ? NAN : Median(fio_w), fr = fio_r.empty() ? NAN : Median(fio_r);
  std::printf("put %.0f MB/s ÷ fio write %.0f = %.2f (bar 0.7); get %.0f MB/s ÷ fio read %.0f = "
              "%.2f (bar 0.7)\n", put, fw, Ratio(put, fw), get, fr, Ratio(get, fr));
  std::printf("ETags %s; one core's MD5 runs at %.0f MB/s\n",
              o.no_md5 ? "from CRC-64s (--no-md5)" : "MD5 of the bytes", md5_mbps);
  PrintSmall("", o, f->small);
  // 4 KiB PUTs (new keys) against fio's 4 KiB writes each followed by fdatasync, at the same
  // depths, in folders on the same file system: bar 0.5 (issue 19).
  struct SmallVsFio {
    int depth;
    double ours = NAN, fio = NAN;
  };
  std::vector<SmallVsFio> svf;
  for (int depth : {16, 64}) {
    SmallVsFio x{depth};
    auto fio = RunFioSync(o, fio_dirs, scratch->path(), depth);
    if (fio.ok()) {
      x.fio = *fio;
    } else if (fio_note.empty()) {
      fio_note = std::string(fio.status().message());
    }
    auto ours = MeasureSmall(**rt, **opened, o, depth, "vs-fio-" + std::to_string(depth),
                             /*gets=*/false);
    if (!ours.ok()) return Fail("small puts", ours.status());
    x.ours = ours->put_ops;
    std::printf("4 KiB PUTs, %d in flight: %.0f ops/s (p50 %.0f µs) ÷ fio 4 KiB write + "
                "fdatasync %.0f/s per folder = %.2f (bar 0.5)\n", depth, x.ours,
                ours->put_p50_us, x.fio, Ratio(x.ours, x.fio));
    svf.push_back(x);
  }
  if (o.json) {
    JsonLine j;
    j.Add("bench", "store")
        .Add("object_MiB", o.size_mib)
        .Add("k", kData)
        .Add("m", kParity)
        .Add("rounds", o.rounds)
        .Add("etag_md5", !o.no_md5)
        .Add("md5_MBps", md5_mbps, 1)
        .Add("put_MBps", put, 1)
        .Add("get_MBps", get, 1)
        .Add("fio_write_MBps_per_object_byte", fw, 1)
        .Add("fio_read_MBps_per_object_byte", fr, 1)
        .Add("put_commit_ms", f->commit_ms, 1)
        .Add("put_cpu_cores", f->put_cpu, 2)
        .Add("put_ratio", Ratio(put, fw))
        .Add("get_ratio", Ratio(get, fr))
        .Add("small_put_ops", f->small.put_ops, 0)
        .Add("small_get_ops", f->small.get_ops, 0)
        .Add("small_put_p50_us", f->small.put_p50_us, 0)
        .Add("small_put_p99_us", f->small.put_p99_us, 0)
        .Add("small_get_p50_us", f->small.get_p50_us, 0)
        .Add("small_get_p99_us", f->small.get_p99_us, 0)
        .Add("commit_journal", !o.no_journal)
        .Add("small_put_ops_16", svf[0].ours, 0)
        .Add("small_put_fio_ops", svf[0].fio, 0)
        .Add("small_put_over_fio", Ratio(svf[0].ours, svf[0].fio))
        .Add("small_put_ops_64", svf[1].ours, 0)
        .Add("small_put_fio_ops_64", svf[1].fio, 0)
        .Add("small_put_over_fio_64", Ratio(svf[1].ours, svf[1].fio));
    if (!fio_note.empty()) j.Add("fio_error", fio_note);
    std::printf("%s\n", j.str().c_str());
  }
  opened->reset();
  (*rt)->Stop();
  return 0;
}

}  // namespace
}  // namespace openlake::bench

int main(int argc, char** argv) {
  openlake::bench::Options o;
  CLI::App app{"store_bench: the object engine's large and small objects vs fio"};
  app.add_flag("--json", o.json, "end with one JSON object");
  app.add_flag("--quick", o.quick, "a smoke run (16 MiB, one round, short small-object phase)");
  app.add_option("--size-mib", o.size_mib, "large object size (default 256)")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--rounds", o.rounds, "rounds (default 3)")->check(CLI::Range(1, 100));
  app.add_option("--dir", o.dir, "where the drive folders go (default /var/tmp)");
  app.add_option("--fio", o.fio, "the fio program");
  app.add_option("--small-seconds", o.small_seconds, "time per small-object phase (default 1)");
  app.add_option("--small-concurrency", o.small_concurrency, "operations in flight (default 16)")
      ->check(CLI::Range(1, 1024));
  app.add_flag("--no-md5", o.no_md5, "ETags from CRC-64s, not MD5 (StoreOptions::etag_md5)");
  app.add_flag("--no-journal", o.no_journal,
               "every commit syncs its own files (StoreOptions::commit_journal = false)");
  app.add_flag("--cluster", o.cluster,
               "RS(4+2) over three in-process nodes against one node over the same folders");
  CLI11_PARSE(app, argc, argv);
  if (o.quick) {
    o.size_mib = 16;
    o.rounds = 1;
    o.small_seconds = 0.2;
  }
  if (o.cluster) {
    openlake::bench::kData = 4;
    openlake::bench::kParity = 2;
  }
  return openlake::bench::Run(o);
}

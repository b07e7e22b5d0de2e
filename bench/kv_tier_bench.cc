// kv_tier_bench: the KV pool's disk tier against the drive's own limits, measured in one run.
//
//   kv_tier_bench [--json] [--quick] [--openlaked PATH] [--dir FOLDER] [--fio PATH]
//
// For 2 MiB and then 256 KiB blocks, with a running openlaked whose slab is a quarter of the
// working set and whose [kv_disk] path is a folder under --dir:
//   spill   sustained puts of the whole working set through kv::Client::Put (the slab full and
//           spilling), at the rate the disk tier takes them without dropping a block (the writer
//           waits whenever more than half the slab is blocks the disk lacks): GB/s stored;
//   fio_write  fio sequential O_DIRECT writes of the same bytes, same block size, io_uring,
//           depth 16, to a new file in the same folder: like the tier's preallocated data
//           file, every extent is written for the first time (on ext4 an overwrite of written
//           extents runs up to 1.5x faster than that, so fio must not loop over its file).
//           The drive's rate drifts by a third from one minute to the next here, so the two
//           alternate: fio, spill, fio, spill, fio, spill, fio (one round in --quick), each
//           spill round a new working set; spill_over_fio is the median over the rounds of each
//           spill against the mean of the fio runs either side of it;
//   disk_get  kv::Client::Get of disk-resident blocks in random order, in batches (each batch
//           read back with one O_DIRECT read per block, CRC-64 checked, then copied out as a RAM
//           hit): GB/s delivered;
//   fio_randread  fio random O_DIRECT reads, same block size, io_uring, the batch as its depth,
//           of a file as large as the working set in the same folder; the gets run in six
//           passes over three quarters of their keys that alternate with fio (fio, get, fio,
//           ..., get, fio; one pass in --quick), each fio run as long as the pass before it
//           (the drive's rate swings within seconds), and disk_get_over_fio is the median of
//           the passes' ratios.
//           A batch is 64 blocks of 256 KiB or 16 of 2 MiB (at most an eighth of the slab);
//   ram_get  Get of blocks resident in the slab, against memcpy of the same bytes (the RAM path
//           must stay where kv_bench has it);
//   restart  SIGTERM, a new openlaked on the same folder: how long until the first hit, and the
//           share of the working set that hits (Exists over every key); the recovery time the
//           daemon reports, scaled to 100 GiB of 256 KiB blocks.
// Output: human-readable lines; with --json one JSON object per block size, the last one for
// 256 KiB. Exit status: 0 on success, 1 when the KV path failed, 2 on bad arguments.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "bench_util.h"

#include "openlake/io/buffer.h"
#include "openlake/kv/client.h"
#include "openlake/status.h"

#ifndef OL_BENCH_OPENLAKED
#define OL_BENCH_OPENLAKED "openlaked"
#endif

namespace openlake::bench {
namespace {

constexpr size_t kMaxBatch = 64;
constexpr double kGB = 1e9;

struct Options {
  bool json = false;
  bool quick = false;
  std::string openlaked = OL_BENCH_OPENLAKED;
  std::string dir = "/var/tmp";
  std::string fio = "fio";
  uint64_t working_set_mb = 1024;
  double fio_seconds = 3;
  int spill_rounds = 3;
};

struct Daemon {
  Child child;
  std::string address;
  std::string config;
};

absl::StatusOr<Daemon> StartDaemon(const Options& o, const std::string& dir, uint64_t slab_bytes,
                                   uint64_t disk_bytes) {
  Daemon d;
  OL_ASSIGN_OR_RETURN(uint16_t port, FreeLoopbackPort());
  d.config = dir + "/openlaked.toml";
  std::ofstream f(d.config);
  f << "mode = \"kv\"\nrpc_addr = \"127.0.0.1:" << port << "\"\nkv_socket = \"" << dir
    << "/kv.sock\"\n[kv_slab]\ncapacity_gb = " << static_cast<double>(slab_bytes) / (1ull << 30)
    << "\nsegment_mb = 16\n[kv_disk]\npaths = [\"" << dir
    << "/tier\"]\ncapacity_gb = " << static_cast<double>(disk_bytes) / (1ull << 30) << "\n";
  f.close();
  d.address = "127.0.0.1:" + std::to_string(port);
  return d;
}

absl::Status Spawn(const Options& o, const std::string& dir, Daemon& d) {
  const std::string path = FindProgram(o.openlaked);
  if (path.empty()) return absl::NotFoundError("openlaked not found: " + o.openlaked);
  OL_ASSIGN_OR_RETURN(d.child, Child::Spawn({path, "--config", d.config, "--log-level", "warning"},
                                            dir + "/openlaked.log", -1));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<kv::Client>> ConnectKv(Daemon& d) {
  const int64_t deadline = NowNs() + 30'000'000'000;
  for (;;) {
    auto c = kv::Client::Connect(d.address, {});
    if (c.ok()) return c;
    if (!d.child.Alive()) {
      return absl::UnavailableError("openlaked exited during start-up:\n" + d.child.LogTail());
    }
    if (NowNs() > deadline) return c.status();
    usleep(5000);
  }
}

kv::BlockKey MakeKey(uint64_t i) { return MixedKey(i * 4 + 0x5eed); }

// fio's bandwidth (bytes/s) of `rw` on `file`.
// Reads run for `seconds` (time-based); writes write `size` bytes once.
absl::StatusOr<double> RunFio(const Options& o, const std::string& scratch, const std::string& file,
                              const std::string& rw, uint32_t bs, int depth, uint64_t size,
                              double seconds = 0) {
  const std::string out_path = scratch + "/fio.json";
  std::vector<std::string> argv = {FindProgram(o.fio),
                                   "--name=" + rw,
                                   "--ioengine=io_uring",
                                   "--direct=1",
                                   "--rw=" + rw,
                                   "--bs=" + std::to_string(bs),
                                   "--iodepth=" + std::to_string(depth),
                                   "--numjobs=1",
                                   "--size=" + std::to_string(size),
                                   "--filename=" + file,
                                   "--output-format=json",
                                   "--output=" + out_path};
  if (rw != "write") {
    argv.push_back("--time_based");
    const double run = seconds > 0 ? seconds : o.fio_seconds;
    argv.push_back("--runtime=" + std::to_string(std::max(1, int(run * 1000))) + "ms");
  }
  if (argv[0].empty()) return absl::NotFoundError("fio not found");
  OL_ASSIGN_OR_RETURN(Child child, Child::Spawn(argv, scratch + "/fio.log", -1));
  const int st = child.Wait(absl::Seconds(o.fio_seconds + 120), absl::Seconds(5));
  std::ifstream in(out_path);
  const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The job's section ("read" : {...}, "write" : {...}), not the option "rw" : "write".
  const size_t at = json.find(rw == "write" ? "\"write\" : {" : "\"read\" : {");
  const double bw = at == std::string::npos ? NAN : JsonNumberAfter(json, "bw_bytes", at);
  if (st != 0 || std::isnan(bw)) {
    return absl::InternalError("fio failed (status " + std::to_string(st) + "):\n" +
                               child.LogTail());
  }
  return bw;
}

// Our rate and fio's (GB/s) measured in turn: fio, ours, fio, ..., ours, fio, with `n` of ours
// (the drive's rate drifts too much for one of each), each against the mean of the fio runs
// either side of it. `ours(i, &note)` measures the i-th; each turn is printed as
// "  <turn> i: fio F, <name> O, fio F GB/s<note>".
struct Alternated {
  double ours = NAN, fio = NAN, ratio = NAN;  // medians; fio's and the ratio NaN when fio failed
  absl::Status fio_status;
};
absl::StatusOr<Alternated> Alternate(
    int n, const char* turn, const char* name, const std::function<absl::StatusOr<double>()>& fio,
    const std::function<absl::StatusOr<double>(int, std::string*)>& ours) {
  Alternated a;
  std::vector<double> fios, mine, ratios;
  auto run_fio = [&] {
    absl::StatusOr<double> r = fio();
    if (!r.ok() && a.fio_status.ok()) a.fio_status = r.status();
    fios.push_back(r.ok() ? *r / kGB : NAN);
  };
  run_fio();
  for (int i = 0; i < n; ++i) {
    std::string note;
    OL_ASSIGN_OR_RETURN(double gbps, ours(i, &note));
    mine.push_back(gbps);
    run_fio();
    ratios.push_back(gbps / ((fios[i] + fios[i + 1]) / 2));
    std::printf("  %s %d: fio %.2f, %s %.2f, fio %.2f GB/s%s\n", turn, i + 1, fios[i], name, gbps,
                fios[i + 1], note.c_str());
  }
  a.ours = Median(mine);
  if (a.fio_status.ok()) {
    a.fio = Median(fios);
    a.ratio = Median(ratios);
  }
  return a;
}

struct Figures {
  uint32_t block_bytes = 0;
  size_t batch = 0;  // blocks per Put and Get: the depth of the disk reads
  double spill_GBps = NAN, fio_write_GBps = NAN;  // medians over the rounds
  double spill_over_fio = NAN;                    // median of the rounds' ratios
  int spill_rounds = 0;
  double disk_get_GBps = NAN, fio_randread_GBps = NAN;  // medians over the passes
  double disk_get_over_fio = NAN;                       // median of the passes' ratios
  double ram_get_GBps = NAN, memcpy_GBps = NAN;
  double restart_hit_fraction = NAN, restart_first_hit_s = NAN;
  double recovery_s = NAN, recovery_100GiB_s = NAN;
  uint64_t spill_drops = 0, disk_hits = 0, checksum_errors = 0;
};

absl::StatusOr<Figures> RunOne(const Options& o, uint32_t block) {
  Figures f;
  f.block_bytes = block;
  // The slab is a quarter of the working set; a batch at most an eighth of the slab (64 blocks
  // of 256 KiB, 16 of 2 MiB in the full run), so a batch read back from disk never evicts
  // itself.
  const uint64_t ws = o.working_set_mb << 20;
  const uint64_t slab = std::max<uint64_t>(ws / 4, 128ull << 20);
  const size_t batch = std::clamp<uint64_t>(slab / 8 / block, 1, kMaxBatch);
  const size_t count = std::max<uint64_t>(4, ws / block / batch) * batch;
  const uint64_t bytes = uint64_t{block} * count;
  f.batch = batch;
  OL_ASSIGN_OR_RETURN(TempDir scratch, TempDir::Create(o.dir, "openlake-tierbench-"));
  const std::string dir = scratch.path();
  const int rounds = std::max(1, o.spill_rounds);
  f.spill_rounds = rounds;
  // Room on disk for the warm-up and every round's working set: no round pays for evicting an
  // earlier one.
  OL_ASSIGN_OR_RETURN(
      Daemon d, StartDaemon(o, dir, slab, rounds * (bytes + bytes / 4) + slab + (256ull << 20)));
  OL_RETURN_IF_ERROR(Spawn(o, dir, d));
  OL_ASSIGN_OR_RETURN(auto c, ConnectKv(d));
  kv::LayoutFingerprint fp;
  fp.model = "kv_tier_bench";
  fp.dtype = "bfloat16";
  OL_ASSIGN_OR_RETURN(kv::Namespace ns, c->OpenNamespace("bench", fp, block));

  io::AlignedBuffer src(uint64_t{block} * batch), dst(uint64_t{block} * batch);
  FillRandom(src.data(), src.size(), block);
  std::vector<const void*> src_ptrs;
  std::vector<void*> dst_ptrs;
  for (size_t i = 0; i < batch; ++i) {
    src_ptrs.push_back(src.data() + i * block);
    dst_ptrs.push_back(dst.data() + i * block);
  }
  // Every round's keys, after a warm-up's (one slab of blocks, not measured: the daemon's slab
  // pages are mapped on their first use, as kv_bench's steady state also waits for); the phases
  // after the spill rounds use the last round's keys.
  const size_t warm_blocks = slab / block / batch * batch;
  std::vector<kv::BlockKey> all_keys(warm_blocks + count * rounds);
  for (size_t i = 0; i < all_keys.size(); ++i) all_keys[i] = MakeKey(i * 131 + block);
  const std::vector<kv::BlockKey> keys(all_keys.end() - count, all_keys.end());

  // (b) Sustained puts of one round's working set, paced by the disk tier: GB/s.
  auto spill_round = [&](const kv::BlockKey* round_keys, size_t n) -> absl::StatusOr<double> {
    const int64_t t0 = NowNs();
    for (size_t b = 0; b < n; b += batch) {
      std::vector<kv::BlockKey> k(round_keys + b, round_keys + b + batch);
      // Each block differs: its first word is its index.
      for (size_t i = 0; i < batch; ++i) std::memcpy(src.data() + i * block, &b, sizeof(b));
      // A put that finds the slab short of room (slots pinned while they are written to disk)
      // stores a prefix; the rest goes again once the disk has caught up.
      size_t stored = 0;
      for (int tries = 0; stored < batch; ++tries) {
        std::vector<kv::BlockKey> rest(k.begin() + stored, k.end());
        std::vector<const void*> rest_src(src_ptrs.begin() + stored, src_ptrs.end());
        auto put = c->Put(ns, rest, rest_src);
        if (put.ok()) stored += put->stored;
        if (stored == batch) break;
        if (tries > 30000) return absl::InternalError("puts found no room for 30 s");
        usleep(1000);
      }
      for (;;) {
        OL_ASSIGN_OR_RETURN(kv::PoolStats st, c->Stats());
        if (st.dirty_blocks <= slab / block / 2) break;
        usleep(500);
      }
    }
    for (;;) {
      OL_ASSIGN_OR_RETURN(kv::PoolStats st, c->Stats());
      if (st.dirty_blocks == 0) break;
      usleep(500);
    }
    return static_cast<double>(n) * block / kGB / (static_cast<double>(NowNs() - t0) / 1e9);
  };

  // fio and our spill alternate, fio first and last.
  const std::string file = dir + "/fio.dat";
  OL_RETURN_IF_ERROR(spill_round(all_keys.data(), warm_blocks).status());
  OL_ASSIGN_OR_RETURN(Alternated spill,
                      Alternate(
                          rounds, "round", "spill",
                          [&]() {
                            auto w = RunFio(o, dir, file, "write", block, 16, bytes);
                            std::remove(file.c_str());
                            return w;
                          },
                          [&](int r, std::string*) {
                            return spill_round(all_keys.data() + warm_blocks + r * count, count);
                          }));
  f.spill_GBps = spill.ours;
  f.fio_write_GBps = spill.fio;  // NaN when fio failed (its error is printed below)
  f.spill_over_fio = spill.ratio;
  absl::Status fio_status = spill.fio_status;

  // (a) Gets of disk-resident blocks: the first three quarters of the last working set left the
  // slab long ago. In passes that alternate with fio's random reads of a file as large, written
  // now in the same folder: fio, pass, fio, ..., pass, fio (one pass in --quick). The drive's
  // rate swings from one second to the next, so the passes are short and many, and each fio run
  // lasts as long as a pass (the first as long as fio needs to read a pass's bytes).
  const int passes = o.quick ? 1 : 6;
  std::vector<size_t> order(count * 3 / 4);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
  auto w = RunFio(o, dir, file, "write", block, 16, bytes);
  if (!w.ok() && fio_status.ok()) fio_status = w.status();
  OL_ASSIGN_OR_RETURN(kv::PoolStats before, c->Stats());
  const size_t per_pass = order.size() / passes / batch * batch;
  double fio_read_s = 0;  // the length of each fio run: that of the pass before it
  OL_ASSIGN_OR_RETURN(
      Alternated get,
      Alternate(
          passes, "get pass", "disk get",
          [&]() -> absl::StatusOr<double> {
            if (!w.ok()) return w.status();
            if (fio_read_s == 0) {  // before the first pass: one second, to size the others
              absl::StatusOr<double> bw =
                  RunFio(o, dir, file, "randread", block, static_cast<int>(batch), bytes, 1.0);
              if (bw.ok()) fio_read_s = static_cast<double>(per_pass) * block / *bw;
              return bw;
            }
            return RunFio(o, dir, file, "randread", block, static_cast<int>(batch), bytes,
                          std::clamp(fio_read_s, 0.2, o.fio_seconds));
          },
          [&](int pass, std::string* note) -> absl::StatusOr<double> {
            const int64_t t1 = NowNs();
            size_t got = 0;
            for (size_t b = pass * per_pass; b + batch <= (pass + 1) * per_pass; b += batch) {
              std::vector<kv::BlockKey> k;
              for (size_t i = 0; i < batch; ++i) k.push_back(keys[order[b + i]]);
              OL_ASSIGN_OR_RETURN(kv::GetResult g, c->Get(ns, k, dst_ptrs));
              got += g.loaded;
            }
            *note = " (" + std::to_string(got) + " of " + std::to_string(per_pass) + " blocks hit)";
            fio_read_s = static_cast<double>(NowNs() - t1) / 1e9;
            return static_cast<double>(got) * block / kGB / fio_read_s;
          }));
  std::remove(file.c_str());
  if (fio_status.ok()) fio_status = get.fio_status;
  OL_ASSIGN_OR_RETURN(kv::PoolStats after, c->Stats());
  f.disk_hits = after.disk_hits - before.disk_hits;
  f.checksum_errors = after.disk_checksum_errors;
  f.spill_drops = after.spill_drops;
  f.disk_get_GBps = get.ours;
  f.fio_randread_GBps = get.fio;
  f.disk_get_over_fio = get.ratio;

  // The RAM path: the last batch again and again (it is in the slab now), against memcpy.
  {
    std::vector<kv::BlockKey> k(keys.end() - batch, keys.end());
    OL_ASSIGN_OR_RETURN(kv::GetResult warm, c->Get(ns, k, dst_ptrs));
    (void)warm;
    std::vector<double> ours, copy;
    for (int r = 0; r < (o.quick ? 5 : 30); ++r) {
      const int64_t a = NowNs();
      OL_ASSIGN_OR_RETURN(kv::GetResult g, c->Get(ns, k, dst_ptrs));
      const int64_t m = NowNs();
      std::memcpy(dst.data(), src.data(), dst.size());
      const int64_t e = NowNs();
      if (g.loaded != batch) return absl::InternalError("RAM-resident blocks missed");
      ours.push_back(static_cast<double>(dst.size()) / kGB / (static_cast<double>(m - a) / 1e9));
      copy.push_back(static_cast<double>(dst.size()) / kGB / (static_cast<double>(e - m) / 1e9));
    }
    f.ram_get_GBps = Median(ours);
    f.memcpy_GBps = Median(copy);
  }

  // Restart on the same folder.
  c.reset();
  d.child.Stop(absl::Seconds(60));
  const int64_t t2 = NowNs();
  OL_RETURN_IF_ERROR(Spawn(o, dir, d));
  OL_ASSIGN_OR_RETURN(c, ConnectKv(d));
  OL_ASSIGN_OR_RETURN(ns, c->OpenNamespace("bench", fp, block));
  for (;;) {
    std::vector<kv::BlockKey> k = {keys[0]};
    std::vector<void*> one = {dst.data()};
    OL_ASSIGN_OR_RETURN(kv::GetResult g, c->Get(ns, k, one));
    if (g.loaded == 1) break;
    if (NowNs() - t2 > 60'000'000'000) return absl::InternalError("no hit after the restart");
  }
  f.restart_first_hit_s = static_cast<double>(NowNs() - t2) / 1e9;
  size_t hit = 0;
  for (size_t b = 0; b < count; b += 1000) {
    std::vector<kv::BlockKey> k(keys.begin() + b, keys.begin() + std::min(count, b + 1000));
    OL_ASSIGN_OR_RETURN(kv::ExistsResult ex, c->Exists(ns, k));
    for (bool p : ex.present) hit += p;
  }
  f.restart_hit_fraction = static_cast<double>(hit) / static_cast<double>(count);
  OL_ASSIGN_OR_RETURN(kv::PoolStats rs, c->Stats());
  f.recovery_s = rs.recovery_seconds;
  // Recovery reads one log record per block: scale by blocks to 100 GiB of 256 KiB blocks.
  f.recovery_100GiB_s = rs.recovered_blocks ? rs.recovery_seconds * ((100ull << 30) / (256 << 10)) /
                                                  static_cast<double>(rs.recovered_blocks)
                                            : NAN;
  c.reset();
  d.child.Stop(absl::Seconds(60));

  if (!fio_status.ok()) {
    std::fprintf(stderr, "kv_tier_bench: fio: %s\n", std::string(fio_status.message()).c_str());
  }
  return f;
}

int Main(int argc, char** argv) {
  Options o;
  CLI::App app{"kv_tier_bench: the KV pool's disk tier against fio on the same file system"};
  app.add_flag("--json", o.json, "end with one JSON line per block size");
  app.add_flag("--quick", o.quick, "a small working set (a smoke run, not a measurement)");
  app.add_option("--openlaked", o.openlaked, "the daemon to run");
  app.add_option("--dir", o.dir, "where the disk tier and fio's file go (a disk, not tmpfs)");
  app.add_option("--fio", o.fio, "fio");
  app.add_option("--working-set-mb", o.working_set_mb, "blocks written per block size");
  app.add_option("--spill-rounds", o.spill_rounds, "spill rounds, each between two fio writes")
      ->check(CLI::Range(1, 10));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (o.quick) {
    o.working_set_mb = 256;
    o.fio_seconds = 1;
    o.spill_rounds = 1;
  }
  PrintMachine(ProbeMachine(0));
  PrintBackgroundLoad(BackgroundLoad(absl::Milliseconds(300)));
  std::vector<std::string> lines;
  for (uint32_t block : {2u << 20, 256u << 10}) {
    auto f = RunOne(o, block);
    if (!f.ok()) {
      std::fprintf(stderr, "kv_tier_bench: %u KiB blocks: %s\n", block >> 10,
                   std::string(f.status().message()).c_str());
      return 1;
    }
    std::printf(
        "%4u KiB blocks, %llu MiB working set, batches of %zu:\n"
        "  spill   %6.2f GB/s stored (fio seq write %6.2f GB/s): %.2f (median of %d "
        "alternating rounds); %llu dropped\n"
        "  disk get %5.2f GB/s (fio randread, same depth, %6.2f GB/s): %.2f; %llu from disk\n"
        "  RAM get %6.2f GB/s (memcpy %6.2f GB/s): %.2f\n"
        "  restart: first hit after %.3f s, %.4f of the working set hits; recovery %.3f s "
        "(100 GiB of 256 KiB blocks: %.2f s)\n",
        block >> 10, static_cast<unsigned long long>(o.working_set_mb), f->batch, f->spill_GBps,
        f->fio_write_GBps, f->spill_over_fio, f->spill_rounds,
        static_cast<unsigned long long>(f->spill_drops), f->disk_get_GBps, f->fio_randread_GBps,
        f->disk_get_over_fio, static_cast<unsigned long long>(f->disk_hits), f->ram_get_GBps,
        f->memcpy_GBps, Ratio(f->ram_get_GBps, f->memcpy_GBps), f->restart_first_hit_s,
        f->restart_hit_fraction, f->recovery_s, f->recovery_100GiB_s);
    std::fflush(stdout);
    JsonLine j;
    j.Add("bench", "kv_tier")
        .Add("block_bytes", uint64_t{block})
        .Add("working_set_bytes", o.working_set_mb << 20)
        .Add("batch", static_cast<uint64_t>(f->batch))
        .Add("disk_get_GBps", f->disk_get_GBps)
        .Add("fio_randread_GBps", f->fio_randread_GBps)
        .Add("disk_get_over_fio", f->disk_get_over_fio)
        .Add("spill_GBps", f->spill_GBps)
        .Add("fio_write_GBps", f->fio_write_GBps)
        .Add("spill_over_fio", f->spill_over_fio)
        .Add("spill_rounds", static_cast<uint64_t>(f->spill_rounds))
        .Add("spill_drops", f->spill_drops)
        .Add("ram_get_GBps", f->ram_get_GBps)
        .Add("memcpy_GBps", f->memcpy_GBps)
        .Add("ram_get_over_memcpy", Ratio(f->ram_get_GBps, f->memcpy_GBps))
        .Add("restart_hit_fraction", f->restart_hit_fraction, 4)
        .Add("restart_first_hit_s", f->restart_first_hit_s)
        .Add("recovery_s", f->recovery_s)
        .Add("recovery_100GiB_s_est", f->recovery_100GiB_s)
        .Add("disk_checksum_errors", f->checksum_errors);
    lines.push_back(j.str());
  }
  if (o.json) {
    for (const std::string& l : lines) std::printf("%s\n", l.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace openlake::bench

int main(int argc, char** argv) { return openlake::bench::Main(argc, argv); }

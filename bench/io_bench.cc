// io_bench: 4 KiB random O_DIRECT reads at depth 64 on one reactor, against fio on the same file
// in the same run.
//
//   io_bench [--json] [--quick] [--dir /var/tmp] [--file-mb 1024] [--seconds 5] [--rounds 4]
//
// Ours: an openlake::io::Runtime with one reactor pinned to one CPU reads through io::File
// (O_RDONLY; aligned requests take its O_DIRECT descriptor) into one io::AlignedBuffer, keeping
// `depth` reads in flight. Each read is an embedded io::Completion that re-arms itself with a
// new random offset: nothing is allocated per I/O.
// Baseline: fio --ioengine=io_uring --direct=1 --rw=randread --bs=4k --iodepth=64 --numjobs=1,
// time based, on the same file, pinned to the same CPU, with the same warm-up (ramp) time.
// Each round runs both, in an order that alternates between rounds; each figure is the median
// over rounds.
//
// The test file (real random bytes) is created under --dir and removed at the end unless --keep;
// --file reuses an existing file and never removes it. Exit status: 0 on success, 1 when our
// reads failed, 2 on bad arguments, 77 when O_DIRECT is unavailable on --dir (a skip).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#include "bench_util.h"

#include "openlake/io/buffer.h"
#include "openlake/io/file.h"
#include "openlake/io/reactor.h"
#include "openlake/status.h"

namespace openlake::bench {
namespace {

constexpr uint32_t kBlock = 4096;

struct Options {
  bool json = false;
  bool quick = false;
  std::string dir = "/var/tmp";
  std::string file;  // an existing file to read; empty: create one under dir
  uint64_t file_mb = 1024;
  unsigned depth = 64;
  double seconds = 5;
  double warmup = 1;
  int rounds = 4;  // even: each side runs first equally often
  std::string fio = "fio";
  bool no_fio = false;
  bool keep = false;
  int cpu = -2;  // -2: the first allowed CPU; -1: unpinned
};

// ---- Latency histogram: 1 µs buckets up to 100 ms, then one overflow bucket.

class Histogram {
 public:
  Histogram() : buckets_(kBuckets + 1, 0) {}
  void Add(int64_t ns) {
    const int64_t us = ns < 0 ? 0 : ns / 1000;
    ++buckets_[static_cast<size_t>(std::min<int64_t>(us, kBuckets))];
    ++count_;
  }
  // Upper edge of the bucket holding the p-th percentile, in µs.
  double PercentileUs(double p) const {
    if (count_ == 0) return NAN;
    const auto rank = static_cast<uint64_t>(std::ceil(p / 100 * static_cast<double>(count_)));
    uint64_t seen = 0;
    for (size_t i = 0; i < buckets_.size(); ++i) {
      seen += buckets_[i];
      if (seen >= std::max<uint64_t>(rank, 1)) return static_cast<double>(i + 1);
    }
    return kBuckets;
  }
  uint64_t count() const { return count_; }

 private:
  static constexpr int64_t kBuckets = 100000;
  std::vector<uint64_t> buckets_;
  uint64_t count_ = 0;
};

// ---- Our reader

// Keeps `depth` random 4 KiB reads in flight on one reactor. Start() runs on the reactor; every
// other member function is for the thread that owns the object, once done() is notified.
class RandomReader {
 public:
  RandomReader(const io::File& file, uint64_t file_bytes, unsigned depth, uint64_t seed)
      : file_(file),
        blocks_(file_bytes / kBlock),
        buf_(uint64_t{depth} * kBlock),
        slots_(depth),
        rng_(Mix64(seed) | 1) {
    for (unsigned i = 0; i < depth; ++i) {
      slots_[i].owner = this;
      slots_[i].data = buf_.data() + uint64_t{i} * kBlock;
    }
  }

  // On the reactor: issue every slot; count completions between now+warmup and
  // now+warmup+measure; stop re-arming after that and signal Done() once all have drained.
  void Start(io::Reactor& r, absl::Duration warmup, absl::Duration measure) {
    reactor_ = &r;
    warm_end_ns_ = r.now_ns() + absl::ToInt64Nanoseconds(warmup);
    end_ns_ = warm_end_ns_ + absl::ToInt64Nanoseconds(measure);
    measure_ns_ = absl::ToInt64Nanoseconds(measure);
    for (Slot& s : slots_) Issue(s);
  }
  absl::Notification& done() { return done_; }

  double iops() const {
    return static_cast<double>(hist_.count()) / (static_cast<double>(measure_ns_) / 1e9);
  }
  const Histogram& latency() const { return hist_; }
  uint64_t errors() const { return errors_; }
  int32_t first_error() const { return first_error_; }

 private:
  struct Slot final : io::Completion {
    RandomReader* owner = nullptr;
    std::byte* data = nullptr;
    int64_t issued_ns = 0;
    void Complete(int32_t res, uint32_t /*flags*/) noexcept override {
      owner->OnComplete(*this, res);
    }
  };

  void Issue(Slot& s) {
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    s.issued_ns = reactor_->now_ns();
    ++in_flight_;
    file_.Read(*reactor_, s.data, kBlock, (rng_ % blocks_) * kBlock, &s);
  }

  void OnComplete(Slot& s, int32_t res) {
    --in_flight_;
    const int64_t now = reactor_->now_ns();
    if (res != static_cast<int32_t>(kBlock)) {
      if (errors_++ == 0) first_error_ = res;
    } else if (now >= warm_end_ns_ && now < end_ns_) {
      hist_.Add(now - s.issued_ns);
    }
    if (now < end_ns_ && errors_ < 1000) {
      Issue(s);
    } else if (in_flight_ == 0) {
      done_.Notify();
    }
  }

  const io::File& file_;
  const uint64_t blocks_;
  io::AlignedBuffer buf_;
  std::vector<Slot> slots_;
  uint64_t rng_;
  io::Reactor* reactor_ = nullptr;
  int64_t warm_end_ns_ = 0, end_ns_ = 0, measure_ns_ = 1;
  unsigned in_flight_ = 0;
  uint64_t errors_ = 0;
  int32_t first_error_ = 0;
  Histogram hist_;
  absl::Notification done_;
};

struct OursResult {
  double iops = NAN, p50_us = NAN, p99_us = NAN;
  double cpu = NAN;  // share of one core this process used over the run (the reactor's)
};

absl::StatusOr<OursResult> RunOurs(io::Runtime& rt, const io::File& f, uint64_t bytes,
                                   const Options& o, uint64_t seed) {
  auto reader = std::make_unique<RandomReader>(f, bytes, o.depth, seed);
  const absl::Duration warm = absl::Seconds(o.warmup), run = absl::Seconds(o.seconds);
  RandomReader* rd = reader.get();
  const double cpu0 = ProcessCpuSeconds();
  const int64_t t0 = NowNs();
  if (!rt.Post(0, [rd, &rt, warm, run] { rd->Start(rt.reactor(0), warm, run); })) {
    return absl::InternalError("the reactor is not running");
  }
  // Reads are bounded by the kernel; a generous deadline still keeps the bench bounded.
  if (!rd->done().WaitForNotificationWithTimeout(warm + run + absl::Seconds(60))) {
    // The reads still point into `reader`: leak it rather than free memory the kernel may fill.
    (void)reader.release();
    return absl::DeadlineExceededError("reads did not drain within 60 s of the end");
  }
  if (rd->errors() > 0) {
    return ErrnoStatus(rd->first_error() < 0 ? rd->first_error() : -EIO,
                       std::to_string(rd->errors()) + " reads failed or came back short; first");
  }
  OursResult r;
  r.cpu = (ProcessCpuSeconds() - cpu0) / (static_cast<double>(NowNs() - t0) / 1e9);
  r.iops = rd->iops();
  r.p50_us = rd->latency().PercentileUs(50);
  r.p99_us = rd->latency().PercentileUs(99);
  return r;
}

// ---- fio

struct FioResult {
  double iops = NAN, clat_p50_us = NAN, clat_p99_us = NAN;
  double cpu = NAN;  // usr_cpu + sys_cpu of the job, as a share of one core
};

FioResult ParseFio(const std::string& out) {
  FioResult r;
  const size_t read = out.find("\"read\"");
  if (read == std::string::npos) return r;
  r.iops = JsonNumberAfter(out, "iops", read);
  r.cpu = (JsonNumberAfter(out, "usr_cpu", read) + JsonNumberAfter(out, "sys_cpu", read)) / 100;
  size_t clat = 0;
  if (!std::isnan(JsonNumberAfter(out, "min", out.find("\"clat_ns\"", read), &clat))) {
    const size_t pct = out.find("\"percentile\"", clat);
    if (pct != std::string::npos) {
      r.clat_p50_us = JsonNumberAfter(out, "50.000000", pct) / 1e3;
      r.clat_p99_us = JsonNumberAfter(out, "99.000000", pct) / 1e3;
    }
  }
  return r;
}

absl::StatusOr<FioResult> RunFio(const std::string& fio, const std::string& file,
                                 const std::string& scratch, const Options& o) {
  const std::string out_path = scratch + "/fio.json";
  std::vector<std::string> argv = {
      fio,
      "--name=randread",
      "--ioengine=io_uring",
      "--direct=1",
      "--rw=randread",
      "--bs=4k",
      "--iodepth=" + std::to_string(o.depth),
      "--numjobs=1",
      "--time_based",
      "--runtime=" + std::to_string(static_cast<int64_t>(o.seconds * 1000)) + "ms",
      "--ramp_time=" + std::to_string(static_cast<int64_t>(o.warmup * 1000)) + "ms",
      "--filename=" + file,
      "--output-format=json",
      "--output=" + out_path};
  if (o.cpu >= 0) argv.push_back("--cpus_allowed=" + std::to_string(o.cpu));
  OL_ASSIGN_OR_RETURN(Child child, Child::Spawn(argv, scratch + "/fio.log", /*cpu=*/-1));
  const int st = child.Wait(absl::Seconds(o.seconds + o.warmup + 60), absl::Seconds(5));
  std::ifstream in(out_path);
  const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  FioResult r = ParseFio(json);
  if (st != 0 || std::isnan(r.iops)) {
    return absl::InternalError("fio failed (status " + std::to_string(st) + "):\n" +
                               child.LogTail());
  }
  return r;
}

// ---- The test file

// Writes `bytes` of random data to `path` (1 MiB at a time) and syncs it.
absl::Status CreateFile(const std::string& path, uint64_t bytes) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, "create " + path);
  std::vector<char> chunk(1 << 20);
  absl::Status st;
  for (uint64_t off = 0; off < bytes && st.ok(); off += chunk.size()) {
    FillRandom(chunk.data(), chunk.size(), off);
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk.size(), bytes - off));
    size_t done = 0;
    while (done < n) {
      const ssize_t w = pwrite(fd, chunk.data() + done, n - done, static_cast<off_t>(off + done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        st = ErrnoStatus(w < 0 ? errno : EIO, "write " + path);
        break;
      }
      done += static_cast<size_t>(w);
    }
  }
  if (st.ok() && fsync(fd) != 0) st = ErrnoStatus(errno, "fsync " + path);
  // The reads bypass the page cache; drop what the writes left there.
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
  return st;
}

// ---- Driver

int Fail(const std::string& what, const absl::Status& st, int code = 1) {
  std::fprintf(stderr, "io_bench: %s: %s\n", what.c_str(), std::string(st.message()).c_str());
  return code;
}

double MedianOrNan(const std::vector<double>& v) { return v.empty() ? NAN : Median(v); }

// Per-round figures of one side.
struct Series {
  std::vector<double> iops, p50, p99, cpu;
  void Add(double i, double a, double b, double c) {
    iops.push_back(i);
    p50.push_back(a);
    p99.push_back(b);
    cpu.push_back(c);
  }
};

// One round of ours and fio. The order alternates between rounds (ours first in odd rounds,
// fio first in even ones), so neither side always meets a colder or warmer device. A fio
// failure fills `fio_note` and leaves fio out of later rounds; our failure is returned.
absl::Status RunRound(int round, io::Runtime& rt, const io::File& file, uint64_t size,
                      const std::string& path, const std::string& scratch, const std::string& fio,
                      const Options& o, Series& ours, Series& theirs, std::string& fio_note) {
  std::string our_text, fio_text;
  char buf[160];
  for (int step = 0; step < 2; ++step) {
    const bool our_turn = (step == 0) == (round % 2 == 0);
    if (our_turn) {
      OL_ASSIGN_OR_RETURN(OursResult r, RunOurs(rt, file, size, o, uint64_t(round) + 1));
      ours.Add(r.iops, r.p50_us, r.p99_us, r.cpu);
      std::snprintf(buf, sizeof(buf), " openlake %7.0f IOPS (p50 %.0f us, p99 %.0f us, cpu %.0f%%)",
                    r.iops, r.p50_us, r.p99_us, r.cpu * 100);
      our_text = buf;
    } else if (fio_note.empty()) {
      auto f = RunFio(fio, path, scratch, o);
      if (!f.ok()) {
        fio_note = std::string(f.status().message());
        continue;
      }
      theirs.Add(f->iops, f->clat_p50_us, f->clat_p99_us, f->cpu);
      std::snprintf(buf, sizeof(buf),
                    " | fio %7.0f IOPS (clat p50 %.0f us, p99 %.0f us, cpu %.0f%%)", f->iops,
                    f->clat_p50_us, f->clat_p99_us, f->cpu * 100);
      fio_text = buf;
    }
  }
  std::printf("  round %d%s:%s%s\n", round + 1, round % 2 == 0 ? "" : " (fio first)",
              our_text.c_str(), fio_text.c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

int Run(Options o) {
  const std::vector<int> cpus = io::AllowedCpus();
  if (o.cpu == -2) o.cpu = cpus.empty() ? -1 : cpus.front();
  PrintMachine(ProbeMachine(o.cpu >= 0 ? o.cpu : 0));
  PrintBackgroundLoad(BackgroundLoad(absl::Milliseconds(500)));

  auto scratch = TempDir::Create(o.dir, "openlake-iobench-");
  if (!scratch.ok()) return Fail("scratch folder under " + o.dir, scratch.status(), 2);
  std::string path = o.file;
  if (path.empty()) {
    path = scratch->path() + "/randread.dat";
    const int64_t t0 = NowNs();
    if (absl::Status st = CreateFile(path, o.file_mb << 20); !st.ok()) {
      return Fail("creating the test file", st);
    }
    std::printf("test file: %s, %lu MiB of random data written in %.1f s\n", path.c_str(),
                static_cast<unsigned long>(o.file_mb), static_cast<double>(NowNs() - t0) / 1e9);
    if (o.keep) scratch->Keep();
  }
  auto file = io::File::Open(path, O_RDONLY);
  if (!file.ok()) return Fail("opening " + path, file.status());
  auto size = file->Size();
  if (!size.ok() || *size < uint64_t{kBlock} * o.depth) {
    return Fail("sizing " + path,
                size.ok() ? absl::InvalidArgumentError("file too small") : size.status());
  }
  if (file->direct_fd() < 0 || file->direct_alignment() > kBlock) {
    std::printf("skip: O_DIRECT with 4 KiB alignment is unavailable on %s\n", path.c_str());
    return 77;
  }

  io::RuntimeOptions ro;
  if (o.cpu >= 0)
    ro.cpus = {o.cpu};
  else
    ro.cpus = {cpus.empty() ? 0 : cpus.front()};
  ro.pin = o.cpu >= 0;
  ro.sq_entries = std::max(256u, o.depth * 2);
  ro.thread_name = "iobench-r";
  auto rt = io::Runtime::Create(ro);
  if (!rt.ok()) return Fail("creating the reactor", rt.status());
  if (absl::Status st = (*rt)->Start(); !st.ok()) return Fail("starting the reactor", st);
  bool deferred = false;
  (void)(*rt)->RunOn(0, [&] { deferred = (*rt)->reactor(0).deferred_taskrun(); });

  const std::string fio = o.no_fio ? "" : FindProgram(o.fio);
  std::string fio_note = o.no_fio      ? "disabled by --no-fio"
                         : fio.empty() ? "fio not found (apt-get install fio)"
                                       : "";
  std::printf(
      "4 KiB random reads, O_DIRECT, depth %u, one reactor on CPU %d (%s); %d round(s) "
      "of %.1f s after %.1f s warm-up; file %.0f MiB\n",
      o.depth, o.cpu, deferred ? "SINGLE_ISSUER|DEFER_TASKRUN" : "plain ring flags", o.rounds,
      o.seconds, o.warmup, static_cast<double>(*size) / (1 << 20));

  Series ours, theirs;
  const LoadMeter load({});
  for (int round = 0; round < o.rounds; ++round) {
    if (absl::Status st = RunRound(round, **rt, *file, *size, path, scratch->path(), fio, o, ours,
                                   theirs, fio_note);
        !st.ok()) {
      return Fail("our reads", st);
    }
  }
  const double other_load = load.OtherLoad();
  (*rt)->Stop();
  std::printf("other processes took %.0f%% of the CPUs meanwhile%s\n", other_load * 100,
              other_load > 0.10 ? " (WARNING: figures skewed)" : "");
  if (!fio_note.empty()) std::printf("fio baseline skipped: %s\n", fio_note.c_str());

  const double our_iops = MedianOrNan(ours.iops), fio_iops = MedianOrNan(theirs.iops);
  std::printf("median: openlake %.0f IOPS, fio %.0f IOPS, ratio %.3f (bar >= 0.9)\n", our_iops,
              fio_iops, Ratio(our_iops, fio_iops));
  if (!o.file.empty() || o.keep) std::printf("test file kept: %s\n", path.c_str());
  if (o.json) {
    JsonLine j;
    j.Add("bench", "io_randread")
        .Add("block_bytes", uint64_t{kBlock})
        .Add("depth", uint64_t{o.depth})
        .Add("file_bytes", *size)
        .Add("seconds", o.seconds, 1)
        .Add("rounds", o.rounds)
        .Add("quick", o.quick)
        .Add("deferred_taskrun", deferred)
        .Add("our_iops", our_iops, 0)
        .Add("fio_iops", fio_iops, 0)
        .Add("ratio", Ratio(our_iops, fio_iops))
        .Add("our_p50_us", MedianOrNan(ours.p50), 0)
        .Add("our_p99_us", MedianOrNan(ours.p99), 0)
        .Add("fio_clat_p50_us", MedianOrNan(theirs.p50), 0)
        .Add("fio_clat_p99_us", MedianOrNan(theirs.p99), 0)
        .Add("our_cpu", MedianOrNan(ours.cpu), 2)
        .Add("fio_cpu", MedianOrNan(theirs.cpu), 2)
        .Add("other_load", other_load, 2);
    if (!fio_note.empty()) j.Add("fio_note", fio_note);
    std::printf("%s\n", j.str().c_str());
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace openlake::bench

int main(int argc, char** argv) {
  openlake::bench::Options o;
  CLI::App app{"io_bench: 4 KiB random O_DIRECT reads on one reactor vs fio (io_uring)"};
  app.add_flag("--json", o.json, "end with one JSON object");
  app.add_flag("--quick", o.quick, "tiny run for smoke tests (64 MiB file, 1 s, one round)");
  app.add_option("--dir", o.dir, "folder for the test file (default /var/tmp)");
  app.add_option("--file", o.file, "read this existing file instead (never removed)");
  app.add_option("--file-mb", o.file_mb, "size of the test file in MiB")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--depth", o.depth, "reads in flight")->check(CLI::Range(1, 1024));
  app.add_option("--seconds", o.seconds, "measured seconds per run")->check(CLI::Range(0.1, 600.0));
  app.add_option("--warmup", o.warmup, "seconds before measuring (fio's ramp_time)")
      ->check(CLI::Range(0.0, 60.0));
  app.add_option("--rounds", o.rounds, "rounds of (ours, fio)")->check(CLI::Range(1, 20));
  app.add_option("--fio", o.fio, "fio binary (default: from PATH)");
  app.add_flag("--no-fio", o.no_fio, "skip the fio baseline");
  app.add_flag("--keep", o.keep, "keep the test file");
  app.add_option("--cpu", o.cpu, "CPU for the reactor and fio (-1: unpinned)");
  CLI11_PARSE(app, argc, argv);
  if (o.quick) {
    o.file_mb = std::min<uint64_t>(o.file_mb, 64);
    o.seconds = 1;
    o.warmup = 0.5;
    o.rounds = 2;
  }
  return openlake::bench::Run(o);
}

// File: bench/bench_util.h
//
// Helpers shared by the benchmark programs in bench/: clocks and percentiles, the machine
// description every bench prints (CPU, kernel, io_uring flags), CPU pinning, loopback ports,
// child processes (the servers a bench starts and stops itself), scratch folders and a small
// JSON line writer. Nothing here throws; failures come back as absl::Status.
//
//   bench::MachineInfo m = bench::ProbeMachine(/*cpu=*/0);
//   bench::PrintMachine(m);
//   OL_ASSIGN_OR_RETURN(bench::Child redis, bench::Child::Spawn(argv, log_path, /*cpu=*/1));
//   ...
//   redis.Stop(absl::Seconds(10));  // SIGTERM, then SIGKILL after the grace period
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "openlake/kv/types.h"

namespace openlake::bench {

// CLOCK_MONOTONIC in nanoseconds.
int64_t NowNs();

// The p-th percentile (0 ≤ p ≤ 100, nearest rank) of `v`; 0 for an empty vector.
double Percentile(std::vector<double> v, double p);
inline double Median(std::vector<double> v) { return Percentile(std::move(v), 50); }

// What a result depends on, printed by every bench.
struct MachineInfo {
  std::string cpu_model;          // "model name" of /proc/cpuinfo
  std::string kernel;             // uname -r
  unsigned cpus = 0;              // CPUs this process may run on
  bool uring_ok = false;          // an io_uring could be created
  bool deferred_taskrun = false;  // ... with SINGLE_ISSUER|DEFER_TASKRUN
  std::string uring_error;        // why not, when !uring_ok
};

// Starts (and stops) a one-reactor io::Runtime on `cpu` to learn the ring flags.
MachineInfo ProbeMachine(int cpu);
// "machine: <cpu> ×N, kernel K, io_uring SINGLE_ISSUER|DEFER_TASKRUN" on stdout.
void PrintMachine(const MachineInfo& m);

// How busy the machine is before a bench starts: the share of all CPUs' time spent outside
// idle and iowait over `window`, from /proc/stat (0..1; NaN if unreadable). Benches print it and
// warn above 10%: other work on a 2-core box skews every figure.
double BackgroundLoad(absl::Duration window);
// Prints "background load: X%" and a warning line when it is above 10%.
void PrintBackgroundLoad(double load);

// Measures how much CPU processes other than ours took while a section ran: machine-wide busy
// time from /proc/stat minus the CPU time of this process and of `pids` (our servers), as a
// share of all CPUs. Kernel work done for us outside our processes' accounting (softirqs,
// kworkers) counts as other, so a few percent is normal.
class LoadMeter {
 public:
  explicit LoadMeter(std::vector<pid_t> pids);
  // 0..1 since construction; NaN when /proc could not be read.
  double OtherLoad() const;

 private:
  uint64_t OurTicks() const;
  std::vector<pid_t> pids_;
  uint64_t busy0_ = 0, total0_ = 0, ours0_ = 0;
  bool ok_ = false;
};

// Minor page faults this process has taken so far (getrusage): a steady-state section takes
// none on its data path.
uint64_t MinorFaults();

// User + system CPU seconds this process (every thread) has used so far.
double ProcessCpuSeconds();

// Pins the calling thread to `cpu`. False (and the thread unpinned) when the kernel refuses.
bool PinThisThread(int cpu);

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, read back, closed).
absl::StatusOr<uint16_t> FreeLoopbackPort();

// The path of `name` found in $PATH (or `name` itself when it contains a '/' and is
// executable); empty when none.
std::string FindProgram(const std::string& name);

// A scratch folder made with mkdtemp under `parent`; removed with everything in it when the
// object dies (unless Keep() was called). Move-only.
class TempDir {
 public:
  static absl::StatusOr<TempDir> Create(const std::string& parent, const std::string& prefix);
  TempDir() = default;
  TempDir(TempDir&& o) noexcept;
  TempDir& operator=(TempDir&& o) noexcept;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

  const std::string& path() const { return path_; }
  void Keep() { keep_ = true; }

 private:
  std::string path_;
  bool keep_ = false;
};

// A child process with its stdout and stderr in a log file. It gets SIGTERM if this process
// dies first (PR_SET_PDEATHSIG), so a crashed bench leaves no server behind. Move-only; the
// destructor stops a child still running.
class Child {
 public:
  // Forks and execs argv[0] (a path) with `argv`; pinned to `cpu` when cpu ≥ 0.
  static absl::StatusOr<Child> Spawn(const std::vector<std::string>& argv,
                                     const std::string& log_path, int cpu);
  Child() = default;
  Child(Child&& o) noexcept;
  Child& operator=(Child&& o) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  pid_t pid() const { return pid_; }
  // True while the process runs (reaps it, and records its status, once it has ended).
  bool Alive();
  // Waits up to `timeout` for the child to end by itself, then stops it as Stop does. Returns
  // the waitpid status.
  int Wait(absl::Duration timeout, absl::Duration grace);
  // SIGTERM, waits up to `grace`, then SIGKILL. Returns the exit status as waitpid gave it
  // (-1 when there was no child). Idempotent.
  int Stop(absl::Duration grace);
  const std::string& log_path() const { return log_path_; }
  // The last `max_bytes` of the log, for error messages.
  std::string LogTail(size_t max_bytes = 2000) const;

 private:
  pid_t pid_ = -1;
  int status_ = -1;
  std::string log_path_;
};

// Fills [data, data + len) with xorshift bytes from `seed` (incompressible, every page touched).
void FillRandom(void* data, size_t len, uint64_t seed);

// splitmix64: a stateless 64-bit mix, for keys and offsets.
uint64_t Mix64(uint64_t x);

// A 32-byte KV key, as an engine's block hashes are: Mix64(base + w) for its four words w.
kv::BlockKey MixedKey(uint64_t base);

// One JSON object on one line. Keys keep the order they were added in; a NaN or infinite number
// is written as null (a baseline that could not run).
class JsonLine {
 public:
  JsonLine& Add(const std::string& key, const std::string& value);
  JsonLine& Add(const std::string& key, const char* value) { return Add(key, std::string(value)); }
  JsonLine& Add(const std::string& key, double value, int decimals = 3);
  JsonLine& Add(const std::string& key, int64_t value);
  JsonLine& Add(const std::string& key, uint64_t value) {
    return Add(key, static_cast<int64_t>(value));
  }
  JsonLine& Add(const std::string& key, int value) { return Add(key, static_cast<int64_t>(value)); }
  JsonLine& Add(const std::string& key, bool value);
  JsonLine& AddNull(const std::string& key);
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void Key(const std::string& key);
  std::string body_;
};

// The number after `"key" :` at or after `from` in a JSON text (fio's output), NaN when absent;
// `at`, when given, receives the position of that colon.
double JsonNumberAfter(const std::string& json, const std::string& key, size_t from,
                       size_t* at = nullptr);

// "a/b": a ÷ b, NaN when either is NaN or b is 0.
double Ratio(double a, double b);

}  // namespace openlake::bench

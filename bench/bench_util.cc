#include "bench_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <utility>

#include "openlake/io/reactor.h"

namespace openlake::bench {

int64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // Nearest rank: the smallest value with at least p% of the values at or below it.
  const double rank = std::ceil(p / 100.0 * static_cast<double>(v.size()));
  const size_t idx = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return v[std::min(idx, v.size() - 1)];
}

namespace {

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown CPU";
}

}  // namespace

MachineInfo ProbeMachine(int cpu) {
  MachineInfo m;
  m.cpu_model = CpuModel();
  utsname u{};
  m.kernel = uname(&u) == 0 ? u.release : "unknown";
  m.cpus = static_cast<unsigned>(io::AllowedCpus().size());
  io::RuntimeOptions ro;
  ro.cpus = {cpu};
  ro.sq_entries = 8;
  ro.thread_name = "bench-probe";
  auto rt = io::Runtime::Create(ro);
  if (!rt.ok()) {
    m.uring_error = std::string(rt.status().message());
    return m;
  }
  if (absl::Status st = (*rt)->Start(); !st.ok()) {
    m.uring_error = std::string(st.message());
    return m;
  }
  m.uring_ok = true;
  bool deferred = false;
  (void)(*rt)->RunOn(0, [&] { deferred = (*rt)->reactor(0).deferred_taskrun(); });
  m.deferred_taskrun = deferred;
  (*rt)->Stop();
  return m;
}

void PrintMachine(const MachineInfo& m) {
  std::printf("machine: %s x%u CPUs, kernel %s, io_uring %s\n", m.cpu_model.c_str(), m.cpus,
              m.kernel.c_str(),
              !m.uring_ok          ? ("unavailable: " + m.uring_error).c_str()
              : m.deferred_taskrun ? "SINGLE_ISSUER|DEFER_TASKRUN"
                                   : "plain flags (no DEFER_TASKRUN)");
}

namespace {

// Busy and total jiffies of the "cpu" line of /proc/stat.
bool ReadCpuTimes(uint64_t* busy, uint64_t* total) {
  std::ifstream in("/proc/stat");
  std::string cpu;
  in >> cpu;
  if (cpu != "cpu") return false;
  uint64_t v[10] = {};
  for (uint64_t& x : v) in >> x;
  if (!in) return false;
  *total = 0;
  for (int i = 0; i < 8; ++i) *total += v[i];  // guest time is already in user
  *busy = *total - v[3] - v[4];                // minus idle and iowait
  return true;
}

}  // namespace

double BackgroundLoad(absl::Duration window) {
  uint64_t b0 = 0, t0 = 0, b1 = 0, t1 = 0;
  if (!ReadCpuTimes(&b0, &t0)) return std::nan("");
  usleep(static_cast<useconds_t>(absl::ToInt64Microseconds(window)));
  if (!ReadCpuTimes(&b1, &t1) || t1 <= t0) return std::nan("");
  return static_cast<double>(b1 - b0) / static_cast<double>(t1 - t0);
}

void PrintBackgroundLoad(double load) {
  std::printf("background load before the run: %.0f%% of all CPUs\n", load * 100);
  if (load > 0.10) {
    std::printf("WARNING: other processes are busy on this machine; figures will be skewed\n");
  }
}

namespace {

// utime + stime of `pid` (every thread) in clock ticks; 0 when it is gone.
uint64_t ProcessTicks(pid_t pid) {
  std::ifstream in(pid == 0 ? std::string("/proc/self/stat")
                            : "/proc/" + std::to_string(pid) + "/stat");
  std::string all;
  std::getline(in, all);
  const size_t paren = all.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos) return 0;
  std::vector<std::string> fields;
  size_t pos = paren + 2;
  while (pos < all.size() && fields.size() < 13) {
    const size_t end = all.find(' ', pos);
    fields.push_back(all.substr(pos, end - pos));
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  if (fields.size() < 13) return 0;
  // Fields 14 and 15 of the file; fields[0] is field 3 (state).
  return std::strtoull(fields[11].c_str(), nullptr, 10) +
         std::strtoull(fields[12].c_str(), nullptr, 10);
}

}  // namespace

LoadMeter::LoadMeter(std::vector<pid_t> pids) : pids_(std::move(pids)) {
  ok_ = ReadCpuTimes(&busy0_, &total0_);
  ours0_ = OurTicks();
}

uint64_t LoadMeter::OurTicks() const {
  // Children that already ended (fio) count through RUSAGE_CHILDREN.
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double child_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  uint64_t t = ProcessTicks(0) + static_cast<uint64_t>(child_s * hz);
  for (pid_t p : pids_) {
    if (p > 0) t += ProcessTicks(p);
  }
  return t;
}

double LoadMeter::OtherLoad() const {
  uint64_t busy = 0, total = 0;
  if (!ok_ || !ReadCpuTimes(&busy, &total) || total <= total0_) return std::nan("");
  const uint64_t ours = OurTicks() - ours0_;
  const uint64_t all = busy - busy0_;
  return static_cast<double>(all > ours ? all - ours : 0) / static_cast<double>(total - total0_);
}

uint64_t MinorFaults() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_minflt);
}

double ProcessCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

bool PinThisThread(int cpu) {
  if (cpu < 0) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

absl::StatusOr<uint16_t> FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int err = errno;
    close(fd);
    return absl::InternalError(std::string("binding a loopback port: ") + std::strerror(err));
  }
  close(fd);
  return ntohs(a.sin_port);
}

std::string FindProgram(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = dirs.substr(start, end - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

// ---- TempDir

namespace {

int RemoveEntry(const char* path, const struct stat*, int, FTW*) {
  (void)::remove(path);  // best effort: a leftover folder is not worth failing a bench for
  return 0;
}

}  // namespace

absl::StatusOr<TempDir> TempDir::Create(const std::string& parent, const std::string& prefix) {
  std::string tmpl = parent + "/" + prefix + "XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    return absl::InternalError("mkdtemp " + tmpl + ": " + std::strerror(errno));
  }
  TempDir d;
  d.path_ = buf.data();
  return d;
}

TempDir::TempDir(TempDir&& o) noexcept
    : path_(std::exchange(o.path_, std::string())), keep_(o.keep_) {}

TempDir& TempDir::operator=(TempDir&& o) noexcept {
  std::swap(path_, o.path_);
  std::swap(keep_, o.keep_);
  return *this;
}

TempDir::~TempDir() {
  if (path_.empty() || keep_) return;
  // Depth first, without following symlinks or leaving the file system.
  nftw(path_.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

// ---- Child

absl::StatusOr<Child> Child::Spawn(const std::vector<std::string>& argv,
                                   const std::string& log_path, int cpu) {
  if (argv.empty()) return absl::InvalidArgumentError("no program to run");
  // Everything the child needs is prepared before fork: it only calls async-signal-safe code.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) return absl::InternalError("open " + log_path + ": " + std::strerror(errno));
  const pid_t parent = getpid();
  cpu_set_t set;
  CPU_ZERO(&set);
  if (cpu >= 0) CPU_SET(cpu, &set);

  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(log_fd);
    return absl::InternalError(std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(126);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    // The parent may have pinned itself; the child gets its own CPU or the whole machine.
    if (cpu >= 0) {
      sched_setaffinity(0, sizeof(set), &set);
    } else {
      cpu_set_t all;
      CPU_ZERO(&all);
      for (int i = 0; i < CPU_SETSIZE; ++i) CPU_SET(i, &all);
      sched_setaffinity(0, sizeof(all), &all);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(log_fd);
  Child c;
  c.pid_ = pid;
  c.log_path_ = log_path;
  return c;
}

Child::Child(Child&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)), status_(o.status_), log_path_(std::move(o.log_path_)) {}

Child& Child::operator=(Child&& o) noexcept {
  std::swap(pid_, o.pid_);
  std::swap(status_, o.status_);
  std::swap(log_path_, o.log_path_);
  return *this;
}

Child::~Child() { Stop(absl::Seconds(5)); }

bool Child::Alive() {
  if (pid_ < 0) return false;
  int st = 0;
  const pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == 0) return true;
  if (r == pid_) status_ = st;
  pid_ = -1;
  return false;
}

int Child::Stop(absl::Duration grace) {
  if (!Alive()) return status_;
  kill(pid_, SIGTERM);
  const int64_t deadline = NowNs() + absl::ToInt64Nanoseconds(grace);
  while (NowNs() < deadline) {
    if (!Alive()) return status_;
    usleep(10000);
  }
  kill(pid_, SIGKILL);
  int st = 0;
  if (waitpid(pid_, &st, 0) == pid_) status_ = st;
  pid_ = -1;
  return status_;
}

int Child::Wait(absl::Duration timeout, absl::Duration grace) {
  const int64_t deadline = NowNs() + absl::ToInt64Nanoseconds(timeout);
  while (NowNs() < deadline) {
    if (!Alive()) return status_;
    usleep(20000);
  }
  return Stop(grace);
}

std::string Child::LogTail(size_t max_bytes) const {
  std::ifstream in(log_path_, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return all.size() > max_bytes ? all.substr(all.size() - max_bytes) : all;
}

// ---- Data

uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

kv::BlockKey MixedKey(uint64_t base) {
  char raw[32];
  static_assert(sizeof(raw) <= kv::kMaxKeyBytes);
  for (uint64_t w = 0; w < 4; ++w) {
    const uint64_t v = Mix64(base + w);
    std::memcpy(raw + w * 8, &v, 8);
  }
  return kv::BlockKey(std::string_view(raw, sizeof(raw)));
}

void FillRandom(void* data, size_t len, uint64_t seed) {
  uint64_t s = Mix64(seed) | 1;
  auto* p = static_cast<unsigned char*>(data);
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    std::memcpy(p + i, &s, 8);
  }
  for (; i < len; ++i) p[i] = static_cast<unsigned char>(Mix64(s + i));
}

// ---- JSON

void JsonLine::Key(const std::string& key) {
  if (!body_.empty()) body_ += ',';
  body_ += '"' + key + "\":";
}

JsonLine& JsonLine::Add(const std::string& key, const std::string& value) {
  Key(key);
  body_ += '"';
  for (char c : value) {
    if (c == '"' || c == '\\') {
      body_ += '\\';
      body_ += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof(esc), "\\u%04x", c);
      body_ += esc;
    } else {
      body_ += c;
    }
  }
  body_ += '"';
  return *this;
}

JsonLine& JsonLine::Add(const std::string& key, double value, int decimals) {
  if (!std::isfinite(value)) return AddNull(key);
  Key(key);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  body_ += buf;
  return *this;
}

JsonLine& JsonLine::Add(const std::string& key, int64_t value) {
  Key(key);
  body_ += std::to_string(value);
  return *this;
}

JsonLine& JsonLine::Add(const std::string& key, bool value) {
  Key(key);
  body_ += value ? "true" : "false";
  return *this;
}

JsonLine& JsonLine::AddNull(const std::string& key) {
  Key(key);
  body_ += "null";
  return *this;
}

double JsonNumberAfter(const std::string& json, const std::string& key, size_t from,
                       size_t* at) {
  const size_t k = json.find("\"" + key + "\"", from);
  if (k == std::string::npos) return std::nan("");
  const size_t colon = json.find(':', k);
  if (colon == std::string::npos) return std::nan("");
  if (at != nullptr) *at = colon;
  return std::strtod(json.c_str() + colon + 1, nullptr);
}

double Ratio(double a, double b) {
  if (!std::isfinite(a) || !std::isfinite(b) || b == 0) return std::nan("");
  return a / b;
}

}  // namespace openlake::bench

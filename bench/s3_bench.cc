// s3_bench: the S3 server of `openlaked` against nginx serving the same bytes as static files,
// with the same client in the same run.
//
//   s3_bench [--json] [--quick] [--seconds 5] [--connections 16] [--size-mib 256] [--rounds 2]
//            [--openlaked PATH] [--wrk wrk] [--nginx nginx] [--dir /var/tmp]
//
// Small GETs: one 4 KiB object, fetched by wrk (--connections connections, 2 threads, keep-alive)
// for --seconds, from openlaked (every request SigV4-signed: the one signed header set wrk
// repeats is valid for the 15 minutes of allowed clock skew) and from nginx (4 KiB static file,
// sendfile, no access log, as many workers as openlaked has reactors). Rate and p50/p99 latency
// for both; bars (PERF.md): rate >= 0.5 of nginx's, p50 <= 2x nginx's.
// Large objects: one --size-mib object PUT (UNSIGNED-PAYLOAD, 1 MiB writes) and GET whole over one
// connection, MB/s, median of --rounds; nginx's GET of the same bytes beside it. The daemon runs
// on its embedded engine settings: RS(2+2) over four folders, MD5 ETags.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_util.h"

#include "openlake/s3/client.h"
#include "openlake/status.h"

namespace openlake::bench {
namespace {

struct Options {
  bool json = false;
  bool quick = false;
  double seconds = 5;
  int connections = 16;
  int size_mib = 256;
  int rounds = 2;
  std::string openlaked = OL_BENCH_OPENLAKED;
  std::string wrk = "wrk";
  std::string nginx = "nginx";
  std::string dir = "/var/tmp";
};

constexpr char kAccess[] = "s3benchaccesskey";
constexpr char kSecret[] = "s3bench-secret-key-not-for-use-elsewhere";
constexpr char kRegion[] = "us-east-1";

int Fail(const std::string& what, const absl::Status& st) {
  std::fprintf(stderr, "s3_bench: %s: %s\n", what.c_str(), std::string(st.message()).c_str());
  return 1;
}

// ---- SigV4, client side: the library's public signer (openlake/s3/client.h)

// Header lines ("Name: value") signing `method path` (a path of unreserved characters and '/'),
// with an unsigned payload.
std::vector<std::string> SignedHeaders(const std::string& method, const std::string& host,
                                       const std::string& path) {
  s3::RequestToSign r;
  r.method = method;
  r.host = host;
  r.path = path;
  std::vector<std::string> lines;
  for (const s3::HttpHeader& h : s3::SignV4Headers(r, {kAccess, kSecret}, kRegion, absl::Now())) {
    lines.push_back(h.name + ": " + h.value);
  }
  return lines;
}

// ---- A blocking HTTP/1.1 client for the large transfers

class Conn {
 public:
  ~Conn() {
    if (fd_ >= 0) close(fd_);
  }
  absl::Status Connect(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      return absl::UnavailableError("connect to 127.0.0.1:" + std::to_string(port));
    }
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return absl::OkStatus();
  }
  absl::Status Send(const char* p, size_t n) {
    while (n > 0) {
      const ssize_t w = send(fd_, p, n, MSG_NOSIGNAL);
      if (w <= 0) return absl::DataLossError("send failed");
      p += w;
      n -= static_cast<size_t>(w);
    }
    return absl::OkStatus();
  }
  // Reads a response: status, and the body's length (which is read and, when `body` is given,
  // kept).
  absl::StatusOr<int> Response(uint64_t* length, std::string* body = nullptr) {
    std::string head;
    char c;
    while (head.size() < 4 || head.compare(head.size() - 4, 4, "\r\n\r\n") != 0) {
      if (recv(fd_, &c, 1, 0) != 1) return absl::DataLossError("response head cut short");
      head.push_back(c);
    }
    const int status = std::atoi(head.c_str() + 9);
    uint64_t len = 0;
    std::istringstream in(head);
    for (std::string line; std::getline(in, line);) {
      if (strncasecmp(line.c_str(), "content-length:", 15) == 0) len = std::stoull(line.substr(15));
    }
    std::vector<char> buf(1 << 20);
    uint64_t left = len;
    while (left > 0) {
      const ssize_t r = recv(fd_, buf.data(), std::min<uint64_t>(left, buf.size()), 0);
      if (r <= 0) return absl::DataLossError("response body cut short");
      if (body != nullptr) body->append(buf.data(), static_cast<size_t>(r));
      left -= static_cast<uint64_t>(r);
    }
    *length = len;
    return status;
  }

 private:
  int fd_ = -1;
};

std::string Request(const std::string& method, const std::string& path, uint16_t port,
                    uint64_t length, bool sign) {
  const std::string host = "127.0.0.1:" + std::to_string(port);
  std::string r = method + " " + path + " HTTP/1.1\r\nHost: " + host + "\r\n";
  if (sign) {
    for (const std::string& h : SignedHeaders(method, host, path)) r += h + "\r\n";
  }
  if (method == "PUT") r += "Content-Length: " + std::to_string(length) + "\r\n";
  return r + "\r\n";
}

// PUT `data` at `path`; the seconds it took (to the response).
absl::StatusOr<double> Put(uint16_t port, const std::string& path, const std::string& data) {
  Conn c;
  OL_RETURN_IF_ERROR(c.Connect(port));
  const int64_t t0 = NowNs();
  const std::string head = Request("PUT", path, port, data.size(), true);
  OL_RETURN_IF_ERROR(c.Send(head.data(), head.size()));
  for (size_t at = 0; at < data.size(); at += 1 << 20) {
    OL_RETURN_IF_ERROR(c.Send(data.data() + at, std::min<size_t>(1 << 20, data.size() - at)));
  }
  uint64_t len = 0;
  std::string body;
  OL_ASSIGN_OR_RETURN(int status, c.Response(&len, &body));
  if (status != 200) {
    return absl::InternalError("PUT answered " + std::to_string(status) + ": " + body);
  }
  return static_cast<double>(NowNs() - t0) / 1e9;
}

// GET `path` whole; the seconds it took. Fails unless `expect` bytes came with status 200.
absl::StatusOr<double> Get(uint16_t port, const std::string& path, uint64_t expect, bool sign) {
  Conn c;
  OL_RETURN_IF_ERROR(c.Connect(port));
  const int64_t t0 = NowNs();
  const std::string head = Request("GET", path, port, 0, sign);
  OL_RETURN_IF_ERROR(c.Send(head.data(), head.size()));
  uint64_t len = 0;
  OL_ASSIGN_OR_RETURN(int status, c.Response(&len));
  if (status != 200 || len != expect) {
    return absl::InternalError("GET " + path + " answered " + std::to_string(status) + " with " +
                               std::to_string(len) + " bytes");
  }
  return static_cast<double>(NowNs() - t0) / 1e9;
}

// ---- wrk

struct WrkResult {
  double rps = NAN;
  double p50_us = NAN;
  double p99_us = NAN;
  uint64_t requests = 0;
};

double LatencyUs(const std::string& v) {
  const double x = std::atof(v.c_str());
  if (v.find("us") != std::string::npos) return x;
  if (v.find("ms") != std::string::npos) return x * 1e3;
  if (v.find('s') != std::string::npos) return x * 1e6;
  return NAN;
}

absl::StatusOr<WrkResult> RunWrk(const Options& o, const std::string& scratch, uint16_t port,
                                 const std::string& path, bool sign, const std::string& name) {
  const std::string wrk = FindProgram(o.wrk);
  if (wrk.empty()) return absl::NotFoundError(o.wrk + " not found (apt-get install wrk)");
  std::vector<std::string> argv = {wrk, "-t2", "-c" + std::to_string(o.connections),
                                   "-d" + std::to_string(static_cast<int>(o.seconds)) + "s",
                                   "--latency"};
  if (sign) {
    for (const std::string& h : SignedHeaders("GET", "127.0.0.1:" + std::to_string(port), path)) {
      argv.push_back("-H");
      argv.push_back(h);
    }
  }
  argv.push_back("http://127.0.0.1:" + std::to_string(port) + path);
  const std::string log = scratch + "/wrk-" + name + ".log";
  OL_ASSIGN_OR_RETURN(Child child, Child::Spawn(argv, log, -1));
  const int st = child.Wait(absl::Seconds(o.seconds + 30), absl::Seconds(2));
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    return absl::InternalError("wrk failed:\n" + child.LogTail());
  }
  std::ifstream in(log);
  WrkResult r;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string a, b;
    f >> a >> b;
    if (a == "Requests/sec:") r.rps = std::atof(b.c_str());
    if (a == "50%") r.p50_us = LatencyUs(b);
    if (a == "99%") r.p99_us = LatencyUs(b);
    if (line.find("requests in") != std::string::npos) r.requests = std::stoull(a);
    if (line.find("Non-2xx or 3xx responses") != std::string::npos) {
      return absl::InternalError(name + " answered errors under load:\n" + child.LogTail());
    }
  }
  if (std::isnan(r.rps) || r.requests == 0) {
    return absl::InternalError("could not read wrk's output:\n" + child.LogTail());
  }
  return r;
}

// ---- The servers

absl::StatusOr<Child> StartOpenlaked(const Options& o, const std::string& dir, uint16_t* port) {
  OL_ASSIGN_OR_RETURN(*port, FreeLoopbackPort());
  std::ofstream cfg(dir + "/openlaked.toml");
  cfg << "mode = \"storage\"\ns3_addr = \"127.0.0.1:" << *port << "\"\n"
      << "data_dirs = [\"" << dir << "/data/d0\", \"" << dir << "/data/d1\", \"" << dir
      << "/data/d2\", \"" << dir << "/data/d3\"]\nset_drive_count = 4\n"
      << "default_parity_count = 2\n[[credentials]]\naccess_key = \"" << kAccess
      << "\"\nsecret_key = \"" << kSecret << "\"\n";
  cfg.close();
  OL_ASSIGN_OR_RETURN(Child c, Child::Spawn({o.openlaked, "--config", dir + "/openlaked.toml",
                                             "--log-level", "warning"},
                                            dir + "/openlaked.log", -1));
  for (int i = 0; i < 200; ++i) {
    Conn probe;
    if (probe.Connect(*port).ok()) return c;
    if (!c.Alive()) return absl::UnavailableError("openlaked exited:\n" + c.LogTail());
    usleep(50 * 1000);
  }
  return absl::DeadlineExceededError("openlaked did not listen:\n" + c.LogTail());
}

absl::StatusOr<Child> StartNginx(const Options& o, const std::string& dir, int workers,
                                 uint16_t* port) {
  const std::string nginx = FindProgram(o.nginx);
  if (nginx.empty()) {
    // Debian puts nginx in /usr/sbin, which a user's PATH may lack.
    if (access("/usr/sbin/nginx", X_OK) != 0) {
      return absl::NotFoundError(o.nginx + " not found (apt-get install nginx-light)");
    }
  }
  OL_ASSIGN_OR_RETURN(*port, FreeLoopbackPort());
  std::ofstream cfg(dir + "/nginx.conf");
  cfg << (geteuid() == 0 ? "user root;\n" : "") << "worker_processes " << workers << ";\n"
      << "daemon off;\npid " << dir << "/nginx.pid;\nerror_log " << dir << "/nginx-error.log;\n"
      << "events { worker_connections 4096; }\nhttp {\n  access_log off;\n  sendfile on;\n"
      << "  tcp_nopush on;\n  keepalive_requests 100000000;\n"
      << "  client_body_temp_path " << dir << "/tmp-body;\n  proxy_temp_path " << dir
      << "/tmp-proxy;\n  fastcgi_temp_path " << dir << "/tmp-fcgi;\n  uwsgi_temp_path " << dir
      << "/tmp-uwsgi;\n  scgi_temp_path " << dir << "/tmp-scgi;\n"
      << "  server {\n    listen 127.0.0.1:" << *port << ";\n    root " << dir << "/www;\n"
      << "    location / { }\n  }\n}\n";
  cfg.close();
  OL_ASSIGN_OR_RETURN(Child c, Child::Spawn({nginx.empty() ? "/usr/sbin/nginx" : nginx, "-p", dir,
                                             "-c", dir + "/nginx.conf", "-e",
                                             dir + "/nginx-error.log"},
                                            dir + "/nginx.log", -1));
  for (int i = 0; i < 200; ++i) {
    Conn probe;
    if (probe.Connect(*port).ok()) return c;
    if (!c.Alive()) return absl::UnavailableError("nginx exited:\n" + c.LogTail());
    usleep(50 * 1000);
  }
  return absl::DeadlineExceededError("nginx did not listen:\n" + c.LogTail());
}

int Run(const Options& o) {
  PrintMachine(ProbeMachine(0));
  PrintBackgroundLoad(BackgroundLoad(absl::Milliseconds(300)));
  auto scratch = TempDir::Create(o.dir, "s3-bench-");
  if (!scratch.ok()) return Fail("scratch folder", scratch.status());
  const std::string dir = scratch->path();
  std::filesystem::create_directories(dir + "/www");

  std::string small(4096, '\0'), large(static_cast<size_t>(o.size_mib) << 20, '\0');
  FillRandom(small.data(), small.size(), 1);
  FillRandom(large.data(), large.size(), 2);
  std::ofstream(dir + "/www/small", std::ios::binary) << small;
  std::ofstream(dir + "/www/large", std::ios::binary) << large;

  uint16_t s3_port = 0, nginx_port = 0;
  auto daemon = StartOpenlaked(o, dir, &s3_port);
  if (!daemon.ok()) return Fail("openlaked", daemon.status());
  const int workers = static_cast<int>(std::min(2u, std::thread::hardware_concurrency()));
  auto nginx = StartNginx(o, dir, workers, &nginx_port);
  if (!nginx.ok()) return Fail("nginx", nginx.status());

  // The objects: a bucket, the 4 KiB object, the large one (PUT timed below).
  {
    Conn c;
    const std::string mb = Request("PUT", "/bench", s3_port, 0, true);
    uint64_t len = 0;
    if (!c.Connect(s3_port).ok() || !c.Send(mb.data(), mb.size()).ok()) {
      return Fail("create bucket", absl::UnavailableError("openlaked does not answer"));
    }
    auto st = c.Response(&len);
    if (!st.ok() || *st != 200) return Fail("create bucket", absl::InternalError("refused"));
  }
  if (auto p = Put(s3_port, "/bench/small", small); !p.ok()) return Fail("PUT 4 KiB", p.status());

  // Small GETs, alternating which server goes first.
  std::printf("4 KiB GETs: wrk, 2 threads, %d connections, %.0f s each; nginx with %d workers\n",
              o.connections, o.seconds, workers);
  WrkResult ours, theirs;
  for (int round = 0; round < 2; ++round) {
    const bool ours_first = round == 0;
    for (int side = 0; side < 2; ++side) {
      const bool is_ours = (side == 0) == ours_first;
      auto r = is_ours ? RunWrk(o, dir, s3_port, "/bench/small", true, "openlaked")
                       : RunWrk(o, dir, nginx_port, "/small", false, "nginx");
      if (!r.ok()) return Fail("wrk", r.status());
      WrkResult& best = is_ours ? ours : theirs;
      if (std::isnan(best.rps) || r->rps > best.rps) best = *r;
      std::printf("  round %d %-9s %9.0f req/s  p50 %7.0f µs  p99 %7.0f µs\n", round + 1,
                  is_ours ? "openlaked" : "nginx", r->rps, r->p50_us, r->p99_us);
    }
    if (o.quick) break;
  }

  // Large objects.
  std::vector<double> put_mbps, get_mbps, nginx_mbps;
  const double mb = static_cast<double>(large.size()) / 1e6;
  for (int i = 0; i < o.rounds; ++i) {
    auto p = Put(s3_port, "/bench/large", large);
    if (!p.ok()) return Fail("PUT large", p.status());
    auto g = Get(s3_port, "/bench/large", large.size(), true);
    if (!g.ok()) return Fail("GET large", g.status());
    auto n = Get(nginx_port, "/large", large.size(), false);
    if (!n.ok()) return Fail("nginx GET large", n.status());
    put_mbps.push_back(mb / *p);
    get_mbps.push_back(mb / *g);
    nginx_mbps.push_back(mb / *n);
  }
  const double put = Median(put_mbps), get = Median(get_mbps), ngx = Median(nginx_mbps);
  const double rate_ratio = Ratio(ours.rps, theirs.rps);
  const double p50_ratio = Ratio(ours.p50_us, theirs.p50_us);
  std::printf("4 KiB GET: openlaked %.0f req/s (p50 %.0f µs, p99 %.0f µs), nginx %.0f req/s "
              "(p50 %.0f µs, p99 %.0f µs): rate ratio %.2f (bar >= 0.5), p50 ratio %.2f "
              "(bar <= 2)\n",
              ours.rps, ours.p50_us, ours.p99_us, theirs.rps, theirs.p50_us, theirs.p99_us,
              rate_ratio, p50_ratio);
  std::printf("%d MiB object, one connection: PUT %.0f MB/s, GET %.0f MB/s (nginx GET of the "
              "same bytes %.0f MB/s)\n", o.size_mib, put, get, ngx);
  if (o.json) {
    JsonLine j;
    j.Add("bench", "s3")
        .Add("connections", o.connections)
        .Add("seconds", o.seconds, 1)
        .Add("get4k_rps", ours.rps, 0)
        .Add("get4k_p50_us", ours.p50_us, 0)
        .Add("get4k_p99_us", ours.p99_us, 0)
        .Add("nginx_get4k_rps", theirs.rps, 0)
        .Add("nginx_get4k_p50_us", theirs.p50_us, 0)
        .Add("nginx_get4k_p99_us", theirs.p99_us, 0)
        .Add("rate_ratio", rate_ratio)
        .Add("p50_ratio", p50_ratio)
        .Add("object_MiB", o.size_mib)
        .Add("put_MBps", put, 1)
        .Add("get_MBps", get, 1)
        .Add("nginx_get_MBps", ngx, 1);
    std::printf("%s\n", j.str().c_str());
  }
  nginx->Stop(absl::Seconds(5));
  const int st = daemon->Stop(absl::Seconds(20));
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::printf("note: openlaked exit status %d (log: %s)\n", st, daemon->log_path().c_str());
  }
  return 0;
}

}  // namespace
}  // namespace openlake::bench

int main(int argc, char** argv) {
  openlake::bench::Options o;
  CLI::App app{"s3_bench: openlaked's S3 server against nginx, with wrk"};
  app.add_flag("--json", o.json, "end with one JSON object");
  app.add_flag("--quick", o.quick, "a smoke run (1 s of GETs, 16 MiB, one round)");
  app.add_option("--seconds", o.seconds, "wrk duration per run (default 5)")
      ->check(CLI::Range(1.0, 600.0));
  app.add_option("--connections", o.connections, "wrk connections (default 16)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--size-mib", o.size_mib, "large object size (default 256)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--rounds", o.rounds, "large-object rounds (default 2)")->check(CLI::Range(1, 20));
  app.add_option("--openlaked", o.openlaked, "the daemon to run");
  app.add_option("--wrk", o.wrk, "the wrk program");
  app.add_option("--nginx", o.nginx, "the nginx program");
  app.add_option("--dir", o.dir, "where the scratch folder goes (default /var/tmp)");
  CLI11_PARSE(app, argc, argv);
  if (o.quick) {
    o.seconds = 1;
    o.size_mib = 16;
    o.rounds = 1;
  }
  return openlake::bench::Run(o);
}

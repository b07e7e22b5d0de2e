// The `openlake` CLI end to end: each command run as a process (the binary meson built, from
// $OPENLAKE_CLI) against real `openlaked` daemons ($OPENLAKED) started here, checking its
// output, its --json (parsed as JSON) and its exit codes.
#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <google/protobuf/struct.pb.h>

#include "../io/test_util.h"
#include "../kv/kv_test_util.h"
#include "integration_util.h"

#include "openlake/io/socket.h"
#include "openlake/kv/client.h"
#include "openlake/node/status.h"
#include "openlake/version.h"

using google::protobuf::Struct;
using google::protobuf::Value;
using openlake::testing::FreePort;
using openlake::testing::ReadFile;
using openlake::testing::TempDir;
using openlake::testing::WaitFor;

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  REQUIRE(v != nullptr);
  return v;
}

// Forks and execs argv with stdout and stderr sent to the given files.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& out, const std::string& err) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with the test
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = err == out ? o : open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> cargv;
    for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  return pid;
}

int ExitCode(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct CliResult {
  int rc = -1;
  std::string out;
  std::string err;
};

// Runs `openlake args...` to completion.
CliResult Cli(const TempDir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), Env("OPENLAKE_CLI"));
  const pid_t pid = Spawn(args, dir.File("cli.out"), dir.File("cli.err"));
  int status = 0;
  waitpid(pid, &status, 0);
  CliResult r{ExitCode(status), ReadFile(dir.File("cli.out")), ReadFile(dir.File("cli.err"))};
  UNSCOPED_INFO("openlake exit " << r.rc << "\nstdout:\n" << r.out << "stderr:\n" << r.err);
  return r;
}

Struct ParseJson(const std::string& text) {
  Struct s;
  const auto st = google::protobuf::util::JsonStringToMessage(text, &s);
  INFO("JSON: " << text);
  REQUIRE(st.ok());
  // One object on one line.
  REQUIRE(text.find('\n') == text.size() - 1);
  return s;
}

const Value& Field(const Struct& s, const std::string& key) {
  INFO("key " << key);
  REQUIRE(s.fields().count(key) == 1);
  return s.fields().at(key);
}

// A process started here (a daemon, or `openlake cluster up`), killed if still running at the
// end of the test.
class Proc {
 public:
  Proc(std::vector<std::string> argv, std::string out) : out_(std::move(out)) {
    pid_ = Spawn(argv, out_, out_);
  }
  ~Proc() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // True once the output holds `marker`; false if the process exits first or time runs out.
  bool WaitFor(const std::string& marker, double seconds = 20) {
    return openlake::testing::WaitFor(
               [&] {
                 if (pid_ < 0) return true;
                 if (int status; waitpid(pid_, &status, WNOHANG) == pid_) {
                   pid_ = -1;
                   status_ = ExitCode(status);
                   return true;
                 }
                 return Output().find(marker) != std::string::npos;
               },
               seconds) &&
           pid_ > 0;
  }
  // SIGTERM; the exit code.
  int Stop() {
    if (pid_ <= 0) return status_;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    status_ = ExitCode(status);
    return status_;
  }
  // SIGKILL, as a crash.
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  std::string Output() const { return ReadFile(out_); }

 private:
  std::string out_;
  pid_t pid_ = -1;
  int status_ = -1;
};

std::string KvConfig(const TempDir& dir, uint16_t port) {
  std::ostringstream c;
  c << "mode = \"kv\"\nrpc_addr = \"127.0.0.1:" << port << "\"\n"
    << "kv_socket = \"" << dir.File("kv.sock") << "\"\n"
    << "[kv_slab]\ncapacity_gb = 0.0625\nsegment_mb = 4\n";
  return c.str();
}

std::string WriteConfig(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.File(name);
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("openlake version prints the library version, in text and JSON", "[cli]") {
  TempDir dir;
  CliResult r = Cli(dir, {"version"});
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("openlake " + std::string(openlake::Version())) == 0);
  r = Cli(dir, {"version", "--json"});
  REQUIRE(r.rc == 0);
  const Struct s = ParseJson(r.out);
  CHECK(Field(s, "version").string_value() == openlake::Version());
  const Struct& features = Field(s, "features").struct_value();
  for (const openlake::BuildFeature& f : openlake::BuildFeatures()) {
    CHECK(Field(features, std::string(f.name)).bool_value() == f.enabled);
  }
}

TEST_CASE("openlake usage errors exit 2; --help exits 0 with examples", "[cli]") {
  TempDir dir;
  CHECK(Cli(dir, {}).rc == 2);
  CHECK(Cli(dir, {"no-such-command"}).rc == 2);
  CHECK(Cli(dir, {"kv", "stats", "--no-such-flag"}).rc == 2);
  CHECK(Cli(dir, {"cluster", "up"}).rc == 2);  // --config is required
  CHECK(Cli(dir, {"cluster", "status"}).rc == 2);
  for (std::vector<std::string> cmd : {std::vector<std::string>{"--help"},
                                       {"node", "info", "--help"},
                                       {"disk", "info", "--help"},
                                       {"kv", "stats", "--help"},
                                       {"cluster", "up", "--help"},
                                       {"cluster", "status", "--help"},
                                       {"cluster", "topology", "--help"},
                                       {"version", "--help"}}) {
    const CliResult r = Cli(dir, cmd);
    CHECK(r.rc == 0);
    CHECK(r.out.find("Examples:") != std::string::npos);
  }
}

TEST_CASE("openlake node info describes this machine", "[cli]") {
  TempDir dir;
  CliResult r = Cli(dir, {"node", "info"});
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("cpus:") != std::string::npos);
  CHECK(r.out.find("io_uring:") != std::string::npos);
  r = Cli(dir, {"node", "info", "--json"});
  REQUIRE(r.rc == 0);
  const Struct s = ParseJson(r.out);
  CHECK(Field(s, "cores").number_value() > 0);
  CHECK(Field(s, "cores").number_value() == sysconf(_SC_NPROCESSORS_ONLN));
  CHECK(Field(Field(s, "memory").struct_value(), "total_bytes").number_value() > 0);
  CHECK(Field(s, "numa_nodes").list_value().values_size() >= 1);
  // Every Linux box has at least the loopback interface.
  bool lo = false;
  for (const Value& n : Field(s, "nics").list_value().values()) {
    lo = lo || Field(n.struct_value(), "name").string_value() == "lo";
  }
  CHECK(lo);
  CHECK(Field(s, "rdma").has_list_value());
  CHECK(Field(s, "gpus").has_list_value());
  const Struct& uring = Field(s, "io_uring").struct_value();
  // The daemons below run on io_uring, so this machine has it.
  CHECK(Field(uring, "available").bool_value());
  CHECK(Field(uring, "opcodes_supported").number_value() > 0);
}

TEST_CASE("openlake disk info reports formatted, empty, foreign and missing drives", "[cli]") {
  TempDir dir;
  std::vector<std::string> drives;
  for (int i = 0; i < 4; ++i) {
    drives.push_back(dir.File("drives/d" + std::to_string(i)));
    std::filesystem::create_directories(drives.back());
  }
  std::ostringstream c;
  c << "mode = \"storage\"\ns3_addr = \"127.0.0.1:0\"\nrpc_addr = \"127.0.0.1:" << FreePort()
    << "\"\ndata_dirs = [";
  for (size_t i = 0; i < drives.size(); ++i) c << (i ? ", " : "") << '"' << drives[i] << '"';
  c << "]\n[[credentials]]\naccess_key = \"clitestkey\"\nsecret_key = \"clitestsecret12345\"\n";
  const std::string config = WriteConfig(dir, "storage.toml", c.str());

  SECTION("before the daemon ran, every drive is unformatted-empty") {
    const CliResult r = Cli(dir, {"disk", "info", "--config", config, "--json"});
    REQUIRE(r.rc == 0);
    const Struct s = ParseJson(r.out);
    const auto& list = Field(s, "drives").list_value();
    REQUIRE(list.values_size() == 4);
    for (const Value& d : list.values()) {
      CHECK(Field(d.struct_value(), "state").string_value() == "unformatted-empty");
      CHECK(Field(d.struct_value(), "identity").has_null_value());
    }
    // Read-only: nothing was created.
    CHECK(!std::filesystem::exists(drives[0] + "/.openlake.sys"));
  }

  SECTION("after openlaked formatted them") {
    {
      Proc daemon({Env("OPENLAKED"), "--config", config}, dir.File("openlaked.out"));
      INFO(daemon.Output());
      REQUIRE(daemon.WaitFor("S3: http://"));
      // While the daemon runs (and holds its drive locks) the report still works.
      CHECK(Cli(dir, {"disk", "info", "--config", config}).rc == 0);
      CHECK(daemon.Stop() == 0);
    }
    // A drive that holds other files, and one that is gone.
    std::filesystem::remove_all(drives[3]);
    const std::string stray = dir.File("drives/stray");
    std::filesystem::create_directories(stray);
    std::ofstream(stray + "/notes.txt") << "not ours\n";
    const std::string empty = dir.File("drives/empty");
    std::filesystem::create_directories(empty);
    std::string text = ReadFile(config);
    text.replace(text.find("]\n"), 2,
                 ", \"" + stray + "\", \"" + empty + "\", \"" + dir.File("drives/d0/x") +
                     "\"]\nset_drive_count = 7\n");
    // set_drive_count = 7 keeps the config valid with seven drives.
    const std::string config2 = WriteConfig(dir, "storage2.toml", text);

    CliResult r = Cli(dir, {"disk", "info", "--config", config2, "--json"});
    REQUIRE(r.rc == 0);
    const Struct s = ParseJson(r.out);
    const auto& list = Field(s, "drives").list_value();
    REQUIRE(list.values_size() == 7);
    std::string deployment;
    std::set<std::string> drive_ids;
    std::set<double> positions;
    for (int i = 0; i < 3; ++i) {
      const Struct& d = list.values(i).struct_value();
      CHECK(Field(d, "path").string_value() == drives[static_cast<size_t>(i)]);
      CHECK(Field(d, "state").string_value() == "ok");
      CHECK(Field(d, "exists").bool_value());
      CHECK(Field(d, "capacity_bytes").number_value() > 0);
      CHECK(Field(d, "free_bytes").number_value() > 0);
      CHECK(Field(d, "free_bytes").number_value() <= Field(d, "capacity_bytes").number_value());
      const Struct& id = Field(d, "identity").struct_value();
      if (deployment.empty()) deployment = Field(id, "deployment_id").string_value();
      CHECK(Field(id, "deployment_id").string_value() == deployment);
      CHECK(Field(id, "set_index").number_value() == 0);
      CHECK(Field(id, "set_drive_count").number_value() == 4);
      drive_ids.insert(Field(id, "drive_id").string_value());
      positions.insert(Field(id, "position").number_value());
    }
    CHECK(deployment.size() == 36);  // a UUID
    CHECK(drive_ids.size() == 3);    // each drive its own id
    CHECK(positions.size() == 3);    // and its own place in the set
    const Struct& missing = list.values(3).struct_value();
    CHECK(Field(missing, "state").string_value() == "missing");
    CHECK(!Field(missing, "exists").bool_value());
    CHECK(Field(missing, "capacity_bytes").has_null_value());
    CHECK(Field(list.values(4).struct_value(), "state").string_value() == "unformatted-nonempty");
    CHECK(Field(list.values(5).struct_value(), "state").string_value() == "unformatted-empty");
    CHECK(Field(list.values(6).struct_value(), "state").string_value() == "missing");

    // A damaged identity.
    std::ofstream(drives[1] + "/.openlake.sys/format.json", std::ios::trunc) << "{\"format\":";
    r = Cli(dir, {"disk", "info", "--config", config2, "--json"});
    REQUIRE(r.rc == 0);
    const Struct s2 = ParseJson(r.out);
    CHECK(
        Field(Field(s2, "drives").list_value().values(1).struct_value(), "state").string_value() ==
        "corrupt-format");

    // The text form names each drive and its state.
    r = Cli(dir, {"disk", "info", "--config", config2});
    REQUIRE(r.rc == 0);
    CHECK(r.out.find(drives[0]) != std::string::npos);
    CHECK(r.out.find("deployment " + deployment) != std::string::npos);
    CHECK(r.out.find("corrupt-format") != std::string::npos);
  }
}

TEST_CASE("openlake disk info: a bad config exits 2 with the parser's message", "[cli]") {
  TempDir dir;
  const std::string config =
      WriteConfig(dir, "bad.toml", "mode = \"storage\"\nset_drive_count = \"four\"\n");
  CliResult r = Cli(dir, {"disk", "info", "--config", config});
  CHECK(r.rc == 2);
  CHECK(r.out.empty());
  // "openlake: <file>:2: set_drive_count: ..." on one line.
  CHECK(r.err.find("openlake: ") == 0);
  CHECK(r.err.find(config) != std::string::npos);
  CHECK(r.err.find(":2") != std::string::npos);
  CHECK(r.err.find("set_drive_count") != std::string::npos);
  CHECK(r.err.find('\n') == r.err.size() - 1);

  r = Cli(dir, {"disk", "info", "--config", dir.File("absent.toml")});
  CHECK(r.rc == 2);
  CHECK(r.err.find("absent.toml") != std::string::npos);
}

TEST_CASE("openlake kv stats reads a running pool; an unreachable one exits 1", "[cli]") {
  TempDir dir;
  const uint16_t port = FreePort();
  const std::string addr = "127.0.0.1:" + std::to_string(port);
  const std::string config = WriteConfig(dir, "kv.toml", KvConfig(dir, port));
  Proc daemon({Env("OPENLAKED"), "--config", config}, dir.File("openlaked.out"));
  INFO(daemon.Output());
  REQUIRE(daemon.WaitFor("KV pool:"));

  // Some traffic: one namespace, two blocks stored, a lookup with one hit and one miss.
  {
    auto client = openlake::kv::Client::Connect(addr);
    REQUIRE(client.ok());
    auto ns = (*client)->OpenNamespace("cli-test", openlake::testing::TestFingerprint(), 4096);
    REQUIRE(ns.ok());
    std::vector<uint8_t> a(4096, 1), b(4096, 2);
    const std::vector<openlake::kv::BlockKey> keys = {openlake::kv::BlockKey("k0"),
                                                      openlake::kv::BlockKey("k1")};
    const std::vector<const void*> blocks = {a.data(), b.data()};
    auto put = (*client)->Put(*ns, keys, blocks);
    REQUIRE(put.ok());
    REQUIRE(put->stored == 2);
    std::vector<uint8_t> out(4096);
    const std::vector<openlake::kv::BlockKey> get_keys = {openlake::kv::BlockKey("k0"),
                                                          openlake::kv::BlockKey("nope")};
    std::vector<uint8_t> out2(4096);
    const std::vector<void*> bufs = {out.data(), out2.data()};
    auto got = (*client)->Get(*ns, get_keys, bufs);
    REQUIRE(got.ok());
    CHECK(got->loaded == 1);
  }

  CliResult r = Cli(dir, {"kv", "stats", "--target", addr, "--json"});
  REQUIRE(r.rc == 0);
  const Struct s = ParseJson(r.out);
  // The 64 MiB slab less its header and index.
  CHECK(Field(s, "capacity_bytes").number_value() > 32.0 * (1 << 20));
  CHECK(Field(s, "capacity_bytes").number_value() <= 64.0 * (1 << 20));
  CHECK(Field(s, "used_bytes").number_value() >= 2 * 4096);
  CHECK(Field(s, "namespaces").number_value() == 1);
  CHECK(Field(s, "commits").number_value() == 2);
  CHECK(Field(s, "hits").number_value() == 1);
  CHECK(Field(s, "misses").number_value() >= 1);
  CHECK(Field(s, "hit_rate").number_value() > 0);
  CHECK(Field(s, "hit_rate").number_value() < 1);
  CHECK(Field(s, "evictions").number_value() == 0);
  CHECK(Field(s, "pinned_slots").number_value() == 0);
  CHECK(Field(s, "server_version").string_value() == openlake::Version());
  const auto& per_ns = Field(s, "per_namespace").list_value();
  REQUIRE(per_ns.values_size() == 1);
  CHECK(Field(per_ns.values(0).struct_value(), "name").string_value() == "cli-test");
  CHECK(Field(per_ns.values(0).struct_value(), "blocks").number_value() == 2);

  r = Cli(dir, {"kv", "stats", "--target", addr});
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("KV pool at " + addr) == 0);
  CHECK(r.out.find("hit rate 50.0%") != std::string::npos);
  CHECK(daemon.Stop() == 0);

  // Nothing listens there any more.
  r = Cli(dir, {"kv", "stats", "--target", addr, "--timeout-secs", "2"});
  CHECK(r.rc == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find("openlake: cannot reach the KV pool at " + addr + ": ") == 0);
  CHECK(r.err.find('\n') == r.err.size() - 1);
  r = Cli(dir, {"kv", "stats", "--target", "not an address"});
  CHECK(r.rc == 2);
}

// ---- openlake bench

namespace {

// A bench run's JSON report, checked for what every op reports.
Struct BenchReport(const CliResult& r, const std::string& op, double size) {
  REQUIRE(r.rc == 0);
  const Struct s = ParseJson(r.out);
  CHECK(Field(s, "op").string_value() == op);
  CHECK(Field(s, "size_bytes").number_value() == size);
  CHECK(Field(s, "ops").number_value() > 0);
  CHECK(Field(s, "errors").number_value() == 0);
  CHECK(Field(s, "first_error").has_null_value());
  CHECK(Field(s, "bytes").number_value() == Field(s, "ops").number_value() * size);
  CHECK(Field(s, "ops_per_sec").number_value() > 0);
  CHECK(Field(s, "mb_per_sec").number_value() > 0);
  CHECK(Field(s, "elapsed_secs").number_value() > 0.5);
  const Struct& lat = Field(s, "latency_us").struct_value();
  CHECK(Field(lat, "p50").number_value() > 0);
  CHECK(Field(lat, "p50").number_value() <= Field(lat, "p99").number_value());
  CHECK(Field(lat, "p99").number_value() <= Field(lat, "p999").number_value());
  CHECK(Field(lat, "min").number_value() <= Field(lat, "p50").number_value());
  CHECK(Field(lat, "p999").number_value() <= Field(lat, "max").number_value());
  CHECK(Field(lat, "mean").number_value() > 0);
  return s;
}

// `bench client` for about a second (0.2 s of warm-up), JSON report.
std::vector<std::string> BenchArgs(const std::string& target, const std::string& op,
                                   const std::string& size) {
  std::vector<std::string> args = {"bench", "client", "--target", target, "--op", op};
  for (const char* a : {"--size", size.c_str(), "--duration-secs", "1", "--warmup-secs", "0.2"}) {
    args.emplace_back(a);
  }
  args.emplace_back("--json");
  return args;
}

bool OneErrorLine(const CliResult& r, const std::string& prefix) {
  return r.out.empty() && r.err.find(prefix) == 0 && r.err.find('\n') == r.err.size() - 1;
}

}  // namespace

TEST_CASE("openlake bench target echoes; bench client rpc-echo measures it", "[cli][bench]") {
  TempDir dir;
  const std::string addr = "127.0.0.1:" + std::to_string(FreePort());
  Proc target({Env("OPENLAKE_CLI"), "bench", "target", "--bind", addr}, dir.File("target.out"));
  INFO(target.Output());
  REQUIRE(target.WaitFor("bench target: listening on " + addr));
  CHECK(target.Output().find("(rpc method 1007 echoes its payload)") != std::string::npos);

  std::vector<std::string> args = BenchArgs(addr, "rpc-echo", "4KiB");
  args.insert(args.end(), {"--threads", "2"});
  CliResult r = Cli(dir, args);
  const Struct s = BenchReport(r, "rpc-echo", 4096);
  CHECK(Field(s, "threads").number_value() == 2);
  CHECK(Field(s, "target").string_value() == addr);
  // The progress line of the first second, on stderr.
  CHECK(r.err.find("  1 s  ") == 0);
  CHECK(r.err.find(" ops/s  ") != std::string::npos);
  CHECK(r.err.find(" MB/s") != std::string::npos);

  r = Cli(dir, {"bench", "client", "--target", addr, "--op", "rpc-echo", "--size", "100",
                "--duration-secs", "0.5", "--warmup-secs", "0"});
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("bench client: rpc-echo of 100 B to " + addr) == 0);
  CHECK(r.out.find("latency:  p50 ") != std::string::npos);
  CHECK(r.out.find(", 0 errors") != std::string::npos);

  CHECK(target.Stop() == 0);  // SIGTERM ends it cleanly
  r = Cli(dir, {"bench", "client", "--target", addr, "--op", "rpc-echo", "--duration-secs", "1"});
  CHECK(r.rc == 1);
  CHECK(OneErrorLine(r, "openlake: bench client: rpc-echo against " + addr + ": "));

  // Usage: an unknown op, no target, a size that is not one, a listener beyond loopback without
  // a secret.
  CHECK(Cli(dir, {"bench", "client", "--target", addr, "--op", "nope"}).rc == 2);
  CHECK(Cli(dir, {"bench", "client", "--op", "rpc-echo"}).rc == 2);
  r = Cli(dir, {"bench", "client", "--target", addr, "--op", "rpc-echo", "--size", "4XB"});
  CHECK(r.rc == 2);
  CHECK(OneErrorLine(r, "openlake: bench client: --size 4XB: "));
  r = Cli(dir, {"bench", "target", "--bind", "0.0.0.0:" + std::to_string(FreePort())});
  CHECK(r.rc == 2);
  CHECK(OneErrorLine(r, "openlake: bench target: refusing to listen on 0.0.0.0:"));
  CHECK(r.err.find("--secret") != std::string::npos);
  for (const char* cmd : {"client", "target"}) {
    r = Cli(dir, {"bench", cmd, "--help"});
    CHECK(r.rc == 0);
    CHECK(r.out.find("Examples:") != std::string::npos);
  }
}

TEST_CASE("openlake bench client drives the KV pool and the S3 server of an openlaked",
          "[cli][bench]") {
  TempDir dir;
  const uint16_t rpc_port = FreePort(), s3_port = FreePort();
  const std::string rpc = "127.0.0.1:" + std::to_string(rpc_port);
  const std::string s3 = "127.0.0.1:" + std::to_string(s3_port);
  std::ostringstream c;
  c << "mode = \"storage\"\nrpc_addr = \"" << rpc << "\"\ns3_addr = \"" << s3
    << "\"\nadmin_addr = \"off\"\nkv_socket = \"" << dir.File("kv.sock") << "\"\ndata_dirs = [";
  for (int d = 0; d < 4; ++d) {
    c << (d ? ", " : "") << '"' << dir.File("d" + std::to_string(d)) << '"';
  }
  c << "]\n[[credentials]]\naccess_key = \"benchkey\"\nsecret_key = \"benchsecret12345\"\n"
    << "[kv_slab]\ncapacity_gb = 0.0625\nsegment_mb = 4\n";
  const std::string config = WriteConfig(dir, "node.toml", c.str());
  Proc daemon({Env("OPENLAKED"), "--config", config}, dir.File("openlaked.out"));
  INFO(daemon.Output());
  REQUIRE(daemon.WaitFor("S3: http://"));
  REQUIRE(daemon.WaitFor("KV pool:"));

  SECTION("kv-put and kv-get, through the mapped slab") {
    BenchReport(Cli(dir, BenchArgs(rpc, "kv-put", "64KiB")), "kv-put", 65536);
    std::vector<std::string> args = BenchArgs(rpc, "kv-get", "64KiB");
    args.insert(args.end(), {"--threads", "2"});
    BenchReport(Cli(dir, args), "kv-get", 65536);
    // The pool saw the traffic, in the bench's own namespace, which was emptied afterwards.
    const CliResult r = Cli(dir, {"kv", "stats", "--target", rpc, "--json"});
    REQUIRE(r.rc == 0);
    const Struct s = ParseJson(r.out);
    CHECK(Field(s, "commits").number_value() > 0);
    CHECK(Field(s, "hits").number_value() > 0);
    CHECK(Field(s, "committed_blocks").number_value() == 0);
    const auto& per_ns = Field(s, "per_namespace").list_value();
    REQUIRE(per_ns.values_size() == 1);
    CHECK(Field(per_ns.values(0).struct_value(), "name").string_value() == "openlake-bench/65536");
    // A block size the pool's segments cannot hold.
    const CliResult big = Cli(dir, BenchArgs(rpc, "kv-put", "8MiB"));
    CHECK(big.rc == 2);
    CHECK(OneErrorLine(big, "openlake: bench client: kv-put against " + rpc + ": "));
  }

  SECTION("s3-put and s3-get, with the daemon's credentials") {
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    CliResult r = Cli(dir, BenchArgs(s3, "s3-put", "64KiB"));
    CHECK(r.rc == 2);  // no credentials
    CHECK(OneErrorLine(r, "openlake: bench client: s3-put needs credentials: "));

    std::vector<std::string> args = BenchArgs(s3, "s3-put", "64KiB");
    args.insert(args.end(), {"--access-key", "benchkey", "--secret-key", "benchsecret12345"});
    BenchReport(Cli(dir, args), "s3-put", 65536);
    // From the environment, as the aws CLI takes them.
    setenv("AWS_ACCESS_KEY_ID", "benchkey", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "benchsecret12345", 1);
    BenchReport(Cli(dir, BenchArgs(s3, "s3-get", "64KiB")), "s3-get", 65536);
    setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret", 1);
    r = Cli(dir, BenchArgs(s3, "s3-get", "64KiB"));
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    CHECK(r.rc == 1);
    CHECK(OneErrorLine(r, "openlake: bench client: s3-get against " + s3 + ": "));
    CHECK(r.err.find("SignatureDoesNotMatch") != std::string::npos);
  }
  CHECK(daemon.Stop() == 0);
}

TEST_CASE("openlake cluster up runs openlaked in its place until SIGTERM", "[cli]") {
  TempDir dir;
  const uint16_t port = FreePort();
  const std::string addr = "127.0.0.1:" + std::to_string(port);
  const std::string config = WriteConfig(dir, "kv.toml", KvConfig(dir, port));

  SECTION("openlaked found next to openlake") {
    Proc up({Env("OPENLAKE_CLI"), "cluster", "up", "--config", config}, dir.File("up.out"));
    INFO(up.Output());
    REQUIRE(up.WaitFor("KV pool:"));
    CHECK(Cli(dir, {"kv", "stats", "--target", addr}).rc == 0);
    CHECK(up.Stop() == 0);  // the daemon itself got the signal and shut down cleanly
    CHECK(up.Output().find("openlaked: stopped") != std::string::npos);
  }
  SECTION("--openlaked names it") {
    Proc up(
        {Env("OPENLAKE_CLI"), "cluster", "up", "--config", config, "--openlaked", Env("OPENLAKED")},
        dir.File("up.out"));
    INFO(up.Output());
    REQUIRE(up.WaitFor("KV pool:"));
    CHECK(Cli(dir, {"kv", "stats", "--target", addr, "--json"}).rc == 0);
    CHECK(up.Stop() == 0);
  }
  SECTION("errors") {
    CliResult r = Cli(dir, {"cluster", "up", "--config", config, "--openlaked", "/nonexistent"});
    CHECK(r.rc == 2);
    CHECK(r.err.find("/nonexistent") != std::string::npos);
    const std::string bad = WriteConfig(dir, "bad.toml", "mode = \"nonsense\"\n");
    r = Cli(dir, {"cluster", "up", "--config", bad});
    CHECK(r.rc == 2);
    CHECK(r.err.find("bad.toml") != std::string::npos);
  }
}

namespace {

// A three-node deployment for `cluster status` / `topology`: node 0 serves KV and S3, node 1
// S3 only, node 2 S3 only and is stopped once the three have formed their object store (one
// store over the twelve drives: a blank cluster forms only with every node). Each node has its
// own config (its self_id, listen addresses and drives) over the same [[nodes]] list.
struct ThreeNodes {
  explicit ThreeNodes(const TempDir& dir) {
    for (int i = 0; i < 3; ++i) ports.push_back(FreePort());
    admin = "127.0.0.1:" + std::to_string(FreePort());
    for (int i = 0; i < 3; ++i) configs.push_back(WriteConfig(dir, Name(i), Config(dir, i)));
  }
  std::string Address(int i) const { return "127.0.0.1:" + std::to_string(ports[i]); }
  static std::string Name(int i) { return "node" + std::to_string(i) + ".toml"; }
  std::string Nodes() const {
    std::ostringstream c;
    for (int i = 0; i < 3; ++i) {
      c << "[[nodes]]\nid = " << i << "\nrpc_addr = \"" << Address(i) << "\"\ndisk_count = 4\n";
    }
    return c.str();
  }
  std::string Config(const TempDir& dir, int i) const {
    std::ostringstream c;
    c << "mode = \"storage\"\nself_id = " << i << "\nrpc_addr = \"" << Address(i) << "\"\n"
      << "s3_addr = \"127.0.0.1:0\"\n"
      << "admin_addr = \"" << (i == 0 ? admin : std::string("off")) << "\"\ndata_dirs = [";
    for (int d = 0; d < 4; ++d) {
      c << (d ? ", " : "") << '"' << dir.File("n" + std::to_string(i) + "/d" + std::to_string(d))
        << '"';
    }
    c << "]\n";
    if (i == 0) c << "kv_socket = \"" << dir.File("kv0.sock") << "\"\n";
    c << "[[credentials]]\naccess_key = \"clusterkey\"\nsecret_key = \"clustersecret12345\"\n";
    if (i == 0) c << "[kv_slab]\ncapacity_gb = 0.0625\n";
    return c.str() + Nodes();
  }
  std::vector<uint16_t> ports;
  std::string admin;
  std::vector<std::string> configs;
};

}  // namespace

TEST_CASE("openlake cluster status asks each node over its RPC; a down node exits 1", "[cli]") {
  TempDir dir;
  ThreeNodes nodes(dir);
  Proc n0({Env("OPENLAKED"), "--config", nodes.configs[0]}, dir.File("n0.out"));
  Proc n1({Env("OPENLAKED"), "--config", nodes.configs[1]}, dir.File("n1.out"));
  Proc n2({Env("OPENLAKED"), "--config", nodes.configs[2]}, dir.File("n2.out"));
  INFO(n0.Output() << n1.Output() << n2.Output());
  REQUIRE(n0.WaitFor("admin: http://"));
  // Each store open, not just listening: a node still joining when node 2 stops would wait for
  // a majority of the drives to carry the deployment, which its own blank ones may not yet.
  REQUIRE(n1.WaitFor("S3: http://"));
  REQUIRE(n2.WaitFor("S3: http://"));
  CHECK(n2.Stop() == 0);

  CliResult r = Cli(dir, {"cluster", "status", "--config", nodes.configs[0], "--json",
                          "--probe-timeout-secs", "2"});
  CHECK(r.rc == 1);  // node 2 is down
  Struct s = ParseJson(r.out);
  CHECK(Field(s, "up").number_value() == 2);
  CHECK(Field(s, "down").number_value() == 1);
  const auto& list = Field(s, "nodes").list_value();
  REQUIRE(list.values_size() == 3);
  const Struct& a = list.values(0).struct_value();
  CHECK(Field(a, "up").bool_value());
  CHECK(Field(a, "address").string_value() == nodes.Address(0));
  CHECK(Field(a, "version").string_value() == openlake::Version());
  CHECK(Field(a, "uptime_secs").number_value() >= 0);
  REQUIRE(Field(a, "serves").list_value().values_size() == 2);
  CHECK(Field(a, "serves").list_value().values(0).string_value() == "kv");
  CHECK(Field(a, "serves").list_value().values(1).string_value() == "s3");
  CHECK(Field(a, "s3_addr").string_value().find("127.0.0.1:") == 0);
  CHECK(Field(a, "admin_addr").string_value() == nodes.admin);
  CHECK(Field(a, "drives").number_value() == 4);
  CHECK(Field(a, "drives_online").number_value() == 4);
  CHECK(Field(a, "cluster_drives").number_value() == 12);
  CHECK(Field(a, "error").has_null_value());
  const Struct& b = list.values(1).struct_value();
  CHECK(Field(b, "up").bool_value());
  REQUIRE(Field(b, "serves").list_value().values_size() == 1);
  CHECK(Field(b, "serves").list_value().values(0).string_value() == "s3");
  CHECK(Field(b, "admin_addr").has_null_value());
  const Struct& c = list.values(2).struct_value();
  CHECK(!Field(c, "up").bool_value());
  CHECK(Field(c, "version").has_null_value());
  CHECK(!Field(c, "error").string_value().empty());

  // Text: a line per node and the summary.
  r = Cli(dir, {"cluster", "status", "--config", nodes.configs[1], "--probe-timeout-secs", "2"});
  CHECK(r.rc == 1);
  CHECK(r.out.find(nodes.Address(0)) != std::string::npos);
  CHECK(r.out.find("drives 4/4 online") != std::string::npos);
  CHECK(r.out.find("3 nodes: 2 up, 1 down") != std::string::npos);

  // Every node up: exit 0. (A config naming only the running nodes.)
  std::string two = ReadFile(nodes.configs[0]);
  two.resize(two.find("[[nodes]]\nid = 2"));
  const std::string two_cfg = WriteConfig(dir, "two.toml", two);
  r = Cli(dir, {"cluster", "status", "--config", two_cfg});
  CHECK(r.rc == 0);
  CHECK(r.out.find("2 nodes: 2 up, 0 down") != std::string::npos);

  // An address that another node answers on is not that node.
  std::string swapped = two;
  swapped.replace(swapped.find(nodes.Address(1)), nodes.Address(1).size(), nodes.Address(0));
  r = Cli(dir, {"cluster", "status", "--config", WriteConfig(dir, "swap.toml", swapped)});
  CHECK(r.rc == 1);
  CHECK(r.out.find("answers as node 0, not 1") != std::string::npos);

  // No config: a usage error.
  r = Cli(dir, {"cluster", "status", "--config", dir.File("missing.toml")});
  CHECK(r.rc == 2);
  CHECK(n0.Stop() == 0);
  CHECK(n1.Stop() == 0);
}

TEST_CASE("openlake cluster topology: as configured, and probed", "[cli]") {
  TempDir dir;
  ThreeNodes nodes(dir);

  // Without --probe nothing is contacted: every node down is fine.
  CliResult r = Cli(dir, {"cluster", "topology", "--config", nodes.configs[0], "--json"});
  REQUIRE(r.rc == 0);
  Struct s = ParseJson(r.out);
  CHECK(Field(s, "set_drive_count").number_value() == 4);
  const auto& list = Field(s, "nodes").list_value();
  REQUIRE(list.values_size() == 3);
  const Struct& self = list.values(0).struct_value();
  CHECK(Field(self, "sets").number_value() == 1);
  CHECK(Field(self, "parity").number_value() == 2);
  REQUIRE(Field(self, "drives").list_value().values_size() == 4);
  const Struct& d3 = Field(self, "drives").list_value().values(3).struct_value();
  CHECK(Field(d3, "path").string_value() == dir.File("n0/d3"));
  CHECK(Field(d3, "position").number_value() == 3);
  CHECK(Field(self, "probe").has_null_value());
  CHECK(Field(list.values(1).struct_value(), "drives").has_null_value());  // another node's
  r = Cli(dir, {"cluster", "topology", "--config", nodes.configs[0]});
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("one object store over 3 nodes: 3 sets of 4 (RS 2+2)") != std::string::npos);
  CHECK(r.out.find("node 2    drive 0") != std::string::npos);

  Proc n0({Env("OPENLAKED"), "--config", nodes.configs[0]}, dir.File("n0.out"));
  Proc n1({Env("OPENLAKED"), "--config", nodes.configs[1]}, dir.File("n1.out"));
  Proc n2({Env("OPENLAKED"), "--config", nodes.configs[2]}, dir.File("n2.out"));
  INFO(n0.Output() << n1.Output() << n2.Output());
  REQUIRE(n0.WaitFor("admin: http://"));
  // Each store open, not just listening: a node still joining when node 2 stops would wait for
  // a majority of the drives to carry the deployment, which its own blank ones may not yet.
  REQUIRE(n1.WaitFor("S3: http://"));
  REQUIRE(n2.WaitFor("S3: http://"));
  CHECK(n2.Stop() == 0);
  r = Cli(dir, {"cluster", "topology", "--config", nodes.configs[0], "--probe", "--json",
                "--probe-timeout-secs", "2"});
  CHECK(r.rc == 1);  // node 2 cannot be asked
  s = ParseJson(r.out);
  const auto& probed = Field(s, "nodes").list_value();
  const Struct& p0 = Field(probed.values(0).struct_value(), "probe").struct_value();
  CHECK(Field(p0, "up").bool_value());
  CHECK(Field(p0, "deployment_id").string_value().size() == 36);
  // Every drive of the store as node 0 sees it; its own four with their file systems.
  const auto& drives = Field(p0, "drives").list_value();
  REQUIRE(drives.values_size() == 12);
  int own = 0;
  for (const Value& v : drives.values()) {
    const Struct& d = v.struct_value();
    if (Field(d, "remote").bool_value()) continue;
    ++own;
    CHECK(Field(d, "node").number_value() == 0);
    CHECK(Field(d, "online").bool_value());
    CHECK(Field(d, "state").string_value() == "ok");
    CHECK(Field(d, "set").number_value() <= 2);
    CHECK(Field(d, "total_bytes").number_value() > 0);
    CHECK(Field(d, "free_bytes").number_value() <= Field(d, "total_bytes").number_value());
  }
  CHECK(own == 4);
  const Struct& pool = Field(p0, "kv_pool").struct_value();
  CHECK(Field(pool, "capacity_bytes").number_value() > 32.0 * (1 << 20));
  CHECK(Field(pool, "used_bytes").number_value() == 0);
  const Struct& p1 = Field(probed.values(1).struct_value(), "probe").struct_value();
  CHECK(Field(p1, "up").bool_value());
  CHECK(Field(p1, "kv_pool").has_null_value());  // node 1 runs no pool
  const Struct& p2 = Field(probed.values(2).struct_value(), "probe").struct_value();
  CHECK(!Field(p2, "up").bool_value());
  CHECK(!Field(p2, "error").string_value().empty());

  // The text form, from another node's config.
  r = Cli(dir, {"cluster", "topology", "--config", nodes.configs[1], "--probe",
                "--probe-timeout-secs", "2"});
  CHECK(r.rc == 1);
  CHECK(r.out.find("KV pool: ") != std::string::npos);
  CHECK(r.out.find("  set 0:") != std::string::npos);
  CHECK(r.out.find("unreachable: ") != std::string::npos);
  CHECK(n0.Stop() == 0);
  CHECK(n1.Stop() == 0);
}

namespace {

// Three KV-pool daemons on loopback with the same [[nodes]] list.
struct KvCluster {
  explicit KvCluster(const TempDir& dir) {
    for (int i = 0; i < 3; ++i) ports.push_back(FreePort());
    for (int i = 0; i < 3; ++i) {
      std::ostringstream c;
      c << "mode = \"kv\"\nself_id = " << i << "\nrpc_addr = \"" << Address(i) << "\"\n"
        << "admin_addr = \"off\"\nkv_socket = \"" << dir.File("kv" + std::to_string(i) + ".sock")
        << "\"\n[kv_slab]\ncapacity_gb = 0.0625\nsegment_mb = 4\n";
      for (int n = 0; n < 3; ++n) {
        c << "[[nodes]]\nid = " << n << "\nrpc_addr = \"" << Address(n) << "\"\n";
      }
      configs.push_back(WriteConfig(dir, "kv" + std::to_string(i) + ".toml", c.str()));
    }
  }
  std::string Address(int i) const { return "127.0.0.1:" + std::to_string(ports[i]); }
  std::vector<uint16_t> ports;
  std::vector<std::string> configs;
};

// What node `at` says of peer `peer` ("" when it cannot be asked).
std::string PeerState(const KvCluster& c, int at, uint32_t peer) {
  auto st = openlake::node::QueryStatus(c.Address(at), {{}, absl::Seconds(2)});
  if (!st.ok()) return "";
  for (const auto& p : st->peers) {
    if (p.id == peer) return p.state;
  }
  return "";
}

}  // namespace

TEST_CASE(
    "A KV cluster's daemons probe each other: a killed peer is down within seconds, and up "
    "again when it restarts",
    "[cli][cluster]") {
  TempDir dir;
  KvCluster c(dir);
  std::vector<std::unique_ptr<Proc>> n;
  for (int i = 0; i < 3; ++i) {
    n.push_back(
        std::make_unique<Proc>(std::vector<std::string>{Env("OPENLAKED"), "--config", c.configs[i]},
                               dir.File("kv" + std::to_string(i) + ".out")));
  }
  INFO(n[0]->Output() << n[1]->Output() << n[2]->Output());
  for (auto& p : n) REQUIRE(p->WaitFor("cluster: node "));
  // Every node sees both others up (each probes once a second).
  for (int at = 0; at < 3; ++at) {
    for (uint32_t peer = 0; peer < 3; ++peer) {
      if (peer == static_cast<uint32_t>(at)) continue;
      CHECK(WaitFor([&] { return PeerState(c, at, peer) == "up"; }, 10));
    }
  }
  auto st = openlake::node::QueryStatus(c.Address(0), {});
  REQUIRE(st.ok());
  CHECK(st->peers.size() == 2);
  // Node 2 crashes: three missed probes later the others say so, and log it.
  n[2]->Kill();
  const absl::Time killed = absl::Now();
  CHECK(WaitFor([&] { return PeerState(c, 0, 2) == "down"; }, 10));
  CHECK(WaitFor([&] { return PeerState(c, 1, 2) == "down"; }, 10));
  CHECK(absl::Now() - killed < absl::Seconds(8));
  CHECK(WaitFor(
      [&] {
        return n[0]->Output().find("cluster: node 2") != std::string::npos &&
               n[0]->Output().find("is down") != std::string::npos;
      },
      5));
  CHECK(PeerState(c, 0, 1) == "up");
  // `cluster status` shows each node's own view.
  CliResult r = Cli(dir, {"cluster", "status", "--config", c.configs[0], "--json"});
  CHECK(r.rc == 1);  // node 2 does not answer
  const Struct status = ParseJson(r.out);
  const auto& list = Field(status, "nodes").list_value();
  REQUIRE(list.values_size() == 3);
  const auto& peers = Field(list.values(0).struct_value(), "peers").list_value();
  REQUIRE(peers.values_size() == 2);
  CHECK(Field(peers.values(0).struct_value(), "id").number_value() == 1);
  CHECK(Field(peers.values(0).struct_value(), "state").string_value() == "up");
  CHECK(Field(peers.values(1).struct_value(), "state").string_value() == "down");
  CHECK(Field(peers.values(1).struct_value(), "missed").number_value() >= 3);
  r = Cli(dir, {"cluster", "status", "--config", c.configs[0]});
  CHECK(r.out.find("sees 1/2 peers up (not 2)") != std::string::npos);
  // It restarts and is up again at its first answer.
  n[2] = std::make_unique<Proc>(
      std::vector<std::string>{Env("OPENLAKED"), "--config", c.configs[2]}, dir.File("kv2b.out"));
  REQUIRE(n[2]->WaitFor("cluster: node "));
  CHECK(WaitFor([&] { return PeerState(c, 0, 2) == "up"; }, 10));
  CHECK(WaitFor([&] { return PeerState(c, 2, 0) == "up"; }, 10));
  for (auto& p : n) CHECK(p->Stop() == 0);
}

TEST_CASE("A cluster beyond loopback without rpc_secret does not start", "[cli][cluster]") {
  TempDir dir;
  const uint16_t port = FreePort();
  std::ostringstream c;
  c << "mode = \"kv\"\nself_id = 0\nrpc_addr = \"127.0.0.1:" << port << "\"\n"
    << "admin_addr = \"off\"\nkv_socket = \"" << dir.File("kv.sock") << "\"\n"
    << "[kv_slab]\ncapacity_gb = 0.0625\n"
    << "[[nodes]]\nid = 0\nrpc_addr = \"127.0.0.1:" << port << "\"\n"
    << "[[nodes]]\nid = 1\nrpc_addr = \"192.0.2.7:9400\"\n";
  const std::string cfg = WriteConfig(dir, "kv.toml", c.str());
  Proc d({Env("OPENLAKED"), "--config", cfg}, dir.File("d.out"));
  CHECK_FALSE(d.WaitFor("KV pool:", 20));  // it exits first
  CHECK(d.Stop() == 2);
  CHECK(d.Output().find("needs rpc_secret") != std::string::npos);
}

TEST_CASE("A cluster peer whose name does not resolve yet is down, and the daemon serves",
          "[cli][cluster]") {
  TempDir dir;
  const uint16_t port = FreePort();
  std::ostringstream c;
  c << "mode = \"kv\"\nself_id = 0\nrpc_addr = \"127.0.0.1:" << port << "\"\n"
    << "admin_addr = \"off\"\nrpc_secret = \"a-cluster-secret-1234\"\nkv_socket = \""
    << dir.File("kv.sock") << "\"\n[kv_slab]\ncapacity_gb = 0.0625\n"
    << "[[nodes]]\nid = 0\nrpc_addr = \"127.0.0.1:" << port << "\"\n"
    << "[[nodes]]\nid = 1\nrpc_addr = \"openlake-1.not-yet.invalid:9400\"\n";
  const std::string cfg = WriteConfig(dir, "kv.toml", c.str());
  Proc d({Env("OPENLAKED"), "--config", cfg}, dir.File("d.out"));
  INFO(d.Output());
  REQUIRE(d.WaitFor("cluster: node 0 of 2"));
  auto down = [&] {
    auto st = openlake::node::QueryStatus("127.0.0.1:" + std::to_string(port), {});
    return st.ok() && st->peers.size() == 1 && st->peers[0].state == "down";
  };
  CHECK(WaitFor(down, 10));
  CHECK(d.Stop() == 0);
}

// The KV pool end to end: a real `openlaked` process (the binary meson built, from $OPENLAKED)
// and client processes forked from this test, talking over loopback and a Unix socket.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>

#include "../io/test_util.h"
#include "../kv/kv_test_util.h"
#include "daemon_config.h"
#include "integration_util.h"
#include "kv_daemon.h"

#include "openlake/io/socket.h"
#include "openlake/kv/client.h"

using namespace openlake::kv;
using openlake::testing::Connect;
using openlake::testing::Daemon;
using openlake::testing::Fill;
using openlake::testing::Fp;
using openlake::testing::FreePort;
using openlake::testing::InChild;
using openlake::testing::KeyOf;
using openlake::testing::KvConfig;
using openlake::testing::ReadFile;
using openlake::testing::TempDir;
using openlake::testing::WaitFor;

namespace {

bool PortBusy(uint16_t port) {
  auto fd = openlake::io::Listen(
      *openlake::io::SocketAddress::Parse("127.0.0.1:" + std::to_string(port)), {});
  if (!fd.ok()) return true;
  close(*fd);
  return false;
}

}  // namespace

TEST_CASE("openlaked with no arguments serves the KV pool on 127.0.0.1:9400 and S3 on :9000",
          "[integration]") {
  if (PortBusy(9400) || PortBusy(9000)) {
    WARN("port 9400 or 9000 is in use on this machine: skipped");
    return;
  }
  TempDir dir;
  Daemon d;
  REQUIRE(d.Start(dir.path()));
  INFO(d.Output());
  CHECK(d.tcp() == "127.0.0.1:9400");
  // The object store: four drive folders made under ./data, a key pair generated, kept
  // owner-only and printed, S3 on loopback (printed after the KV pool's line).
  for (int i = 0; i < 100 && d.Output().find("secret key:") == std::string::npos; ++i) {
    usleep(50 * 1000);
  }
  CHECK(d.Output().find("S3: http://127.0.0.1:9000 (region us-east-1) over 4 drive folders") !=
        std::string::npos);
  CHECK(d.Output().find("access key: OL") != std::string::npos);
  struct stat cred;
  REQUIRE(stat((dir.path() + "/data/.openlake-credentials.toml").c_str(), &cred) == 0);
  CHECK((cred.st_mode & 0777) == 0600);
  for (const char* drive : {"/data/d0", "/data/d1", "/data/d2", "/data/d3"}) {
    struct stat ds;
    CHECK(stat((dir.path() + drive + "/.openlake.sys/format.json").c_str(), &ds) == 0);
  }
  auto c = Connect("127.0.0.1:9400");
  CHECK(c->has_slab());
  auto st = c->Stats();
  REQUIRE(st.ok());
  // Half of the RAM, less the part that does not fill a whole segment.
  const uint64_t half = openlake::tools::MemTotalBytes() / 2;
  CHECK(st->capacity_bytes <= half);
  CHECK(st->capacity_bytes + (64ull << 20) + (2ull << 20) >= half);
  auto ns = c->OpenNamespace("default/tp0", Fp(), 4096);
  REQUIRE(ns.ok());
  std::vector<uint8_t> data(4096);
  Fill(data, 0, 0);
  std::vector<const void*> src = {data.data()};
  std::vector<BlockKey> k = {KeyOf(0, 0)};
  REQUIRE(c->Put(*ns, k, src)->stored == 1);
  std::vector<uint8_t> out(4096);
  std::vector<void*> dst = {out.data()};
  REQUIRE(c->Get(*ns, k, dst)->loaded == 1);
  const bool same_bytes = out == data;
  CHECK(same_bytes);
  c.reset();
  CHECK(d.Stop() == 0);
  CHECK(d.Output().find("openlaked: stopped") != std::string::npos);
  struct stat sb;
  CHECK(stat(d.unix_socket().c_str(), &sb) != 0);  // the socket file is removed
}

TEST_CASE("upstream's kv_local.toml runs as is", "[integration]") {
  if (PortBusy(9400)) {
    WARN("port 9400 is in use on this machine: skipped");
    return;
  }
  TempDir dir;
  Daemon d("", {"--config", OL_SOURCE_ROOT "/examples/configs/kv_local.toml"});
  REQUIRE(d.Start(dir.path()));
  INFO(d.Output());
  CHECK(d.Output().find("(kv, config") != std::string::npos);
  auto c = Connect("127.0.0.1:9400");
  CHECK(c->Stats().ok());
  c.reset();
  CHECK(d.Stop() == 0);
}

TEST_CASE("two client processes put and get concurrently, every byte verified", "[integration]") {
  TempDir dir;
  Daemon d(KvConfig(dir, FreePort(), 0.5));
  REQUIRE(d.Start(dir.path()));
  INFO(d.Output());
  constexpr uint32_t kBlock = 64 << 10;
  constexpr int kRounds = 40, kBatch = 16;
  auto writer = [&](int w) {
    return [&, w] {
      auto c = Client::Connect(d.tcp());
      if (!c.ok() || !(*c)->has_slab()) return 10;
      auto ns = (*c)->OpenNamespace("shared", Fp(), kBlock);
      if (!ns.ok()) return 11;
      std::vector<std::vector<uint8_t>> in(kBatch, std::vector<uint8_t>(kBlock));
      std::vector<std::vector<uint8_t>> out(kBatch, std::vector<uint8_t>(kBlock));
      for (int r = 0; r < kRounds; ++r) {
        std::vector<BlockKey> keys;
        std::vector<const void*> src;
        std::vector<void*> dst;
        for (int i = 0; i < kBatch; ++i) {
          Fill(in[i], w, r * kBatch + i);
          keys.push_back(KeyOf(w, r * kBatch + i));
          src.push_back(in[i].data());
          dst.push_back(out[i].data());
        }
        auto put = (*c)->Put(*ns, keys, src);
        if (!put.ok() || put->stored != kBatch) return 12;
        auto got = (*c)->Get(*ns, keys, dst);
        if (!got.ok() || got->loaded != kBatch) return 13;
        for (int i = 0; i < kBatch; ++i) {
          if (out[i] != in[i]) return 14;
        }
      }
      return 0;
    };
  };
  // Two writers at once, in two processes.
  std::vector<pid_t> kids;
  for (int w = 1; w <= 2; ++w) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) _exit(writer(w)());
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  // A third process reads everything both wrote.
  CHECK(InChild([&] {
          auto c = Client::Connect(d.tcp());
          if (!c.ok()) return 20;
          auto ns = (*c)->OpenNamespace("shared", Fp(), kBlock);
          if (!ns.ok()) return 21;
          std::vector<uint8_t> want(kBlock), got(kBlock);
          for (int w = 1; w <= 2; ++w) {
            for (int b = 0; b < kRounds * kBatch; ++b) {
              std::vector<BlockKey> k = {KeyOf(w, b)};
              std::vector<void*> dst = {got.data()};
              auto g = (*c)->Get(*ns, k, dst);
              if (!g.ok() || g->loaded != 1) return 22;
              Fill(want, w, b);
              if (got != want) return 23;
            }
          }
          return 0;
        }) == 0);
  auto st = Connect(d.tcp())->Stats();
  REQUIRE(st.ok());
  CHECK(st->committed_blocks == 2 * kRounds * kBatch);
  CHECK(st->pinned_slots == 0);
  CHECK(st->reserved_slots == 0);
  CHECK(d.Stop() == 0);
}

TEST_CASE("a client killed with SIGKILL gives back its reservations and pins", "[integration]") {
  TempDir dir;
  Daemon d(KvConfig(dir, FreePort(), 0.25));
  REQUIRE(d.Start(dir.path()));
  INFO(d.Output());
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(ready[0]);
    auto c = Client::Connect(d.tcp());
    if (!c.ok()) _exit(1);
    auto ns = *(*c)->OpenNamespace("victim", Fp(), 4096);
    std::vector<uint8_t> data(4096, 9);
    std::vector<const void*> src(10, data.data());
    std::vector<BlockKey> keys;
    for (int i = 0; i < 10; ++i) keys.push_back(KeyOf(9, i));
    if (!(*c)->Put(ns, keys, src).ok()) _exit(2);
    if ((*c)->Lookup(ns, keys)->hits.size() != 10) _exit(3);  // 10 pins
    if ((*c)->Reserve(ns, 5, false)->size() != 5) _exit(4);   // 5 reservations
    (void)!write(ready[1], "R", 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char r = 0;
  REQUIRE(read(ready[0], &r, 1) == 1);
  close(ready[0]);
  auto admin = Connect(d.tcp());
  auto before = admin->Stats();
  REQUIRE(before.ok());
  CHECK(before->pinned_slots == 10);
  CHECK(before->reserved_slots == 5);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  CHECK(WaitFor([&] {
    auto st = admin->Stats();
    return st.ok() && st->pinned_slots == 0 && st->reserved_slots == 0;
  }));
  CHECK(admin->Stats()->committed_blocks == 10);  // what it committed stays
  admin.reset();
  CHECK(d.Stop() == 0);
}

TEST_CASE("a full pool answers ResourceExhausted and loses nothing", "[integration]") {
  TempDir dir;
  // 32 MiB: 2 MiB header area + 30 segments of 1 MiB, three 256 KiB blocks each.
  // (capacity_gb = 1/32; segment_mb = 1)
  Daemon d(KvConfig(dir, FreePort(), 0.03125, 1));
  REQUIRE(d.Start(dir.path()));
  INFO(d.Output());
  auto holder = Connect(d.tcp());
  const uint32_t block = 256 << 10;
  auto ns = *holder->OpenNamespace("full", Fp(), block);
  std::vector<std::vector<uint8_t>> data(90, std::vector<uint8_t>(block));
  std::vector<const void*> src;
  std::vector<BlockKey> keys;
  for (int i = 0; i < 90; ++i) {
    Fill(data[i], 3, i);
    src.push_back(data[i].data());
    keys.push_back(KeyOf(3, i));
  }
  auto put = holder->Put(ns, keys, src);
  REQUIRE(put.ok());
  REQUIRE(put->stored == 90);
  REQUIRE(holder->Lookup(ns, keys)->hits.size() == 90);  // everything pinned
  CHECK(InChild([&] {
          auto c = Client::Connect(d.tcp());
          if (!c.ok()) return 1;
          auto n2 = (*c)->OpenNamespace("full", Fp(), block);
          std::vector<const void*> one = {src[0]};
          std::vector<BlockKey> k = {BlockKey("newcomer")};
          auto p = (*c)->Put(*n2, k, one);
          if (p.status().code() != absl::StatusCode::kResourceExhausted) return 2;
          if (std::string(p.status().message()).find("pinned") == std::string::npos) return 3;
          return 0;
        }) == 0);
  // Every stored block is intact.
  std::vector<std::vector<uint8_t>> out(90, std::vector<uint8_t>(block));
  std::vector<void*> dst;
  for (auto& o : out) dst.push_back(o.data());
  auto got = holder->Get(ns, keys, dst);
  REQUIRE(got.ok());
  CHECK(got->loaded == 90);
  const bool same_bytes = out == data;
  CHECK(same_bytes);
  holder.reset();
  CHECK(d.Stop() == 0);
}

TEST_CASE("a wrong fingerprint is refused across processes", "[integration]") {
  TempDir dir;
  Daemon d(KvConfig(dir, FreePort(), 0.0625));
  REQUIRE(d.Start(dir.path()));
  auto a = Connect(d.tcp());
  REQUIRE(a->OpenNamespace("llama/tp0", Fp("bfloat16"), 4096).ok());
  CHECK(InChild([&] {
          auto c = Client::Connect(d.tcp());
          if (!c.ok()) return 1;
          auto ns = (*c)->OpenNamespace("llama/tp0", Fp("float16"), 4096);
          if (ns.status().code() != absl::StatusCode::kFailedPrecondition) return 2;
          const std::string msg(ns.status().message());
          return msg.find("dtype: float16 requested vs bfloat16 stored") != std::string::npos ? 0
                                                                                              : 3;
        }) == 0);
  a.reset();
  CHECK(d.Stop() == 0);
}

TEST_CASE("garbage on a socket drops that connection only", "[integration]") {
  TempDir dir;
  Daemon d(KvConfig(dir, FreePort(), 0.0625));
  REQUIRE(d.Start(dir.path()));
  auto good = Connect(d.tcp());
  auto ns = *good->OpenNamespace("g", Fp(), 4096);
  for (const std::string& target : {d.tcp(), "unix:" + d.unix_socket()}) {
    auto fd = openlake::io::Connect(*openlake::io::SocketAddress::Parse(target), absl::Seconds(2));
    REQUIRE(fd.ok());
    const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(100, '\xff');
    REQUIRE(write(*fd, junk.data(), junk.size()) == static_cast<ssize_t>(junk.size()));
    timeval tv{5, 0};
    setsockopt(*fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[1024];
    ssize_t n;
    while ((n = read(*fd, buf, sizeof(buf))) > 0) {
    }
    CHECK((n == 0 || errno == ECONNRESET));  // closed by the daemon
    close(*fd);
    CHECK(good->Exists(ns, {BlockKey("anything")}).ok());
  }
  CHECK(d.Output().find("bad frame magic") != std::string::npos);
  good.reset();
  CHECK(d.Stop() == 0);
}

TEST_CASE("bad configurations are refused with a precise message", "[integration]") {
  TempDir dir;
  {
    Daemon d("mode = \"kv\"\nrpc_addr = 9400\n");
    CHECK(d.RunToExit(dir.path()) == 2);
    CHECK(d.Output().find("openlake.toml:2: key 'rpc_addr' must be a string") != std::string::npos);
  }
  {
    Daemon d(KvConfig(dir, FreePort(), 1000));
    CHECK(d.RunToExit(dir.path()) == 2);
    CHECK(d.Output().find("exceeds the machine's RAM") != std::string::npos);
  }
  {
    // Beyond loopback without a secret: a config error, refused before anything starts.
    Daemon d("mode = \"kv\"\nrpc_addr = \"0.0.0.0:" + std::to_string(FreePort()) +
             "\"\nkv_socket = \"" + dir.File("s/kv.sock") +
             "\"\n[kv_slab]\ncapacity_gb = 0.0625\n");
    CHECK(d.RunToExit(dir.path()) == 2);
    CHECK(d.Output().find("listens beyond loopback: set rpc_secret") != std::string::npos);
  }
}

// Beyond loopback the daemon demands the shared secret. It binds 0.0.0.0, so this runs in a
// private network namespace where the only interface is its own loopback.
TEST_CASE("beyond loopback, clients must present rpc_secret", "[integration][auth]") {
  const int rc = openlake::testing::RunInPrivateNetwork([] {
    TempDir dir;
    const std::string cfg =
        "mode = \"kv\"\nrpc_addr = \"0.0.0.0:9411\"\nrpc_secret = \"s3cr3t-s3cr3t\"\n"
        "kv_socket = \"" +
        dir.File("s/kv.sock") + "\"\n[kv_slab]\ncapacity_gb = 0.0625\nsegment_mb = 4\n";
    Daemon d(cfg);
    if (!d.Start(dir.path())) return 10;
    ClientOptions none;
    none.map_slab = false;
    if (Client::Connect("127.0.0.1:9411", none).status().code() !=
        absl::StatusCode::kPermissionDenied) {
      return 11;
    }
    ClientOptions wrong = none;
    wrong.secret = "guess";
    if (Client::Connect("127.0.0.1:9411", wrong).status().code() !=
        absl::StatusCode::kPermissionDenied) {
      return 12;
    }
    ClientOptions right = none;
    right.secret = "s3cr3t-s3cr3t";
    auto c = Client::Connect("127.0.0.1:9411", right);
    if (!c.ok() || !(*c)->Stats().ok()) return 13;
    c->reset();
    return d.Stop() == 0 ? 0 : 14;
  });
  if (rc == 77) {
    WARN("network namespaces unavailable (not root?): skipped");
    return;
  }
  CHECK(rc == 0);
}

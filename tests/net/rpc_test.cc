#include "openlake/net/rpc.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include <catch2/catch.hpp>

#include "io/test_util.h"
#include "net/frame.h"

using openlake::io::Reactor;
using openlake::io::SocketAddress;
using openlake::net::RpcCall;
using openlake::net::RpcClient;
using openlake::net::RpcServer;
using openlake::net::RpcServerOptions;

namespace {

enum : uint16_t { kEcho = 1, kSlow = 2, kFd = 3, kFail = 4 };

// A server on reactor 0 of its own runtime, with echo, slow, descriptor and failing methods.
struct Fixture {
  std::unique_ptr<openlake::io::Runtime> rt = openlake::testing::StartRuntime(1);
  std::unique_ptr<RpcServer> server;
  std::atomic<int> disconnects{0};
  int memfd = -1;

  explicit Fixture(RpcServerOptions opts = {}) {
    memfd = memfd_create("rpc-test", MFD_CLOEXEC);
    (void)!write(memfd, "through SCM_RIGHTS", 18);
    REQUIRE(rt);
    REQUIRE(
        rt->RunOn(0, [&] {
            server = *RpcServer::Create(rt->reactor(0), opts);
            server->Register(kEcho, [](RpcCall c) { c.Respond(std::string(c.payload())); });
            server->Register(kSlow, [](RpcCall c) {
              auto held = std::make_shared<RpcCall>(std::move(c));
              Reactor::Current()->After(absl::Milliseconds(300), [held] { held->Respond("late"); });
            });
            server->Register(kFd, [this](RpcCall c) { c.RespondWithFd("fd", memfd); });
            server->Register(
                kFail, [](RpcCall c) { c.RespondError(absl::NotFoundError("no such thing")); });
            server->OnDisconnect([this](const openlake::net::ConnectionInfo&) { ++disconnects; });
          }).ok());
  }
  ~Fixture() {
    (void)rt->RunOn(0, [&] { server.reset(); });
    rt->Stop();
    close(memfd);
  }
  SocketAddress Listen(const std::string& addr) {
    absl::StatusOr<SocketAddress> bound;
    REQUIRE(rt->RunOn(0, [&] { bound = server->Listen(*SocketAddress::Parse(addr), {}); }).ok());
    REQUIRE(bound.ok());
    return *bound;
  }
  RpcServer::Counters counters() {
    RpcServer::Counters c;
    REQUIRE(rt->RunOn(0, [&] { c = server->counters(); }).ok());
    return c;
  }
};

std::unique_ptr<RpcClient> Dial(const SocketAddress& a, std::string secret = "") {
  openlake::net::RpcClientOptions o;
  o.secret = std::move(secret);
  auto c = RpcClient::Connect(a, o);
  REQUIRE(c.ok());
  return *std::move(c);
}

// Reads until EOF or 3 s; true when the server closed the connection.
bool ClosedByPeer(int fd) {
  timeval tv{3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

// A request frame for Send: the headroom the client fills with the header, then the payload.
std::string Framed(std::string_view payload) {
  return std::string(RpcClient::kHeadroom, '\0') + std::string(payload);
}

}  // namespace

TEST_CASE("echo, errors and unknown methods", "[net][rpc]") {
  Fixture f;
  auto addr = f.Listen("127.0.0.1:0");
  auto c = Dial(addr);
  CHECK(!c->server_version().empty());
  auto r = c->Call(kEcho, "hello");
  REQUIRE(r.ok());
  CHECK(r->payload == "hello");
  auto big = c->Call(kEcho, std::string(5 << 20, 'z'));
  REQUIRE(big.ok());
  CHECK(big->payload.size() == 5u << 20);
  auto e = c->Call(kFail, "");
  CHECK(e.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(e.status().message()) == "no such thing");
  CHECK(c->Call(999, "").status().code() == absl::StatusCode::kUnimplemented);
}

TEST_CASE("pipelined requests are matched by id", "[net][rpc]") {
  Fixture f;
  auto c = Dial(f.Listen("127.0.0.1:0"));
  std::vector<std::string> payloads;
  for (int i = 0; i < 200; ++i)
    payloads.push_back(std::string(static_cast<size_t>(i * 37), 'a' + i % 26));
  std::vector<RpcClient::Request> reqs;
  for (const auto& p : payloads) reqs.push_back({kEcho, p});
  // A slow one first: the answers come back out of order and are still matched.
  reqs.insert(reqs.begin(), RpcClient::Request{kSlow, ""});
  auto out = c->CallMany(reqs);
  REQUIRE(out.size() == reqs.size());
  REQUIRE(out[0].ok());
  CHECK(out[0]->payload == "late");
  for (size_t i = 0; i < payloads.size(); ++i) {
    REQUIRE(out[i + 1].ok());
    CHECK(out[i + 1]->payload == payloads[i]);
  }
}

TEST_CASE("Send and Wait: the caller works between, answers are kept for their own Wait",
          "[net][rpc]") {
  Fixture f;
  auto c = Dial(f.Listen("127.0.0.1:0"));
  auto slow = c->Send(kSlow, Framed(""));
  auto a = c->Send(kEcho, Framed("a"));
  auto b = c->Send(kEcho, Framed("b"));
  REQUIRE(slow.ok());
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  // A whole call in between, then the answers in another order than sent.
  CHECK(c->Call(kEcho, "between")->payload == "between");
  CHECK(c->Wait(*b)->payload == "b");
  CHECK(c->Wait(*slow)->payload == "late");
  CHECK(c->Wait(*a)->payload == "a");
  CHECK(c->Send(kEcho, "short").status().code() == absl::StatusCode::kInvalidArgument);
  auto late = c->Send(kSlow, Framed(""), absl::Milliseconds(50));
  REQUIRE(late.ok());
  CHECK(c->Wait(*late).status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(c->Call(kEcho, "x")->payload == "x");
}

TEST_CASE(
    "WaitAny: the first answer of a set, whatever the order sent; a deadline or a broken "
    "connection is left for that call's Wait",
    "[net][rpc]") {
  Fixture f;
  auto c = Dial(f.Listen("127.0.0.1:0"));
  auto slow = c->Send(kSlow, Framed(""));
  auto fail = c->Send(kFail, Framed(""));
  auto echo = c->Send(kEcho, Framed("e"));
  REQUIRE(slow.ok());
  REQUIRE(fail.ok());
  REQUIRE(echo.ok());
  std::vector<RpcClient::Sent> set = {*slow, *echo};
  // The echo answers first although it was sent last; the failure's answer, read on the way,
  // is kept for its own Wait.
  CHECK(c->WaitAny(set) == 1);
  CHECK(c->WaitAny(set) == 1);  // still there: WaitAny takes nothing
  CHECK(c->Wait(*echo)->payload == "e");
  CHECK(c->WaitAny(std::vector<RpcClient::Sent>{*fail}) == 0);
  CHECK(c->Wait(*fail).status().code() == absl::StatusCode::kNotFound);
  CHECK(c->WaitAny(std::vector<RpcClient::Sent>{*slow}) == 0);
  CHECK(c->Wait(*slow)->payload == "late");

  // A deadline that passes first: that one is returned, and its Wait says so.
  auto patient = c->Send(kSlow, Framed(""));
  auto hasty = c->Send(kSlow, Framed(""), absl::Milliseconds(50));
  REQUIRE(patient.ok());
  REQUIRE(hasty.ok());
  CHECK(c->WaitAny(std::vector<RpcClient::Sent>{*patient, *hasty}) == 1);
  CHECK(c->Wait(*hasty).status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(c->Wait(*patient)->payload == "late");
  CHECK(c->Call(kEcho, "x")->payload == "x");

  // A connection that is gone: WaitAny returns, and the Wait reports it.
  auto orphan = c->Send(kSlow, Framed(""));
  REQUIRE(orphan.ok());
  c->Close();
  CHECK(c->WaitAny(std::vector<RpcClient::Sent>{*orphan}) == 0);
  CHECK(c->Wait(*orphan).status().code() == absl::StatusCode::kUnavailable);
}

TEST_CASE("a missed deadline fails that call only", "[net][rpc]") {
  Fixture f;
  auto c = Dial(f.Listen("127.0.0.1:0"));
  auto slow = c->Call(kSlow, "", absl::Milliseconds(50));
  CHECK(slow.status().code() == absl::StatusCode::kDeadlineExceeded);
  // The late answer is skipped; the connection still works.
  auto r = c->Call(kEcho, "after");
  REQUIRE(r.ok());
  CHECK(r->payload == "after");
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  r = c->Call(kEcho, "later");
  REQUIRE(r.ok());
  CHECK(r->payload == "later");
  CHECK(c->Notify(kEcho, "one-way").ok());
  CHECK(c->Call(kEcho, "x")->payload == "x");
}

TEST_CASE("malformed frames close only their connection", "[net][rpc]") {
  Fixture f;
  auto addr = f.Listen("127.0.0.1:0");
  auto good = Dial(addr);

  SECTION("garbage") {
    auto fd = openlake::io::Connect(addr, absl::Seconds(1));
    REQUIRE(fd.ok());
    const std::string junk(64, '\x5a');
    REQUIRE(write(*fd, junk.data(), junk.size()) == 64);
    CHECK(ClosedByPeer(*fd));
    close(*fd);
  }
  SECTION("oversized frame") {
    auto fd = openlake::io::Connect(addr, absl::Seconds(1));
    REQUIRE(fd.ok());
    openlake::net::FrameHeader h;
    h.length = 1u << 30;
    char hdr[openlake::net::kFrameHeaderBytes];
    openlake::net::EncodeHeader(h, hdr);
    REQUIRE(write(*fd, hdr, sizeof(hdr)) == sizeof(hdr));
    CHECK(ClosedByPeer(*fd));
    close(*fd);
  }
  SECTION("a response frame from a client") {
    auto fd = openlake::io::Connect(addr, absl::Seconds(1));
    REQUIRE(fd.ok());
    openlake::net::FrameHeader h;
    h.type = openlake::net::FrameType::kResponse;
    std::string out;
    openlake::net::AppendFrame(h, "", &out);
    REQUIRE(write(*fd, out.data(), out.size()) == static_cast<ssize_t>(out.size()));
    CHECK(ClosedByPeer(*fd));
    close(*fd);
  }
  CHECK(f.counters().protocol_errors == 1);
  // The well-behaved client never noticed.
  auto r = good->Call(kEcho, "still here");
  REQUIRE(r.ok());
  CHECK(r->payload == "still here");
  CHECK(openlake::testing::WaitFor([&] { return f.disconnects.load() == 1; }));
}

TEST_CASE("listening beyond loopback needs a secret", "[net][rpc][auth]") {
  Fixture open;
  absl::StatusOr<SocketAddress> bound;
  // Refused before any socket exists, so this never listens beyond loopback.
  REQUIRE(
      open.rt
          ->RunOn(0, [&] { bound = open.server->Listen(*SocketAddress::Parse("0.0.0.0:0"), {}); })
          .ok());
  CHECK(bound.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(std::string(bound.status().message()).find("rpc_secret") != std::string::npos);
}

// The listener binds 0.0.0.0, so it runs inside a private network namespace (only its own
// loopback exists there): nothing is exposed to a real network.
TEST_CASE("clients of a listener beyond loopback must present the secret", "[net][rpc][auth]") {
  const int rc = openlake::testing::RunInPrivateNetwork([] {
    int failures = 0;
    auto expect = [&](bool ok, const char* what) {
      if (!ok) {
        std::fprintf(stderr, "FAILED: %s\n", what);
        ++failures;
      }
    };
    RpcServerOptions o;
    o.secret = "correct horse";
    Fixture f(o);
    auto bound = f.Listen("0.0.0.0:0");
    auto addr = *SocketAddress::Parse("127.0.0.1:" + std::to_string(bound.port()));
    expect(RpcClient::Connect(addr, {}).status().code() == absl::StatusCode::kPermissionDenied,
           "no secret is PermissionDenied");
    openlake::net::RpcClientOptions wrong;
    wrong.secret = "wrong horse";
    expect(RpcClient::Connect(addr, wrong).status().code() == absl::StatusCode::kPermissionDenied,
           "wrong secret is PermissionDenied");
    openlake::net::RpcClientOptions right;
    right.secret = "correct horse";
    auto ok = RpcClient::Connect(addr, right);
    expect(ok.ok() && (*ok)->Call(kEcho, "authenticated")->payload == "authenticated",
           "right secret works");
    expect(f.counters().auth_failures >= 1, "failures counted");
    // A raw request without the handshake is dropped.
    auto fd = openlake::io::Connect(addr, absl::Seconds(1));
    expect(fd.ok(), "raw connect");
    if (fd.ok()) {
      openlake::net::FrameHeader h;
      h.method = kEcho;
      std::string out;
      openlake::net::AppendFrame(h, "sneaky", &out);
      expect(write(*fd, out.data(), out.size()) == static_cast<ssize_t>(out.size()), "write");
      expect(ClosedByPeer(*fd), "unauthenticated request closes the connection");
      close(*fd);
    }
    return failures == 0 ? 0 : 1;
  });
  if (rc == 77) {
    WARN("network namespaces unavailable (not root?): skipped");
    return;
  }
  CHECK(rc == 0);
}

TEST_CASE("descriptors travel over unix sockets only", "[net][rpc]") {
  openlake::testing::TempDir dir;
  Fixture f;
  auto uaddr = f.Listen("unix:" + dir.File("rpc.sock"));
  auto c = Dial(uaddr);
  auto r = c->Call(kFd, "");
  REQUIRE(r.ok());
  REQUIRE(r->fd >= 0);
  char buf[32] = {};
  CHECK(pread(r->fd, buf, sizeof(buf), 0) == 18);
  CHECK(std::string(buf) == "through SCM_RIGHTS");
  close(r->fd);
  // And an echo after it still lines up.
  CHECK(c->Call(kEcho, "next")->payload == "next");

  auto t = Dial(f.Listen("127.0.0.1:0"));
  CHECK(t->Call(kFd, "").status().code() == absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("closing a client runs the disconnect hook", "[net][rpc]") {
  Fixture f;
  auto addr = f.Listen("127.0.0.1:0");
  {
    auto c = Dial(addr);
    CHECK(c->Call(kEcho, "x").ok());
  }
  CHECK(openlake::testing::WaitFor([&] { return f.disconnects.load() == 1; }));
}

TEST_CASE("a full server says so where the hello would be", "[net][rpc][limits]") {
  RpcServerOptions o;
  o.max_connections = 1;
  Fixture f(o);
  auto addr = f.Listen("127.0.0.1:0");
  auto first = Dial(addr);
  auto second = RpcClient::Connect(addr, {});
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(std::string(second.status().message()).find("server full") != std::string::npos);
  REQUIRE(first->Call(kEcho, "on").ok());
}

TEST_CASE("requests beyond the memory budget are answered, not held", "[net][rpc][limits]") {
  RpcServerOptions o;
  o.max_buffered_bytes = 2 << 20;
  Fixture f(o);
  auto addr = f.Listen("127.0.0.1:0");
  auto c = Dial(addr);
  // 1 MiB fits; 8 MiB would hold more than the budget: refused whole, the connection goes on.
  auto fits = c->Call(kEcho, std::string(1 << 20, 'a'));
  REQUIRE(fits.ok());
  CHECK(fits->payload.size() == 1u << 20);
  auto big = c->Call(kEcho, std::string(8 << 20, 'b'));
  CHECK(big.status().code() == absl::StatusCode::kResourceExhausted);
  auto after = c->Call(kEcho, "after");
  REQUIRE(after.ok());
  CHECK(after->payload == "after");
  CHECK(f.counters().refused_requests == 1);
}

TEST_CASE("a header's claim costs no memory until its bytes come", "[net][rpc][limits]") {
  RpcServerOptions o;
  o.max_buffered_bytes = 4 << 20;  // far below what the claims add up to
  Fixture f(o);
  auto addr = f.Listen("127.0.0.1:0");
  std::vector<int> fds;
  for (int i = 0; i < 16; ++i) {
    auto fd = openlake::io::Connect(addr, absl::Seconds(1));
    REQUIRE(fd.ok());
    openlake::net::FrameHeader h;
    h.method = kEcho;
    h.length = 60u << 20;
    h.request_id = 1;
    char hdr[openlake::net::kFrameHeaderBytes];
    openlake::net::EncodeHeader(h, hdr);
    REQUIRE(write(*fd, hdr, sizeof(hdr)) == sizeof(hdr));
    fds.push_back(*fd);
  }
  // Nobody was refused memory: the claims took none, so a real request still goes through.
  auto c = Dial(addr);
  auto r = c->Call(kEcho, std::string(1 << 20, 'c'));
  REQUIRE(r.ok());
  CHECK(f.counters().refused_requests == 0);
  for (int fd : fds) close(fd);
}

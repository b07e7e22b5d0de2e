// net::RpcChannel, the coroutine client, against a real RpcServer over real sockets: the server
// runs on a runtime of its own, the channel on another.
#include "net/rpc_channel.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "io/test_util.h"
#include "net/frame.h"

#include "openlake/io/task.h"
#include "openlake/net/rpc.h"
#include "openlake/strings.h"

namespace io = openlake::io;
using openlake::StrCat;
using openlake::io::Reactor;
using openlake::io::SocketAddress;
using openlake::net::RpcCall;
using openlake::net::RpcChannel;
using openlake::net::RpcChannelOptions;
using openlake::net::RpcServer;
using openlake::net::RpcServerOptions;

namespace {

enum : uint16_t { kEcho = 1, kSlow = 2, kFail = 4, kHold = 5, kBig = 6 };

using Answer = absl::StatusOr<std::string>;

// An RpcServer on reactor 0 of its own runtime: echo, an answer 300 ms late, an error, calls
// held unanswered until the server goes, and a 64 KiB answer.
struct Server {
  std::unique_ptr<io::Runtime> rt = openlake::testing::StartRuntime(1);
  std::unique_ptr<RpcServer> server;
  std::vector<RpcCall> held;  // on the server's reactor
  std::atomic<int> held_count{0};

  explicit Server(RpcServerOptions opts = {}) {
    REQUIRE(rt);
    REQUIRE(rt->RunOn(0, [&] {
                server = *RpcServer::Create(rt->reactor(0), opts);
                server->Register(kEcho, [](RpcCall c) { c.Respond(std::string(c.payload())); });
                server->Register(kSlow, [](RpcCall c) {
                  auto call = std::make_shared<RpcCall>(std::move(c));
                  Reactor::Current()->After(absl::Milliseconds(300),
                                            [call] { call->Respond("late"); });
                });
                server->Register(
                    kFail, [](RpcCall c) { c.RespondError(absl::NotFoundError("no such thing")); });
                server->Register(kHold, [this](RpcCall c) {
                  held.push_back(std::move(c));
                  ++held_count;
                });
                server->Register(kBig, [](RpcCall c) { c.Respond(std::string(64 << 10, 'b')); });
              }).ok());
  }
  ~Server() {
    // The server first: its connections close, and the held calls then answer nobody.
    (void)rt->RunOn(0, [&] {
      server.reset();
      held.clear();
    });
    rt->Stop();
  }
  absl::StatusOr<SocketAddress> TryListen(const std::string& addr) {
    absl::StatusOr<SocketAddress> bound = absl::UnavailableError("not run");
    (void)rt->RunOn(0, [&] { bound = server->Listen(*SocketAddress::Parse(addr), {}); });
    return bound;
  }
  SocketAddress Listen(const std::string& addr) {
    absl::StatusOr<SocketAddress> bound = TryListen(addr);
    REQUIRE(bound.ok());
    return *bound;
  }
  uint64_t accepted() {
    uint64_t n = 0;
    REQUIRE(rt->RunOn(0, [&] { n = server->counters().accepted; }).ok());
    return n;
  }
};

// A channel on reactor 0 of a runtime of its own.
struct Client {
  std::unique_ptr<io::Runtime> rt = openlake::testing::StartRuntime(1);
  std::unique_ptr<RpcChannel> ch;

  explicit Client(const SocketAddress& addr, RpcChannelOptions o = {}) {
    REQUIRE(rt);
    REQUIRE(rt->RunOn(0, [&] { ch = std::make_unique<RpcChannel>(rt->reactor(0), addr, o); }).ok());
  }
  ~Client() {
    (void)rt->RunOn(0, [&] { ch.reset(); });
    rt->Stop();
    ch.reset();  // when the runtime was stopped first
  }
  Answer Call(uint16_t method, std::string payload, absl::Duration timeout = absl::ZeroDuration()) {
    return io::BlockOn(*rt, 0, [&] { return ch->Call(method, payload, timeout); });
  }
  bool connected() {
    bool up = false;
    REQUIRE(rt->RunOn(0, [&] { up = ch->connected(); }).ok());
    return up;
  }
};

bool Contains(const absl::Status& s, std::string_view what) {
  return std::string_view(s.message().data(), s.message().size()).find(what) !=
         std::string_view::npos;
}

// `n` echoes of different sizes and one slow call, all in flight at once from their own
// coroutines; each must get its own answer.
io::Task<absl::Status> ManyEchoes(RpcChannel* ch, int n) {
  std::vector<std::string> sent;
  std::vector<io::Task<Answer>> calls;
  for (int i = 0; i < n; ++i) {
    sent.push_back(
        StrCat("call ", i, ":", std::string(static_cast<size_t>(i * 97 % 6000), 'a' + i % 26)));
    calls.push_back(ch->Call(kEcho, sent.back()));
  }
  calls.push_back(ch->Call(kSlow, ""));  // sent among the first, answered last
  std::swap(calls.front(), calls.back());
  io::Task<std::vector<Answer>> all = io::WhenAll(std::move(calls));
  std::vector<Answer> got = co_await all;
  if (got.size() != static_cast<size_t>(n) + 1) co_return absl::InternalError("lost answers");
  if (!got[0].ok()) co_return got[0].status();
  if (*got[0] != "late") co_return absl::InternalError("slow call: wrong answer");
  for (int i = 1; i <= n; ++i) {
    // Call i went in slot i except for the swapped pair.
    const size_t want = i == n ? 0 : static_cast<size_t>(i);
    if (!got[static_cast<size_t>(i)].ok()) co_return got[static_cast<size_t>(i)].status();
    if (*got[static_cast<size_t>(i)] != sent[want]) {
      co_return absl::InternalError(StrCat("call ", i, " got another call's answer"));
    }
  }
  co_return absl::OkStatus();
}

// Two 8 MiB payloads and small calls between them, all at once: the frames must not mix.
io::Task<absl::Status> BigAndSmall(RpcChannel* ch, const std::string* a, const std::string* b) {
  std::vector<io::Task<Answer>> calls;
  calls.push_back(ch->Call(kEcho, *a));
  calls.push_back(ch->Call(kEcho, "small 1"));
  calls.push_back(ch->Call(kEcho, *b));
  calls.push_back(ch->Call(kEcho, "small 2"));
  io::Task<std::vector<Answer>> all = io::WhenAll(std::move(calls));
  std::vector<Answer> got = co_await all;
  for (const Answer& r : got) {
    if (!r.ok()) co_return r.status();
  }
  if (*got[0] != *a || *got[2] != *b)
    co_return absl::InternalError("a large payload came back changed");
  if (*got[1] != "small 1" || *got[3] != "small 2")
    co_return absl::InternalError("small calls mixed up");
  co_return absl::OkStatus();
}

// A call detached on the reactor that leaves its answer in `*out`.
io::Task<void> CallInto(RpcChannel* ch, uint16_t method, Answer* out, std::atomic<int>* done) {
  io::Task<Answer> call = ch->Call(method, "");
  Answer r = co_await call;
  *out = std::move(r);
  done->fetch_add(1);
}

// Blocking helpers for a fake server.
bool ReadFull(int fd, char* buf, size_t n) {
  while (n > 0) {
    const ssize_t got = read(fd, buf, n);
    if (got <= 0) return false;
    buf += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool WriteFull(int fd, const std::string& bytes) {
  return write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
}

}  // namespace

TEST_CASE("RpcChannel: calls from many coroutines are pipelined on one connection",
          "[net][rpc_channel]") {
  Server s;
  Client c(s.Listen("127.0.0.1:0"));
  CHECK(!c.connected());
  const absl::Status st = io::BlockOn(*c.rt, 0, [&] { return ManyEchoes(c.ch.get(), 200); });
  INFO(st.message());
  CHECK(st.ok());
  CHECK(c.connected());
  // The 201 callers all came while the first one was connecting: they waited for its connect.
  CHECK(s.accepted() == 1);
}

TEST_CASE("RpcChannel: 8 MiB payloads go out whole and do not mix with other frames",
          "[net][rpc_channel]") {
  Server s;
  Client c(s.Listen("127.0.0.1:0"));
  std::string a(8 << 20, '\0');
  std::string b(8 << 20, '\0');
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<char>(i * 7 % 251);
    b[i] = static_cast<char>(i * 13 % 241);
  }
  auto r = c.Call(kEcho, a);
  REQUIRE(r.ok());
  CHECK(*r == a);
  const absl::Status st = io::BlockOn(*c.rt, 0, [&] { return BigAndSmall(c.ch.get(), &a, &b); });
  INFO(st.message());
  CHECK(st.ok());
}

TEST_CASE("RpcChannel: error statuses and frame limits", "[net][rpc_channel]") {
  Server s;
  auto addr = s.Listen("127.0.0.1:0");
  Client c(addr);
  auto e = c.Call(kFail, "");
  CHECK(e.status().code() == absl::StatusCode::kNotFound);
  CHECK(std::string(e.status().message()) == "no such thing");
  CHECK(c.Call(999, "").status().code() == absl::StatusCode::kUnimplemented);
  CHECK(c.Call(kEcho, "after errors").value_or("") == "after errors");

  RpcChannelOptions small;
  small.max_frame_bytes = 1024;
  Client t(addr, small);
  CHECK(t.Call(kEcho, std::string(2000, 'x')).status().code() ==
        absl::StatusCode::kInvalidArgument);
  // An answer over the limit is a bad frame: the connection breaks, the next call reconnects.
  auto big = t.Call(kBig, "");
  CHECK(big.status().code() == absl::StatusCode::kUnavailable);
  CHECK(Contains(big.status(), addr.ToString()));
  CHECK(Contains(big.status(), "malformed frame"));
  CHECK(t.Call(kEcho, "again").value_or("") == "again");
}

TEST_CASE("RpcChannel: a missed deadline fails that call only", "[net][rpc_channel]") {
  Server s;
  auto addr = s.Listen("127.0.0.1:0");
  Client c(addr);
  auto slow = c.Call(kSlow, "", absl::Milliseconds(50));
  CHECK(slow.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(std::string(slow.status().message()) ==
        StrCat("no answer from ", addr.ToString(), " before the deadline"));
  CHECK(c.Call(kEcho, "after").value_or("") == "after");
  // The late answer comes and is dropped; the connection carries on.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  CHECK(c.Call(kEcho, "later").value_or("") == "later");
  CHECK(c.connected());
  CHECK(s.accepted() == 1);

  // call_timeout is the default deadline.
  RpcChannelOptions o;
  o.call_timeout = absl::Milliseconds(50);
  Client d(addr, o);
  CHECK(d.Call(kSlow, "").status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(d.Call(kSlow, "", absl::Seconds(5)).value_or("") == "late");
}

TEST_CASE("RpcChannel: a server gone fails the calls in flight; the next call reconnects",
          "[net][rpc_channel]") {
  auto s = std::make_unique<Server>();
  const SocketAddress addr = s->Listen("127.0.0.1:0");
  Client c(addr);
  REQUIRE(c.Call(kEcho, "one").value_or("") == "one");

  Answer in_flight;
  std::thread caller([&] { in_flight = c.Call(kHold, "", absl::Seconds(10)); });
  REQUIRE(openlake::testing::WaitFor([&] { return s->held_count.load() == 1; }));
  s.reset();
  caller.join();
  CHECK(in_flight.status().code() == absl::StatusCode::kUnavailable);
  CHECK(Contains(in_flight.status(), addr.ToString()));
  CHECK(Contains(in_flight.status(), "closed by the server"));
  CHECK(!c.connected());

  // Nobody listens: refused, at once.
  const auto start = std::chrono::steady_clock::now();
  auto refused = c.Call(kEcho, "x");
  CHECK(refused.status().code() == absl::StatusCode::kUnavailable);
  CHECK(Contains(refused.status(), "cannot connect to " + addr.ToString()));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));

  // A new server on the same port: the channel finds it.
  s = std::make_unique<Server>();
  absl::StatusOr<SocketAddress> again = s->TryListen(addr.ToString());
  for (int i = 0; i < 50 && !again.ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    again = s->TryListen(addr.ToString());
  }
  REQUIRE(again.ok());
  CHECK(c.Call(kEcho, "two").value_or("") == "two");
  CHECK(c.connected());
}

TEST_CASE("RpcChannel: unix sockets", "[net][rpc_channel]") {
  openlake::testing::TempDir dir;
  Server s;
  Client c(s.Listen("unix:" + dir.File("chan.sock")));
  CHECK(c.Call(kEcho, "over unix").value_or("") == "over unix");
  CHECK(c.Call(kFail, "").status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("RpcChannel: a malformed frame breaks the connection; the next call reconnects",
          "[net][rpc_channel]") {
  // A fake server: the first connection answers garbage, the second answers properly.
  const int lfd = *io::Listen(*SocketAddress::Parse("127.0.0.1:0"), {});
  const SocketAddress addr = *io::LocalAddress(lfd);
  std::thread fake([lfd] {
    for (int conn = 0; conn < 2; ++conn) {
      const int fd = accept(lfd, nullptr, nullptr);
      if (fd < 0) return;
      const uint8_t nonce[openlake::net::kNonceBytes] = {};
      openlake::net::FrameHeader h;
      h.type = openlake::net::FrameType::kHello;
      std::string hello;
      openlake::net::AppendFrame(h, openlake::net::EncodeHello(false, nonce, "fake"), &hello);
      char hdr[openlake::net::kFrameHeaderBytes];
      openlake::net::FrameHeader req;
      if (WriteFull(fd, hello) && ReadFull(fd, hdr, sizeof(hdr)) &&
          openlake::net::DecodeHeader(hdr, 1 << 20, &req).ok()) {
        std::string payload(req.length, '\0');
        if (ReadFull(fd, payload.data(), payload.size())) {
          std::string out;
          if (conn == 0) {
            out.assign(openlake::net::kFrameHeaderBytes, 'Z');
          } else {
            openlake::net::FrameHeader resp;
            resp.type = openlake::net::FrameType::kResponse;
            resp.request_id = req.request_id;
            openlake::net::AppendFrame(resp, "fine", &out);
          }
          (void)WriteFull(fd, out);
          char sink[64];
          while (read(fd, sink, sizeof(sink)) > 0) {
          }
        }
      }
      close(fd);
    }
  });
  {
    Client c(addr);
    auto bad = c.Call(kEcho, "x");
    CHECK(bad.status().code() == absl::StatusCode::kUnavailable);
    CHECK(Contains(bad.status(), "malformed frame"));
    CHECK(c.Call(kEcho, "x").value_or("") == "fine");
  }
  fake.join();
  close(lfd);
}

TEST_CASE("RpcChannel: a server that never greets times the connect out", "[net][rpc_channel]") {
  // Listening, never accepting: the kernel completes the TCP handshake, no hello ever comes.
  const int lfd = *io::Listen(*SocketAddress::Parse("127.0.0.1:0"), {});
  const SocketAddress addr = *io::LocalAddress(lfd);
  RpcChannelOptions o;
  o.connect_timeout = absl::Milliseconds(200);
  Client c(addr, o);
  const auto start = std::chrono::steady_clock::now();
  auto r = c.Call(kEcho, "x", absl::Seconds(10));
  CHECK(r.status().code() == absl::StatusCode::kUnavailable);
  CHECK(Contains(r.status(), "no handshake within 200ms"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3));
  CHECK(!c.connected());
  close(lfd);
}

// The listener binds 0.0.0.0 (so it asks for the handshake) inside a private network namespace:
// nothing is exposed to a real network.
TEST_CASE("RpcChannel: the shared-secret handshake", "[net][rpc_channel][auth]") {
  const int rc = openlake::testing::RunInPrivateNetwork([] {
    int failures = 0;
    auto expect = [&](bool ok, const char* what) {
      if (!ok) {
        std::fprintf(stderr, "FAILED: %s\n", what);
        ++failures;
      }
    };
    RpcServerOptions so;
    so.secret = "correct horse";
    Server s(so);
    const SocketAddress bound = s.Listen("0.0.0.0:0");
    const SocketAddress addr = *SocketAddress::Parse(StrCat("127.0.0.1:", bound.port()));
    {
      Client none(addr);
      auto r = none.Call(kEcho, "x");
      expect(r.status().code() == absl::StatusCode::kPermissionDenied, "no secret is denied");
      expect(Contains(r.status(), "requires the cluster's shared secret and none was given"),
             "no secret says so");
    }
    {
      RpcChannelOptions o;
      o.secret = "wrong horse";
      Client wrong(addr, o);
      auto r = wrong.Call(kEcho, "x");
      expect(r.status().code() == absl::StatusCode::kPermissionDenied, "wrong secret is denied");
      expect(!wrong.connected(), "no connection after a wrong secret");
    }
    {
      RpcChannelOptions o;
      o.secret = "correct horse";
      Client right(addr, o);
      // Many callers at once: one connect, one handshake, every call answered.
      const absl::Status st =
          io::BlockOn(*right.rt, 0, [&] { return ManyEchoes(right.ch.get(), 20); });
      expect(st.ok(), "right secret works for every caller");
      expect(right.connected(), "connected");
    }
    expect(s.accepted() == 3, "one connection per channel");
    return failures == 0 ? 0 : 1;
  });
  if (rc == 77) {
    WARN("network namespaces unavailable (not root?): skipped");
    return;
  }
  CHECK(rc == 0);
}

TEST_CASE("RpcChannel: destroyed with calls in flight", "[net][rpc_channel]") {
  Server s;
  const SocketAddress addr = s.Listen("127.0.0.1:0");
  constexpr int kCalls = 5;
  std::vector<Answer> out(kCalls);
  std::atomic<int> done{0};

  SECTION("calls waiting for answers") {
    Client c(addr);
    REQUIRE(c.Call(kEcho, "up").ok());
    REQUIRE(c.rt->RunOn(0,
                        [&] {
                          for (int i = 0; i < kCalls; ++i) {
                            io::Spawn(
                                CallInto(c.ch.get(), kSlow, &out[static_cast<size_t>(i)], &done));
                          }
                        })
                .ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the requests are out
    REQUIRE(c.rt->RunOn(0, [&] { c.ch.reset(); }).ok());
    REQUIRE(openlake::testing::WaitFor([&] { return done.load() == kCalls; }));
    for (const Answer& r : out) CHECK(r.status().code() == absl::StatusCode::kCancelled);
    // The late answers find nobody.
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
  }
  SECTION("calls waiting for the connect") {
    Client c(addr);
    REQUIRE(c.rt->RunOn(0,
                        [&] {
                          for (int i = 0; i < kCalls; ++i) {
                            io::Spawn(
                                CallInto(c.ch.get(), kEcho, &out[static_cast<size_t>(i)], &done));
                          }
                          c.ch.reset();
                        })
                .ok());
    REQUIRE(openlake::testing::WaitFor([&] { return done.load() == kCalls; }));
    for (const Answer& r : out) CHECK(r.status().code() == absl::StatusCode::kCancelled);
  }
  SECTION("a call made after the channel is gone") {
    Client c(addr);
    Answer late;
    REQUIRE(c.rt->RunOn(0,
                        [&] {
                          io::Task<Answer> call = c.ch->Call(kEcho, "x");
                          c.ch.reset();
                          io::Spawn([](io::Task<Answer> t, Answer* o,
                                       std::atomic<int>* d) -> io::Task<void> {
                            Answer r = co_await t;
                            *o = std::move(r);
                            d->fetch_add(1);
                          }(std::move(call), &late, &done));
                        })
                .ok());
    REQUIRE(openlake::testing::WaitFor([&] { return done.load() == 1; }));
    CHECK(late.status().code() == absl::StatusCode::kCancelled);
  }
}

TEST_CASE("RpcChannel: a runtime stopped under an open connection leaves nothing behind",
          "[net][rpc_channel]") {
  Server s;
  Client c(s.Listen("127.0.0.1:0"));
  REQUIRE(c.Call(kEcho, "up").ok());
  REQUIRE(c.connected());
  // The receive loop is in flight when the ring goes; the channel is destroyed afterwards, off
  // the reactor (ASan checks that nothing leaks or is touched after it is freed).
  c.rt->Stop();
  c.ch.reset();
}

// The acceptor over real loopback and Unix sockets: connections handed to the handler with
// their peer, the cap, deadlines, stopping, and connections that outlive the acceptor.
#include "io/acceptor.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include <catch2/catch.hpp>

#include "io/test_util.h"

#include "openlake/io/socket.h"

namespace openlake::io {
namespace {

using testing::StartRuntime;
using testing::TempDir;
using testing::WaitFor;

// Connections the handler received, kept (open) until the test lets them go.
struct Held {
  std::mutex mu;
  std::vector<Connection> conns;
  size_t size() {
    std::lock_guard<std::mutex> g(mu);
    return conns.size();
  }
};

struct Fixture {
  std::unique_ptr<Runtime> rt = StartRuntime(1);
  std::unique_ptr<Acceptor> acceptor;
  Held held;
  SocketAddress addr;

  explicit Fixture(AcceptorOptions o, std::string where = "127.0.0.1:0",
                   ListenerLimits limits = {}) {
    REQUIRE(rt != nullptr);
    const SocketAddress at = SocketAddress::Parse(where).value();
    absl::Status st = rt->RunOn(0, [&] {
      acceptor = Acceptor::Create(*Reactor::Current(), o).value();
      auto bound = acceptor->Listen(
          at, ListenOptions(),
          [this](Connection c) {
            std::lock_guard<std::mutex> g(held.mu);
            held.conns.push_back(std::move(c));
          },
          limits);
      REQUIRE(bound.ok());
      addr = *bound;
    });
    REQUIRE(st.ok());
  }
  ~Fixture() {
    if (acceptor) {
      Acceptor* a = acceptor.get();
      (void)rt->RunOn(0, [a] { a->StopAccepting(); });
      a->ShutdownAll();
      {
        std::lock_guard<std::mutex> g(held.mu);
        held.conns.clear();
      }
      WaitFor([a] { return !a->listening(); });
    }
    rt->Stop();
  }
};

int Dial(const SocketAddress& a) { return Connect(a, absl::Seconds(2)).value(); }

// True when the peer closed the socket (a recv of 0 bytes within `seconds`).
bool SeesEnd(int fd, double seconds = 3) {
  timeval tv{static_cast<time_t>(seconds), 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char c;
  return recv(fd, &c, 1, 0) == 0;
}

TEST_CASE("acceptor: connections reach the handler with their peer", "[io][acceptor]") {
  Fixture f(AcceptorOptions{});
  const int a = Dial(f.addr), b = Dial(f.addr);
  REQUIRE(WaitFor([&] { return f.held.size() == 2; }));
  CHECK(f.acceptor->open() == 2);
  CHECK(f.acceptor->accepted() == 2);
  {
    std::lock_guard<std::mutex> g(f.held.mu);
    CHECK(f.held.conns[0].id() == 1);
    CHECK(f.held.conns[1].id() == 2);
    CHECK(f.held.conns[0].peer().IsLoopback());
    CHECK_FALSE(f.held.conns[0].is_unix());
    // Bytes flow on the descriptor the Connection holds.
    REQUIRE(send(a, "x", 1, 0) == 1);
    char c = 0;
    CHECK(recv(f.held.conns[0].fd(), &c, 1, 0) == 1);
    CHECK(c == 'x');
    f.held.conns[1].Close();  // closes the socket and frees the place
  }
  CHECK(SeesEnd(b));
  CHECK(f.acceptor->open() == 1);
  close(a);
  close(b);
}

TEST_CASE("acceptor: past max_connections a connection is closed at once", "[io][acceptor]") {
  AcceptorOptions o;
  o.max_connections = 2;
  Fixture f(o);
  const int a = Dial(f.addr), b = Dial(f.addr);
  REQUIRE(WaitFor([&] { return f.held.size() == 2; }));
  const int c = Dial(f.addr);
  CHECK(SeesEnd(c));
  CHECK(f.acceptor->refused() == 1);
  CHECK(f.acceptor->open() == 2);
  {
    std::lock_guard<std::mutex> g(f.held.mu);
    f.held.conns.clear();  // both places free again
  }
  CHECK(f.acceptor->open() == 0);
  const int d = Dial(f.addr);
  CHECK(WaitFor([&] { return f.held.size() == 1; }));
  for (int fd : {a, b, c, d}) close(fd);
}

// What a refused client reads before the close (on_refused's words), "" when nothing came.
std::string ReadAll(int fd) {
  timeval tv{3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string got;
  char buf[256];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) got.append(buf, static_cast<size_t>(n));
  return got;
}

TEST_CASE("acceptor: a refused client is told why before the close", "[io][acceptor]") {
  AcceptorOptions o;
  o.max_connections = 1;
  o.on_refused = [](int fd, std::string_view why) {
    const std::string msg = "full: " + std::string(why);
    (void)send(fd, msg.data(), msg.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  };
  Fixture f(o);
  const int a = Dial(f.addr);
  REQUIRE(WaitFor([&] { return f.held.size() == 1; }));
  const int b = Dial(f.addr);
  const std::string got = ReadAll(b);
  CHECK(got.rfind("full: 1 connections open (max_connections)", 0) == 0);
  CHECK(f.acceptor->refused() == 1);
  close(a);
  close(b);
}

TEST_CASE("acceptor: one client address may hold max_per_peer connections", "[io][acceptor]") {
  AcceptorOptions o;
  o.max_per_peer = 2;
  Fixture f(o);
  const int a = Dial(f.addr), b = Dial(f.addr);
  REQUIRE(WaitFor([&] { return f.held.size() == 2; }));
  const int c = Dial(f.addr);
  CHECK(SeesEnd(c));
  CHECK(f.acceptor->refused() == 1);
  {
    std::lock_guard<std::mutex> g(f.held.mu);
    f.held.conns.erase(f.held.conns.begin());  // one place back for the address
  }
  const int d = Dial(f.addr);
  CHECK(WaitFor([&] { return f.held.size() == 2; }));
  CHECK(f.acceptor->refused() == 1);
  for (int fd : {a, b, c, d}) close(fd);
}

TEST_CASE("acceptor: a listener's own cap", "[io][acceptor]") {
  ListenerLimits limits;
  limits.max_connections = 1;
  Fixture f(AcceptorOptions{}, "127.0.0.1:0", limits);
  const int a = Dial(f.addr);
  REQUIRE(WaitFor([&] { return f.held.size() == 1; }));
  const int b = Dial(f.addr);
  CHECK(SeesEnd(b));
  CHECK(f.acceptor->refused() == 1);
  close(a);
  close(b);
}

TEST_CASE("acceptor: a full cap takes back the place held longest without work", "[io][acceptor]") {
  AcceptorOptions o;
  o.max_connections = 2;
  Fixture f(o);
  const int a = Dial(f.addr), b = Dial(f.addr);
  REQUIRE(WaitFor([&] { return f.held.size() == 2; }));
  {
    std::lock_guard<std::mutex> g(f.held.mu);
    f.held.conns[1].SetEvictableAfter(absl::ZeroDuration());
    f.held.conns[0].SetEvictableAfter(absl::Seconds(3600));  // not yet
  }
  const int c = Dial(f.addr);
  CHECK(WaitFor([&] { return f.held.size() == 3; }));
  CHECK(SeesEnd(b));  // the evictable one went
  CHECK(f.acceptor->evicted() == 1);
  {
    std::lock_guard<std::mutex> g(f.held.mu);
    CHECK(f.held.conns[1].evicted());
    CHECK_FALSE(f.held.conns[0].evicted());
    f.held.conns.erase(f.held.conns.begin() + 1);  // its owner lets it go
  }
  // Nothing evictable is left (the new one never said so): the next is refused.
  const int d = Dial(f.addr);
  CHECK(SeesEnd(d));
  CHECK(f.acceptor->refused() == 1);
  for (int fd : {a, b, c, d}) close(fd);
}

TEST_CASE("acceptor: the reserve admits a few beyond the cap, marked as such", "[io][acceptor]") {
  AcceptorOptions o;
  o.max_connections = 1;
  o.reserve = 1;
  o.max_per_peer = 1;  // the reserve is not counted against the address
  Fixture f(o);
  const int a = Dial(f.addr), b = Dial(f.addr);
  REQUIRE(WaitFor([&] { return f.held.size() == 2; }));
  {
    std::lock_guard<std::mutex> g(f.held.mu);
    CHECK_FALSE(f.held.conns[0].reserve());
    CHECK(f.held.conns[1].reserve());
  }
  const int c = Dial(f.addr);
  CHECK(SeesEnd(c));
  for (int fd : {a, b, c}) close(fd);
}

TEST_CASE("acceptor: a deadline shuts the connection down; a cleared one does not",
          "[io][acceptor]") {
  AcceptorOptions o;
  o.deadline_check = absl::Milliseconds(20);
  Fixture f(o);
  const int a = Dial(f.addr), b = Dial(f.addr);
  REQUIRE(WaitFor([&] { return f.held.size() == 2; }));
  {
    std::lock_guard<std::mutex> g(f.held.mu);
    f.held.conns[0].SetDeadline(absl::Now() + absl::Milliseconds(100));
    f.held.conns[1].SetDeadline(absl::Now() + absl::Milliseconds(100));
    f.held.conns[1].ClearDeadline();
  }
  CHECK(SeesEnd(a));
  {
    std::lock_guard<std::mutex> g(f.held.mu);
    CHECK(f.held.conns[0].expired());
    CHECK_FALSE(f.held.conns[1].expired());
    CHECK(f.held.conns[0].valid());  // shut down, still owned: the owner closes it
  }
  // The other stays usable past the deadline it no longer has.
  absl::SleepFor(absl::Milliseconds(200));
  REQUIRE(send(b, "y", 1, MSG_NOSIGNAL) == 1);
  {
    std::lock_guard<std::mutex> g(f.held.mu);
    char c = 0;
    CHECK(recv(f.held.conns[1].fd(), &c, 1, 0) == 1);
  }
  close(a);
  close(b);
}

TEST_CASE("acceptor: stopping refuses new connections and ends the open ones", "[io][acceptor]") {
  Fixture f(AcceptorOptions{});
  const int a = Dial(f.addr);
  REQUIRE(WaitFor([&] { return f.held.size() == 1; }));
  Acceptor* acc = f.acceptor.get();
  REQUIRE(f.rt->RunOn(0, [acc] { acc->StopAccepting(); }).ok());
  CHECK(WaitFor([acc] { return !acc->listening(); }));
  CHECK_FALSE(Connect(f.addr, absl::Seconds(1)).ok());
  acc->ShutdownAll();
  CHECK(SeesEnd(a));
  close(a);
}

TEST_CASE("acceptor: Unix sockets carry the peer's credentials", "[io][acceptor]") {
  TempDir dir;
  Fixture f(AcceptorOptions{}, "unix:" + dir.File("a.sock"));
  const int a = Dial(f.addr);
  REQUIRE(WaitFor([&] { return f.held.size() == 1; }));
  {
    std::lock_guard<std::mutex> g(f.held.mu);
    CHECK(f.held.conns[0].is_unix());
    CHECK(f.held.conns[0].peer_pid() == getpid());
    CHECK(f.held.conns[0].peer_uid() == geteuid());
  }
  close(a);
}

TEST_CASE("acceptor: connections may outlive it", "[io][acceptor]") {
  auto rt = StartRuntime(1);
  REQUIRE(rt != nullptr);
  std::unique_ptr<Acceptor> acceptor;
  Held held;
  SocketAddress addr;
  REQUIRE(rt->RunOn(0, [&] {
              acceptor = Acceptor::Create(*Reactor::Current(), {}).value();
              addr = acceptor
                         ->Listen(SocketAddress::Parse("127.0.0.1:0").value(), ListenOptions(),
                                  [&held](Connection c) {
                                    std::lock_guard<std::mutex> g(held.mu);
                                    held.conns.push_back(std::move(c));
                                  })
                         .value();
            }).ok());
  const int a = Dial(addr);
  REQUIRE(WaitFor([&] { return held.size() == 1; }));
  REQUIRE(rt->RunOn(0, [&] { acceptor->StopAccepting(); }).ok());
  REQUIRE(WaitFor([&] { return !acceptor->listening(); }));
  acceptor.reset();
  {
    std::lock_guard<std::mutex> g(held.mu);
    held.conns.clear();  // closes through the state it kept
  }
  CHECK(SeesEnd(a));
  close(a);
  rt->Stop();
}

}  // namespace
}  // namespace openlake::io

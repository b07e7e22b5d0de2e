#include "openlake/io/socket.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "io/test_util.h"

using openlake::io::Reactor;
using openlake::io::SocketAddress;
using openlake::testing::TempDir;

TEST_CASE("addresses parse, print and know loopback", "[io][socket]") {
  auto a = SocketAddress::Parse("127.0.0.1:9400");
  REQUIRE(a.ok());
  CHECK(a->port() == 9400);
  CHECK(a->IsLoopback());
  CHECK(a->ToString() == "127.0.0.1:9400");
  auto b = SocketAddress::Parse("[::1]:80");
  REQUIRE(b.ok());
  CHECK(b->IsLoopback());
  CHECK(b->ToString() == "[::1]:80");
  auto c = SocketAddress::Parse("0.0.0.0:9000");
  REQUIRE(c.ok());
  CHECK(!c->IsLoopback());
  CHECK(!SocketAddress::Parse("10.1.2.3:1")->IsLoopback());
  auto u = SocketAddress::Parse("unix:/tmp/x.sock");
  REQUIRE(u.ok());
  CHECK(u->is_unix());
  CHECK(u->ToString() == "unix:/tmp/x.sock");
  CHECK(!SocketAddress::Parse("nonsense").ok());
  CHECK(!SocketAddress::Parse("127.0.0.1:99999").ok());
  CHECK(!SocketAddress::Parse("127.0.0.1:x").ok());
  CHECK(!SocketAddress::Parse("unix:").ok());
  CHECK(!SocketAddress::Parse("unix:" + std::string(200, 'a')).ok());
  CHECK(SocketAddress::Parse("localhost:1")->IsLoopback());
}

TEST_CASE("accept, recv and send run on the reactor", "[io][socket]") {
  auto rt = openlake::testing::StartRuntime(1);
  REQUIRE(rt);
  auto listen_fd = openlake::io::Listen(*SocketAddress::Parse("127.0.0.1:0"), {});
  REQUIRE(listen_fd.ok());
  auto bound = openlake::io::LocalAddress(*listen_fd);
  REQUIRE(bound.ok());
  REQUIRE(bound->port() != 0);

  // Echo server: accept one connection, echo one message back, close.
  struct State {
    int conn = -1;
    char buf[256];
  } st;
  std::promise<void> served;
  rt->Post(0, [&] {
    Reactor& r = *Reactor::Current();
    r.Accept(*listen_fd, false, r.Callback([&](int32_t fd) {
      st.conn = fd;  // checked on the test thread: Catch is not thread-safe
      Reactor& r2 = *Reactor::Current();
      r2.Recv(fd, st.buf, sizeof(st.buf), 0, r2.Callback([&](int32_t n) {
        Reactor& r3 = *Reactor::Current();
        r3.Send(st.conn, st.buf, static_cast<size_t>(n), 0, r3.Callback([&](int32_t) {
          Reactor::Current()->Close(st.conn, nullptr);
          served.set_value();
        }));
      }));
    }));
  });
  auto cfd = openlake::io::Connect(*bound, absl::Seconds(2));
  REQUIRE(cfd.ok());
  const char msg[] = "ping over io_uring";
  REQUIRE(write(*cfd, msg, sizeof(msg)) == sizeof(msg));
  char back[sizeof(msg)] = {};
  size_t got = 0;
  while (got < sizeof(msg)) {
    const ssize_t n = read(*cfd, back + got, sizeof(msg) - got);
    REQUIRE(n > 0);
    got += static_cast<size_t>(n);
  }
  CHECK(std::memcmp(back, msg, sizeof(msg)) == 0);
  served.get_future().wait();
  CHECK(st.conn >= 0);
  close(*cfd);
  close(*listen_fd);
}

TEST_CASE("connect to a closed port is Unavailable", "[io][socket]") {
  auto fd = openlake::io::Listen(*SocketAddress::Parse("127.0.0.1:0"), {});
  REQUIRE(fd.ok());
  const auto addr = *openlake::io::LocalAddress(*fd);
  close(*fd);
  CHECK(openlake::io::Connect(addr, absl::Seconds(1)).status().code() ==
        absl::StatusCode::kUnavailable);
}

TEST_CASE("unix sockets are owner-only; stale ones are replaced, live ones kept", "[io][socket]") {
  TempDir dir;
  const std::string path = dir.File("s.sock");
  auto addr = SocketAddress::Parse("unix:" + path);
  REQUIRE(addr.ok());
  auto fd = openlake::io::Listen(*addr, {});
  REQUIRE(fd.ok());
  struct stat st;
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  // Live: refused.
  CHECK(openlake::io::Listen(*addr, {}).status().code() == absl::StatusCode::kAlreadyExists);
  close(*fd);
  // Stale (nobody listening): replaced.
  auto again = openlake::io::Listen(*addr, {});
  REQUIRE(again.ok());
  close(*again);
  // Not a socket: never replaced.
  const std::string plain = dir.File("plain");
  std::ofstream(plain) << "precious";
  CHECK(openlake::io::Listen(*SocketAddress::Parse("unix:" + plain), {}).status().code() ==
        absl::StatusCode::kAlreadyExists);
  std::ifstream in(plain);
  std::string s;
  in >> s;
  CHECK(s == "precious");
}

TEST_CASE(
    "a unix socket whose listener's process is gone is replaced even while it still "
    "accepts",
    "[io][socket]") {
  // What a daemon killed -9 leaves for a moment: its listening socket still open (io_uring
  // closes a dead process's ring later, in a kernel worker) though the process is gone. Here a
  // child listens and exits while a grandchild keeps the socket open without ever accepting.
  TempDir dir;
  const std::string path = dir.File("s.sock");
  auto addr = SocketAddress::Parse("unix:" + path);
  REQUIRE(addr.ok());
  int pipefd[2];
  REQUIRE(pipe(pipefd) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto fd = openlake::io::Listen(*addr, {});
    if (!fd.ok()) _exit(1);
    const pid_t holder = fork();
    if (holder == 0) {
      pause();  // holds the listening socket until killed
      _exit(0);
    }
    (void)!write(pipefd[1], &holder, sizeof(holder));
    _exit(0);
  }
  pid_t holder = -1;
  REQUIRE(read(pipefd[0], &holder, sizeof(holder)) == sizeof(holder));
  close(pipefd[0]);
  close(pipefd[1]);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);

  auto taken = openlake::io::Listen(*addr, {});
  CHECK(taken.ok());
  if (taken.ok()) close(*taken);
  kill(holder, SIGKILL);
  waitpid(holder, &status, 0);
}

TEST_CASE("blocking transfers: whole sends, partial receives, deadlines, descriptors",
          "[io][socket]") {
  int sv[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  // Two pieces go out whole and arrive in order.
  std::string a = "hello, ", b = "world";
  iovec iov[2] = {{a.data(), a.size()}, {b.data(), b.size()}};
  REQUIRE(openlake::io::SendAll(sv[0], iov, 2, "peer", absl::Now() + absl::Seconds(2)).ok());
  char buf[64];
  auto n = openlake::io::RecvSome(sv[1], buf, sizeof(buf), "peer", absl::Now() + absl::Seconds(2));
  REQUIRE(n.ok());
  CHECK(std::string(buf, *n) == "hello, world");
  // Nothing to read: DeadlineExceeded once the deadline passes.
  const absl::Time t0 = absl::Now();
  n = openlake::io::RecvSome(sv[1], buf, sizeof(buf), "peer", t0 + absl::Milliseconds(50),
                             absl::Microseconds(20));
  CHECK(n.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(absl::Now() - t0 >= absl::Milliseconds(45));
  // A peer that reads nothing: the send stalls and says so.
  std::string big(16 << 20, 'x');
  iovec one{big.data(), big.size()};
  absl::Status st =
      openlake::io::SendAll(sv[0], &one, 1, "peer", absl::InfiniteFuture(), absl::Milliseconds(50));
  CHECK(st.code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(one.iov_len < big.size());  // what went is behind the entry now
  // A descriptor sent with the bytes comes back through `fds`.
  int extra[2];
  REQUIRE(pipe(extra) == 0);
  char c = 'f';
  iovec piece{&c, 1};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &piece;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof(cbuf);
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cm), &extra[0], sizeof(int));
  int back[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, back) == 0);
  REQUIRE(sendmsg(back[0], &msg, 0) == 1);
  std::vector<int> fds;
  n = openlake::io::RecvSome(back[1], buf, sizeof(buf), "peer", absl::Now() + absl::Seconds(2),
                             absl::ZeroDuration(), &fds);
  REQUIRE(n.ok());
  CHECK(*n == 1);
  REQUIRE(fds.size() == 1);
  CHECK(fds[0] != extra[0]);
  for (int fd : {sv[0], sv[1], extra[0], extra[1], back[0], back[1], fds[0]}) close(fd);
  // The peer closed: 0 bytes.
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  close(sv[0]);
  n = openlake::io::RecvSome(sv[1], buf, sizeof(buf), "peer", absl::Now() + absl::Seconds(2));
  REQUIRE(n.ok());
  CHECK(*n == 0);
  close(sv[1]);
}

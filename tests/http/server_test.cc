// The HTTP server over real loopback sockets: keep-alive, pipelining, bodies by length and
// chunked, 100-continue, framing errors, timeouts, unread bodies, a client that vanishes,
// and stopping with connections open.
#include "http/server.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "common/digest.h"
#include "io/test_util.h"

#include "openlake/io/socket.h"
#include "openlake/strings.h"

namespace openlake::http {
namespace {

std::string Sha256Hex(std::string_view data) {
  Digest h(Digest::kSha256);
  h.Update(data);
  return Hex(h.Final());
}

struct Seen {
  std::atomic<int> requests{0};
  std::atomic<int> body_errors{0};
};

// Echo: reads the body and answers its length and SHA-256, with the request's X-Tag echoed.
// /noread answers without reading; /stream answers in three written pieces.
Handler Echo(Seen* seen) {
  return [seen](Exchange& ex) -> io::Task<void> {
    seen->requests++;
    const std::string target = ex.request().target;
    if (target == "/noread") {
      (void)co_await ex.Respond("ignored\n");
      co_return;
    }
    if (target == "/stream") {
      absl::Status s = co_await ex.StartResponse(9);
      if (s.ok()) s = co_await ex.Write("abc");
      if (s.ok()) s = co_await ex.Write("def");
      if (s.ok()) s = co_await ex.Write("ghi");
      co_return;
    }
    std::string body;
    while (true) {
      absl::StatusOr<std::string_view> piece = co_await ex.ReadBody();
      if (!piece.ok()) {
        seen->body_errors++;
        co_return;
      }
      if (piece->empty()) break;
      body.append(*piece);
    }
    ex.AddHeader("X-Tag", std::string(ex.request().Value("x-tag")));
    (void)co_await ex.Respond("len=" + std::to_string(body.size()) + " sha=" + Sha256Hex(body));
  };
}

class Client {
 public:
  explicit Client(uint16_t port) {
    auto a = io::SocketAddress::Parse("127.0.0.1:" + std::to_string(port));
    REQUIRE(a.ok());
    auto fd = io::Connect(*a, absl::Seconds(5));
    REQUIRE(fd.ok());
    fd_ = *fd;
    timeval tv{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~Client() { close(fd_); }
  void Send(const std::string& s) {
    size_t at = 0;
    while (at < s.size()) {
      const ssize_t n = send(fd_, s.data() + at, s.size() - at, MSG_NOSIGNAL);
      REQUIRE(n > 0);
      at += static_cast<size_t>(n);
    }
  }
  // One response: status, headers (lower-case names) and a Content-Length body.
  struct Response {
    int status = 0;
    std::vector<Header> headers;
    std::string body;
    std::string_view Value(std::string_view n) const {
      const Header* h = FindHeader(headers, n);
      return h ? std::string_view(h->value) : std::string_view();
    }
  };
  // With `head`, the response to a HEAD: no body follows whatever Content-Length says.
  Response Read(bool head_only = false) {
    Response r;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return r;
    }
    const std::string head = buf_.substr(0, end + 2);
    buf_.erase(0, end + 4);
    r.status = std::stoi(head.substr(9, 3));
    size_t at = head.find("\r\n") + 2;
    while (at < head.size()) {
      const size_t e = head.find("\r\n", at);
      const std::string line = head.substr(at, e - at);
      const size_t colon = line.find(':');
      r.headers.push_back({AsciiLower(line.substr(0, colon)), line.substr(colon + 2)});
      at = e + 2;
    }
    const size_t len = head_only || r.Value("content-length").empty()
                           ? 0
                           : std::stoul(std::string(r.Value("content-length")));
    while (buf_.size() < len) {
      if (!Fill()) break;
    }
    r.body = buf_.substr(0, len);
    buf_.erase(0, std::min(len, buf_.size()));
    return r;
  }
  // True when the server closed the connection (EOF) within the receive timeout.
  bool Closed() {
    while (true) {
      char c;
      const ssize_t n = recv(fd_, &c, 1, 0);
      if (n == 0) return true;
      if (n < 0) return false;
      buf_.push_back(c);
    }
  }
  void SetTimeout(int ms) {
    timeval tv{ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  void HalfClose() { shutdown(fd_, SHUT_WR); }
  int fd() const { return fd_; }

 private:
  bool Fill() {
    char tmp[65536];
    const ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }
  int fd_ = -1;
  std::string buf_;
};

struct Fixture {
  explicit Fixture(ServerOptions o = ServerOptions()) {
    rt = testing::StartRuntime(2);
    REQUIRE(rt != nullptr);
    auto a = io::SocketAddress::Parse("127.0.0.1:0");
    REQUIRE(a.ok());
    auto s = Server::Start(*rt, *a, std::move(o), Echo(&seen));
    REQUIRE(s.ok());
    server = *std::move(s);
  }
  ~Fixture() {
    server->Stop();
    rt->Stop();
  }
  Seen seen;
  std::unique_ptr<io::Runtime> rt;
  std::unique_ptr<Server> server;
};

TEST_CASE("http server: keep-alive, pipelining, bodies by length and chunked", "[s3][http]") {
  Fixture f;
  Client c(f.server->port());
  c.Send("GET /a HTTP/1.1\r\nHost: h\r\nX-Tag: one\r\n\r\n");
  Client::Response r = c.Read();
  CHECK(r.status == 200);
  CHECK(r.Value("x-tag") == "one");
  CHECK(r.body == "len=0 sha=" + Sha256Hex(""));
  CHECK(!r.Value("date").empty());

  // Two requests in one write, answered in order on the same connection.
  c.Send("PUT /b HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nX-Tag: two\r\n\r\nhello"
         "PUT /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nX-Tag: three\r\n\r\n"
         "3\r\nabc\r\n4;ext=1\r\ndefg\r\n0\r\n\r\n");
  r = c.Read();
  CHECK(r.Value("x-tag") == "two");
  CHECK(r.body == "len=5 sha=" + Sha256Hex("hello"));
  r = c.Read();
  CHECK(r.Value("x-tag") == "three");
  CHECK(r.body == "len=7 sha=" + Sha256Hex("abcdefg"));

  // A large body in many writes.
  const std::string big(3 << 20, 'z');
  c.Send("PUT /big HTTP/1.1\r\nHost: h\r\nContent-Length: " + std::to_string(big.size()) +
         "\r\n\r\n");
  for (size_t at = 0; at < big.size(); at += 100000) c.Send(big.substr(at, 100000));
  r = c.Read();
  CHECK(r.body == "len=" + std::to_string(big.size()) + " sha=" + Sha256Hex(big));

  // A streamed response.
  c.Send("GET /stream HTTP/1.1\r\nHost: h\r\n\r\n");
  r = c.Read();
  CHECK(r.body == "abcdefghi");
  // HEAD gets the head only (the next response parses cleanly after it).
  c.Send("HEAD /stream HTTP/1.1\r\nHost: h\r\n\r\nGET /x HTTP/1.1\r\nHost: h\r\n\r\n");
  Client::Response head = c.Read(/*head=*/true);
  CHECK(head.status == 200);
  CHECK(head.Value("content-length") == "9");
  CHECK(c.Read().body == "len=0 sha=" + Sha256Hex(""));  // framing intact after it
  CHECK(f.seen.requests.load() == 7);

  // Connection: close is honoured.
  c.Send("GET /last HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  r = c.Read();
  CHECK(r.status == 200);
  CHECK(r.Value("connection") == "close");
  CHECK(c.Closed());
}

TEST_CASE("http server: 100-continue and unread bodies", "[s3][http]") {
  Fixture f;
  {
    Client c(f.server->port());
    c.Send("PUT /k HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
    Client::Response cont = c.Read();
    CHECK(cont.status == 100);
    c.Send("body");
    Client::Response r = c.Read();
    CHECK(r.status == 200);
    CHECK(r.body == "len=4 sha=" + Sha256Hex("body"));
  }
  {
    // No body to invite: "100 Continue" comes before the answer all the same, and the
    // connection carries the next 100-continue request (the aws CLI's sync: an empty file's
    // PUT, then another's; botocore misreads the second answer after a lone final one).
    Client c(f.server->port());
    c.Send("PUT /e HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nExpect: 100-continue\r\n\r\n");
    CHECK(c.Read().status == 100);
    Client::Response r = c.Read();
    CHECK(r.status == 200);
    CHECK(r.body == "len=0 sha=" + Sha256Hex(""));
    c.Send("PUT /k HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
    CHECK(c.Read().status == 100);
    c.Send("body");
    r = c.Read();
    CHECK(r.status == 200);
    CHECK(r.body == "len=4 sha=" + Sha256Hex("body"));
    // Answered without reading, too.
    c.Send("PUT /noread HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nExpect: 100-continue\r\n\r\n");
    CHECK(c.Read().status == 100);
    r = c.Read();
    CHECK(r.status == 200);
    CHECK(r.body == "ignored\n");
    CHECK(r.Value("connection").empty());
    c.Send("GET /after HTTP/1.1\r\nHost: h\r\n\r\n");
    CHECK(c.Read().body == "len=0 sha=" + Sha256Hex(""));
  }
  {
    // Answered without reading: a small body is skipped and the connection goes on ...
    Client c(f.server->port());
    c.Send("PUT /noread HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789"
           "GET /after HTTP/1.1\r\nHost: h\r\n\r\n");
    CHECK(c.Read().body == "ignored\n");
    CHECK(c.Read().body == "len=0 sha=" + Sha256Hex(""));
  }
  {
    // ... a large one closes it, and so does a 100-continue never granted.
    Client c(f.server->port());
    c.Send("PUT /noread HTTP/1.1\r\nHost: h\r\nContent-Length: 100000000\r\n\r\nxyz");
    CHECK(c.Read().body == "ignored\n");
    CHECK(c.Closed());
  }
  {
    Client c(f.server->port());
    c.Send("PUT /noread HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    Client::Response r = c.Read();
    CHECK(r.status == 200);
    CHECK(r.Value("connection") == "close");  // said, so that no client reuses it
    CHECK(c.Closed());
  }
}

TEST_CASE("http server: framing errors, timeouts and vanishing clients", "[s3][http]") {
  ServerOptions o;
  o.idle_timeout = absl::Milliseconds(300);
  o.limits.max_header_bytes = 1024;
  Fixture f(o);
  {
    Client c(f.server->port());
    c.Send("GET / HTTP/1.1\r\nHost: h\r\nBad Header: x\r\n\r\n");
    Client::Response r = c.Read();
    CHECK(r.status == 400);
    CHECK(r.Value("connection") == "close");
    CHECK(!r.body.empty());
    CHECK(c.Closed());
  }
  {
    Client c(f.server->port());
    c.Send("GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + std::string(2000, 'v') + "\r\n\r\n");
    CHECK(c.Read().status == 431);
  }
  {
    Client c(f.server->port());
    c.Send("PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n");
    CHECK(c.Read().status == 400);
  }
  {
    Client c(f.server->port());  // idle: closed without a word
    CHECK(c.Closed());
  }
  {
    Client c(f.server->port());  // half a head, then silence: 408
    c.Send("GET / HTTP/1.1\r\nHo");
    CHECK(c.Read().status == 408);
  }
  {
    const int before = f.seen.body_errors.load();
    Client c(f.server->port());  // the body stops short and the client goes
    c.Send("PUT /k HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\nonly this");
    c.HalfClose();
    CHECK(c.Closed());
    for (int i = 0; i < 200 && f.seen.body_errors.load() == before; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    CHECK(f.seen.body_errors.load() == before + 1);
  }
  {
    const int before = f.seen.body_errors.load();
    Client c(f.server->port());  // malformed chunked framing
    c.Send("PUT /k HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    CHECK(c.Closed());
    CHECK(f.seen.body_errors.load() == before + 1);
  }
  // The server still serves.
  Client c(f.server->port());
  c.Send("GET /ok HTTP/1.1\r\nHost: h\r\n\r\n");
  CHECK(c.Read().status == 200);
}

TEST_CASE("http server: stopping ends open connections", "[s3][http]") {
  Fixture f;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 8; ++i) clients.push_back(std::make_unique<Client>(f.server->port()));
  clients[0]->Send("PUT /k HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\npartial");
  for (int i = 0; i < 200 && f.server->connections() < 8; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(f.server->connections() == 8);
  const auto t0 = std::chrono::steady_clock::now();
  f.server->Stop();
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  CHECK(f.server->connections() == 0);
  for (auto& c : clients) CHECK(c->Closed());
}

}  // namespace
}  // namespace openlake::http

// The HTTP/1.1 server (see server.h).
#include "http/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "http/date.h"

#include "openlake/log.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::http {
namespace {

std::string_view Reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return status < 400 ? "OK" : "Error";
  }
}

// Formatted once per second per reactor thread.
std::string HttpDate() {
  thread_local time_t last = 0;
  thread_local std::string text;
  const time_t now = time(nullptr);
  if (now != last) {
    text = FormatHttpDate(absl::FromTimeT(now));
    last = now;
  }
  return text;
}

}  // namespace

// ---- Connections

// Received bytes. Grows without zero-filling: resizing a std::string would write every byte of
// each 256 KiB read before the kernel does (a memset per request, the top of a GET's profile).
class RecvBuffer {
 public:
  std::string_view view() const { return std::string_view(data_.get(), len_); }
  size_t size() const { return len_; }
  void EraseFront(size_t n) {
    if (n < len_) std::memmove(data_.get(), data_.get() + n, len_ - n);
    len_ -= n;
  }
  // Room for `n` more bytes at the end.
  char* Reserve(size_t n) {
    if (cap_ - len_ < n) {
      const size_t cap = std::max(len_ + n, 2 * cap_);
      std::unique_ptr<char[]> bigger(new char[cap]);  // default-initialised: not zeroed
      if (len_ > 0) std::memcpy(bigger.get(), data_.get(), len_);
      data_ = std::move(bigger);
      cap_ = cap;
    }
    return data_.get() + len_;
  }
  void Commit(size_t n) { len_ += n; }

 private:
  std::unique_ptr<char[]> data_;
  size_t len_ = 0;
  size_t cap_ = 0;
};

struct Exchange::Conn {
  Server* server = nullptr;
  const ServerOptions* opts = nullptr;
  io::Reactor* r = nullptr;
  int fd = -1;
  RecvBuffer buf;  // received, not yet consumed from `pos` on
  size_t pos = 0;

  std::string_view Avail() const { return buf.view().substr(pos); }

  // Reads more into buf: bytes read, 0 at the peer's end, -errno (-ETIMEDOUT when nothing
  // came for `wait`).
  io::Task<int32_t> RecvSome() { return RecvSome(opts->idle_timeout); }
  io::Task<int32_t> RecvSome(absl::Duration wait) {
    if (pos > 0 && (pos == buf.size() || pos > buf.size() / 2)) {
      buf.EraseFront(pos);
      pos = 0;
    }
    const size_t len = opts->read_size;
    char* dst = buf.Reserve(len);
    io::Reactor& rr = *r;
    const int fdv = fd;
    auto recv = [&rr, fdv, dst, len](io::Completion* c) { rr.Recv(fdv, dst, len, 0, c); };
    const int32_t n = co_await io::TimedOp(rr, wait, recv);
    if (n > 0) buf.Commit(static_cast<size_t>(n));
    co_return n;
  }

  io::Task<absl::Status> SendAll(std::string_view data) {
    io::Reactor& rr = *r;
    const int fdv = fd;
    while (!data.empty()) {
      const char* p = data.data();
      const size_t len = data.size();
      auto send = [&rr, fdv, p, len](io::Completion* c) { rr.Send(fdv, p, len, MSG_NOSIGNAL, c); };
      const int32_t n = co_await io::TimedOp(rr, opts->send_timeout, send);
      if (n <= 0) co_return ErrnoStatus(n == 0 ? EPIPE : -n, "send");
      data.remove_prefix(static_cast<size_t>(n));
    }
    co_return absl::OkStatus();
  }
};

std::string Exchange::peer_address() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(c_->fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  char text[INET6_ADDRSTRLEN] = {};
  const void* addr = nullptr;
  if (ss.ss_family == AF_INET) {
    addr = &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr;
  } else if (ss.ss_family == AF_INET6) {
    addr = &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr;
  } else {
    return "";
  }
  if (inet_ntop(ss.ss_family, addr, text, sizeof(text)) == nullptr) return "";
  return text;
}

Exchange::Exchange(Conn* c, Request req) : c_(c), req_(std::move(req)) {
  switch (req_.framing) {
    case BodyFraming::kNone:
      body_done_ = true;
      break;
    case BodyFraming::kLength:
      body_left_ = req_.content_length;
      body_done_ = body_left_ == 0;
      break;
    case BodyFraming::kChunked:
      chunked_ = std::make_unique<ChunkedDecoder>(c->opts->limits);
      break;
  }
}

const std::vector<Header>& Exchange::trailers() const {
  static const std::vector<Header> kNone;
  return chunked_ ? chunked_->trailers() : kNone;
}

io::Task<absl::StatusOr<std::string_view>> Exchange::ReadBody() {
  if (body_done_) co_return std::string_view();
  if (req_.expect_continue && !continue_sent_ && !head_sent_) {
    continue_sent_ = true;
    OL_CO_RETURN_IF_ERROR(co_await c_->SendAll("HTTP/1.1 100 Continue\r\n\r\n"));
  }
  while (true) {
    std::string_view avail = c_->Avail();
    if (!chunked_) {
      if (!avail.empty()) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(avail.size(), body_left_));
        c_->pos += n;
        body_left_ -= n;
        body_done_ = body_left_ == 0;
        bytes_in_ += n;
        co_return avail.substr(0, n);
      }
    } else {
      while (!avail.empty()) {
        ChunkedDecoder::Event ev;
        const size_t used = chunked_->Next(avail, &ev);
        c_->pos += used;
        avail.remove_prefix(used);
        switch (ev.kind) {
          case ChunkedDecoder::Event::kData:
            bytes_in_ += ev.data.size();
            co_return ev.data;  // a view into c_->buf, before pos
          case ChunkedDecoder::Event::kChunk:
            chunk_ext_ = std::string(ev.extensions);
            break;
          case ChunkedDecoder::Event::kEnd:
            body_done_ = true;
            co_return std::string_view();
          case ChunkedDecoder::Event::kError:
            failed_ = true;
            co_return absl::InvalidArgumentError("malformed chunked body: " + ev.error);
          case ChunkedDecoder::Event::kNeedMore:
            break;
        }
        if (used == 0) break;
      }
    }
    const int32_t n = co_await c_->RecvSome();
    if (n == 0) {
      failed_ = true;
      co_return absl::DataLossError("the client closed the connection before the body was whole");
    }
    if (n < 0) {
      failed_ = true;
      if (n == -ETIMEDOUT) co_return absl::DeadlineExceededError("no body bytes for too long");
      co_return ErrnoStatus(-n, "recv");
    }
  }
}

std::string Exchange::Head(uint64_t length) {
  // A final answer to "Expect: 100-continue" that came without "100 Continue" leaves botocore
  // (boto3, the aws CLI) holding that answer's status line for the next response on the same
  // connection: it misreads that response and waits out its read timeout (boto/botocore#3755;
  // the aws CLI's sync met it on an empty file's PUT followed by another). So a request
  // without a body (nothing to invite) still gets "100 Continue" first, and one whose body
  // was never invited closes the connection after this answer, and says so.
  std::string h;
  if (req_.expect_continue && !continue_sent_) {
    if (body_done_) {
      h = "HTTP/1.1 100 Continue\r\n\r\n";
      continue_sent_ = true;
    } else {
      close_after_ = true;
    }
  }
  h.append(StrCat("HTTP/1.1 ", status_, " ", Reason(status_), "\r\n"));
  bool has_date = false;
  for (const auto& [name, value] : headers_) {
    h.append(name).append(": ").append(value).append("\r\n");
    has_date = has_date || EqualsLower(name, "date");
  }
  if (!has_date) h.append("Date: ").append(HttpDate()).append("\r\n");
  if (status_ >= 200 && status_ != 204 && status_ != 304) {
    h.append("Content-Length: ").append(std::to_string(length)).append("\r\n");
  }
  const bool close = close_after_ || !req_.keep_alive;
  if (close) h.append("Connection: close\r\n");
  h.append("\r\n");
  return h;
}

io::Task<absl::Status> Exchange::SendAll(std::string_view data) {
  absl::Status s = co_await c_->SendAll(data);
  if (!s.ok()) failed_ = true;
  if (s.ok()) bytes_out_ += data.size();
  co_return s;
}

io::Task<absl::Status> Exchange::Respond(std::string_view body) {
  if (head_sent_) co_return absl::FailedPreconditionError("response already started");
  head_sent_ = true;
  std::string out = Head(body.size());
  if (req_.method != "HEAD") out.append(body);
  co_return co_await SendAll(out);
}

io::Task<absl::Status> Exchange::StartResponse(uint64_t length) {
  if (head_sent_) co_return absl::FailedPreconditionError("response already started");
  head_sent_ = true;
  response_left_ = req_.method == "HEAD" ? 0 : length;
  std::string head = Head(length);
  if (response_left_ == 0) co_return co_await SendAll(head);
  pending_head_ = std::move(head);
  co_return absl::OkStatus();
}

io::Task<absl::Status> Exchange::FlushHead() {
  if (pending_head_.empty()) co_return absl::OkStatus();
  const std::string head = std::move(pending_head_);
  pending_head_.clear();
  co_return co_await SendAll(head);
}

io::Task<absl::Status> Exchange::Write(std::string_view data) {
  if (!head_sent_) co_return absl::FailedPreconditionError("StartResponse first");
  if (data.size() > response_left_) {
    co_return absl::InvalidArgumentError("more bytes than the announced Content-Length");
  }
  response_left_ -= data.size();
  if (!pending_head_.empty() && data.size() <= (64 << 10)) {
    std::string out = std::move(pending_head_);
    pending_head_.clear();
    out.append(data);
    co_return co_await SendAll(out);
  }
  OL_CO_RETURN_IF_ERROR(co_await FlushHead());
  co_return co_await SendAll(data);
}

// ---- The server

Server::Server(io::Runtime& rt, ServerOptions options, Handler handler)
    : rt_(rt), opts_(std::move(options)), handler_(std::move(handler)) {}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(io::Runtime& rt,
                                                      const io::SocketAddress& addr,
                                                      ServerOptions options, Handler handler) {
  std::unique_ptr<Server> s(new Server(rt, std::move(options), std::move(handler)));
  Server* self = s.get();
  absl::StatusOr<io::SocketAddress> bound = absl::InternalError("not started");
  // Reactor 0 accepts; each connection goes to a reactor in turn (a message, which never
  // fails) and is served there.
  const absl::Status ran = rt.RunOn(0, [self, &addr, &bound] {
    io::AcceptorOptions ao;
    ao.name = "http";
    ao.max_connections = self->opts_.max_connections;
    ao.max_per_peer = self->opts_.max_per_client;
    ao.reserve = self->opts_.reserve_serves ? self->opts_.reserve : 0;
    ao.on_refused = [self](int fd, std::string_view why) {
      // A fresh socket's send buffer is empty: this one small write does not block.
      const std::string out = self->ErrorResponse(503, StrCat("refused: ", why, "; retry"));
      (void)send(fd, out.data(), out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    };
    absl::StatusOr<std::unique_ptr<io::Acceptor>> a =
        io::Acceptor::Create(*io::Reactor::Current(), std::move(ao));
    if (!a.ok()) {
      bound = a.status();
      return;
    }
    self->acceptor_ = *std::move(a);
    bound = self->acceptor_->Listen(addr, io::ListenOptions(), [self](io::Connection conn) {
      const unsigned target = self->next_reactor_++ % self->rt_.size();
      io::Reactor::Current()->SendTo(
          target, [self, c = std::move(conn)]() mutable { io::Spawn(self->Serve(std::move(c))); });
    });
  });
  if (!ran.ok()) return ran;
  if (!bound.ok()) return bound.status();
  s->addr_ = *bound;
  s->port_ = bound->port();
  return s;
}

std::string Server::ErrorResponse(int status, std::string_view why) const {
  std::string type = "text/plain", extra;
  const std::string body =
      opts_.error_body ? opts_.error_body(status, why, &type, &extra) : StrCat(why, "\n");
  if (status == 503) extra.append("Retry-After: 1\r\n");
  return StrCat("HTTP/1.1 ", status, " ", Reason(status), "\r\nDate: ", HttpDate(),
                "\r\nContent-Type: ", type, "\r\n", extra, "Content-Length: ", body.size(),
                "\r\nConnection: close\r\n\r\n", body);
}

size_t Server::connections() const { return acceptor_ ? acceptor_->open() : 0; }

io::Task<void> Server::Serve(io::Connection conn) {
  Exchange::Conn c;
  c.server = this;
  c.opts = &opts_;
  c.r = io::Reactor::Current();
  c.fd = conn.fd();
  const bool reserve = conn.reserve();
  const absl::Duration head_timeout =
      reserve ? std::min(opts_.head_timeout, opts_.reserve_head_timeout) : opts_.head_timeout;
  const absl::Duration idle_timeout =
      reserve ? std::min(opts_.idle_timeout, opts_.reserve_head_timeout) : opts_.idle_timeout;
  bool first = true;
  while (!stopping_.load()) {
    // A request head: idle_timeout for its first byte, head_timeout from there for the rest.
    // Until it is whole the connection holds its place without work: a full server may take
    // the place back for a new client (a second after a new connection or a head's start,
    // sooner between requests).
    conn.SetEvictableAfter(first ? absl::Seconds(1) : absl::Milliseconds(100));
    first = false;
    Request req;
    HeadResult h;
    size_t searched = 0;
    bool ended = false;
    absl::Time head_deadline = absl::InfiniteFuture();
    while (true) {
      const std::string_view avail = c.Avail();
      if (!avail.empty() && HeadMayBeComplete(avail, searched, opts_.limits)) {
        h = ParseRequestHead(avail, opts_.limits, &req);
        if (h.state != HeadResult::kIncomplete) break;
      }
      searched = avail.size();
      absl::Duration wait = idle_timeout;
      if (!avail.empty()) {
        const absl::Time now = absl::Now();
        if (head_deadline == absl::InfiniteFuture()) head_deadline = now + head_timeout;
        wait = std::min(wait, head_deadline - now);
      }
      int32_t n = -ETIMEDOUT;
      if (wait > absl::ZeroDuration()) n = co_await c.RecvSome(wait);
      if (n > 0) continue;
      if (n == -ETIMEDOUT && !c.Avail().empty()) {
        h.state = HeadResult::kError;
        h.status = 408;
        h.error = "the request head did not arrive in time";
        break;
      }
      ended = true;  // closed, idle between requests, or broken
      break;
    }
    if (ended) break;
    conn.ClearEvictable();
    if (h.state == HeadResult::kComplete && reserve &&
        !(opts_.reserve_serves && opts_.reserve_serves(req))) {
      h.state = HeadResult::kError;
      h.status = 503;
      h.error = "the server is at its connection limit; retry";
    }
    if (h.state == HeadResult::kError) {
      (void)co_await c.SendAll(ErrorResponse(h.status, h.error));
      break;
    }
    c.pos += h.consumed;

    Exchange ex(&c, std::move(req));
    co_await handler_(ex);
    if (!ex.failed_) (void)co_await ex.FlushHead();  // a streamed response never written to
    if (!ex.head_sent_ && !ex.failed_) {
      ex.SetStatus(500);
      ex.CloseAfter();
      (void)co_await ex.Respond("");
    }
    if (ex.failed_ || ex.response_left_ > 0 || ex.close_after_ || !ex.req_.keep_alive) break;
    if (reserve) break;  // one request per place taken from the reserve
    // A body the handler left unread: skip it if it is small, else close. A client that waits
    // for "100 Continue" it never got has not sent it.
    if (!ex.body_done_) {
      if (ex.req_.expect_continue && !ex.continue_sent_) break;
      if (!ex.chunked_ && ex.body_left_ > opts_.max_drain) break;  // not worth waiting for
      uint64_t drained = 0;
      bool ok = true;
      while (!ex.body_done_ && drained <= opts_.max_drain) {
        auto piece = co_await ex.ReadBody();
        if (!piece.ok()) {
          ok = false;
          break;
        }
        drained += piece->size();
      }
      if (!ok || !ex.body_done_) break;
    }
  }
  // `conn` goes with the frame: the socket closes and its place among max_connections is free.
}

void Server::Stop() {
  if (stopping_.exchange(true) || acceptor_ == nullptr) return;
  io::Acceptor* a = acceptor_.get();
  if (rt_.running()) (void)rt_.RunOn(0, [a] { a->StopAccepting(); });
  a->ShutdownAll();  // in-flight exchanges see their reads and sends fail
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while ((a->open() > 0 || (rt_.running() && a->listening())) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  if (a->open() > 0) {
    OL_LOG(kWarning) << "http: " << a->open() << " connections still open after stop";
  }
}

Server::~Server() { Stop(); }

}  // namespace openlake::http

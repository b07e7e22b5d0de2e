#include "net/rpc_channel.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <coroutine>
#include <cstring>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "net/frame.h"

#include "openlake/log.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::net {
namespace {

// Each connection's receive buffer starts this size and goes back to it after a larger frame.
constexpr size_t kBaseInput = 64 << 10;
// Frames of the handshake (hello, auth answer, or a refusal where the hello would be) are small.
constexpr uint32_t kMaxHandshakeFrame = 4096;
// Frames gathered into one sendmsg (two entries each: header and payload).
constexpr size_t kMaxIov = 64;

absl::Status CodeStatus(uint32_t code, std::string_view message) {
  if (code == 0) return absl::OkStatus();
  if (code > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::InternalError(StrCat("server answered unknown status code ", code, ": ", message));
  }
  return absl::Status(static_cast<absl::StatusCode>(code), AV(message));
}

// The request's aux: its budget in ms, clamped to 1 .. 2^32 − 1 (0 would mean "none").
uint32_t BudgetMs(absl::Duration left) {
  const int64_t ms = absl::ToInt64Milliseconds(left);
  if (ms < 1) return 1;
  if (ms > static_cast<int64_t>(UINT32_MAX)) return UINT32_MAX;
  return static_cast<uint32_t>(ms);
}

absl::Duration Remaining(absl::Time deadline) {
  return std::max(absl::ZeroDuration(), deadline - absl::Now());
}

// A call waiting for its answer; lives in the calling coroutine's frame. Whoever completes it
// (the receive loop, a broken connection, the channel's destruction, the deadline) removes it
// from State::waiting first, so exactly one of them does.
struct Pending {
  uint64_t id = 0;
  std::coroutine_handle<> h = nullptr;
  std::optional<absl::StatusOr<std::string>> result;
  io::TimerId timer;

  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> handle) noexcept { h = handle; }
  absl::StatusOr<std::string> await_resume() { return std::move(*result); }
};

// A call waiting for the connect another call started; lives in its coroutine's frame.
struct ConnectWait {
  std::coroutine_handle<> h = nullptr;
  absl::Status status;

  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> handle) noexcept { h = handle; }
  absl::Status await_resume() const { return status; }
};

// A request queued on a connection: the header, and the payload moved in from the call.
struct OutFrame {
  char header[kFrameHeaderBytes];
  std::string payload;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Internals. Everything below runs on the channel's reactor thread.

struct RpcChannel::State : std::enable_shared_from_this<State> {
  struct Conn;
  struct RecvOp final : io::Completion {
    Conn* c = nullptr;
    void Complete(int32_t res, uint32_t) noexcept override { c->s->OnRecv(c, res); }
  };
  struct SendOp final : io::Completion {
    Conn* c = nullptr;
    void Complete(int32_t res, uint32_t) noexcept override { c->s->OnSent(c, res); }
  };

  // One connection, from the end of its handshake until its last operation has come back after
  // it broke. Owned by State::conns.
  struct Conn {
    State* s = nullptr;
    uint64_t id = 0;
    int fd = -1;
    RecvOp recv_op;
    SendOp send_op;
    int ops = 0;  // operations in flight, plus a guard while input is handled
    bool broken = false;
    // Received: [beg, end) of `in` not yet consumed.
    std::unique_ptr<char[]> in;
    size_t cap = 0, beg = 0, end = 0;
    // Queued requests; `out_offset` bytes of the front one are sent. std::deque keeps the
    // frames in place as more are queued behind a send in flight.
    std::deque<OutFrame> out;
    size_t out_offset = 0;
    bool sending = false;
    io::TimerId stall;
    iovec iov[kMaxIov];
    msghdr msg{};
  };

  State(io::Reactor& r, io::SocketAddress a, RpcChannelOptions o)
      : reactor(r), addr(a), peer(a.ToString()), options(std::move(o)) {}

  void RegisterExitHook();
  void OnReactorExit();
  // Shuts the connection down, fails every waiting call (Cancelled) and wakes the callers
  // waiting for a connect. Called by ~RpcChannel.
  void Close();
  // Makes `fd` (handshake done; `leftover` bytes already read past it) the live connection.
  void Adopt(int fd, std::string_view leftover);
  void Send(Conn* c, OutFrame f);
  void Flush(Conn* c);
  void OnSent(Conn* c, int32_t res);
  void OnStall(uint64_t conn_id);
  void ArmRecv(Conn* c);
  void OnRecv(Conn* c, int32_t res);
  void ProcessInput(Conn* c);
  // Completes a waiting call: its timer is cancelled and it resumes on a later loop turn (never
  // inside the receive loop, whose state a resumed caller could change).
  void Finish(Pending* p, absl::StatusOr<std::string> result);
  void OnDeadline(Pending* p);
  // Ends `c`: shuts its socket down and, when it is the live connection, fails every waiting
  // call with `why`. Its descriptor is closed once its operations have come back.
  void Break(Conn* c, const absl::Status& why);
  void MaybeFinalize(Conn* c);

  io::Reactor& reactor;
  const io::SocketAddress addr;
  const std::string peer;  // addr as text, for messages
  const RpcChannelOptions options;
  bool closed = false;        // the RpcChannel is gone
  bool reactor_gone = false;  // the reactor's ring is torn down (AtExit ran)
  bool exit_hook = false;
  // A connect in progress (its socket, to shut down on Close) and the calls waiting for it.
  bool connecting = false;
  int connecting_fd = -1;
  std::vector<ConnectWait*> connect_waiters;
  Conn* live = nullptr;                      // the connection new calls use
  std::vector<std::unique_ptr<Conn>> conns;  // the live one and broken ones draining
  // Set while `conns` is not empty: operations in flight point into this state.
  std::shared_ptr<State> keep;
  absl::flat_hash_map<uint64_t, Pending*> waiting;  // calls on the live connection, by id
  uint64_t next_id = 1;
  uint64_t next_conn_id = 1;
  absl::Status last_error;  // why the last connection broke
};

void RpcChannel::State::RegisterExitHook() {
  if (exit_hook) return;
  exit_hook = true;
  // A runtime stopped with a connection open drops the operations in flight; their memory is
  // freed here, once the ring is gone. The hook holds no reference: a channel gone by then
  // needs nothing.
  std::weak_ptr<State> weak = weak_from_this();
  reactor.AtExit([weak] {
    if (std::shared_ptr<State> s = weak.lock()) s->OnReactorExit();
  });
}

void RpcChannel::State::OnReactorExit() {
  reactor_gone = true;
  for (auto& c : conns) close(c->fd);
  conns.clear();
  live = nullptr;
  // Suspended calls are dropped with the runtime (io/task.h); forget them.
  waiting.clear();
  connect_waiters.clear();
  if (connecting_fd >= 0) close(connecting_fd);
  connecting_fd = -1;
  keep.reset();  // the caller holds a reference of its own
}

void RpcChannel::State::Close() {
  closed = true;
  if (reactor_gone) return;
  if (connecting_fd >= 0) shutdown(connecting_fd, SHUT_RDWR);  // the dialing call gives up
  std::vector<ConnectWait*> waiters = std::move(connect_waiters);
  connect_waiters.clear();
  for (ConnectWait* w : waiters) {
    w->status = absl::CancelledError(StrCat("channel to ", peer, " closed"));
    reactor.Defer([w] { w->h.resume(); });
  }
  if (live != nullptr) Break(live, absl::CancelledError(StrCat("channel to ", peer, " closed")));
}

void RpcChannel::State::Adopt(int fd, std::string_view leftover) {
  auto owned = std::make_unique<Conn>();
  Conn* c = owned.get();
  c->s = this;
  c->id = next_conn_id++;
  c->fd = fd;
  c->recv_op.c = c;
  c->send_op.c = c;
  c->cap = std::max(kBaseInput, leftover.size());
  c->in.reset(new char[c->cap]);  // not zero-filled: recv writes it
  std::memcpy(c->in.get(), leftover.data(), leftover.size());
  c->end = leftover.size();
  if (conns.empty()) keep = shared_from_this();
  conns.push_back(std::move(owned));
  live = c;
  ArmRecv(c);
}

// ---- Sending

void RpcChannel::State::Send(Conn* c, OutFrame f) {
  c->out.push_back(std::move(f));
  Flush(c);
}

void RpcChannel::State::Flush(Conn* c) {
  if (c->sending || c->broken || c->out.empty()) return;
  size_t n = 0;
  size_t skip = c->out_offset;  // applies to the front frame only
  for (OutFrame& f : c->out) {
    if (n + 2 > kMaxIov) break;
    if (skip < kFrameHeaderBytes) {
      c->iov[n++] = iovec{f.header + skip, kFrameHeaderBytes - skip};
      skip = 0;
    } else {
      skip -= kFrameHeaderBytes;
    }
    if (f.payload.size() > skip)
      c->iov[n++] = iovec{f.payload.data() + skip, f.payload.size() - skip};
    skip = 0;
  }
  c->msg = msghdr{};
  c->msg.msg_iov = c->iov;
  c->msg.msg_iovlen = n;
  c->sending = true;
  ++c->ops;
  reactor.SendMsg(c->fd, &c->msg, 0, &c->send_op);
  // A peer that stops reading would hold the queue forever: past call_timeout without the
  // send coming back, the connection is given up.
  std::weak_ptr<State> weak = weak_from_this();
  const uint64_t conn_id = c->id;
  c->stall = reactor.After(options.call_timeout, [weak, conn_id] {
    if (std::shared_ptr<State> s = weak.lock()) s->OnStall(conn_id);
  });
}

void RpcChannel::State::OnSent(Conn* c, int32_t res) {
  --c->ops;
  c->sending = false;
  reactor.CancelTimer(c->stall);
  if (c->broken) return MaybeFinalize(c);
  if (res == -EINTR || res == -EAGAIN) return Flush(c);
  if (res <= 0) {
    const std::string why = res == 0 ? std::string("send took nothing")
                                     : std::string(ErrnoStatus(res, "send").message());
    return Break(c, absl::UnavailableError(StrCat("connection to ", peer, " lost: ", why)));
  }
  // Partial sends are normal for large frames: the rest goes in the next sendmsg.
  size_t left = static_cast<size_t>(res);
  while (left > 0 && !c->out.empty()) {
    const size_t rest = kFrameHeaderBytes + c->out.front().payload.size() - c->out_offset;
    if (left >= rest) {
      left -= rest;
      c->out_offset = 0;
      c->out.pop_front();
    } else {
      c->out_offset += left;
      left = 0;
    }
  }
  Flush(c);
}

void RpcChannel::State::OnStall(uint64_t conn_id) {
  for (auto& c : conns) {
    if (c->id != conn_id || c->broken || !c->sending) continue;
    Break(c.get(),
          absl::UnavailableError(StrCat("connection to ", peer, " lost: sending stalled for ",
                                        absl::FormatDuration(options.call_timeout))));
    return;
  }
}

// ---- Receiving

void RpcChannel::State::ArmRecv(Conn* c) {
  if (c->broken) return;
  size_t have = c->end - c->beg;
  if (have == 0 && c->cap > kBaseInput) {  // a large frame is done: back to the base buffer
    c->in.reset(new char[kBaseInput]);
    c->cap = kBaseInput;
  }
  if (have == 0) c->beg = c->end = 0;
  // Room for the rest of the frame whose header is here (ProcessInput has validated it), or
  // for a header.
  size_t need = kFrameHeaderBytes;
  if (have >= kFrameHeaderBytes) {
    FrameHeader h;
    if (DecodeHeader(c->in.get() + c->beg, options.max_frame_bytes, &h).ok()) {
      need = kFrameHeaderBytes + h.length;
    }
  }
  if (c->beg + need > c->cap || c->end == c->cap) {
    if (need > c->cap) {
      std::unique_ptr<char[]> bigger(new char[need]);
      std::memcpy(bigger.get(), c->in.get() + c->beg, have);
      c->in = std::move(bigger);
      c->cap = need;
    } else {
      std::memmove(c->in.get(), c->in.get() + c->beg, have);
    }
    c->beg = 0;
    c->end = have;
  }
  ++c->ops;
  reactor.Recv(c->fd, c->in.get() + c->end, c->cap - c->end, 0, &c->recv_op);
}

void RpcChannel::State::OnRecv(Conn* c, int32_t res) {
  if (c->broken) {
    --c->ops;
    return MaybeFinalize(c);
  }
  if (res <= 0 && res != -EINTR && res != -EAGAIN) {
    --c->ops;
    const std::string why = res == 0 ? std::string("closed by the server")
                                     : std::string(ErrnoStatus(res, "recv").message());
    return Break(c, absl::UnavailableError(StrCat("connection to ", peer, " lost: ", why)));
  }
  if (res > 0) {
    c->end += static_cast<size_t>(res);
    ProcessInput(c);  // the recv's count stays taken meanwhile: a Break cannot free `c`
  }
  --c->ops;
  if (c->broken) return MaybeFinalize(c);
  ArmRecv(c);
}

void RpcChannel::State::ProcessInput(Conn* c) {
  while (!c->broken && c->end - c->beg >= kFrameHeaderBytes) {
    FrameHeader h;
    const absl::Status st = DecodeHeader(c->in.get() + c->beg, options.max_frame_bytes, &h);
    if (!st.ok()) {
      return Break(c, absl::UnavailableError(StrCat("connection to ", peer,
                                                    " lost: malformed frame: ", st.message())));
    }
    if (h.type != FrameType::kResponse) {
      return Break(
          c, absl::UnavailableError(StrCat("connection to ", peer, " lost: unexpected frame type ",
                                           static_cast<int>(h.type), " from the server")));
    }
    const size_t need = kFrameHeaderBytes + h.length;
    if (c->end - c->beg < need) return;  // ArmRecv makes room for the rest
    const char* payload = c->in.get() + c->beg + kFrameHeaderBytes;
    c->beg += need;
    auto it = waiting.find(h.request_id);
    if (it == waiting.end()) continue;  // its call has timed out: dropped
    Pending* p = it->second;
    waiting.erase(it);
    if (h.flags & kFrameFlagFd) {
      // recv without a control buffer: the kernel drops the descriptor; the call learns why.
      Finish(p, absl::FailedPreconditionError(
                    "the answer carries a descriptor, which RpcChannel does not receive"));
    } else if (h.aux != 0) {
      Finish(p, CodeStatus(h.aux, std::string_view(payload, h.length)));
    } else {
      Finish(p, std::string(payload, h.length));
    }
  }
}

// ---- Calls

void RpcChannel::State::Finish(Pending* p, absl::StatusOr<std::string> result) {
  reactor.CancelTimer(p->timer);
  p->result = std::move(result);
  reactor.Defer([p] { p->h.resume(); });
}

void RpcChannel::State::OnDeadline(Pending* p) {
  waiting.erase(p->id);  // a late answer is dropped
  p->result = absl::DeadlineExceededError(StrCat("no answer from ", peer, " before the deadline"));
  p->h.resume();  // may end the call and free *p: nothing after it
}

void RpcChannel::State::Break(Conn* c, const absl::Status& why) {
  if (c->broken) return;
  c->broken = true;
  // Ends the recv and send in flight; the descriptor is closed once both have come back.
  shutdown(c->fd, SHUT_RDWR);
  if (live == c) {
    live = nullptr;
    last_error = why;
    if (!absl::IsCancelled(why)) {
      OL_LOG_EVERY_N_SEC(kWarning, 5) << why.message();
    }
    std::vector<Pending*> failed;
    failed.reserve(waiting.size());
    for (auto& [id, p] : waiting) failed.push_back(p);
    waiting.clear();
    for (Pending* p : failed) Finish(p, why);
  }
  MaybeFinalize(c);
}

void RpcChannel::State::MaybeFinalize(Conn* c) {
  if (!c->broken || c->ops > 0) return;
  close(c->fd);
  for (size_t i = 0; i < conns.size(); ++i) {
    if (conns[i].get() != c) continue;
    conns.erase(conns.begin() + static_cast<std::ptrdiff_t>(i));  // frees *c
    break;
  }
  // The last connection gone: nothing in flight points here any more. This may free the state
  // itself (the channel and its calls are gone): every caller returns at once after this.
  if (conns.empty()) keep.reset();
}

namespace {

using State = RpcChannel::State;

// Reads one whole frame of the handshake into `*payload` (bytes past it stay in `*buf`).
io::Task<absl::Status> ReadHandshakeFrame(State* s, int fd, absl::Time deadline, std::string* buf,
                                          FrameHeader* h, std::string* payload) {
  io::Reactor& r = s->reactor;
  for (;;) {
    if (buf->size() >= kFrameHeaderBytes) {
      const absl::Status st = DecodeHeader(buf->data(), kMaxHandshakeFrame, h);
      if (!st.ok()) {
        co_return absl::UnavailableError(
            StrCat(s->peer, " did not greet with an OpenLake RPC hello: ", st.message()));
      }
      const size_t need = kFrameHeaderBytes + h->length;
      if (buf->size() >= need) {
        payload->assign(buf->data() + kFrameHeaderBytes, h->length);
        buf->erase(0, need);
        co_return absl::OkStatus();
      }
    }
    const size_t have = buf->size();
    const size_t room = 4096;
    buf->resize(have + room);
    char* dst = buf->data() + have;
    auto recv = [&r, fd, dst, room](io::Completion* c) { r.Recv(fd, dst, room, 0, c); };
    const absl::Duration left = Remaining(deadline);
    const int32_t n = co_await io::TimedOp(r, left, recv);
    buf->resize(have + static_cast<size_t>(std::max(n, 0)));
    if (n == -ETIMEDOUT) {
      co_return absl::UnavailableError(StrCat(s->peer, ": no handshake within ",
                                              absl::FormatDuration(s->options.connect_timeout)));
    }
    if (n == 0) {
      co_return absl::UnavailableError(
          StrCat(s->peer, " closed the connection during the handshake"));
    }
    if (n < 0 && n != -EINTR && n != -EAGAIN) {
      const absl::Status err = ErrnoStatus(n, "recv");
      co_return absl::UnavailableError(StrCat(s->peer, " (handshake): ", err.message()));
    }
  }
}

// Sends `bytes` (which must outlive the task) whole.
io::Task<absl::Status> SendHandshakeFrame(State* s, int fd, absl::Time deadline,
                                          std::string_view bytes) {
  io::Reactor& r = s->reactor;
  size_t done = 0;
  while (done < bytes.size()) {
    const char* src = bytes.data() + done;
    const size_t len = bytes.size() - done;
    auto send = [&r, fd, src, len](io::Completion* c) { r.Send(fd, src, len, 0, c); };
    const absl::Duration left = Remaining(deadline);
    const int32_t n = co_await io::TimedOp(r, left, send);
    if (n == -EINTR || n == -EAGAIN) continue;
    if (n <= 0) {
      const absl::Status err = ErrnoStatus(n == 0 ? EPIPE : -n, "send");
      co_return absl::UnavailableError(StrCat(s->peer, " (handshake): ", err.message()));
    }
    done += static_cast<size_t>(n);
  }
  co_return absl::OkStatus();
}

// Connects `fd` to the server and passes the hello (and the authentication when asked);
// `*rest` gets any bytes read past the handshake.
io::Task<absl::Status> Handshake(State* s, int fd, absl::Time deadline, std::string* rest) {
  io::Reactor& r = s->reactor;
  const sockaddr* sa = s->addr.sockaddr_ptr();
  const socklen_t salen = s->addr.length();
  auto connect = [&r, fd, sa, salen](io::Completion* c) { r.Connect(fd, sa, salen, c); };
  const absl::Duration left = Remaining(deadline);
  const int32_t rc = co_await io::TimedOp(r, left, connect);
  if (rc == -ETIMEDOUT) {
    co_return absl::UnavailableError(StrCat("cannot connect to ", s->peer, ": no answer within ",
                                            absl::FormatDuration(s->options.connect_timeout)));
  }
  if (rc < 0) {
    co_return absl::UnavailableError(StrCat("cannot connect to ", s->peer, ": ", strerror(-rc)));
  }
  if (s->closed) co_return absl::CancelledError(StrCat("channel to ", s->peer, " closed"));

  std::string buf;
  FrameHeader h;
  std::string payload;
  const absl::Status hello = co_await ReadHandshakeFrame(s, fd, deadline, &buf, &h, &payload);
  OL_CO_RETURN_IF_ERROR(hello);
  if (h.type == FrameType::kResponse && h.aux != 0) {  // refused: full, or a uid not allowed
    co_return CodeStatus(h.aux, payload);
  }
  if (h.type != FrameType::kHello) {
    co_return absl::UnavailableError(StrCat(s->peer, " did not greet with an OpenLake RPC hello"));
  }
  bool auth_required = false;
  uint8_t nonce[kNonceBytes];
  std::string version;
  const absl::Status decoded = DecodeHello(payload, &auth_required, nonce, &version);
  if (!decoded.ok()) {
    co_return absl::UnavailableError(StrCat(s->peer, ": bad hello: ", decoded.message()));
  }
  if (auth_required) {
    if (s->options.secret.empty()) {
      co_return absl::PermissionDeniedError(
          StrCat(s->peer, " requires the cluster's shared secret and none was given"));
    }
    FrameHeader auth;
    auth.type = FrameType::kAuth;
    std::string out;
    AppendFrame(auth, AuthMac(s->options.secret, nonce), &out);
    const absl::Status sent = co_await SendHandshakeFrame(s, fd, deadline, out);
    OL_CO_RETURN_IF_ERROR(sent);
    const absl::Status answer = co_await ReadHandshakeFrame(s, fd, deadline, &buf, &h, &payload);
    OL_CO_RETURN_IF_ERROR(answer);
    if (h.type != FrameType::kAuth) {
      co_return absl::UnavailableError(StrCat(s->peer, " did not answer the authentication"));
    }
    if (h.aux != 0) co_return CodeStatus(h.aux, payload);
  }
  *rest = std::move(buf);
  co_return absl::OkStatus();
}

// Opens a connection and makes it the live one.
io::Task<absl::Status> Dial(State* s) {
  const absl::Time deadline = absl::Now() + s->options.connect_timeout;
  // Non-blocking, although every operation goes through the ring: nothing on this socket may
  // ever block the reactor thread.
  const int fd = socket(s->addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    const absl::Status err = ErrnoStatus(errno, "socket");
    co_return absl::UnavailableError(StrCat("cannot connect to ", s->peer, ": ", err.message()));
  }
  // TCP_NODELAY and 4 MiB buffers, before the connect so that the window scale fits them.
  if (!s->addr.is_unix()) io::TuneStreamSocket(fd);
  s->connecting_fd = fd;
  std::string rest;
  absl::Status st = co_await Handshake(s, fd, deadline, &rest);
  s->connecting_fd = -1;
  if (s->closed) st = absl::CancelledError(StrCat("channel to ", s->peer, " closed"));
  if (!st.ok()) {
    close(fd);
    s->last_error = st;
    co_return st;
  }
  s->Adopt(fd, rest);
  co_return absl::OkStatus();
}

// Waits until the channel has a live connection: makes one, or waits for the connect another
// call has started (one connect at a time, whoever asks).
io::Task<absl::Status> AwaitConnection(State* s) {
  if (s->connecting) {
    ConnectWait w;
    s->connect_waiters.push_back(&w);
    const absl::Status st = co_await w;
    co_return st;
  }
  s->connecting = true;
  const absl::Status st = co_await Dial(s);
  s->connecting = false;
  std::vector<ConnectWait*> waiters = std::move(s->connect_waiters);
  s->connect_waiters.clear();
  for (ConnectWait* w : waiters) {
    w->status = st;
    s->reactor.Defer([w] { w->h.resume(); });
  }
  co_return st;
}

// The body of RpcChannel::Call. It holds the state, so a call may outlive its channel.
io::Task<absl::StatusOr<std::string>> CallOn(std::shared_ptr<State> s, uint16_t method,
                                             std::string payload, absl::Duration timeout) {
  if (s->closed) co_return absl::CancelledError(StrCat("channel to ", s->peer, " closed"));
  if (payload.size() > s->options.max_frame_bytes) {
    co_return absl::InvalidArgumentError(StrCat("request of ", payload.size(),
                                                " bytes exceeds the frame limit of ",
                                                s->options.max_frame_bytes));
  }
  if (timeout <= absl::ZeroDuration()) timeout = s->options.call_timeout;
  const absl::Time deadline = absl::Now() + timeout;
  s->RegisterExitHook();
  State* sp = s.get();
  if (s->live == nullptr) {
    const absl::Status st = co_await AwaitConnection(sp);
    if (!st.ok()) co_return st;
    if (s->closed) co_return absl::CancelledError(StrCat("channel to ", s->peer, " closed"));
    // Connected, and broken again before this call got its turn.
    if (s->live == nullptr) co_return s->last_error;
  }
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) {
    co_return absl::DeadlineExceededError(
        StrCat("no answer from ", s->peer, " before the deadline"));
  }
  FrameHeader h;
  h.type = FrameType::kRequest;
  h.method = method;
  h.length = static_cast<uint32_t>(payload.size());
  h.aux = BudgetMs(left);
  h.request_id = s->next_id++;
  OutFrame f;
  EncodeHeader(h, f.header);
  f.payload = std::move(payload);  // the payload is never copied: the queue sends it in place

  Pending p;
  p.id = h.request_id;
  Pending* pp = &p;
  s->waiting.emplace(p.id, pp);
  p.timer = s->reactor.After(left, [sp, pp] { sp->OnDeadline(pp); });
  s->Send(s->live, std::move(f));
  absl::StatusOr<std::string> result = co_await p;
  co_return std::move(result);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// RpcChannel

RpcChannel::RpcChannel(io::Reactor& reactor, io::SocketAddress addr, RpcChannelOptions options)
    : state_(std::make_shared<State>(reactor, addr, std::move(options))) {}

RpcChannel::~RpcChannel() { state_->Close(); }

io::Task<absl::StatusOr<std::string>> RpcChannel::Call(uint16_t method, std::string payload,
                                                       absl::Duration timeout) {
  return CallOn(state_, method, std::move(payload), timeout);
}

bool RpcChannel::connected() const { return state_->live != nullptr; }

const io::SocketAddress& RpcChannel::address() const { return state_->addr; }

}  // namespace openlake::net

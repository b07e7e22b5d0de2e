#include <sys/socket.h>
#include <unistd.h>

#include <deque>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

#include "common/random.h"
#include "io/acceptor.h"
#include "io/peer_uid.h"
#include "net/frame.h"

#include "openlake/log.h"
#include "openlake/net/rpc.h"
#include "openlake/status.h"
#include "openlake/strings.h"
#include "openlake/version.h"

namespace openlake::net {
namespace {

// A frame before the handshake is done is a hello answer at most: nothing large may arrive
// before the peer has proved it holds the secret.
constexpr uint32_t kMaxFrameBeforeAuth = 4096;
// Every connection starts with a receive buffer this size, and goes back to it once a larger
// frame is handled.
constexpr size_t kBaseInput = 64 << 10;
// A TCP connection idle this long may make room for a new client when a cap is full.
constexpr absl::Duration kIdleEvictable = absl::Seconds(10);

}  // namespace

// ---------------------------------------------------------------------------------------------
// Internals. Everything below runs on the server's reactor thread.

class RpcServer::Impl {
 public:
  struct Connection;

  Impl(RpcServer* owner, io::Reactor& r, RpcServerOptions opts)
      : owner_(owner), reactor_(r), opts_(std::move(opts)) {
    if (opts_.version.empty()) opts_.version = std::string(Version());
  }

  // ---- Connections
  struct RecvOp final : io::Completion {
    Connection* c;
    void Complete(int32_t res, uint32_t) noexcept override;
  };
  struct SendOp final : io::Completion {
    Connection* c;
    void Complete(int32_t res, uint32_t) noexcept override;
  };
  struct OutFrame {
    std::string bytes;
    int fd = -1;
  };

  struct Connection {
    Impl* impl;
    ConnectionInfo info;
    io::Connection conn;  // the socket, and its place among max_connections
    int fd = -1;          // conn.fd()
    RecvOp recv_op;
    SendOp send_op;
    std::unique_ptr<char[]> in;
    size_t in_cap = 0, in_start = 0, in_end = 0;
    uint64_t discard = 0;  // bytes of a refused request still to read and drop
    std::deque<OutFrame> out;
    size_t out_offset = 0;  // bytes of out.front() already sent
    size_t out_bytes = 0;   // unsent bytes in `out`
    bool recv_armed = false;
    bool sending = false;
    bool closing = false;
    bool hook_done = false;
    bool closing_after_send = false;
    std::string close_reason;       // logged when closing_after_send closes it
    int64_t idle_refreshed_ns = 0;  // when the idle deadline was last pushed back
    int ops = 0;  // operations in flight
    uint8_t nonce[kNonceBytes];
    // Send state for the sendmsg in flight.
    iovec iov[64];
    msghdr msg{};
    alignas(cmsghdr) char cmsg[CMSG_SPACE(sizeof(int))];
  };

  // `beyond_loopback`: came through a listener that is not on loopback.
  void OnConnection(io::Connection conn, bool beyond_loopback);
  // How a loopback peer gets in: by its uid, through the handshake, or not at all (`*why`).
  enum class Admission { kAdmin, kAllowed, kHandshake, kRefused };
  Admission Admit(Connection* c, std::string* why);
  // Pushes the idle deadline of a TCP connection back (tcp_idle_timeout).
  void RefreshIdle(Connection* c);
  // Answers `status` where a response would go (request 0) and closes once it is sent.
  void SayAndClose(Connection* c, FrameType type, const absl::Status& status);
  // Gives `c` a receive buffer of `cap` bytes (its unconsumed bytes kept), charging the growth
  // beyond kBaseInput to buffered_; false when that would pass max_buffered_bytes.
  bool Resize(Connection* c, size_t cap);
  void ArmRecv(Connection* c);
  void OnRecv(Connection* c, int32_t res);
  void ProcessInput(Connection* c);
  // Answers request `h` with `why` without handling it (or closes, for anything else).
  void Refuse(Connection* c, const FrameHeader& h, const absl::Status& why);
  void HandleFrame(Connection* c, const FrameHeader& h, std::string_view payload);
  void Queue(Connection* c, OutFrame f);
  void Flush(Connection* c);
  void OnSent(Connection* c, int32_t res);
  void CloseConn(Connection* c, std::string_view reason, bool protocol_error);
  void MaybeFinalize(Connection* c);
  void RunHook(Connection* c);
  void StopAll();
  bool Drained() const { return conns_.empty() && !acceptor_->listening(); }

  RpcServer* owner_;  // null once the RpcServer is gone
  io::Reactor& reactor_;
  RpcServerOptions opts_;
  absl::flat_hash_map<uint16_t, Handler> handlers_;
  std::vector<ConnectionHook> disconnect_hooks_;
  std::unique_ptr<io::Acceptor> acceptor_;  // before conns_: it outlives them
  absl::flat_hash_map<uint64_t, std::unique_ptr<Connection>> conns_;
  uint64_t next_conn_id_ = 1;
  // Bytes held over every connection: input buffers beyond kBaseInput, unsent answers.
  size_t buffered_ = 0;
  bool stopping_ = false;
  bool exit_hook_registered_ = false;
};

void RpcServer::Impl::RecvOp::Complete(int32_t res, uint32_t) noexcept {
  --c->ops;
  c->recv_armed = false;
  c->impl->OnRecv(c, res);
}

void RpcServer::Impl::SendOp::Complete(int32_t res, uint32_t) noexcept {
  --c->ops;
  c->sending = false;
  c->impl->OnSent(c, res);
}

void RpcServer::Impl::OnConnection(io::Connection conn, bool beyond_loopback) {
  auto owned = std::make_unique<Connection>();
  Connection* c = owned.get();
  c->impl = this;
  c->fd = conn.fd();
  c->recv_op.c = c;
  c->send_op.c = c;
  c->info.id = next_conn_id_++;
  c->info.is_unix = conn.is_unix();
  c->info.peer = conn.peer();
  c->info.peer_pid = conn.peer_pid();
  c->info.peer_uid = conn.peer_uid();
  c->conn = std::move(conn);
  c->in_cap = kBaseInput;
  c->in.reset(new char[c->in_cap]);  // not zero-filled: recv writes it
  RandomBytes(c->nonce, kNonceBytes);
  conns_.emplace(c->info.id, std::move(owned));
  if (owner_) ++owner_->counters_.accepted;

  std::string why;
  const Admission how = beyond_loopback ? Admission::kHandshake : Admit(c, &why);
  if (how == Admission::kRefused) {
    if (owner_) ++owner_->counters_.auth_failures;
    // Where the hello would be: an error the client reports (RpcClient::Connect).
    SayAndClose(c, FrameType::kResponse, absl::PermissionDeniedError(why));
    ArmRecv(c);  // sees the close after the send
    return;
  }
  const bool require_auth = how == Admission::kHandshake;
  c->info.authenticated = !require_auth;
  c->info.admin = how == Admission::kAdmin;
  FrameHeader h;
  h.type = FrameType::kHello;
  OutFrame hello;
  AppendFrame(h, EncodeHello(require_auth, c->nonce, opts_.version), &hello.bytes);
  Queue(c, std::move(hello));
  // Past the deadline the acceptor shuts the socket down; OnRecv then closes it as such. Until
  // then it holds a place without work: a full server takes it back for a new client.
  if (require_auth) {
    c->conn.SetDeadline(absl::Now() + opts_.auth_timeout);
    c->conn.SetEvictableAfter(absl::Seconds(1));
  } else {
    RefreshIdle(c);
  }
  ArmRecv(c);
}

RpcServer::Impl::Admission RpcServer::Impl::Admit(Connection* c, std::string* why) {
  if (!c->info.is_unix) {
    absl::StatusOr<uid_t> uid = io::LoopbackPeerUid(c->fd);
    if (uid.ok()) {
      c->info.peer_uid = *uid;
    } else {
      *why = StrCat("cannot tell which user is connecting (", uid.status().message(), ")");
    }
  }
  const uid_t uid = c->info.peer_uid;
  if (uid != static_cast<uid_t>(-1)) {
    if (uid == 0 || uid == geteuid()) return Admission::kAdmin;
    for (uid_t allowed : opts_.allowed_uids) {
      if (uid == allowed) return Admission::kAllowed;
    }
    *why = StrCat("uid ", uid, " may not use this server");
  }
  if (!opts_.secret.empty()) return Admission::kHandshake;
  *why = StrCat(*why, ": only uid ", geteuid(),
                " (the server's), root and the uids in rpc_allowed_uids may; no shared secret "
                "is configured (rpc_secret) to admit anyone else");
  return Admission::kRefused;
}

void RpcServer::Impl::RefreshIdle(Connection* c) {
  if (c->info.is_unix || opts_.tcp_idle_timeout == absl::InfiniteDuration()) return;
  // At most once a second: a busy connection pays one clock read per request, no more.
  const int64_t now = reactor_.now_ns();
  if (c->idle_refreshed_ns != 0 && now - c->idle_refreshed_ns < 1'000'000'000) return;
  c->idle_refreshed_ns = now;
  c->conn.SetDeadline(absl::Now() + opts_.tcp_idle_timeout);
  c->conn.SetEvictableAfter(kIdleEvictable);
}

void RpcServer::Impl::SayAndClose(Connection* c, FrameType type, const absl::Status& status) {
  FrameHeader h;
  h.type = type;
  h.aux = static_cast<uint32_t>(status.code());
  OutFrame f;
  AppendFrame(h, SV(status.message()), &f.bytes);
  c->close_reason = std::string(status.message());
  Queue(c, std::move(f));
  // Close once the answer is out: stop reading now, shut down after the send.
  c->closing_after_send = true;
}

void RpcServer::Impl::ArmRecv(Connection* c) {
  if (c->recv_armed || c->closing || c->closing_after_send) return;
  // Resumes when the output drains (OnSent).
  if (c->out_bytes > opts_.max_pending_output) return;
  if (c->out_bytes > 0 && buffered_ > opts_.max_buffered_bytes) return;
  if (c->in_start == c->in_end) c->in_start = c->in_end = 0;
  if (c->in_end == c->in_cap) {
    // Compact; ProcessInput has already grown the buffer when a larger frame is pending.
    std::memmove(c->in.get(), c->in.get() + c->in_start, c->in_end - c->in_start);
    c->in_end -= c->in_start;
    c->in_start = 0;
  }
  c->recv_armed = true;
  ++c->ops;
  reactor_.Recv(c->fd, c->in.get() + c->in_end, c->in_cap - c->in_end, 0, &c->recv_op);
}

void RpcServer::Impl::OnRecv(Connection* c, int32_t res) {
  if (c->closing) return MaybeFinalize(c);
  if (res <= 0 && c->conn.expired()) {  // a deadline passed (OnConnection, RefreshIdle)
    if (c->info.authenticated) {
      if (owner_) ++owner_->counters_.idle_closed;
      return CloseConn(c, StrCat("no request for ", absl::FormatDuration(opts_.tcp_idle_timeout)),
                       false);
    }
    if (owner_) ++owner_->counters_.auth_failures;
    return CloseConn(c, "no authentication before the deadline", false);
  }
  if (res == 0) return CloseConn(c, "", false);  // orderly close by the peer
  if (res < 0) {
    if (res == -EINTR || res == -EAGAIN) return ArmRecv(c);
    // A peer that exits with answers unread resets the connection: an ordinary way to go.
    if (res == -ECONNRESET || res == -EPIPE) return CloseConn(c, "", false);
    return CloseConn(c, SV(ErrnoStatus(res, "recv").message()), false);
  }
  ++c->ops;  // guard: a close while the input is processed must not free `c` under us
  c->in_end += static_cast<size_t>(res);
  ProcessInput(c);
  if (!c->closing) ArmRecv(c);
  --c->ops;
  MaybeFinalize(c);
}

bool RpcServer::Impl::Resize(Connection* c, size_t cap) {
  const size_t before = c->in_cap > kBaseInput ? c->in_cap - kBaseInput : 0;
  const size_t after = cap > kBaseInput ? cap - kBaseInput : 0;
  if (after > before && buffered_ - before + after > opts_.max_buffered_bytes) return false;
  const size_t held = c->in_end - c->in_start;
  std::unique_ptr<char[]> fresh(new char[cap]);  // not zero-filled: recv writes it
  std::memcpy(fresh.get(), c->in.get() + c->in_start, held);
  c->in = std::move(fresh);
  c->in_cap = cap;
  c->in_start = 0;
  c->in_end = held;
  buffered_ = buffered_ - before + after;
  return true;
}

void RpcServer::Impl::ProcessInput(Connection* c) {
  while (!c->closing && !c->closing_after_send) {
    if (c->discard > 0) {  // the rest of a refused request
      const size_t drop =
          static_cast<size_t>(std::min<uint64_t>(c->discard, c->in_end - c->in_start));
      c->in_start += drop;
      c->discard -= drop;
      if (c->discard > 0) break;
    }
    if (c->in_end - c->in_start < kFrameHeaderBytes) break;
    FrameHeader h;
    const uint32_t limit = c->info.authenticated ? opts_.max_frame_bytes : kMaxFrameBeforeAuth;
    absl::Status st = DecodeHeader(c->in.get() + c->in_start, limit, &h);
    if (!st.ok()) {
      if (!c->info.authenticated) {
        return CloseConn(c, StrCat(st.message(), " (before authentication)"), true);
      }
      return CloseConn(c, SV(st.message()), true);
    }
    const size_t need = kFrameHeaderBytes + h.length;
    const size_t have = c->in_end - c->in_start;
    if (have < need) {
      // Grow as the bytes arrive, never ahead of them: at most double what is held, so a header
      // that claims a large frame costs memory only once its bytes are really coming.
      if (c->in_end == c->in_cap) {
        const size_t cap = std::min(need, std::max(kBaseInput, 2 * c->in_cap));
        if (cap > c->in_cap || c->in_start > 0) {
          if (!Resize(c, std::max(cap, c->in_cap))) {
            // No memory left for it: drop this request's bytes and say so; the connection
            // carries on.
            c->in_start += have;
            c->discard = need - have;
            Refuse(c, h,
                   absl::ResourceExhaustedError(
                       "the server holds too many requests in memory; retry"));
            continue;
          }
        }
      }
      break;
    }
    const std::string_view payload(c->in.get() + c->in_start + kFrameHeaderBytes, h.length);
    c->in_start += need;
    HandleFrame(c, h, payload);
  }
  if (c->in_start == c->in_end) {
    c->in_start = c->in_end = 0;
    if (c->in_cap > kBaseInput && !c->closing) (void)Resize(c, kBaseInput);  // give it back
  }
}

void RpcServer::Impl::Refuse(Connection* c, const FrameHeader& h, const absl::Status& why) {
  if (h.type != FrameType::kRequest || !c->info.authenticated) {
    return CloseConn(c, SV(why.message()), true);
  }
  if (owner_) ++owner_->counters_.refused_requests;
  FrameHeader reply;
  reply.type = FrameType::kResponse;
  reply.method = h.method;
  reply.request_id = h.request_id;
  reply.aux = static_cast<uint32_t>(why.code());
  OutFrame f;
  AppendFrame(reply, SV(why.message()), &f.bytes);
  Queue(c, std::move(f));
}

void RpcServer::Impl::HandleFrame(Connection* c, const FrameHeader& h, std::string_view payload) {
  if (h.type == FrameType::kAuth) {
    FrameHeader reply;
    reply.type = FrameType::kAuth;
    OutFrame f;
    if (c->info.authenticated) {  // not needed here (or done already): say yes
      AppendFrame(reply, "", &f.bytes);
      Queue(c, std::move(f));
      return;
    }
    if (!AuthMacMatches(opts_.secret, c->nonce, payload)) {
      if (owner_) ++owner_->counters_.auth_failures;
      return SayAndClose(c, FrameType::kAuth,
                         absl::PermissionDeniedError("authentication failed: wrong shared secret"));
    }
    c->info.authenticated = true;
    c->info.admin = true;
    c->conn.ClearDeadline();
    c->conn.ClearEvictable();
    RefreshIdle(c);
    AppendFrame(reply, "", &f.bytes);
    Queue(c, std::move(f));
    return;
  }
  if (h.type != FrameType::kRequest) {
    return CloseConn(
        c, StrCat("unexpected frame type ", static_cast<int>(h.type), " from a client"), true);
  }
  if (!c->info.authenticated) {
    if (owner_) ++owner_->counters_.auth_failures;
    return CloseConn(c, "request before authentication", true);
  }
  if (h.flags != 0) return CloseConn(c, "descriptors are not accepted from clients", true);
  if (owner_) ++owner_->counters_.requests;
  RefreshIdle(c);
  auto it = handlers_.find(h.method);
  RpcCall call;
  call.server_ = owner_;
  if (owner_) call.alive_ = owner_->alive_;
  call.conn_id_ = c->info.id;
  call.info_ = c->info;
  call.method_ = h.method;
  call.request_id_ = h.request_id;
  call.deadline_ns_ = h.aux ? reactor_.now_ns() + int64_t{h.aux} * 1000000 : 0;
  call.payload_ = payload;
  call.responded_ = false;
  if (it == handlers_.end()) {
    call.RespondError(absl::UnimplementedError(StrCat("unknown method ", h.method)));
    return;
  }
  it->second(std::move(call));
}

void RpcServer::Impl::Queue(Connection* c, OutFrame f) {
  if (c->closing) {
    return;
  }
  c->out_bytes += f.bytes.size();
  buffered_ += f.bytes.size();
  c->out.push_back(std::move(f));
  Flush(c);
}

void RpcServer::Impl::Flush(Connection* c) {
  if (c->sending || c->closing || c->out.empty()) return;
  // Gather up to 64 frames into one sendmsg. A frame that carries a descriptor goes alone (or
  // first), so SCM_RIGHTS arrives with that frame's first byte.
  unsigned n = 0;
  int fd_to_send = -1;
  for (auto it = c->out.begin(); it != c->out.end() && n < 64; ++it) {
    if (it->fd >= 0) {
      if (n > 0) break;
      fd_to_send = it->fd;
    }
    const size_t skip = n == 0 ? c->out_offset : 0;
    c->iov[n].iov_base = it->bytes.data() + skip;
    c->iov[n].iov_len = it->bytes.size() - skip;
    ++n;
    if (fd_to_send >= 0) break;
  }
  c->msg = msghdr{};
  c->msg.msg_iov = c->iov;
  c->msg.msg_iovlen = n;
  if (fd_to_send >= 0 && c->out_offset == 0) {
    std::memset(c->cmsg, 0, sizeof(c->cmsg));
    c->msg.msg_control = c->cmsg;
    c->msg.msg_controllen = sizeof(c->cmsg);
    cmsghdr* cm = CMSG_FIRSTHDR(&c->msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cm), &fd_to_send, sizeof(int));
  }
  c->sending = true;
  ++c->ops;
  reactor_.SendMsg(c->fd, &c->msg, 0, &c->send_op);
}

void RpcServer::Impl::OnSent(Connection* c, int32_t res) {
  if (c->closing) return MaybeFinalize(c);
  if (res < 0) {
    if (res == -EINTR || res == -EAGAIN) return Flush(c);
    if (res == -ECONNRESET || res == -EPIPE) return CloseConn(c, "", false);
    return CloseConn(c, SV(ErrnoStatus(res, "send").message()), false);
  }
  size_t left = static_cast<size_t>(res);
  c->out_bytes -= left;
  buffered_ -= left;
  while (left > 0 && !c->out.empty()) {
    OutFrame& f = c->out.front();
    const size_t rest = f.bytes.size() - c->out_offset;
    if (left >= rest) {
      left -= rest;
      c->out_offset = 0;
      c->out.pop_front();
    } else {
      c->out_offset += left;
      // The descriptor went with the first byte; never send it twice.
      f.fd = -1;
      left = 0;
    }
  }
  if (c->closing_after_send && c->out.empty()) {
    return CloseConn(c, c->close_reason, false);
  }
  Flush(c);
  if (!c->recv_armed) ArmRecv(c);  // it checks the output caps
}

void RpcServer::Impl::CloseConn(Connection* c, std::string_view reason, bool protocol_error) {
  if (c->closing) return;
  c->closing = true;
  if (protocol_error) {
    if (owner_) ++owner_->counters_.protocol_errors;
    OL_LOG_EVERY_N_SEC(kWarning, 1) << "closing connection " << c->info.id << " from "
                                    << c->info.peer.ToString() << ": " << reason;
  } else if (!reason.empty()) {
    OL_LOG_EVERY_N_SEC(kInfo, 1) << "closing connection " << c->info.id << " from "
                                 << c->info.peer.ToString() << ": " << reason;
  }
  // shutdown() ends the recv and send in flight (they complete with 0 or an error); the
  // descriptor is closed once both have come back.
  shutdown(c->fd, SHUT_RDWR);
  RunHook(c);
  MaybeFinalize(c);
}

void RpcServer::Impl::RunHook(Connection* c) {
  if (c->hook_done) return;
  c->hook_done = true;
  for (ConnectionHook& hook : disconnect_hooks_) hook(c->info);
}

void RpcServer::Impl::MaybeFinalize(Connection* c) {
  if (!c->closing || c->ops > 0) return;
  buffered_ -= c->out_bytes + (c->in_cap > kBaseInput ? c->in_cap - kBaseInput : 0);
  conns_.erase(c->info.id);  // destroys *c; its io::Connection closes the socket
}

void RpcServer::Impl::StopAll() {
  stopping_ = true;
  acceptor_->StopAccepting();
  std::vector<Connection*> all;
  for (auto& [id, c] : conns_) all.push_back(c.get());
  for (Connection* c : all) CloseConn(c, "", false);
}

// ---------------------------------------------------------------------------------------------
// RpcServer

RpcServer::RpcServer(io::Reactor& reactor, RpcServerOptions options)
    : reactor_(reactor), impl_(std::make_unique<Impl>(this, reactor, std::move(options))) {}

absl::StatusOr<std::unique_ptr<RpcServer>> RpcServer::Create(io::Reactor& reactor,
                                                             RpcServerOptions options) {
  if (io::Reactor::Current() != &reactor) {
    return absl::FailedPreconditionError("RpcServer::Create must run on its reactor's thread");
  }
  if (options.max_frame_bytes < 1024) {
    return absl::InvalidArgumentError("max_frame_bytes must be at least 1024");
  }
  io::AcceptorOptions ao;
  ao.name = "rpc";
  ao.max_connections = options.max_connections;
  ao.on_refused = [](int fd, std::string_view why) {
    // Where the hello would be: an error the client reports (RpcClient::Connect).
    FrameHeader h;
    h.type = FrameType::kResponse;
    h.aux = static_cast<uint32_t>(absl::StatusCode::kResourceExhausted);
    std::string out;
    AppendFrame(h, StrCat("server full: ", why, "; retry later"), &out);
    (void)send(fd, out.data(), out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  };
  OL_ASSIGN_OR_RETURN(std::unique_ptr<io::Acceptor> acceptor,
                      io::Acceptor::Create(reactor, std::move(ao)));
  std::unique_ptr<RpcServer> server(new RpcServer(reactor, std::move(options)));
  server->impl_->acceptor_ = std::move(acceptor);
  return server;
}

RpcServer::~RpcServer() {
  alive_.reset();  // calls still held elsewhere now answer nothing
  impl_->StopAll();
  impl_->handlers_.clear();
  impl_->disconnect_hooks_.clear();
  impl_->owner_ = nullptr;
  Impl* impl = impl_.release();
  // Listener sockets close when their last accept has come back; the Impl (which in-flight
  // operations point into, its acceptor's among them) is freed once the reactor has torn its
  // ring down.
  reactor_.AtExit([impl] { delete impl; });
}

void RpcServer::Register(uint16_t method, Handler handler) {
  impl_->handlers_[method] = std::move(handler);
}

void RpcServer::OnDisconnect(ConnectionHook hook) {
  impl_->disconnect_hooks_.push_back(std::move(hook));
}

absl::StatusOr<io::SocketAddress> RpcServer::Listen(const io::SocketAddress& addr,
                                                    const io::ListenOptions& options,
                                                    size_t max_connections) {
  if (impl_->stopping_) return absl::FailedPreconditionError("server is stopping");
  const bool loopback = addr.IsLoopback();
  if (!loopback && impl_->opts_.secret.empty()) {
    return absl::FailedPreconditionError(
        StrCat("refusing to listen on ", addr.ToString(),
               ": it is beyond loopback and no shared secret is configured (set rpc_secret)"));
  }
  Impl* impl = impl_.get();
  return impl->acceptor_->Listen(
      addr, options,
      [impl, loopback](io::Connection conn) { impl->OnConnection(std::move(conn), !loopback); },
      io::ListenerLimits{max_connections});
}

void RpcServer::Stop() { impl_->StopAll(); }

bool RpcServer::stopped() const { return impl_->stopping_ && impl_->Drained(); }

size_t RpcServer::connection_count() const { return impl_->conns_.size(); }

void RpcServer::SendResponse(uint64_t conn_id, uint64_t request_id, uint16_t method, uint32_t code,
                             std::string payload, int fd, bool headroom) {
  auto it = impl_->conns_.find(conn_id);
  if (it == impl_->conns_.end() || it->second->closing) return;
  Impl::Connection* c = it->second.get();
  if (fd >= 0 && !c->info.is_unix) {
    code = static_cast<uint32_t>(absl::StatusCode::kFailedPrecondition);
    payload = "descriptors can only be passed over a Unix socket";
    fd = -1;
  }
  const size_t payload_size = payload.size() - (headroom ? RpcCall::kHeadroom : 0);
  if (payload_size > impl_->opts_.max_frame_bytes) {
    code = static_cast<uint32_t>(absl::StatusCode::kResourceExhausted);
    payload = StrCat("response of ", payload_size, " bytes exceeds the frame limit");
    fd = -1;
    headroom = false;
  }
  FrameHeader h;
  h.type = FrameType::kResponse;
  h.method = method;
  h.aux = code;
  h.request_id = request_id;
  h.flags = fd >= 0 ? kFrameFlagFd : 0;
  Impl::OutFrame f;
  if (headroom) {
    static_assert(RpcCall::kHeadroom == kFrameHeaderBytes);
    h.length = static_cast<uint32_t>(payload.size() - kFrameHeaderBytes);
    EncodeHeader(h, payload.data());
    f.bytes = std::move(payload);
  } else {
    f.bytes.reserve(kFrameHeaderBytes + payload.size());
    AppendFrame(h, payload, &f.bytes);
  }
  f.fd = fd;
  impl_->Queue(c, std::move(f));
}

// ---------------------------------------------------------------------------------------------
// RpcCall

RpcCall::RpcCall(RpcCall&& o) noexcept
    : server_(o.server_),
      alive_(std::move(o.alive_)),
      conn_id_(o.conn_id_),
      info_(std::move(o.info_)),
      method_(o.method_),
      request_id_(o.request_id_),
      deadline_ns_(o.deadline_ns_),
      payload_(o.payload_),
      responded_(std::exchange(o.responded_, true)) {}

RpcCall& RpcCall::operator=(RpcCall&& o) noexcept {
  if (this != &o) {
    if (!responded_) RespondError(absl::InternalError("request dropped without an answer"));
    server_ = o.server_;
    alive_ = std::move(o.alive_);
    conn_id_ = o.conn_id_;
    info_ = std::move(o.info_);
    method_ = o.method_;
    request_id_ = o.request_id_;
    deadline_ns_ = o.deadline_ns_;
    payload_ = o.payload_;
    responded_ = std::exchange(o.responded_, true);
  }
  return *this;
}

RpcCall::~RpcCall() {
  if (!responded_) RespondError(absl::InternalError("request dropped without an answer"));
}

void RpcCall::Respond(std::string payload) { Send(std::move(payload), -1, false); }

void RpcCall::RespondWithHeadroom(std::string frame) { Send(std::move(frame), -1, true); }

void RpcCall::Send(std::string payload, int fd, bool headroom) {
  if (responded_) return;
  if (deadline_ns_ != 0 && alive_.lock() && server_->reactor().now_ns() > deadline_ns_) {
    return RespondError(absl::DeadlineExceededError("answered after the request's deadline"));
  }
  responded_ = true;
  if (alive_.lock()) {
    server_->SendResponse(conn_id_, request_id_, method_, 0, std::move(payload), fd, headroom);
  }
}

void RpcCall::RespondError(const absl::Status& status) {
  if (responded_) return;
  responded_ = true;
  absl::Status st = status.ok() ? absl::InternalError("error response with an OK status") : status;
  if (alive_.lock()) {
    server_->SendResponse(conn_id_, request_id_, method_, static_cast<uint32_t>(st.code()),
                          std::string(st.message()), -1);
  }
}

void RpcCall::RespondWithFd(std::string payload, int fd) { Send(std::move(payload), fd, false); }

}  // namespace openlake::net

// File: openlake/net/rpc.h
//
// Framed RPC over TCP and Unix sockets: length-prefixed messages with request ids, so a client
// may pipeline many requests on one connection and match the answers; per-request deadlines;
// a frame-size limit; a shared-secret handshake for listeners beyond loopback, and on loopback
// admission by the peer's uid (the secret's handshake for anyone else). The frame and handshake are
// specified in docs/rpc.md. Payloads are opaque bytes here: each service encodes its own messages
// (the KV pool uses protobuf, kept private to it).
//
// Server: lives on one reactor; every handler runs there.
//
//   auto server = net::RpcServer::Create(reactor, {}).value();        // on the reactor
//   server->Register(kEcho, [](net::RpcCall call) {
//     call.Respond(std::string(call.payload()));
//   });
//   server->Listen(io::SocketAddress::Parse("127.0.0.1:9400").value(), {});
//
// Client: blocking, for application threads (never a reactor thread).
//
//   auto client = net::RpcClient::Connect(addr, {}).value();
//   absl::StatusOr<net::RpcClient::Response> r = client->Call(kEcho, "hi");
//
// A malformed frame (bad magic, version or type, an oversized length, a frame before the
// handshake is done) closes that one connection with a logged reason; the server goes on
// serving the others.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

#include "openlake/export.h"
#include "openlake/io/reactor.h"
#include "openlake/io/socket.h"

namespace openlake::net {

inline constexpr uint32_t kDefaultMaxFrameBytes = 64u << 20;
struct FrameHeader;

struct ConnectionInfo {
  uint64_t id = 0;
  io::SocketAddress peer;
  bool is_unix = false;
  // Unix sockets: the peer's process (SO_PEERCRED); -1 otherwise.
  pid_t peer_pid = -1;
  // The peer's user: Unix sockets (SO_PEERCRED) and loopback TCP (sock_diag); -1 beyond
  // loopback, where only the shared secret says who may come in.
  uid_t peer_uid = static_cast<uid_t>(-1);
  bool authenticated = false;  // admitted: by its uid, or by the shared-secret handshake
  // May change what any client made: the server's own user, root, or a holder of the secret.
  // A client admitted by RpcServerOptions::allowed_uids is not.
  bool admin = false;
};

class RpcServer;

// One request. Move-only. Respond exactly once, now or later, on the server's reactor; a call
// destroyed without a response answers Internal. Responding after the connection has gone is
// a no-op.
class OL_EXPORT RpcCall {
 public:
  RpcCall(RpcCall&& o) noexcept;
  RpcCall& operator=(RpcCall&& o) noexcept;
  RpcCall(const RpcCall&) = delete;
  RpcCall& operator=(const RpcCall&) = delete;
  ~RpcCall();

  uint16_t method() const { return method_; }
  uint64_t request_id() const { return request_id_; }
  // The request bytes; valid only until the handler returns (copy them to keep them).
  std::string_view payload() const { return payload_; }
  // The connection the request came on (a copy: valid after the connection closes).
  const ConnectionInfo& connection() const { return info_; }
  // Absolute deadline on the reactor clock (ns), 0 when the client set none. A response after
  // it is replaced by DeadlineExceeded (the client has stopped waiting anyway).
  int64_t deadline_ns() const { return deadline_ns_; }

  void Respond(std::string payload);
  // The same, for a payload built after kHeadroom bytes of room that the frame header then
  // fills in place (saves copying a large answer once more).
  static constexpr size_t kHeadroom = 32;
  void RespondWithHeadroom(std::string frame);
  // `status` must not be OK.
  void RespondError(const absl::Status& status);
  // Sends `fd` with the response (Unix sockets only: SCM_RIGHTS). The server does not close
  // `fd`; it must stay open until the send completes, i.e. for the server's lifetime.
  void RespondWithFd(std::string payload, int fd);

 private:
  friend class RpcServer;
  RpcCall() = default;
  void Send(std::string payload, int fd, bool headroom);
  // Valid while `alive_` can be locked: a call that outlives its server answers nothing.
  RpcServer* server_ = nullptr;
  std::weak_ptr<void> alive_;
  uint64_t conn_id_ = 0;
  ConnectionInfo info_;
  uint16_t method_ = 0;
  uint64_t request_id_ = 0;
  int64_t deadline_ns_ = 0;
  std::string_view payload_;
  bool responded_ = true;
};

struct RpcServerOptions {
  uint32_t max_frame_bytes = kDefaultMaxFrameBytes;
  // Shared secret. Without one, Listen refuses addresses beyond loopback; with one, every
  // connection to such a listener must pass the handshake before its first request.
  std::string secret;
  // Connections open at once over every listener (each listener may have a cap of its own:
  // Listen). One more is told so (an error frame where the hello would be) and closed,
  // unless an unauthenticated connection can make room.
  size_t max_connections = 4096;
  // A connection whose unsent responses exceed this stops being read until they drain.
  size_t max_pending_output = 64u << 20;
  // Memory all connections together may hold for frames half received and answers not yet
  // sent. A request that would take more is read and dropped, and answered ResourceExhausted;
  // past it in answers, connections with answers unsent stop being read until they drain.
  size_t max_buffered_bytes = 1u << 30;
  // Time a connection has to authenticate.
  absl::Duration auth_timeout = absl::Seconds(5);
  // Who may connect on loopback (Unix sockets and loopback TCP, where the kernel tells the
  // peer's uid) without the secret: the server's own user, root, and these uids (admitted but
  // not ConnectionInfo::admin). Any other local user must pass the handshake when a secret is
  // set, and is refused (PermissionDenied, in an error frame where the hello would be) when
  // none is.
  std::vector<uid_t> allowed_uids;
  // A TCP connection that sends no request for this long is closed (Unix sockets never are);
  // one idle for 10 s may make room for a new client when a cap is full.
  absl::Duration tcp_idle_timeout = absl::InfiniteDuration();
  // Version string sent in the hello.
  std::string version;
};

class OL_EXPORT RpcServer {
 public:
  using Handler = absl::AnyInvocable<void(RpcCall call)>;
  using ConnectionHook = absl::AnyInvocable<void(const ConnectionInfo& info)>;

  // Call on `reactor`'s thread; the server stays on it.
  static absl::StatusOr<std::unique_ptr<RpcServer>> Create(io::Reactor& reactor,
                                                           RpcServerOptions options);
  // Stops the server (as Stop) on its reactor's thread. Memory that in-flight operations still
  // point into is freed when they complete or, at the latest, when the reactor exits.
  ~RpcServer();

  void Register(uint16_t method, Handler handler);
  // Runs when a connection closes, for whatever reason, after its last request was handled.
  // Several services on one server may each add one; they run in the order added.
  void OnDisconnect(ConnectionHook hook);

  // Starts accepting on `addr` (the socket is created here). Returns the bound address (port 0
  // becomes the real port). FailedPrecondition for a non-loopback address without a secret.
  // `max_connections` caps the connections through this listener (0: only the server's cap),
  // so that one listener's clients cannot take every place from another's.
  absl::StatusOr<io::SocketAddress> Listen(const io::SocketAddress& addr,
                                           const io::ListenOptions& options,
                                           size_t max_connections = 0);

  // Closes listeners and connections; OnDisconnect runs for each connection. The object may
  // be destroyed once `stopped()` is true (in-flight operations have drained).
  void Stop();
  bool stopped() const;

  size_t connection_count() const;
  io::Reactor& reactor() { return reactor_; }

  // Counters, for stats and metrics.
  struct Counters {
    uint64_t accepted = 0;
    uint64_t requests = 0;
    uint64_t protocol_errors = 0;  // connections closed for a malformed frame
    uint64_t auth_failures = 0;    // wrong or no secret, and local users not allowed
    uint64_t idle_closed = 0;      // TCP connections closed for tcp_idle_timeout
    uint64_t refused_requests = 0;  // answered ResourceExhausted: max_buffered_bytes reached
  };
  const Counters& counters() const { return counters_; }

 private:
  friend class RpcCall;
  class Impl;
  RpcServer(io::Reactor& reactor, RpcServerOptions options);
  void SendResponse(uint64_t conn_id, uint64_t request_id, uint16_t method, uint32_t code,
                    std::string payload, int fd, bool headroom = false);

  io::Reactor& reactor_;
  std::unique_ptr<Impl> impl_;
  Counters counters_;
  std::shared_ptr<void> alive_ = std::make_shared<int>(0);
};

struct RpcClientOptions {
  // Needed when the server asks for the handshake.
  std::string secret;
  absl::Duration connect_timeout = absl::Seconds(5);
  // Deadline of calls that do not pass their own.
  absl::Duration call_timeout = absl::Seconds(10);
  uint32_t max_frame_bytes = kDefaultMaxFrameBytes;
  // Before sleeping on an answer, poll the socket this long: a fast server answers within
  // it, and the wake-up of a sleeping thread (tens of µs on a VM) is skipped. Zero: sleep
  // at once.
  absl::Duration spin = absl::Microseconds(50);
};

// Blocking client. Thread-safe: calls from several threads are serialised on the connection
// (each still pipelines its own batch). A call that times out returns DeadlineExceeded and
// its late answer is skipped; the connection stays usable. After an I/O error (or a send that
// stalls past the deadline) the connection is closed and every later call returns
// Unavailable; make a new client to reconnect.
class OL_EXPORT RpcClient {
 public:
  struct Response {
    std::string payload;
    int fd = -1;  // a descriptor that came with the response; the caller owns it
  };
  struct Request {
    uint16_t method;
    std::string_view payload;
  };

  static absl::StatusOr<std::unique_ptr<RpcClient>> Connect(const io::SocketAddress& addr,
                                                            RpcClientOptions options);
  ~RpcClient();

  // One request, one answer. A non-OK status from the server comes back as that status.
  absl::StatusOr<Response> Call(uint16_t method, std::string_view payload,
                                absl::Duration timeout = absl::InfiniteDuration());
  // The same for a request built after kHeadroom bytes of room, which the frame header then
  // fills in place (saves copying a large request once more).
  static constexpr size_t kHeadroom = 32;
  absl::StatusOr<Response> CallWithHeadroom(uint16_t method, std::string frame,
                                            absl::Duration timeout = absl::InfiniteDuration());
  // CallWithHeadroom in two halves, so a caller can work while the server does: Send returns
  // at once, Wait reads that answer (answers to other requests that come first are kept for
  // their own Wait). Every Sent request needs one Wait.
  struct Sent {
    uint64_t id = 0;
    uint16_t method = 0;
    absl::Time deadline;
  };
  absl::StatusOr<Sent> Send(uint16_t method, std::string frame,
                            absl::Duration timeout = absl::InfiniteDuration());
  absl::StatusOr<Response> Wait(const Sent& sent);
  // Blocks until one of `sents` (not empty) can be waited for at once: its answer has come,
  // its deadline has passed, or the connection failed. Returns its index; the answer stays
  // kept for its Wait, which also reports any failure. Lets a caller take answers in the order
  // the server gives them.
  size_t WaitAny(absl::Span<const Sent> sents);
  // Sends every request before reading any answer; results in request order.
  std::vector<absl::StatusOr<Response>> CallMany(const std::vector<Request>& requests,
                                                 absl::Duration timeout = absl::InfiniteDuration());
  // Sends without waiting. The answer is read and dropped by a later call (an error answer is
  // logged).
  absl::Status Notify(uint16_t method, std::string_view payload);

  const std::string& server_version() const { return server_version_; }
  const io::SocketAddress& address() const { return addr_; }
  bool connected() const;
  void Close();

 private:
  RpcClient() = default;
  absl::Status Handshake(const RpcClientOptions& options);
  absl::Status SendAll(const std::string& bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads one frame (and any descriptor sent with it) before `deadline`.
  absl::Status ReadFrame(absl::Time deadline, FrameHeader* header, std::string* payload, int* fd)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Response> Await(uint64_t id, uint16_t method, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads frames before `deadline` until one answers a request that is waited for (answers to
  // one-way and timed-out requests are dropped), and returns that answer with its id.
  absl::Status ReadAnswer(absl::Time deadline, uint64_t* id, absl::StatusOr<Response>* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Kept(uint64_t id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Broken(const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  int fd_ ABSL_GUARDED_BY(mu_) = -1;
  io::SocketAddress addr_;
  std::string peer_;  // addr_ as text, for messages
  RpcClientOptions options_;
  std::string server_version_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Bytes received: [rbeg_, rend_) of rbuf_ are not yet consumed. Descriptors, in order.
  std::unique_ptr<char[]> rbuf_ ABSL_GUARDED_BY(mu_);
  size_t rcap_ ABSL_GUARDED_BY(mu_) = 0;
  size_t rbeg_ ABSL_GUARDED_BY(mu_) = 0;
  size_t rend_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int> rfds_ ABSL_GUARDED_BY(mu_);
  // Requests whose answers are to be skipped (sent with Notify, or timed out).
  std::vector<uint64_t> notified_ ABSL_GUARDED_BY(mu_);
  // Answers read while waiting for another one.
  struct Stashed {
    uint64_t id;
    absl::StatusOr<Response> response;
  };
  std::vector<Stashed> stash_ ABSL_GUARDED_BY(mu_);
};

}  // namespace openlake::net

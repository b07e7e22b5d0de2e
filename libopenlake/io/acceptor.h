// Accepting connections, written once for every server of the library (the RPC server and the
// HTTP server today; the cluster's services next): listening sockets whose accepts run on one
// reactor (multishot where the kernel has it, one-shot otherwise), caps on the connections
// open at once (over all listeners, per listener and per client address) with a small reserve
// beyond them for servers that keep room for cheap requests, a polite word to a client that is
// refused, a deadline per connection, and draining on stop.
//
//   io::AcceptorOptions o;
//   o.name = "s3";
//   o.max_connections = 4096;
//   auto acceptor = io::Acceptor::Create(reactor, o);             // on `reactor`'s thread
//   auto bound = acceptor->Listen(addr, {}, [](io::Connection conn) {
//     // On `reactor`: serve conn.fd() here, or move `conn` to another reactor (SendTo).
//   });
//   ...
//   acceptor->StopAccepting();   // on `reactor`: no new connections
//   acceptor->ShutdownAll();     // any thread: every open connection's reads and writes end
//   // open() reaches 0 as their owners let the Connections go.
//
// A Connection owns its socket: destroying it (or Close) closes the descriptor and gives its
// place back. Connections may outlive the Acceptor (they keep its shared state), so a server
// can stop in any order.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "openlake/io/reactor.h"
#include "openlake/io/socket.h"

namespace openlake::io {

struct AcceptorOptions {
  // In log lines: "<name>: refusing a connection on ...".
  std::string name = "server";
  // Connections open at once, over every listener; one more is closed as soon as it is
  // accepted (and the refusal logged, at most every few seconds).
  size_t max_connections = 4096;
  // TCP connections open at once from one client address (IPv4 or IPv6 address, any port);
  // 0: no cap. Unix sockets are not counted.
  size_t max_per_peer = 0;
  // At a cap (any of them), the connection in that cap's scope whose owner marked it
  // evictable longest ago (Connection::SetEvictableAfter: idle between requests, a head still
  // trickling in, a handshake not done) is shut down to make room; only when none is, the new
  // connection is refused. This is what keeps slow or idle clients from locking others out.
  bool evict_when_full = true;
  // Connections accepted beyond max_connections (never beyond a listener's or a peer's cap),
  // marked Connection::reserve(): room for a server's cheap requests (health probes) while the
  // ordinary places are taken. 0: none.
  size_t reserve = 0;
  // Called with a connection about to be refused, before it is closed, to tell the client why
  // (a short non-blocking send: say it in one small write). `why` is for a person to read.
  std::function<void(int fd, std::string_view why)> on_refused;
  // How often connections with a deadline are checked: a deadline takes effect within this.
  absl::Duration deadline_check = absl::Milliseconds(100);
};

// What one listening socket admits, on top of the acceptor's caps.
struct ListenerLimits {
  // Connections open at once through this listener; 0: only the acceptor's cap applies.
  size_t max_connections = 0;
};

namespace internal {
struct AcceptorState;
struct ConnectionSlot;
}  // namespace internal

// One accepted connection. Move-only; thread-safe where noted, otherwise used by one thread at
// a time (its owner's).
class Connection {
 public:
  Connection() = default;
  Connection(Connection&& o) noexcept;
  Connection& operator=(Connection&& o) noexcept;
  ~Connection();  // Close()

  bool valid() const { return slot_ != nullptr; }
  int fd() const;
  uint64_t id() const;  // unique per Acceptor, from 1
  // TCP: the peer's address. Unix: the listener's path (Unix peers are unnamed).
  const SocketAddress& peer() const;
  bool is_unix() const;
  // Unix sockets: the peer's process and user (SO_PEERCRED); -1 otherwise.
  pid_t peer_pid() const;
  uid_t peer_uid() const;
  // Accepted from the reserve (AcceptorOptions::reserve): the ordinary places were all taken.
  bool reserve() const;

  // Past `deadline`, the acceptor shuts the socket down (reads and writes in flight end, at the
  // peer's end as it were) and expired() becomes true. InfiniteFuture clears it. Any thread.
  void SetDeadline(absl::Time deadline);
  void ClearDeadline() { SetDeadline(absl::InfiniteFuture()); }
  // True once a deadline shut the connection down. Any thread.
  bool expired() const;

  // From `after` on, a cap that is full may shut this connection down to make room for a new
  // one (AcceptorOptions::evict_when_full): for a connection that holds a place without doing
  // work. ClearEvictable when it does work again. Any thread.
  void SetEvictableAfter(absl::Duration after);
  void ClearEvictable();
  // True once the acceptor shut this connection down to make room. Any thread.
  bool evicted() const;

  // Closes the socket now and gives the place back (idempotent).
  void Close();

 private:
  friend class Acceptor;
  Connection(std::shared_ptr<internal::AcceptorState> state, internal::ConnectionSlot* slot);
  std::shared_ptr<internal::AcceptorState> state_;
  internal::ConnectionSlot* slot_ = nullptr;
};

class Acceptor {
 public:
  // Runs on the acceptor's reactor for each connection accepted.
  using Handler = absl::AnyInvocable<void(Connection conn)>;

  // On `reactor`'s thread; the accepts run there.
  static absl::StatusOr<std::unique_ptr<Acceptor>> Create(Reactor& reactor,
                                                          AcceptorOptions options);
  // Closes listening sockets still open. On the reactor's thread while it runs, or after it
  // has stopped (its ring gone); never while its accepts may still complete elsewhere.
  ~Acceptor();

  // Creates a listening socket on `addr` (io::Listen) and starts accepting on it. Returns the
  // bound address (port 0 becomes the real port). On the reactor's thread.
  absl::StatusOr<SocketAddress> Listen(const SocketAddress& addr, const ListenOptions& options,
                                       Handler handler, ListenerLimits limits = {});

  // No new connections: the accepts in flight are cancelled and each listening socket closes
  // when its last one has come back (listening() then turns false). On the reactor's thread.
  void StopAccepting();
  // Shuts every open connection down (their reads and writes end); their owners then let them
  // go. Any thread.
  void ShutdownAll();

  // Connections open now. Any thread.
  size_t open() const;
  // True while some listening socket is open (an accept may still complete). Any thread.
  bool listening() const;
  Reactor& reactor() { return reactor_; }

  // Counters, any thread.
  uint64_t accepted() const;
  uint64_t refused() const;  // closed at once: over a cap, or stopping
  uint64_t evicted() const;  // shut down to make room (evict_when_full)

 private:
  struct Listener;
  Acceptor(Reactor& reactor, AcceptorOptions options);
  void OnAccept(Listener* l, int32_t res, uint32_t flags);
  void Admit(Listener* l, int fd);
  void Refuse(Listener* l, int fd, std::string_view why);
  // Shuts down the connection evictable longest ago among those `in_scope` accepts; false
  // when there is none.
  bool EvictOne(const std::function<bool(const internal::ConnectionSlot&)>& in_scope);
  void Arm(Listener* l);

  Reactor& reactor_;
  const AcceptorOptions opts_;
  std::shared_ptr<internal::AcceptorState> state_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  bool stopping_ = false;
  std::shared_ptr<void> alive_ = std::make_shared<int>(0);  // reset first in the destructor
};

namespace internal {

struct ConnectionSlot {
  int fd = -1;
  uint64_t id = 0;
  SocketAddress peer;
  bool is_unix = false;
  bool reserve = false;
  std::string peer_key;  // the client address counted against max_per_peer; empty: none
  std::shared_ptr<std::atomic<size_t>> listener_open;  // its listener's open connections
  pid_t peer_pid = -1;
  uid_t peer_uid = static_cast<uid_t>(-1);
  // Reactor-clock deadline (CLOCK_MONOTONIC ns); INT64_MAX: none.
  std::atomic<int64_t> deadline_ns{INT64_MAX};
  std::atomic<bool> expired{false};
  // Reactor-clock time from which a full cap may evict it; INT64_MAX: never.
  std::atomic<int64_t> evictable_ns{INT64_MAX};
  std::atomic<bool> evicted{false};
};

// What Connections share with their Acceptor (and keep alive after it).
struct AcceptorState : std::enable_shared_from_this<AcceptorState> {
  AcceptorState(Reactor& r, absl::Duration every) : reactor(r), check_every(every) {}
  // Makes sure the deadline check runs while some slot has a deadline. Any thread.
  void WatchDeadlines();
  // Shuts down the slots past their deadline. On `reactor`.
  void CheckDeadlines();

  Reactor& reactor;
  const absl::Duration check_every;
  std::atomic<bool> check_armed{false};
  absl::Mutex mu;
  // Open connections, for ShutdownAll and the deadline check. Held for an insert, an erase or
  // one pass over the set: accept and close paths, never a request's.
  absl::flat_hash_set<ConnectionSlot*> open ABSL_GUARDED_BY(mu);
  // Open TCP connections per client address (ConnectionSlot::peer_key), while nonzero.
  absl::flat_hash_map<std::string, size_t> per_peer ABSL_GUARDED_BY(mu);
  std::atomic<size_t> count{0};
  std::atomic<size_t> with_deadline{0};  // slots whose deadline is set
  std::atomic<int> listening{0};
  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> refused{0};
  std::atomic<uint64_t> evicted{0};
  uint64_t next_id = 1;  // the acceptor's reactor only
};

}  // namespace internal
}  // namespace openlake::io

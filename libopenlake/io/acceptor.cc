// Accepting connections (see acceptor.h).
#include "io/acceptor.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <utility>

#include "openlake/log.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::io {
namespace {

// The client address a TCP connection counts against max_per_peer: its IP address, no port.
std::string PeerKey(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    return std::string(reinterpret_cast<const char*>(&in->sin_addr), sizeof(in->sin_addr));
  }
  if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    return std::string(reinterpret_cast<const char*>(&in6->sin6_addr), sizeof(in6->sin6_addr));
  }
  return std::string();
}

int64_t MonotonicNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace

// ---- Connection

Connection::Connection(std::shared_ptr<internal::AcceptorState> state,
                       internal::ConnectionSlot* slot)
    : state_(std::move(state)), slot_(slot) {}

Connection::Connection(Connection&& o) noexcept
    : state_(std::move(o.state_)), slot_(std::exchange(o.slot_, nullptr)) {}

Connection& Connection::operator=(Connection&& o) noexcept {
  if (this != &o) {
    Close();
    state_ = std::move(o.state_);
    slot_ = std::exchange(o.slot_, nullptr);
  }
  return *this;
}

Connection::~Connection() { Close(); }

int Connection::fd() const { return slot_ ? slot_->fd : -1; }
uint64_t Connection::id() const { return slot_ ? slot_->id : 0; }
const SocketAddress& Connection::peer() const { return slot_->peer; }
bool Connection::is_unix() const { return slot_ && slot_->is_unix; }
pid_t Connection::peer_pid() const { return slot_ ? slot_->peer_pid : -1; }
uid_t Connection::peer_uid() const { return slot_ ? slot_->peer_uid : static_cast<uid_t>(-1); }
bool Connection::reserve() const { return slot_ && slot_->reserve; }
bool Connection::expired() const { return slot_ && slot_->expired.load(std::memory_order_acquire); }

void Connection::SetDeadline(absl::Time deadline) {
  if (slot_ == nullptr) return;
  int64_t ns = INT64_MAX;
  if (deadline != absl::InfiniteFuture()) {
    ns = MonotonicNowNs() + absl::ToInt64Nanoseconds(deadline - absl::Now());
  }
  const int64_t before = slot_->deadline_ns.exchange(ns, std::memory_order_acq_rel);
  if (before == INT64_MAX && ns != INT64_MAX) {
    state_->with_deadline.fetch_add(1, std::memory_order_acq_rel);
    state_->WatchDeadlines();
  } else if (before != INT64_MAX && ns == INT64_MAX) {
    state_->with_deadline.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void Connection::SetEvictableAfter(absl::Duration after) {
  if (slot_ == nullptr) return;
  slot_->evictable_ns.store(MonotonicNowNs() + absl::ToInt64Nanoseconds(after),
                            std::memory_order_release);
}

void Connection::ClearEvictable() {
  if (slot_ != nullptr) slot_->evictable_ns.store(INT64_MAX, std::memory_order_release);
}

bool Connection::evicted() const { return slot_ && slot_->evicted.load(std::memory_order_acquire); }

void Connection::Close() {
  if (slot_ == nullptr) return;
  {
    // Out of the set before the descriptor closes: a ShutdownAll or a deadline check, which
    // work under the same lock, never touch a number the kernel may already have reused.
    absl::MutexLock lock(&state_->mu);
    state_->open.erase(slot_);
    if (!slot_->peer_key.empty()) {
      auto it = state_->per_peer.find(slot_->peer_key);
      if (it != state_->per_peer.end() && --it->second == 0) state_->per_peer.erase(it);
    }
  }
  if (slot_->listener_open) slot_->listener_open->fetch_sub(1, std::memory_order_acq_rel);
  if (slot_->deadline_ns.load(std::memory_order_acquire) != INT64_MAX) {
    state_->with_deadline.fetch_sub(1, std::memory_order_acq_rel);
  }
  close(slot_->fd);
  delete slot_;
  slot_ = nullptr;
  state_->count.fetch_sub(1, std::memory_order_acq_rel);
  state_.reset();
}

// ---- Deadlines

void internal::AcceptorState::WatchDeadlines() {
  if (check_armed.exchange(true, std::memory_order_acq_rel)) return;  // already running
  std::shared_ptr<AcceptorState> self = shared_from_this();
  TaskFn start = [self] {
    self->reactor.After(self->check_every, [self] { self->CheckDeadlines(); });
  };
  Reactor* here = Reactor::Current();
  if (here == &reactor) {
    start();
  } else if (here != nullptr && &here->runtime() == &reactor.runtime()) {
    here->SendTo(reactor.id(), std::move(start));
  } else {
    (void)reactor.runtime().Post(reactor.id(), std::move(start));
  }
}

void internal::AcceptorState::CheckDeadlines() {
  const int64_t now = MonotonicNowNs();
  {
    absl::MutexLock lock(&mu);
    for (ConnectionSlot* s : open) {
      if (s->deadline_ns.load(std::memory_order_acquire) > now) continue;
      if (!s->expired.exchange(true, std::memory_order_acq_rel)) {
        shutdown(s->fd, SHUT_RDWR);
      }
    }
  }
  check_armed.store(false, std::memory_order_release);
  // A deadline set while this pass ran finds check_armed true and leaves the next pass to us.
  if (with_deadline.load(std::memory_order_acquire) > 0) WatchDeadlines();
}

// ---- Acceptor

struct Acceptor::Listener final : Completion {
  Acceptor* owner = nullptr;
  int fd = -1;
  SocketAddress addr;
  Handler handler;
  ListenerLimits limits;
  std::shared_ptr<std::atomic<size_t>> open = std::make_shared<std::atomic<size_t>>(0);
  bool multishot = true;
  bool armed = false;
  bool closed = false;
  void Complete(int32_t res, uint32_t flags) noexcept override {
    owner->OnAccept(this, res, flags);
  }
};

Acceptor::Acceptor(Reactor& reactor, AcceptorOptions options)
    : reactor_(reactor),
      opts_(std::move(options)),
      state_(std::make_shared<internal::AcceptorState>(reactor, opts_.deadline_check)) {}

absl::StatusOr<std::unique_ptr<Acceptor>> Acceptor::Create(Reactor& reactor,
                                                           AcceptorOptions options) {
  if (Reactor::Current() != &reactor) {
    return absl::FailedPreconditionError("Acceptor::Create must run on its reactor's thread");
  }
  if (options.max_connections == 0) {
    return absl::InvalidArgumentError("max_connections must be at least 1");
  }
  return std::unique_ptr<Acceptor>(new Acceptor(reactor, std::move(options)));
}

Acceptor::~Acceptor() {
  alive_.reset();
  for (auto& l : listeners_) {
    if (l->fd >= 0) {
      close(l->fd);
      l->fd = -1;
      state_->listening.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
}

absl::StatusOr<SocketAddress> Acceptor::Listen(const SocketAddress& addr,
                                               const ListenOptions& options, Handler handler,
                                               ListenerLimits limits) {
  if (stopping_) return absl::FailedPreconditionError(StrCat(opts_.name, " is stopping"));
  OL_ASSIGN_OR_RETURN(int fd, io::Listen(addr, options));
  auto bound = LocalAddress(fd);
  auto l = std::make_unique<Listener>();
  l->owner = this;
  l->fd = fd;
  l->addr = bound.ok() ? *bound : addr;
  l->handler = std::move(handler);
  l->limits = limits;
  Listener* raw = l.get();
  listeners_.push_back(std::move(l));
  state_->listening.fetch_add(1, std::memory_order_acq_rel);
  Arm(raw);
  return raw->addr;
}

void Acceptor::Arm(Listener* l) {
  if (l->closed || l->armed) return;
  l->armed = true;
  reactor_.Accept(l->fd, l->multishot, l);
}

void Acceptor::OnAccept(Listener* l, int32_t res, uint32_t flags) {
  if ((flags & kCqeMore) == 0) {
    l->armed = false;
    if (l->closed && l->fd >= 0) {  // the last accept is back: the socket can go
      if (res >= 0) {
        state_->refused.fetch_add(1, std::memory_order_relaxed);
        close(res);
      }
      close(l->fd);
      l->fd = -1;
      // The last touch: once listening() reads false the acceptor may be destroyed, from any
      // thread (ThreadSanitizer caught this function still reading it after the decrement).
      state_->listening.fetch_sub(1, std::memory_order_acq_rel);
      return;
    }
  }
  if (res == -EINVAL && l->multishot && !l->closed) {
    l->multishot = false;  // a kernel without multishot accept
  } else if (res < 0) {
    if (!l->closed && res != -ECANCELED) {
      OL_LOG_EVERY_N_SEC(kWarning, 5) << opts_.name << ": accept on " << l->addr.ToString() << ": "
                                      << ErrnoStatus(res, "accept").message();
    }
    const bool out_of_resources = res == -EMFILE || res == -ENFILE || res == -ENOBUFS ||
                                  res == -ENOMEM;
    if (out_of_resources && !l->armed && !l->closed && !stopping_) {
      // Accepting again at once would fail again at once (the connection stays queued): try
      // again shortly, when a descriptor may have been freed.
      std::weak_ptr<void> alive = alive_;
      reactor_.After(absl::Milliseconds(50), [this, l, alive] {
        if (alive.lock() && !stopping_) Arm(l);
      });
      return;
    }
  } else if (l->closed || stopping_) {
    state_->refused.fetch_add(1, std::memory_order_relaxed);
    close(res);
  } else {
    Admit(l, res);
  }
  if (!l->armed && !l->closed && !stopping_) Arm(l);
}

void Acceptor::Refuse(Listener* l, int fd, std::string_view why) {
  OL_LOG_EVERY_N_SEC(kWarning, 5) << opts_.name << ": refusing a connection on "
                                  << l->addr.ToString() << ": " << why;
  state_->refused.fetch_add(1, std::memory_order_relaxed);  // counted before the peer sees it
  if (opts_.on_refused) opts_.on_refused(fd, why);
  close(fd);
}

bool Acceptor::EvictOne(const std::function<bool(const internal::ConnectionSlot&)>& in_scope) {
  if (!opts_.evict_when_full) return false;
  const int64_t now = MonotonicNowNs();
  absl::MutexLock lock(&state_->mu);
  internal::ConnectionSlot* oldest = nullptr;
  int64_t oldest_ns = now + 1;
  for (internal::ConnectionSlot* s : state_->open) {
    const int64_t at = s->evictable_ns.load(std::memory_order_acquire);
    if (at < oldest_ns && !s->evicted.load(std::memory_order_acquire) && in_scope(*s)) {
      oldest = s;
      oldest_ns = at;
    }
  }
  if (oldest == nullptr) return false;
  oldest->evicted.store(true, std::memory_order_release);
  shutdown(oldest->fd, SHUT_RDWR);  // its owner sees its reads end and lets it go
  state_->evicted.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void Acceptor::Admit(Listener* l, int fd) {
  const size_t open = state_->count.load(std::memory_order_acquire);
  bool reserve = false;
  if (open >= opts_.max_connections) {
    const bool room = EvictOne([](const internal::ConnectionSlot&) { return true; });
    if (!room && open >= opts_.max_connections + opts_.reserve) {
      return Refuse(l, fd, StrCat(open, " connections open (max_connections)"));
    }
    reserve = !room;
  }
  const size_t here = l->open->load(std::memory_order_acquire);
  if (l->limits.max_connections > 0 && here >= l->limits.max_connections) {
    const std::atomic<size_t>* counter = l->open.get();
    const bool room = EvictOne(
        [counter](const internal::ConnectionSlot& s) { return s.listener_open.get() == counter; });
    if (!room) return Refuse(l, fd, StrCat(here, " connections open on this listener (its cap)"));
  }
  auto slot = std::make_unique<internal::ConnectionSlot>();
  slot->fd = fd;
  slot->is_unix = l->addr.is_unix();
  slot->reserve = reserve;
  if (slot->is_unix) {
    slot->peer = l->addr;  // Unix peers are unnamed: name the socket they came in on
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      slot->peer_pid = cred.pid;
      slot->peer_uid = cred.uid;
    }
  } else {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
      slot->peer = SocketAddress::FromSockaddr(reinterpret_cast<sockaddr*>(&ss), len);
      // A place from the reserve is not counted against its address: it holds one short
      // request at most.
      if (opts_.max_per_peer > 0 && !reserve) slot->peer_key = PeerKey(ss);
    }
  }
  if (!slot->peer_key.empty()) {
    size_t from_peer = 0;
    {
      absl::MutexLock lock(&state_->mu);
      auto it = state_->per_peer.find(slot->peer_key);
      if (it != state_->per_peer.end()) from_peer = it->second;
    }
    if (from_peer >= opts_.max_per_peer) {
      const std::string key = slot->peer_key;
      const bool room =
          EvictOne([&key](const internal::ConnectionSlot& s) { return s.peer_key == key; });
      if (!room) {
        return Refuse(l, fd,
                      StrCat(from_peer, " connections open from ", slot->peer.ToString(),
                             "'s address (max_per_peer)"));
      }
    }
  }
  {
    absl::MutexLock lock(&state_->mu);
    if (!slot->peer_key.empty()) ++state_->per_peer[slot->peer_key];
    state_->open.insert(slot.get());
  }
  if (!slot->is_unix) TuneStreamSocket(fd);
  slot->id = state_->next_id++;
  slot->listener_open = l->open;
  l->open->fetch_add(1, std::memory_order_acq_rel);
  state_->count.fetch_add(1, std::memory_order_acq_rel);
  state_->accepted.fetch_add(1, std::memory_order_relaxed);
  l->handler(Connection(state_, slot.release()));
}

void Acceptor::StopAccepting() {
  stopping_ = true;
  for (auto& l : listeners_) {
    if (l->closed) continue;
    l->closed = true;
    if (!l->armed) {
      close(l->fd);
      l->fd = -1;
      state_->listening.fetch_sub(1, std::memory_order_acq_rel);
      continue;
    }
    // Ends the accept in flight; its last CQE comes back (-ECANCELED or an error) and OnAccept
    // closes the socket then.
    shutdown(l->fd, SHUT_RDWR);
    reactor_.Cancel(l.get(), nullptr);
  }
}

void Acceptor::ShutdownAll() {
  absl::MutexLock lock(&state_->mu);
  for (internal::ConnectionSlot* s : state_->open) shutdown(s->fd, SHUT_RDWR);
}

size_t Acceptor::open() const { return state_->count.load(std::memory_order_acquire); }
bool Acceptor::listening() const { return state_->listening.load(std::memory_order_acquire) > 0; }
uint64_t Acceptor::accepted() const { return state_->accepted.load(std::memory_order_relaxed); }
uint64_t Acceptor::refused() const { return state_->refused.load(std::memory_order_relaxed); }
uint64_t Acceptor::evicted() const { return state_->evicted.load(std::memory_order_relaxed); }

}  // namespace openlake::io

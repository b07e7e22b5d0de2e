// The lock RPC's client side (dist_locks.h): acquisition by quorum, the background release, and
// the refresh loop of a held lock.
#include <algorithm>
#include <atomic>
#include <coroutine>
#include <utility>

#include "absl/random/random.h"

#include "common/random.h"
#include "store/dist_locks.h"
#include "store/lock_rpc.pb.h"

#include "openlake/log.h"
#include "openlake/strings.h"

namespace openlake::store {

// What every lock of one DistLocks shares: fixed at construction, except the counters. Kept by
// the locks and their background coroutines too, so it outlives the DistLocks when it must.
struct DistLocks::Shared {
  std::vector<PeerLink*> links;
  uint32_t node_id = 0;
  DistLocksOptions o;
  absl::Duration refresh_every;  // InfiniteDuration: never
  // Relaxed: each is a tally read for stats; nothing is ordered by them.
  std::atomic<uint64_t> rounds{0};
  std::atomic<uint64_t> rpcs{0};
  std::atomic<uint64_t> lock_rounds{0};
  std::atomic<uint64_t> acquired{0};
  std::atomic<uint64_t> timed_out{0};
  std::atomic<uint64_t> unreachable{0};
  std::atomic<uint64_t> lost{0};
  std::atomic<uint64_t> background{0};
};

// One held lock, shared by its guard and its refresh loop. Everything but `held` belongs to
// the home reactor.
struct DistLock::State {
  std::shared_ptr<DistLocks::Shared> sh;
  io::Reactor* home = nullptr;
  std::string resource;
  std::string uid;
  bool exclusive = false;
  size_t quorum = 0;
  std::vector<bool> granted;
  // Read by held() from any thread; release/acquire so a reader that sees false also sees why.
  std::atomic<bool> held{true};
  bool released = false;  // the guard let go
  bool unlocked = false;  // Unlock has gone to every locker
  // The refresh loop while it waits for its next round, and the timer that will wake it;
  // Release cuts the wait short so the loop ends at once, not a refresh period later.
  std::coroutine_handle<> napper = nullptr;
  io::TimerId nap_timer;
};

namespace {

using Shared = DistLocks::Shared;
using LockState = DistLock::State;
using Answers = std::vector<absl::StatusOr<std::string>>;

constexpr auto kRelaxed = std::memory_order_relaxed;

// A fresh acquisition id: 16 random bytes in hex. Random rather than counted, so that ids of
// different nodes (and of one node before and after a restart) never meet in a table.
std::string NewUid() {
  char b[16];
  RandomBytes(b, sizeof(b));
  return Hex(std::string_view(b, sizeof(b)));
}

// A pause drawn at random from the upper half of `d`.
absl::Duration Jittered(absl::Duration d) {
  thread_local absl::BitGen gen;
  return d * absl::Uniform(gen, 0.5, 1.0);
}

uint32_t Millis(absl::Duration d) {
  const int64_t ms = absl::ToInt64Milliseconds(d);
  return static_cast<uint32_t>(std::clamp<int64_t>(ms, 1, UINT32_MAX));
}

// Sends `payload` to every locker at once and waits for every answer (a locker's error is its
// answer). Counted as one round.
io::Task<Answers> Round(Shared* sh, uint16_t method, std::string payload, absl::Duration timeout) {
  std::vector<io::Task<absl::StatusOr<std::string>>> calls;
  calls.reserve(sh->links.size());
  for (PeerLink* link : sh->links) calls.push_back(link->Call(method, payload, timeout));
  sh->rounds.fetch_add(1, kRelaxed);
  sh->rpcs.fetch_add(sh->links.size(), kRelaxed);
  io::Task<Answers> all = io::WhenAll(std::move(calls));
  Answers answers = co_await std::move(all);
  co_return answers;
}

// Gives `uid`'s hold on `resource` back to every locker, and ends. Errors are dropped: an entry
// a locker keeps expires after its ttl. Holds only the shared links and two strings, so it may
// outlive the lock (and the DistLocks) it came from.
io::Task<void> UnlockAll(std::shared_ptr<Shared> sh, std::string resource, std::string uid) {
  sh->background.fetch_add(1, kRelaxed);
  pb::UnlockRequest req;
  req.set_resource(resource);
  req.set_uid(uid);
  std::string payload = req.SerializeAsString();
  io::Task<Answers> round = Round(sh.get(), kLockRelease, std::move(payload), sh->o.call_timeout);
  Answers ignored = co_await std::move(round);
  (void)ignored;
  sh->background.fetch_sub(1, kRelaxed);
}

// Waits on the home reactor until the refresh period is over, or until Release wakes it.
struct Nap {
  LockState* s;
  absl::Duration d;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) {
    s->napper = h;
    LockState* st = s;
    s->nap_timer = s->home->After(d, [st] {
      std::coroutine_handle<> w = std::exchange(st->napper, nullptr);
      if (w) w.resume();
    });
  }
  void await_resume() const noexcept {}
};

void WakeRefresher(LockState& s) {
  if (!s.napper) return;
  s.home->CancelTimer(s.nap_timer);
  std::coroutine_handle<> w = std::exchange(s.napper, nullptr);
  // On a later turn: Release may be running inside the caller's own coroutine.
  s.home->Defer([w] { w.resume(); });
}

// While the lock is held: every refresh period, asks every locker to push its entry out. Fewer
// than a quorum that still had it means the lock may already be someone else's: it is lost,
// and what is left of it is given back at once rather than left to expire.
io::Task<void> RefreshLoop(std::shared_ptr<LockState> s) {
  Shared* sh = s->sh.get();
  sh->background.fetch_add(1, kRelaxed);
  pb::RefreshRequest req;
  req.add_resources(s->resource);
  req.add_uids(s->uid);
  req.set_ttl_ms(Millis(sh->o.ttl));
  const std::string payload = req.SerializeAsString();
  for (;;) {
    Nap nap{s.get(), sh->refresh_every};
    co_await nap;
    if (s->released) break;
    io::Task<Answers> round = Round(sh, kLockRefresh, payload, sh->o.call_timeout);
    Answers answers = co_await std::move(round);
    if (s->released) break;
    size_t confirmed = 0;
    for (const absl::StatusOr<std::string>& a : answers) {
      pb::RefreshAnswer r;
      if (a.ok() && r.ParseFromString(*a) && r.held_size() == 1 && r.held(0)) ++confirmed;
    }
    if (confirmed >= s->quorum) continue;
    s->held.store(false, std::memory_order_release);
    sh->lost.fetch_add(1, kRelaxed);
    s->unlocked = true;
    io::Spawn(UnlockAll(s->sh, s->resource, s->uid));
    break;
  }
  sh->background.fetch_sub(1, kRelaxed);
}

// The work of Release, on the home reactor.
void ReleaseHere(const std::shared_ptr<LockState>& s) {
  s->released = true;
  WakeRefresher(*s);
  if (s->unlocked) return;
  s->unlocked = true;
  io::Spawn(UnlockAll(s->sh, s->resource, s->uid));
}

}  // namespace

// ---- DistLock.

DistLock& DistLock::operator=(DistLock&& o) noexcept {
  if (this != &o) {
    Release();
    state_ = std::move(o.state_);
  }
  return *this;
}

void DistLock::Release() {
  if (state_ == nullptr) return;
  std::shared_ptr<State> s = std::move(state_);
  s->held.store(false, std::memory_order_release);
  io::Reactor* here = io::Reactor::Current();
  if (here == s->home) {
    ReleaseHere(s);
    return;
  }
  // A guard let go on another thread (a control path, a test): its state is the home
  // reactor's, so the release is sent there. Dropped only when that runtime has stopped, and
  // then nothing of the lock runs any more; its entries expire.
  if (here != nullptr && &here->runtime() == &s->home->runtime()) {
    here->SendTo(s->home->id(), [s] { ReleaseHere(s); });
  } else {
    (void)s->home->runtime().Post(s->home->id(), [s] { ReleaseHere(s); });
  }
}

bool DistLock::held() const {
  return state_ != nullptr && state_->held.load(std::memory_order_acquire);
}

std::string_view DistLock::resource() const {
  if (state_ == nullptr) return {};
  return state_->resource;
}

bool DistLock::exclusive() const { return state_ != nullptr && state_->exclusive; }

std::vector<bool> DistLock::granted() const {
  if (state_ == nullptr) return {};
  return state_->granted;
}

// ---- DistLocks.

DistLocks::DistLocks(std::vector<PeerLink*> lockers, uint32_t node_id, DistLocksOptions options)
    : shared_(std::make_shared<Shared>()) {
  shared_->links = std::move(lockers);
  shared_->node_id = node_id;
  shared_->o = std::move(options);
  const absl::Duration every = shared_->o.refresh_interval;
  shared_->refresh_every = every == absl::ZeroDuration() ? shared_->o.ttl / 3 : every;
}

DistLocks::~DistLocks() = default;

io::Task<absl::StatusOr<DistLock>> DistLocks::Lock(std::string resource, bool exclusive,
                                                   absl::Duration timeout) {
  return LockOn(shared_, std::move(resource), exclusive, timeout);
}

io::Task<absl::StatusOr<DistLock>> DistLocks::LockOn(std::shared_ptr<Shared> sh,
                                                     std::string resource, bool exclusive,
                                                     absl::Duration timeout) {
  const size_t n = sh->links.size();
  if (n == 0) co_return absl::FailedPreconditionError("distributed locks with no lockers");
  io::Reactor* home = io::Reactor::Current();
  OL_DCHECK(home != nullptr);  // a lock belongs to a reactor: its refreshes run there
  const size_t quorum = DistLocks::Quorum(n, exclusive);
  if (timeout <= absl::ZeroDuration()) timeout = sh->o.acquire_timeout;
  const int64_t deadline_ns = home->now_ns() + absl::ToInt64Nanoseconds(timeout);
  absl::Duration backoff = sh->o.backoff_min;
  absl::Status last_error;
  size_t best = 0;
  for (;;) {
    // A fresh uid per round: the Unlock of a failed round may still be on its way when the
    // next round's Lock arrives, and must not take that one's grant away.
    std::string uid = NewUid();
    pb::LockRequest req;
    req.set_resource(resource);
    req.set_uid(uid);
    req.set_owner(sh->node_id);
    req.set_exclusive(exclusive);
    req.set_ttl_ms(Millis(sh->o.ttl));
    std::string payload = req.SerializeAsString();
    // Each request gets the whole call_timeout even near the acquisition's deadline: a
    // request cut shorter would time out on a healthy but busy locker, and its PeerLink would
    // then take that node as down for everything else this node asks of it.
    sh->lock_rounds.fetch_add(1, kRelaxed);
    io::Task<Answers> round = Round(sh.get(), kLockAcquire, std::move(payload), sh->o.call_timeout);
    Answers answers = co_await std::move(round);

    std::vector<bool> granted(n, false);
    size_t grants = 0;
    size_t answered = 0;     // lockers that answered at all, granting or refusing
    bool give_back = false;  // some locker granted, or may have (its answer never came)
    for (size_t i = 0; i < n; ++i) {
      pb::LockAnswer a;
      if (!answers[i].ok()) {
        last_error = answers[i].status();
        give_back = true;
        continue;
      }
      ++answered;
      if (!a.ParseFromString(*answers[i])) {
        last_error = absl::InternalError("malformed lock answer");
        give_back = true;
      } else if (a.granted()) {
        granted[i] = true;
        ++grants;
        give_back = true;
      }
    }
    if (grants >= quorum) {
      auto s = std::make_shared<LockState>();
      s->sh = sh;
      s->home = home;
      s->resource = std::move(resource);
      s->uid = std::move(uid);
      s->exclusive = exclusive;
      s->quorum = quorum;
      s->granted = std::move(granted);
      sh->acquired.fetch_add(1, kRelaxed);
      if (sh->refresh_every != absl::InfiniteDuration()) io::Spawn(RefreshLoop(s));
      co_return DistLock(std::move(s));
    }
    best = std::max(best, grants);
    if (give_back) io::Spawn(UnlockAll(sh, resource, uid));
    // Too few lockers answer for any quorum (the rest refused the connection, are taken as
    // down, or let the request pass its deadline): no wait helps until a node returns, so the
    // caller hears it now instead of at the timeout, and its client retries.
    if (answered < quorum) {
      sh->unreachable.fetch_add(1, kRelaxed);
      co_return absl::UnavailableError(
          StrCat("lock ", resource, " (", exclusive ? "exclusive" : "shared", "): only ",
                 answered, " of ", n, " lockers answer, ", quorum,
                 " needed; last locker error: ", last_error.ToString()));
    }

    const int64_t now = home->now_ns();
    if (now >= deadline_ns) break;
    const absl::Duration pause = std::min(Jittered(backoff), absl::Nanoseconds(deadline_ns - now));
    io::Sleep nap{pause};
    co_await nap;
    backoff = std::min(backoff * 2, sh->o.backoff_max);
  }
  sh->timed_out.fetch_add(1, kRelaxed);
  std::string why = StrCat("lock ", resource, " (", exclusive ? "exclusive" : "shared",
                           "): at best ", best, " of ", n, " lockers granted it, ", quorum,
                           " needed, within ", absl::FormatDuration(timeout));
  if (!last_error.ok()) why += StrCat("; last locker error: ", last_error.ToString());
  co_return absl::DeadlineExceededError(why);
}

size_t DistLocks::Quorum(size_t lockers, bool exclusive) {
  const size_t q = lockers - lockers / 2;
  // With an even count, half is not a majority: two writers could each have half.
  return exclusive && lockers % 2 == 0 ? q + 1 : q;
}

size_t DistLocks::lockers() const { return shared_->links.size(); }

DistLocks::Counters DistLocks::counters() const {
  Counters c;
  c.rounds = shared_->rounds.load(kRelaxed);
  c.rpcs = shared_->rpcs.load(kRelaxed);
  c.lock_rounds = shared_->lock_rounds.load(kRelaxed);
  c.acquired = shared_->acquired.load(kRelaxed);
  c.timed_out = shared_->timed_out.load(kRelaxed);
  c.unreachable = shared_->unreachable.load(kRelaxed);
  c.lost = shared_->lost.load(kRelaxed);
  c.background = shared_->background.load(kRelaxed);
  return c;
}

}  // namespace openlake::store

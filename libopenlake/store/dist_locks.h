// Locks across the nodes of a cluster, held by quorum (the scheme of MinIO's dsync). Every node
// runs a LockService: a table of which resource names ("o:<bucket>/<key>", as in locks.h) are
// held, by whom, until when. A node that wants a lock asks every node's table at once
// (DistLocks) and has it when a quorum of them granted it; otherwise it gives back what it got,
// backs off and asks again, until its timeout. When fewer than a quorum of the tables answer at
// all (the rest are down or cut off), it gives up at once with Unavailable: a minority never
// waits out the timeout.
//
//   // On each node, beside the drive service:
//   std::unique_ptr<store::LockService> service = store::LockService::Attach(server, {});
//   // One link per node of the cluster, this node's own included:
//   store::DistLocks locks(links, /*node_id=*/1, {});
//   // In a coroutine on any reactor:
//   absl::StatusOr<store::DistLock> lock = co_await locks.Lock(name, /*exclusive=*/true, t);
//   if (!lock.ok()) co_return lock.status();      // DeadlineExceeded: no quorum within t;
//                                                 // Unavailable: too few tables answer
//   ... stage the new version ...
//   if (!lock->held()) co_return absl::AbortedError("lock lost");  // checked by the commit
//   ... commit ...
//   lock->Release();                              // or let it go out of scope
//
// Quorums, with n lockers: a shared lock needs n - n/2 grants; an exclusive one the same, plus
// one when n is even. Two exclusive quorums therefore always overlap, and so do an exclusive
// and a shared one, and each table refuses the second of two conflicting holders.
//
// Nothing is kept forever: an entry lives for its ttl unless its holder refreshes it, so the
// locks of a node that died go away by themselves. A holder refreshes every ttl/3; when fewer
// than a quorum of the tables still confirm (they restarted and forgot it, or cannot be
// reached), the lock is lost and DistLock::held() turns false. A holder cut off from the tables
// learns it at its next refresh, before its entries expire. Tables that restart forget at once,
// though, and then another node may take the lock up to one refresh period before the holder
// learns it has lost it: the commit's check of held() narrows that window, it does not close
// it (the same caveat as dsync's).
//
// Threads: a LockService lives on its RpcServer's reactor. DistLocks may be used from every
// reactor at once (it holds links and options, which do not change, and atomic counters); a
// DistLock belongs to the reactor whose Lock made it, and its refresh timers run there.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "store/remote_drive.h"

#include "openlake/io/task.h"
#include "openlake/net/rpc.h"

namespace openlake::store {

// Method numbers (the drive RPC has 512..533).
enum LockMethod : uint16_t {
  kLockAcquire = 560,  // pb::LockRequest → pb::LockAnswer
  kLockRelease = 561,  // pb::UnlockRequest → empty
  kLockRefresh = 562,  // pb::RefreshRequest → pb::RefreshAnswer
};

// ---- The serving side: one node's table.

struct LockServiceOptions {
  // For requests that name no ttl; longer ones are cut to max_ttl.
  absl::Duration default_ttl = absl::Seconds(30);
  absl::Duration max_ttl = absl::Minutes(10);
  // How often expired entries are swept out. An expired entry never blocks a request between
  // sweeps: each request drops the expired holders of its resource first.
  absl::Duration sweep_interval = absl::Seconds(1);
};

class LockService {
 public:
  // Registers the lock methods on `server`. On the server's reactor; the service must outlive
  // the server's handlers (Stop the server first), and be destroyed on that reactor. Only admin
  // connections (the cluster's daemons) may use it; others are answered PermissionDenied.
  static std::unique_ptr<LockService> Attach(net::RpcServer& server, LockServiceOptions options);
  ~LockService();
  LockService(const LockService&) = delete;
  LockService& operator=(const LockService&) = delete;

  // On the server's reactor (tests, metrics).
  struct Counters {
    uint64_t grants = 0;       // Lock requests granted (re-grants included)
    uint64_t refusals = 0;     // Lock requests refused for a conflict
    uint64_t expirations = 0;  // entries dropped because their ttl ran out
  };
  const Counters& counters() const;
  // Holder entries now: one per exclusive holder, one per shared holder.
  size_t held() const;

  struct State;

 private:
  explicit LockService(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

// ---- The client side.

struct DistLocksOptions {
  // How long a table keeps an entry that is not refreshed.
  absl::Duration ttl = absl::Seconds(30);
  // How often a held lock is refreshed. Zero: ttl / 3. InfiniteDuration: never (the lock then
  // expires after ttl however long it is held; tests use it to play a holder that died).
  absl::Duration refresh_interval = absl::ZeroDuration();
  // Lock's timeout when it is given none.
  absl::Duration acquire_timeout = absl::Seconds(30);
  // Deadline of each request to a locker. A locker that does not answer in time counts as a
  // refusal (and its PeerLink takes that node as down for a while: its later requests fail at
  // once). An acquisition starts no round past its timeout, but the round under way may end up
  // to call_timeout later when a locker hangs instead of refusing.
  absl::Duration call_timeout = absl::Seconds(2);
  // Pause between two rounds of a contended acquisition: starts at backoff_min, doubles each
  // round up to backoff_max, and each pause is drawn at random from its upper half so that
  // contenders do not keep colliding.
  absl::Duration backoff_min = absl::Milliseconds(5);
  absl::Duration backoff_max = absl::Milliseconds(100);
};

class DistLocks;

// A lock held by quorum. Move-only. Release it, or destroy it, on the reactor whose Lock made
// it (elsewhere the release is sent there, which needs that runtime to be running), and before
// that runtime stops: a held lock's refresh loop waits on one of its timers.
class DistLock {
 public:
  DistLock() = default;  // holds nothing
  DistLock(DistLock&& o) noexcept = default;
  DistLock& operator=(DistLock&& o) noexcept;
  DistLock(const DistLock&) = delete;
  DistLock& operator=(const DistLock&) = delete;
  ~DistLock() { Release(); }

  // Lets go: Unlock goes to every locker in the background, and the refresh loop ends. A no-op
  // on a lock released already (or one that holds nothing).
  void Release();
  // True until Release, and until a refresh finds fewer than a quorum of lockers still holding
  // it. Any thread.
  bool held() const;
  // Empty for a lock that holds nothing.
  std::string_view resource() const;
  bool exclusive() const;
  // Which lockers granted it, in the order DistLocks was given them; empty for a lock that
  // holds nothing.
  std::vector<bool> granted() const;

  struct State;

 private:
  friend class DistLocks;
  explicit DistLock(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

class DistLocks {
 public:
  // `lockers`: one link per node of the cluster, this node's own included (it is asked over
  // loopback like any other); their count is n. The links must outlive this object and every
  // lock it hands out, and every request still in flight (destroying a PeerLink cancels those).
  // `node_id` is recorded as the owner of the entries this node makes.
  DistLocks(std::vector<PeerLink*> lockers, uint32_t node_id, DistLocksOptions options = {});
  ~DistLocks();  // the locks handed out stay valid
  DistLocks(const DistLocks&) = delete;
  DistLocks& operator=(const DistLocks&) = delete;

  // Takes `resource`, shared or exclusive, within `timeout` (zero: options.acquire_timeout).
  // From a coroutine on a reactor; the lock belongs to that reactor. Errors:
  //   DeadlineExceeded    no quorum within the timeout (the message says how close it came,
  //                       and the last error of a locker that did not answer)
  //   Unavailable         fewer than a quorum of the lockers answered a round at all: given up
  //                       at once (the message names how many answered and the last error)
  //   FailedPrecondition  constructed with no lockers
  io::Task<absl::StatusOr<DistLock>> Lock(std::string resource, bool exclusive,
                                          absl::Duration timeout = absl::ZeroDuration());

  // Grants needed out of `lockers` for a shared or an exclusive lock.
  static size_t Quorum(size_t lockers, bool exclusive);
  size_t lockers() const;

  // Any thread. A round is one request sent to every locker at once, i.e. one round trip of
  // latency; rpcs counts the requests themselves.
  struct Counters {
    uint64_t rounds = 0;       // lock, unlock and refresh rounds
    uint64_t rpcs = 0;         // lock, unlock and refresh requests
    uint64_t lock_rounds = 0;  // rounds of Lock requests (one per try of an acquisition)
    uint64_t acquired = 0;     // Locks that reached their quorum
    uint64_t timed_out = 0;    // Locks that did not, within their timeout
    uint64_t unreachable = 0;  // Locks given up as too few lockers answer for a quorum
    uint64_t lost = 0;         // held locks a refresh found gone
    uint64_t background = 0;   // unlock rounds and refresh loops running now
  };
  Counters counters() const;

  struct Shared;

 private:
  // The body of Lock. It holds the shared part, so it may outlive this object.
  static io::Task<absl::StatusOr<DistLock>> LockOn(std::shared_ptr<Shared> sh, std::string resource,
                                                   bool exclusive, absl::Duration timeout);

  std::shared_ptr<Shared> shared_;
};

}  // namespace openlake::store

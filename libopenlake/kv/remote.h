// The KV pool's cluster side (docs/kv-pool.md, "Cluster pool"): what one daemon does for and
// with its peers. Private to the KV service.
//
// As an owner, it serves its peers on the pool's RPC server (admin connections only: the
// daemon's own user or root on loopback, a holder of the shared secret beyond):
//   PeerAttach   the UCX worker address, the slab's packed rkey and address, the slab instance
//   PeerLookup   the longest prefix it holds of a namespace named by name and digest, pinned
//                for the asking connection (a daemon-to-daemon session with a lease)
//   Announce     heads of chains an owner holds, for the directory this daemon is a home of
//   FindOwners   the directory's owners of a head
// and announces the heads it holds to their homes (cluster::Announcer, once a second).
//
// As a puller, when a Lookup or Exists misses locally it asks the head's home for owners and
// the first owner for the rest of the prefix (Probe: Exists; Pull: Lookup, which also pins,
// reserves local slots, reads the blocks with one batched UCX get straight into this slab,
// checks each block's CRC-64 and that the owner's lease still held, and hands the verified
// blocks back for the service to commit). Blocking RPCs to peers run on two agent threads, so
// the pool's reactor never waits on a peer; UCX runs on the pool's reactor (a worker whose event
// fd the reactor's io_uring polls).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

#include "cluster/directory.h"
#include "kv/pool.h"
#include "kv/slab.h"

#include "openlake/io/reactor.h"
#include "openlake/kv/service.h"
#include "openlake/net/rpc.h"

namespace openlake::kv {

// What the service lends the cluster side: this daemon's tiers (slab and disk) as one. Each
// runs on the pool's reactor.
struct LocalTiers {
  // Whether a tier still holds the block (heads that no longer are get withdrawn).
  std::function<bool(uint32_t ns, const BlockKey& key)> holds;
  // Exists over both tiers.
  std::function<absl::StatusOr<ExistsResult>(NsRef ref, absl::Span<const BlockKey> keys)> exists;
  // A Lookup pinned for `session` that reads disk-resident blocks back into the slab first;
  // `done` runs later on the reactor (never when the session closed meanwhile).
  std::function<void(uint64_t session, NsRef ref, std::vector<BlockKey> keys,
                     absl::AnyInvocable<void(absl::StatusOr<Pins>)> done)>
      lookup;
};

// What a Pull brings back: blocks read into slots reserved here and verified, for the service
// to commit (in key order, contiguous from the first key asked), and reserved slots to free.
struct Pulled {
  std::vector<CommitEntry> entries;
  std::vector<uint64_t> unused;
  uint32_t node = 0;  // the owner it came from
};

class Remote {
 public:
  Remote(io::Runtime& runtime, unsigned reactor, Pool& pool, SlabMapping& slab,
         KvClusterOptions options, LocalTiers tiers);
  ~Remote();

  // On the pool's reactor, before the server listens: the UCX context, the slab's registration
  // and the worker (attached to the reactor), the peer methods on `server`, the agent threads.
  absl::Status Start(net::RpcServer& server);
  // Not on a reactor thread: ends the agent threads (a job in progress finishes first, within
  // its deadline). Then StopOnReactor, on the reactor (or after it stopped).
  void StopThreads();
  bool threads_stopped() const { return agents_.empty(); }
  void StopOnReactor();

  // ---- On the pool's reactor.
  // A Lookup of `keys` (of the chain whose first key is `head`) in namespace `ns` found their
  // first `have` here. Pulls what follows from an owner; `done` runs on the reactor with what
  // came (possibly nothing). False when nothing was started (`done` is then never called): no
  // owner can be asked, or the agents are busy.
  bool Pull(uint32_t ns, const BlockKey& head, std::vector<BlockKey> keys, size_t have,
            absl::Time deadline, absl::AnyInvocable<void(Pulled)> done);
  // An Exists: how many keys after `have` an owner holds (0 when none, or none answered in
  // time). Same contract as Pull.
  bool Probe(uint32_t ns, const BlockKey& head, std::vector<BlockKey> keys, size_t have,
             absl::AnyInvocable<void(size_t)> done);
  // Blocks committed here (by a client or a pull): chain heads (depth 0) get announced.
  void Committed(uint32_t ns, absl::Span<const CommitEntry> entries);
  // A chain head this daemon holds (one the disk tier recovered at start): announced too.
  void Holding(uint32_t ns, const BlockKey& head);
  // Once a second: announcements due, the directory's expiry, the withdrawal of heads gone.
  void Tick();

  struct Counters {
    uint64_t pulls = 0;            // Pull calls started
    uint64_t pull_failures = 0;    // an owner was asked and nothing came
    uint64_t rejected_blocks = 0;  // CRC-64 mismatch or lease run out
    uint64_t probes = 0;
    uint64_t announcements = 0;       // messages sent to homes
    uint64_t peer_lookups = 0;        // PeerLookups served to peers
    uint64_t peer_served_blocks = 0;  // blocks pinned for peers' gets
    int64_t get_ns = 0;               // in the gets of pulls that brought blocks
  };
  Counters counters() const;

 private:
  struct Link;
  struct Job {
    uint32_t ns = 0;
    std::string ns_name;
    uint64_t digest = 0;
    uint32_t block_bytes = 0;
    BlockKey head;
    std::vector<BlockKey> keys;
    size_t have = 0;
    bool pull = false;
    // Where this daemon is the head's first home, its directory's owners, found on the
    // reactor before the job is queued (no round trip back to it from the agent).
    bool owners_known = false;
    std::vector<uint32_t> owners;
    absl::Time deadline;
    absl::AnyInvocable<void(Pulled)> pulled;
    absl::AnyInvocable<void(size_t)> probed;
  };
  bool Enqueue(std::function<void()> fn);
  // On the reactor: while jobs queued from it have not been answered, keep it turning (it polls
  // its ring instead of sleeping, yielding its core each turn), so the answer posted back is
  // taken without a wake-up.
  void KeepHot();
  bool Prepare(uint32_t ns, const BlockKey& head, std::vector<BlockKey>& keys, size_t have,
               Job* job);
  void AgentLoop();
  void RunJob(Job& job);
  // The owners of chain head `head`, from the first live home that answers.
  std::vector<uint32_t> FindOwners(uint64_t head, absl::Time deadline);
  // The owner that last answered for `head`, while that is recent and it is live; kNoNode
  // otherwise. RememberOwner records one. Any thread.
  static constexpr uint32_t kNoNode = ~uint32_t{0};
  uint32_t RecentOwner(uint64_t head);
  void RememberOwner(uint64_t head, uint32_t node);
  // On the reactor: the live owners of `head` in this daemon's shard of the directory, `asker`
  // left out, freshest first.
  std::vector<uint32_t> OwnersHere(uint64_t head, const cluster::LiveSet& live, uint32_t asker);
  // The owner's answer for keys[have..] (by `lookup_deadline`): pulled and verified, or
  // counted (a probe). Returns how many keys it brought.
  size_t PullFrom(uint32_t owner, Job& job, absl::Time lookup_deadline, Pulled* out);
  // The peer's link, connected (and attached for UCX gets when `ucx`); null when that failed.
  // `fresh`: whether it connected just now (a kept connection may have died unnoticed).
  std::shared_ptr<Link> LinkTo(uint32_t node, absl::Time deadline, bool ucx,
                               bool* fresh = nullptr);
  // Calls `method` on `node` over its link (attached when `ucx`). A kept connection that turns
  // out dead (the peer restarted) is dropped and the call made once more on a new one. The link
  // used comes back in `*used` (null when none could be made).
  absl::StatusOr<net::RpcClient::Response> CallPeer(uint32_t node, absl::Time deadline, bool ucx,
                                                    uint16_t method, const std::string& payload,
                                                    std::shared_ptr<Link>* used);
  void DropLink(uint32_t node, const std::shared_ptr<Link>& link);
  void Register(net::RpcServer& server);

  io::Runtime& runtime_;
  const unsigned reactor_;
  Pool& pool_;
  SlabMapping& slab_;
  const KvClusterOptions options_;
  LocalTiers tiers_;

  // The reactor's: UCX, the directory, the announcer and the heads it announces.
  struct Ucx;
  std::unique_ptr<Ucx> ucx_;
  cluster::Directory directory_;
  cluster::Announcer announcer_;
  struct Head {
    uint32_t ns;
    BlockKey key;
  };
  absl::flat_hash_map<uint64_t, Head> heads_;
  absl::Time next_sweep_ = absl::InfinitePast();
  size_t awaiting_ = 0;  // jobs queued and not yet answered
  bool hot_ = false;     // a KeepHot turn is deferred
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);

  // The agents'.
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> agents_;
  absl::flat_hash_map<uint32_t, std::shared_ptr<Link>> links_;  // under mu_
  struct RecentEntry {
    uint32_t node;
    absl::Time until;
  };
  absl::flat_hash_map<uint64_t, RecentEntry> recent_owners_;  // under mu_
  mutable std::mutex counters_mu_;
  Counters counters_;
};

}  // namespace openlake::kv

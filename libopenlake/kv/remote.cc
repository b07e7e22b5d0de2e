#include "kv/remote.h"

#include <sched.h>

#include <algorithm>
#include <utility>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

#include "kv/wire.h"

#include "openlake/checksum.h"
#include "openlake/log.h"
#include "openlake/net/ucx.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::kv {
namespace {

// The pins a peer grants are trusted until this share of its lease has passed since they were
// asked for (the rest covers clock steps and the answer's travel).
constexpr int64_t kLeaseTrustPercent = 80;
constexpr size_t kOwnersPerFind = 4;
constexpr absl::Duration kAnnounceTimeout = absl::Milliseconds(500);
constexpr absl::Duration kHeadSweep = absl::Seconds(10);
// Heads whose owner answered lately, and for how long that is trusted before the directory is
// asked again (a wrong one costs one message, never a wrong byte).
constexpr size_t kRecentOwners = 1 << 16;
constexpr absl::Duration kRecentOwnerTtl = absl::Seconds(5);

absl::Duration Left(absl::Time deadline) {
  return std::max(absl::ZeroDuration(), deadline - absl::Now());
}

absl::Status NeedAdmin(const net::RpcCall& call) {
  if (call.connection().admin) return absl::OkStatus();
  return absl::PermissionDeniedError(
      "the KV peer methods are for the cluster's daemons: connect as the daemon's user, or "
      "with the cluster's rpc_secret");
}

// Parses a peer method's request; false (answered with the error) when the caller is not an
// admin or the request is malformed.
bool PeerRequest(net::RpcCall& call, google::protobuf::MessageLite* req) {
  absl::Status st = NeedAdmin(call);
  if (st.ok()) st = wire::Parse(call.payload(), req);
  if (st.ok()) return true;
  call.RespondError(st);
  return false;
}

void Answer(net::RpcCall& call, const google::protobuf::MessageLite& msg) {
  std::string out;
  msg.SerializeToString(&out);
  call.Respond(std::move(out));
}

}  // namespace

struct Remote::Ucx {
  std::unique_ptr<net::UcxContext> context;
  std::unique_ptr<net::UcxRegion> region;  // the slab
  std::unique_ptr<net::UcxWorker> worker;  // attached to the pool's reactor
};

// One peer, as this daemon reaches it. The RPC client is the agents' (thread-safe); the UCX
// endpoint and key are the reactor's.
struct Remote::Link {
  std::mutex mu;  // serialises (re)connecting
  std::unique_ptr<net::RpcClient> rpc;
  bool attached = false;
  std::unique_ptr<net::UcxEndpoint> ep;
  std::unique_ptr<net::UcxRemoteKey> rkey;
  uint64_t instance = 0;
  uint64_t slab_address = 0;
  int64_t lease_ns = 0;
};

Remote::Remote(io::Runtime& runtime, unsigned reactor, Pool& pool, SlabMapping& slab,
               KvClusterOptions options, LocalTiers tiers)
    : runtime_(runtime),
      reactor_(reactor),
      pool_(pool),
      slab_(slab),
      options_(std::move(options)),
      tiers_(std::move(tiers)),
      directory_(cluster::DirectoryOptions{}),
      announcer_(options_.membership->self_id(),
                 cluster::Announcer::Options{options_.homes, absl::Seconds(10), absl::Seconds(1)}) {
}

Remote::~Remote() {
  StopThreads();
  StopOnReactor();  // a no-op after the reactor's; else the reactor has stopped
}

absl::Status Remote::Start(net::RpcServer& server) {
  if (net::UcxBuilt()) {
    auto ucx = std::make_unique<Ucx>();
    net::UcxOptions uo;
    uo.tls = options_.ucx_tls;
    uo.net_devices = options_.ucx_devices;
    OL_ASSIGN_OR_RETURN(ucx->context, net::UcxContext::Create(uo));
    OL_ASSIGN_OR_RETURN(ucx->region,
                        net::UcxRegion::Map(*ucx->context, slab_.base(), slab_.size()));
    OL_ASSIGN_OR_RETURN(ucx->worker, net::UcxWorker::Create(*ucx->context));
    ucx->worker->Attach(runtime_.reactor(reactor_));
    OL_LOG(kInfo) << "KV cluster: UCX " << ucx->context->Describe() << "; the slab ("
                  << slab_.size() << " bytes) is registered for peers' gets";
    ucx_ = std::move(ucx);
  } else {
    OL_LOG(kWarning) << "KV cluster: this build has no UCX: peers can find this daemon's "
                        "prefixes but neither side can pull them";
  }
  Register(server);
  for (int i = 0; i < 2; ++i) agents_.emplace_back([this] { AgentLoop(); });
  return absl::OkStatus();
}

void Remote::StopThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    jobs_.clear();
  }
  cv_.notify_all();
  for (std::thread& t : agents_) t.join();
  agents_.clear();
}

void Remote::StopOnReactor() {
  alive_.reset();  // answers still to come, and KeepHot's next turn, find it gone
  // Keys before endpoints, endpoints before the worker (net/ucx.h).
  for (auto& [node, link] : links_) {
    link->rkey.reset();
    link->ep.reset();
  }
  links_.clear();
  ucx_.reset();
}

Remote::Counters Remote::counters() const {
  std::lock_guard<std::mutex> lock(counters_mu_);
  return counters_;
}

// ---- the owner's side ----------------------------------------------------------------------

void Remote::Register(net::RpcServer& server) {
  server.Register(wire::kPeerAttach, [this](net::RpcCall call) {
    wire::PeerAttachRequest req;
    if (!PeerRequest(call, &req)) return;
    if (ucx_ == nullptr) {
      call.RespondError(absl::FailedPreconditionError("this daemon was built without UCX"));
      return;
    }
    wire::PeerAttachResponse resp;
    resp.set_node_id(options_.membership->self_id());
    resp.set_instance_id(slab_.header().instance_id);
    resp.set_worker_address(ucx_->worker->address());
    resp.set_packed_rkey(ucx_->region->packed_key());
    resp.set_slab_address(ucx_->region->address());
    resp.set_lease_ms(static_cast<uint64_t>(pool_.lease_ns() / 1000000));
    OL_LOG(kInfo) << "KV cluster: node " << req.node_id() << " ("
                  << call.connection().peer.ToString() << ") attached for gets from this slab";
    Answer(call, resp);
  });

  server.Register(wire::kPeerLookup, [this](net::RpcCall call) {
    wire::PeerLookupRequest req;
    if (!PeerRequest(call, &req)) return;
    absl::StatusOr<std::vector<BlockKey>> keys = wire::UnpackKeys(req.keys(), req.key_len());
    if (!keys.ok()) {
      call.RespondError(keys.status());
      return;
    }
    wire::PeerLookupResponse resp;
    resp.set_instance_id(slab_.header().instance_id);
    {
      std::lock_guard<std::mutex> lock(counters_mu_);
      ++counters_.peer_lookups;
    }
    absl::StatusOr<Namespace> ns = pool_.FindNamespace(req.ns_name(), nullptr);
    if (!ns.ok() || ns->digest != req.ns_digest()) {  // not here, or another layout: a miss
      Answer(call, resp);
      return;
    }
    resp.set_block_bytes(ns->block_bytes);
    const NsRef ref{ns->id, ns->digest};
    if (!req.pin()) {
      absl::StatusOr<ExistsResult> r = tiers_.exists(ref, *keys);
      if (r.ok()) resp.set_prefix(static_cast<uint32_t>(r->prefix));
      Answer(call, resp);
      return;
    }
    // Both tiers: blocks this daemon holds only on disk are read back into the slab first, so
    // the peer's gets find them there.
    const uint64_t session = call.connection().id;
    tiers_.lookup(session, ref, *std::move(keys),
                  [this, call = std::move(call), resp = std::move(resp)](
                      absl::StatusOr<Pins> pins) mutable {
                    if (!pins.ok()) {
                      call.RespondError(pins.status());
                      return;
                    }
                    resp.set_prefix(static_cast<uint32_t>(pins->hits.size()));
                    resp.set_pin_batch(pins->batch);
                    for (const SlotHit& h : pins->hits) {
                      resp.add_offsets(h.offset);
                      resp.add_checksums(h.checksum);
                      resp.add_depths(pool_.DepthOf(h.slot));
                    }
                    {
                      std::lock_guard<std::mutex> lock(counters_mu_);
                      counters_.peer_served_blocks += pins->hits.size();
                    }
                    Answer(call, resp);
                  });
  });

  server.Register(wire::kAnnounce, [this](net::RpcCall call) {
    wire::AnnounceRequest req;
    if (!PeerRequest(call, &req)) return;
    const absl::Time now = absl::Now();
    directory_.Announce(req.owner(), {req.announce().begin(), req.announce().end()}, now);
    directory_.Withdraw(req.owner(), {req.withdraw().begin(), req.withdraw().end()});
    Answer(call, wire::AnnounceResponse());
  });

  server.Register(wire::kFindOwners, [this](net::RpcCall call) {
    wire::FindOwnersRequest req;
    if (!PeerRequest(call, &req)) return;
    std::shared_ptr<const cluster::LiveSet> live = options_.membership->live();
    wire::FindOwnersResponse resp;
    for (uint32_t o : OwnersHere(req.head(), *live, req.asker())) resp.add_owners(o);
    Answer(call, resp);
  });
}

void Remote::Committed(uint32_t ns, absl::Span<const CommitEntry> entries) {
  for (const CommitEntry& e : entries) {
    if (e.depth == 0) Holding(ns, e.key);
  }
}

void Remote::Holding(uint32_t ns, const BlockKey& key) {
  const Namespace* n = pool_.NamespaceOf(ns);
  if (n == nullptr) return;
  const uint64_t head = cluster::DirectoryKey(n->name, n->digest, key.bytes());
  if (heads_.try_emplace(head, Head{ns, key}).second) announcer_.Add(head);
}

void Remote::Tick() {
  const absl::Time now = absl::Now();
  if (now >= next_sweep_) {
    next_sweep_ = now + kHeadSweep;
    for (auto it = heads_.begin(); it != heads_.end();) {
      if (tiers_.holds(it->second.ns, it->second.key)) {
        ++it;
        continue;
      }
      announcer_.Remove(it->first);
      heads_.erase(it++);
    }
    directory_.Expire(now);
  }
  std::shared_ptr<const cluster::LiveSet> live = options_.membership->live();
  const uint32_t self = options_.membership->self_id();
  std::vector<cluster::Announcement> out =
      announcer_.Flush(*live, now, [&](const cluster::Announcement& a) {
        directory_.Announce(self, a.announce, now);
        directory_.Withdraw(self, a.withdraw);
      });
  for (cluster::Announcement& a : out) {
    wire::AnnounceRequest req;
    req.set_owner(self);
    for (uint64_t h : a.announce) req.add_announce(h);
    for (uint64_t h : a.withdraw) req.add_withdraw(h);
    auto payload = std::make_shared<std::string>(req.SerializeAsString());
    const uint32_t home = a.home;
    Enqueue([this, home, payload] {
      const absl::Time deadline = absl::Now() + kAnnounceTimeout;
      std::shared_ptr<Link> link;
      absl::StatusOr<net::RpcClient::Response> r =
          CallPeer(home, deadline, /*ucx=*/false, wire::kAnnounce, *payload, &link);
      if (!r.ok()) {
        OL_LOG_EVERY_N_SEC(kWarning, 10)
            << "KV cluster: announcing heads to node " << home << ": " << r.status().message();
        return;
      }
      std::lock_guard<std::mutex> lock(counters_mu_);
      ++counters_.announcements;
    });
  }
}

// ---- the puller's side ---------------------------------------------------------------------

bool Remote::Prepare(uint32_t ns, const BlockKey& head, std::vector<BlockKey>& keys, size_t have,
                     Job* job) {
  if (have >= keys.size() || keys.empty()) return false;
  if (options_.membership->live_count() < 2) return false;  // nobody to ask
  const Namespace* n = pool_.NamespaceOf(ns);
  if (n == nullptr) return false;
  job->ns = ns;
  job->ns_name = n->name;
  job->digest = n->digest;
  job->block_bytes = n->block_bytes;
  job->head = head.empty() ? keys[0] : head;
  job->keys = std::move(keys);
  job->have = have;
  const uint64_t dkey = cluster::DirectoryKey(job->ns_name, job->digest, job->head.bytes());
  std::shared_ptr<const cluster::LiveSet> live = options_.membership->live();
  const auto homes = cluster::Homes(dkey, *live, 1);
  if (!homes.empty() && homes[0] == options_.membership->self_id()) {
    job->owners_known = true;
    job->owners = OwnersHere(dkey, *live, options_.membership->self_id());
  }
  return true;
}

bool Remote::Pull(uint32_t ns, const BlockKey& head, std::vector<BlockKey> keys, size_t have,
                  absl::Time deadline, absl::AnyInvocable<void(Pulled)> done) {
  if (ucx_ == nullptr) return false;
  auto job = std::make_shared<Job>();
  if (!Prepare(ns, head, keys, have, job.get())) return false;
  job->pull = true;
  job->deadline = deadline;
  job->pulled = std::move(done);
  if (!Enqueue([this, job] { RunJob(*job); })) return false;
  ++awaiting_;
  KeepHot();
  return true;
}

bool Remote::Probe(uint32_t ns, const BlockKey& head, std::vector<BlockKey> keys, size_t have,
                   absl::AnyInvocable<void(size_t)> done) {
  auto job = std::make_shared<Job>();
  if (!Prepare(ns, head, keys, have, job.get())) return false;
  job->deadline = absl::Now() + options_.lookup_timeout;
  job->probed = std::move(done);
  if (!Enqueue([this, job] { RunJob(*job); })) return false;
  ++awaiting_;
  KeepHot();
  return true;
}

void Remote::KeepHot() {
  if (hot_ || awaiting_ == 0) return;
  hot_ = true;
  runtime_.reactor(reactor_).Defer([this, alive = std::weak_ptr<int>(alive_)] {
    if (alive.expired()) return;
    hot_ = false;
    // The agent that will answer may be waiting for this very core (a busy reactor keeps it
    // off until the scheduler's next tick, milliseconds): give it the core on every turn.
    sched_yield();
    KeepHot();
  });
}

bool Remote::Enqueue(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || jobs_.size() >= options_.max_queued) return false;
    jobs_.push_back(std::move(fn));
  }
  cv_.notify_one();
  return true;
}

void Remote::AgentLoop() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      fn = std::move(jobs_.front());
      jobs_.pop_front();
    }
    fn();
  }
}

void Remote::RunJob(Job& job) {
  const absl::Time lookup_deadline = std::min(job.deadline, absl::Now() + options_.lookup_timeout);
  const uint64_t head = cluster::DirectoryKey(job.ns_name, job.digest, job.head.bytes());
  Pulled out;
  size_t more = 0;
  {
    std::lock_guard<std::mutex> lock(counters_mu_);
    ++(job.pull ? counters_.pulls : counters_.probes);
  }
  // The owner that answered for this head a moment ago is asked first, without a message to
  // the home (a scheduler's Exists and then its workers' Lookups ask for the same prefix).
  const uint32_t recent = RecentOwner(head);
  if (recent != kNoNode) {
    more = PullFrom(recent, job, lookup_deadline, &out);
    if (more > 0) out.node = recent;
  }
  std::vector<uint32_t> owners;
  if (more == 0) {
    owners = job.owners_known ? std::move(job.owners) : FindOwners(head, lookup_deadline);
  }
  for (uint32_t owner : owners) {
    if (absl::Now() >= lookup_deadline) break;
    if (owner == recent) continue;  // asked above
    more = PullFrom(owner, job, lookup_deadline, &out);
    if (more > 0) {
      out.node = owner;
      break;
    }
  }
  if (more > 0) RememberOwner(head, out.node);
  if (job.pull && (recent != kNoNode || !owners.empty()) && out.entries.empty()) {
    std::lock_guard<std::mutex> lock(counters_mu_);
    ++counters_.pull_failures;
  }
  auto shared = std::make_shared<Job>(std::move(job));
  auto result = std::make_shared<Pulled>(std::move(out));
  const bool posted = runtime_.Post(reactor_, [this, alive = std::weak_ptr<int>(alive_), shared,
                                              result, more] {
    if (!alive.expired()) --awaiting_;
    if (shared->pull) {
      shared->pulled(std::move(*result));
    } else {
      shared->probed(more);
    }
  });
  if (!posted) OL_LOG(kWarning) << "KV cluster: the pool stopped before a remote answer";
}

uint32_t Remote::RecentOwner(uint64_t head) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = recent_owners_.find(head);
  if (it == recent_owners_.end()) return kNoNode;
  if (absl::Now() > it->second.until || !options_.membership->live()->Contains(it->second.node)) {
    recent_owners_.erase(it);
    return kNoNode;
  }
  return it->second.node;
}

void Remote::RememberOwner(uint64_t head, uint32_t node) {
  std::lock_guard<std::mutex> lock(mu_);
  if (recent_owners_.size() >= kRecentOwners) recent_owners_.clear();  // soft state: start over
  recent_owners_[head] = RecentEntry{node, absl::Now() + kRecentOwnerTtl};
}

std::vector<uint32_t> Remote::OwnersHere(uint64_t head, const cluster::LiveSet& live,
                                          uint32_t asker) {
  auto found = directory_.Find(
      head, absl::Now(), [&](uint32_t id) { return id != asker && live.Contains(id); },
      kOwnersPerFind);
  return std::vector<uint32_t>(found.begin(), found.end());
}

std::vector<uint32_t> Remote::FindOwners(uint64_t head, absl::Time deadline) {
  std::shared_ptr<const cluster::LiveSet> live = options_.membership->live();
  const uint32_t self = options_.membership->self_id();
  auto usable = [&](uint32_t id) { return id != self && live->Contains(id); };
  for (uint32_t home : cluster::Homes(head, *live, options_.homes)) {
    if (home == self) {
      std::vector<uint32_t> owners;
      const absl::Status st =
          runtime_.RunOn(reactor_, [&] { owners = OwnersHere(head, *live, self); });
      if (!st.ok()) return {};
      return owners;
    }
    wire::FindOwnersRequest req;
    req.set_head(head);
    req.set_asker(self);
    std::shared_ptr<Link> link;
    absl::StatusOr<net::RpcClient::Response> r =
        CallPeer(home, deadline, /*ucx=*/false, wire::kFindOwners, req.SerializeAsString(), &link);
    wire::FindOwnersResponse resp;
    if (!r.ok() || !wire::Parse(r->payload, &resp).ok()) continue;  // the next home
    std::vector<uint32_t> owners;
    for (uint32_t o : resp.owners()) {
      if (usable(o)) owners.push_back(o);
    }
    return owners;  // the first home that answers decides: one message per lookup
  }
  return {};
}

absl::StatusOr<net::RpcClient::Response> Remote::CallPeer(uint32_t node, absl::Time deadline,
                                                          bool ucx, uint16_t method,
                                                          const std::string& payload,
                                                          std::shared_ptr<Link>* used) {
  absl::StatusOr<net::RpcClient::Response> r = absl::UnavailableError("no link");
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool fresh = false;
    std::shared_ptr<Link> link = LinkTo(node, deadline, ucx, &fresh);
    *used = link;
    if (link == nullptr) return absl::UnavailableError(StrCat("node ", node, " is unreachable"));
    r = link->rpc->Call(method, payload, Left(deadline));
    if (r.ok() || r.status().code() != absl::StatusCode::kUnavailable) return r;
    DropLink(node, link);
    *used = nullptr;
    if (fresh) break;  // a new connection failed: the peer is gone, not just the connection
  }
  return r;
}

std::shared_ptr<Remote::Link> Remote::LinkTo(uint32_t node, absl::Time deadline, bool ucx,
                                             bool* fresh) {
  std::shared_ptr<Link> link;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<Link>& slot = links_[node];
    if (slot == nullptr) slot = std::make_shared<Link>();
    link = slot;
  }
  std::lock_guard<std::mutex> lock(link->mu);
  if (link->rpc == nullptr || !link->rpc->connected()) {
    std::shared_ptr<const cluster::LiveSet> live = options_.membership->live();
    const cluster::Member* m = live->Find(node);
    if (m == nullptr) return nullptr;
    absl::StatusOr<io::SocketAddress> addr = io::SocketAddress::Parse(m->rpc_addr);
    if (!addr.ok()) return nullptr;
    net::RpcClientOptions co;
    co.secret = options_.secret;
    co.connect_timeout = std::max(Left(deadline), absl::Milliseconds(1));
    co.spin = absl::Microseconds(50);
    absl::StatusOr<std::unique_ptr<net::RpcClient>> c = net::RpcClient::Connect(*addr, co);
    if (!c.ok()) {
      OL_LOG_EVERY_N_SEC(kWarning, 10) << "KV cluster: connecting to node " << node << " ("
                                       << m->rpc_addr << "): " << c.status().message();
      return nullptr;
    }
    link->rpc = *std::move(c);
    link->attached = false;
    if (fresh != nullptr) *fresh = true;
  }
  if (!ucx || link->attached) return link;
  if (ucx_ == nullptr) return nullptr;
  wire::PeerAttachRequest req;
  req.set_node_id(options_.membership->self_id());
  absl::StatusOr<net::RpcClient::Response> r =
      link->rpc->Call(wire::kPeerAttach, req.SerializeAsString(), Left(deadline));
  wire::PeerAttachResponse resp;
  absl::Status st = r.status();
  if (st.ok()) st = wire::Parse(r->payload, &resp);
  if (st.ok()) {
    absl::Status made;
    st = runtime_.RunOn(reactor_, [&] {
      link->rkey.reset();
      link->ep.reset();
      absl::StatusOr<std::unique_ptr<net::UcxEndpoint>> ep =
          net::UcxEndpoint::Connect(*ucx_->worker, resp.worker_address());
      if (!ep.ok()) {
        made = ep.status();
        return;
      }
      absl::StatusOr<std::unique_ptr<net::UcxRemoteKey>> key = (*ep)->Unpack(resp.packed_rkey());
      if (!key.ok()) {
        made = key.status();
        return;
      }
      link->ep = *std::move(ep);
      link->rkey = *std::move(key);
    });
    if (st.ok()) st = made;
  }
  if (!st.ok()) {
    OL_LOG_EVERY_N_SEC(kWarning, 10)
        << "KV cluster: attaching to node " << node << " for UCX gets: " << st.message();
    return nullptr;
  }
  link->instance = resp.instance_id();
  link->slab_address = resp.slab_address();
  link->lease_ns = static_cast<int64_t>(resp.lease_ms()) * 1000000;
  link->attached = true;
  OL_LOG(kInfo) << "KV cluster: attached to node " << node << " for UCX gets (slab instance "
                << StrCat(absl::Hex(link->instance)) << ")";
  return link;
}

void Remote::DropLink(uint32_t node, const std::shared_ptr<Link>& link) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = links_.find(node);
    if (it != links_.end() && it->second == link) links_.erase(it);
  }
  std::lock_guard<std::mutex> lock(link->mu);
  link->attached = false;
  if (link->rpc) link->rpc->Close();
  (void)runtime_.RunOn(reactor_, [&] {
    link->rkey.reset();
    link->ep.reset();
  });
}

namespace {

// One batch of gets, shared between the agent that waits and the reactor's completion.
struct GetWait {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool abandoned = false;  // the agent gave up: the completion frees the slots
  absl::Status status;
};

}  // namespace

size_t Remote::PullFrom(uint32_t owner, Job& job, absl::Time lookup_deadline, Pulled* out) {
  wire::PeerLookupRequest req;
  req.set_ns_name(job.ns_name);
  req.set_ns_digest(job.digest);
  req.set_pin(job.pull);
  uint32_t key_len = 0;
  std::string packed;
  if (!wire::PackKeys(job.keys.data() + job.have, job.keys.size() - job.have, &packed, &key_len)
           .ok()) {
    return 0;
  }
  req.set_keys(std::move(packed));
  req.set_key_len(key_len);
  const absl::Time asked = absl::Now();
  std::shared_ptr<Link> link;
  absl::StatusOr<net::RpcClient::Response> r = CallPeer(
      owner, lookup_deadline, job.pull, wire::kPeerLookup, req.SerializeAsString(), &link);
  wire::PeerLookupResponse resp;
  absl::Status st = r.status();
  if (st.ok()) st = wire::Parse(r->payload, &resp);
  if (!st.ok()) return 0;
  if (!job.pull) return resp.prefix();
  auto release_owner = [&] {
    if (resp.pin_batch() == 0) return;
    wire::ReleaseRequest rel;
    rel.add_pin_batches(resp.pin_batch());
    (void)link->rpc->Notify(wire::kRelease, rel.SerializeAsString());
  };
  const size_t n = static_cast<size_t>(resp.offsets_size());
  if (resp.instance_id() != link->instance) {
    // The owner restarted since this link attached: its old key reads nothing of its own.
    release_owner();
    DropLink(owner, link);
    return 0;
  }
  if (n == 0 || resp.checksums_size() != resp.offsets_size() ||
      resp.block_bytes() != job.block_bytes || n > job.keys.size() - job.have) {
    release_owner();
    return 0;
  }
  // Slots here for what the owner holds.
  absl::StatusOr<std::vector<SlotGrant>> grants = absl::UnavailableError("the pool stopped");
  (void)runtime_.RunOn(reactor_, [&] {
    grants =
        pool_.Reserve(Pool::kInternalSession, NsRef{job.ns, job.digest}, static_cast<uint32_t>(n),
                      /*allow_partial=*/true, runtime_.reactor(reactor_).now_ns());
  });
  if (!grants.ok() || grants->empty()) {
    release_owner();
    return 0;
  }
  const size_t m = grants->size();
  auto* base = static_cast<std::byte*>(slab_.base());
  std::vector<net::UcxGet> gets(m);
  for (size_t j = 0; j < m; ++j) {
    gets[j].local = base + (*grants)[j].offset;
    gets[j].remote = link->slab_address + resp.offsets(static_cast<int>(j));
    gets[j].length = job.block_bytes;
  }
  std::vector<uint64_t> slots(m);
  for (size_t j = 0; j < m; ++j) slots[j] = (*grants)[j].slot;
  auto wait = std::make_shared<GetWait>();
  const absl::Time gets_started = absl::Now();
  (void)runtime_.RunOn(reactor_, [&] {
    auto finish = [this, wait, slots, link](absl::Status got) {
      std::lock_guard<std::mutex> lock(wait->mu);
      wait->done = true;
      wait->status = std::move(got);
      if (wait->abandoned) {
        (void)pool_.Release(Pool::kInternalSession, {}, slots);
        // Its gets are back: the link can close now (not from inside this callback).
        runtime_.reactor(reactor_).Defer([link] {
          link->rkey.reset();
          link->ep.reset();
        });
      }
      wait->cv.notify_all();
    };
    if (link->ep == nullptr || link->rkey == nullptr) {
      finish(absl::UnavailableError("the link to the owner closed"));
      return;
    }
    net::GetMany(*link->ep, *link->rkey, gets, ucx_->region.get(), std::move(finish));
  });
  bool finished = false;
  {
    std::unique_lock<std::mutex> lock(wait->mu);
    finished = wait->cv.wait_for(lock, absl::ToChronoNanoseconds(Left(job.deadline)),
                                 [&] { return wait->done; });
  }
  if (!finished) {
    // The owner did not deliver in time: its gets end with the abort (or when UCX returns
    // them); the slots stay reserved until then, since UCX may still write them.
    (void)runtime_.RunOn(reactor_, [&] {
      if (link->ep) link->ep->Abort(absl::DeadlineExceededError("a pull passed its deadline"));
    });
    bool abandoned = false;
    {
      std::lock_guard<std::mutex> lock(wait->mu);
      abandoned = wait->abandoned = !wait->done;
    }
    if (abandoned) {
      OL_LOG_EVERY_N_SEC(kWarning, 5)
          << "KV cluster: node " << owner << " did not deliver " << m << " blocks in time";
      release_owner();
      // Closing the endpoint under gets in flight would make the owner's UCX 1.13 abort when
      // it answers them (docs/transport.md): the completion closes it; the next pull from
      // this owner makes a new link.
      std::lock_guard<std::mutex> lock(mu_);
      auto it = links_.find(owner);
      if (it != links_.end() && it->second == link) links_.erase(it);
      return 0;
    }
  }
  if (!wait->status.ok()) {
    OL_LOG_EVERY_N_SEC(kWarning, 5)
        << "KV cluster: pulling from node " << owner << ": " << wait->status.message();
    (void)runtime_.RunOn(reactor_, [&] { (void)pool_.Release(Pool::kInternalSession, {}, slots); });
    release_owner();
    DropLink(owner, link);
    return 0;
  }
  const absl::Duration got_in = absl::Now() - gets_started;
  // The owner's pins held the blocks only for its lease: bytes read after it may be another
  // block's. Then each block against the CRC-64 its writer committed.
  const bool in_lease =
      absl::Now() < asked + absl::Nanoseconds(link->lease_ns / 100 * kLeaseTrustPercent);
  size_t good = 0;
  while (in_lease && good < m &&
         Crc64(gets[good].local, job.block_bytes) == resp.checksums(static_cast<int>(good))) {
    ++good;
  }
  release_owner();
  if (good > 0) {
    std::lock_guard<std::mutex> lock(counters_mu_);
    counters_.get_ns += absl::ToInt64Nanoseconds(got_in);
  }
  if (good < m) {
    std::lock_guard<std::mutex> lock(counters_mu_);
    counters_.rejected_blocks += m - good;
    OL_LOG_EVERY_N_SEC(kWarning, 5)
        << "KV cluster: " << (m - good) << " blocks pulled from node " << owner
        << (in_lease ? " failed their CRC-64 check" : " came after the owner's lease")
        << "; discarded";
  }
  // Each block keeps its place in its chain (eviction and announcements go by it); an owner
  // that does not say counts from the keys asked.
  const bool depths = resp.depths_size() == resp.offsets_size();
  for (size_t j = 0; j < m; ++j) {
    if (j < good) {
      const int i = static_cast<int>(j);
      const uint32_t depth =
          depths ? resp.depths(i) : static_cast<uint32_t>(job.have + j);
      out->entries.push_back(
          CommitEntry{slots[j], job.keys[job.have + j], resp.checksums(i), depth});
    } else {
      out->unused.push_back(slots[j]);
    }
  }
  return good;
}

}  // namespace openlake::kv

#include "openlake/kv/service.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "absl/types/span.h"

#include "kv/disk_tier.h"
#include "kv/pool.h"
#include "kv/remote.h"
#include "kv/slab.h"
#include "kv/wire.h"

#include "openlake/log.h"
#include "openlake/net/rpc.h"
#include "openlake/status.h"
#include "openlake/strings.h"
#include "openlake/version.h"

namespace openlake::kv {
namespace {

absl::Status EnsureOwnerOnlyDir(const std::string& socket_path) {
  const auto slash = socket_path.rfind('/');
  if (slash == std::string::npos || slash == 0) return absl::OkStatus();
  const std::string dir = socket_path.substr(0, slash);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoStatus(errno, StrCat("create socket folder ", dir));
  }
  // The folder must be ours and closed to others: in a shared place like /tmp, someone else
  // could have made it first to intercept the socket.
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) return ErrnoStatus(errno, StrCat("stat ", dir));
  if (!S_ISDIR(st.st_mode)) return absl::FailedPreconditionError(StrCat(dir, " is not a folder"));
  if (st.st_uid != geteuid()) {
    return absl::PermissionDeniedError(
        StrCat("socket folder ", dir, " belongs to uid ", st.st_uid, ", not to this user"));
  }
  if ((st.st_mode & 022) != 0) {
    return absl::PermissionDeniedError(StrCat("socket folder ", dir,
                                              " is writable by others (mode ",
                                              absl::Hex(st.st_mode & 0777), "); make it 0700"));
  }
  return absl::OkStatus();
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// Lives on the pool's reactor; every member is touched only there (Metrics() reads the
// per-core registry, which is built for concurrent readers).
class KvService::Impl {
 public:
  Impl(io::Runtime& rt, unsigned index, std::unique_ptr<SlabMapping> slab,
       const KvServiceOptions& o, std::unique_ptr<DiskTier> tier)
      : reactor_(rt.reactor(index)),
        options_(o),
        slab_(std::move(slab)),
        pool_(slab_->base(), PoolOptionsFor(o, slab_->size(), tier != nullptr)),
        tier_(std::move(tier)),
        metrics_(1) {
    const char* names[] = {"attach", "open_namespace", "reserve", "commit",
                           "lookup", "release",        "exists",  "reset",
                           "stats",  "find_namespace", "remove"};
    for (const char* n : names) {
      latency_.push_back(metrics_.AddHistogram(StrCat("kv_", n, "_us"),
                                               StrCat("Latency of KV ", n, " requests, µs")));
    }
    errors_ = metrics_.AddCounter("kv_request_errors_total", "KV requests answered with an error");
    if (tier_) {
      // What was on disk comes back under its namespaces, with their owners.
      const auto& rec = tier_->recovered();
      for (size_t i = 0; i < rec.size(); ++i) {
        auto ns = pool_.OpenNamespace(rec[i].name, rec[i].fingerprint, rec[i].block_bytes,
                                      Caller{rec[i].owner, false});
        if (!ns.ok()) {
          OL_LOG(kWarning) << "KV disk tier: blocks of namespace '" << rec[i].name
                           << "' are dropped: " << ns.status().message();
          continue;
        }
        tier_->BindRecovered(i, ns->id);
      }
      tier_->SetConfirm(
          [this](const DiskTier::SpillItem& it) { return pool_.SpillCurrent(it.token, it.tag); });
    }
    if (o.cluster.membership != nullptr) {
      LocalTiers tiers;
      tiers.holds = [this](uint32_t ns, const BlockKey& key) {
        return pool_.Contains(ns, key) || (tier_ && tier_->Contains(ns, key));
      };
      tiers.exists = [this](NsRef ref, absl::Span<const BlockKey> keys) {
        return ExistsTiers(ref, keys);
      };
      tiers.lookup = [this](uint64_t session, NsRef ref, std::vector<BlockKey> keys,
                            absl::AnyInvocable<void(absl::StatusOr<Pins>)> done) {
        absl::StatusOr<Pins> pinned = pool_.Lookup(session, ref, keys, NowNs());
        if (!pinned.ok()) {
          done(pinned.status());
          return;
        }
        LookupTiers(session, ref, std::move(keys), *std::move(pinned),
                    [done = std::move(done)](std::vector<BlockKey>, Pins pins) mutable {
                      done(std::move(pins));
                    });
      };
      remote_ = std::make_unique<Remote>(rt, index, pool_, *slab_, o.cluster, std::move(tiers));
    }
  }

  // Not on a reactor thread, before Stop: the cluster's agent threads end.
  void StopRemoteThreads() {
    if (remote_) remote_->StopThreads();
  }

  DiskTier* tier() { return tier_.get(); }

  static PoolOptions PoolOptionsFor(const KvServiceOptions& o, uint64_t slab_bytes, bool tier) {
    PoolOptions po;
    po.spill = tier;
    po.lease_ns = absl::ToInt64Nanoseconds(o.lease);
    const uint32_t percent = std::clamp<uint32_t>(o.max_reserved_percent, 1, 100);
    po.max_reserved_bytes_per_session = percent == 100 ? 0 : slab_bytes / 100 * percent;
    po.default_owner = geteuid();
    return po;
  }

  // Who asks, as the RPC server admitted them (net::ConnectionInfo).
  static Caller CallerOf(const net::RpcCall& call) {
    return Caller{call.connection().peer_uid, call.connection().admin};
  }

  absl::Status Start(std::string* tcp_bound, std::string* unix_bound) {
    net::RpcServerOptions ro;
    ro.secret = options_.secret;
    ro.allowed_uids = options_.allowed_uids;
    ro.tcp_idle_timeout = options_.tcp_idle_timeout;
    ro.max_frame_bytes = options_.max_frame_bytes;
    ro.max_connections = options_.max_unix_connections + options_.max_tcp_connections;
    ro.max_buffered_bytes = options_.max_buffered_bytes;
    OL_ASSIGN_OR_RETURN(server_, net::RpcServer::Create(reactor_, ro));
    Register();
    if (options_.extend) options_.extend(*server_);
    if (remote_) {
      OL_RETURN_IF_ERROR(remote_->Start(*server_));
      // What the disk tier kept across a restart is announced like what is committed.
      if (tier_) tier_->ForEachHead([this](uint32_t ns, const BlockKey& key) {
        remote_->Holding(ns, key);
      });
    }
    server_->OnDisconnect([this](const net::ConnectionInfo& info) {
      pool_.CloseSession(info.id);
      if (auto it = promoting_.find(info.id); it != promoting_.end()) it->second.closed = true;
    });
    if (!options_.unix_socket.empty()) {
      OL_RETURN_IF_ERROR(EnsureOwnerOnlyDir(options_.unix_socket));
      OL_ASSIGN_OR_RETURN(auto addr,
                          io::SocketAddress::Parse(StrCat("unix:", options_.unix_socket)));
      OL_ASSIGN_OR_RETURN(
          auto bound, server_->Listen(addr, io::ListenOptions{}, options_.max_unix_connections));
      *unix_bound = options_.unix_socket;
      unix_path_ = options_.unix_socket;
      (void)bound;
    }
    if (!options_.tcp_address.empty()) {
      OL_ASSIGN_OR_RETURN(auto addr, io::SocketAddress::Parse(options_.tcp_address));
      OL_ASSIGN_OR_RETURN(auto bound,
                          server_->Listen(addr, io::ListenOptions{}, options_.max_tcp_connections));
      *tcp_bound = bound.ToString();
    }
    ScheduleSweep();
    return absl::OkStatus();
  }

  // Idempotent. Runs on the reactor: from KvService::Stop, or from the reactor's AtStop hook
  // when the runtime stops first.
  void Stop() {
    if (stopped_) return;
    reactor_.CancelTimer(sweep_timer_);
    if (spill_retry_armed_) reactor_.CancelTimer(spill_retry_);
    spill_retry_armed_ = false;
    stopped_ = true;
    draining_ = false;
    StopServing();
    // With its agents ended, the cluster side closes its UCX objects here; otherwise (the
    // runtime stopped first) when it is destroyed, after the reactor.
    if (remote_ && remote_->threads_stopped()) remote_->StopOnReactor();
  }

  // Shutdown with a disk tier: stop serving, then write every dirty block.
  void BeginDrain() {
    StopServing();
    draining_ = true;
    drain_start_blocks_ = tier_ ? tier_->Stats().spilled_blocks : 0;
    PumpSpill();
  }
  void EndDrain() { draining_ = false; }
  // True once the slab holds nothing the disk lacks (or no path is left to take it).
  bool Drained() const {
    if (!tier_) return true;
    return (pool_.dirty_blocks() == 0 || tier_->Stats().paths_online == 0) && tier_->busy() == 0;
  }
  bool Idle() const { return !tier_ || tier_->busy() == 0; }
  uint64_t DrainedBlocks() const {
    return tier_ ? tier_->Stats().spilled_blocks - drain_start_blocks_ : 0;
  }

  PoolStats Stats() const {
    PoolStats st = pool_.Stats();
    if (tier_) {
      const DiskTierStats d = tier_->Stats();
      st.disk_paths = d.paths;
      st.disk_paths_online = d.paths_online;
      st.disk_capacity_bytes = d.capacity_bytes;
      st.disk_used_bytes = d.used_bytes;
      st.disk_blocks = d.blocks;
      st.disk_hits = disk_hits_;
      st.spilled_blocks = d.spilled_blocks;
      st.spilled_bytes = d.spilled_bytes;
      st.promoted_blocks = promoted_blocks_;
      st.promoted_bytes = promoted_bytes_;
      st.disk_evictions = d.evictions;
      st.disk_errors = d.io_errors;
      st.disk_checksum_errors = d.checksum_errors;
      st.recovered_blocks = d.recovered_blocks;
      st.recovery_seconds = d.recovery_seconds;
    }
    if (remote_) {
      const Remote::Counters c = remote_->counters();
      st.cluster_nodes = static_cast<uint32_t>(options_.cluster.membership->size());
      st.remote_hits = remote_hits_;
      st.remote_probe_hits = remote_probe_hits_;
      st.pulls = c.pulls;
      st.pulled_blocks = pulled_blocks_;
      st.pulled_bytes = pulled_bytes_;
      st.pull_failures = c.pull_failures;
      st.pull_rejected_blocks = c.rejected_blocks;
      st.pull_get_seconds = static_cast<double>(c.get_ns) / 1e9;
      st.probes = c.probes;
      st.announcements = c.announcements;
      st.peer_lookups = c.peer_lookups;
      st.peer_served_blocks = c.peer_served_blocks;
    }
    return st;
  }

  Pool& pool() { return pool_; }
  const MetricsRegistry& metrics() const { return metrics_; }

 private:
  void ScheduleSweep() {
    // Leases are also swept whenever a Reserve runs short; this catches idle pools.
    sweep_timer_ = reactor_.After(absl::Seconds(1), [this] {
      if (stopped_) return;
      const int64_t now = NowNs();
      pool_.ExpireLeases(now);
      pool_.TrimFreeSegments(now);
      if (tier_) {
        tier_->Tick();
        PumpSpill();
      }
      if (remote_) remote_->Tick();
      ScheduleSweep();
    });
  }

  // Wraps a handler: parse the request, time the call, answer with the result or the error.
  template <typename Req, typename Fn>
  void Add(wire::Method m, Fn fn) {
    server_->Register(m, [this, m, fn = std::move(fn)](net::RpcCall call) mutable {
      const int64_t t0 = NowNs();
      Req req;
      absl::Status st = wire::Parse(call.payload(), &req);
      if (st.ok()) st = fn(call, req);
      if (!st.ok()) {
        metrics_.shard(0).Add(errors_);
        call.RespondError(st);
      }
      metrics_.shard(0).Record(latency_[m - 1], static_cast<uint64_t>((NowNs() - t0) / 1000));
    });
  }

  // Serialises straight into the response frame (after room for its header): one copy less.
  static absl::Status Reply(net::RpcCall& call, const google::protobuf::MessageLite& msg) {
    const size_t size = msg.ByteSizeLong();
    std::string frame(net::RpcCall::kHeadroom + size, '\0');
    msg.SerializeWithCachedSizesToArray(
        reinterpret_cast<uint8_t*>(frame.data() + net::RpcCall::kHeadroom));
    call.RespondWithHeadroom(std::move(frame));
    return absl::OkStatus();
  }

  static NsRef Ref(const wire::NsRef& r) { return NsRef{r.id(), r.digest()}; }

  void Register() {
    Add<wire::AttachRequest>(wire::kAttach,
                             [this](net::RpcCall& call, const wire::AttachRequest& req) {
                               wire::AttachResponse resp;
                               resp.set_version(std::string(Version()));
                               resp.set_slab_bytes(slab_->size());
                               resp.set_instance_id(slab_->header().instance_id);
                               resp.set_unix_socket(unix_path_);
                               resp.set_lease_ms(static_cast<uint64_t>(pool_.lease_ns() / 1000000));
                               resp.set_segment_bytes(slab_->header().segment_bytes);
                               resp.set_max_reserved_bytes(pool_.max_reserved_bytes());
                               // The slab holds every tenant's blocks: mapping it is for
                               // the server's own user and root.
                               const bool give = req.want_slab() && call.connection().is_unix &&
                                                 call.connection().admin;
                               resp.set_slab_attached(give);
                               std::string out;
                               resp.SerializeToString(&out);
                               if (give) {
                                 call.RespondWithFd(std::move(out), slab_->fd());
                               } else {
                                 call.Respond(std::move(out));
                               }
                               return absl::OkStatus();
                             });

    Add<wire::OpenNamespaceRequest>(
        wire::kOpenNamespace, [this](net::RpcCall& call, const wire::OpenNamespaceRequest& req) {
          OL_ASSIGN_OR_RETURN(Namespace ns,
                              pool_.OpenNamespace(req.name(), wire::FromWire(req.fingerprint()),
                                                  req.block_bytes(), CallerOf(call)));
          if (tier_) {
            tier_->BindNamespace(ns.id, ns.name, wire::FromWire(req.fingerprint()), ns.block_bytes,
                                 pool_.OwnerOf(ns.id));
          }
          wire::OpenNamespaceResponse resp;
          resp.set_id(ns.id);
          resp.set_digest(ns.digest);
          resp.set_slot_bytes(ns.slot_bytes);
          resp.set_block_bytes(ns.block_bytes);
          return Reply(call, resp);
        });

    Add<wire::FindNamespaceRequest>(
        wire::kFindNamespace, [this](net::RpcCall& call, const wire::FindNamespaceRequest& req) {
          std::string fp;
          OL_ASSIGN_OR_RETURN(Namespace ns, pool_.FindNamespace(req.name(), &fp));
          wire::FindNamespaceResponse resp;
          resp.set_id(ns.id);
          resp.set_digest(ns.digest);
          resp.set_slot_bytes(ns.slot_bytes);
          resp.set_block_bytes(ns.block_bytes);
          resp.set_fingerprint(fp);
          return Reply(call, resp);
        });

    Add<wire::ReserveRequest>(wire::kReserve, [this](net::RpcCall& call,
                                                     const wire::ReserveRequest& req) {
      if (req.count() > wire::kMaxBatch) {
        return absl::InvalidArgumentError(
            StrCat("cannot reserve ", req.count(), " slots at once (limit ", wire::kMaxBatch, ")"));
      }
      OL_RETURN_IF_ERROR(pool_.MayWrite(Ref(req.ns()), CallerOf(call)));
      OL_ASSIGN_OR_RETURN(auto grants, pool_.Reserve(call.connection().id, Ref(req.ns()),
                                                     req.count(), req.allow_partial(), NowNs()));
      wire::ReserveResponse resp;
      resp.mutable_slots()->Reserve(static_cast<int>(grants.size()));
      resp.mutable_offsets()->Reserve(static_cast<int>(grants.size()));
      resp.mutable_generations()->Reserve(static_cast<int>(grants.size()));
      for (const SlotGrant& g : grants) {
        resp.add_slots(g.slot);
        resp.add_offsets(g.offset);
        resp.add_generations(g.generation);
      }
      return Reply(call, resp);
    });

    Add<wire::CommitRequest>(
        wire::kCommit, [this](net::RpcCall& call, const wire::CommitRequest& req) {
          OL_ASSIGN_OR_RETURN(auto keys, wire::UnpackKeys(req.keys(), req.key_len()));
          const size_t n = keys.size();
          if (static_cast<size_t>(req.slots_size()) != n ||
              static_cast<size_t>(req.checksums_size()) != n ||
              (req.depths_size() != 0 && static_cast<size_t>(req.depths_size()) != n)) {
            return absl::InvalidArgumentError(
                "commit: slots, keys, checksums and depths must have the same count");
          }
          std::vector<CommitEntry> entries(n);
          for (size_t i = 0; i < n; ++i) {
            entries[i].slot = req.slots(static_cast<int>(i));
            entries[i].key = keys[i];
            entries[i].checksum = req.checksums(static_cast<int>(i));
            entries[i].depth =
                req.depths_size() ? req.depths(static_cast<int>(i)) : static_cast<uint32_t>(i);
          }
          OL_RETURN_IF_ERROR(pool_.MayWrite(Ref(req.ns()), CallerOf(call)));
          OL_RETURN_IF_ERROR(pool_.Commit(call.connection().id, Ref(req.ns()), entries, NowNs()));
          AfterCommit(req.ns().id(), entries);
          return Reply(call, wire::CommitResponse());
        });

    Add<wire::LookupRequest>(
        wire::kLookup, [this](net::RpcCall& call, const wire::LookupRequest& req) {
          OL_ASSIGN_OR_RETURN(auto keys, wire::UnpackKeys(req.keys(), req.key_len()));
          const NsRef ref = Ref(req.ns());
          const uint64_t session = call.connection().id;
          OL_ASSIGN_OR_RETURN(Pins pinned, pool_.Lookup(session, ref, keys, NowNs()));
          const bool compact = req.compact();
          OL_ASSIGN_OR_RETURN(std::optional<BlockKey> head,
                              PeersHead(req.local_only(), req.head(), keys));
          if (!tier_ || pinned.hits.size() == keys.size()) {  // the slab's answer is final
            AnswerLookup(std::move(call), ref, std::move(keys), std::move(pinned), compact,
                         head);
            return absl::OkStatus();
          }
          LookupTiers(session, ref, std::move(keys), std::move(pinned),
                      [this, call = std::move(call), ref, compact, head](
                          std::vector<BlockKey> asked, Pins pins) mutable {
                        AnswerLookup(std::move(call), ref, std::move(asked), std::move(pins),
                                     compact, head);
                      });
          return absl::OkStatus();
        });

    Add<wire::ReleaseRequest>(
        wire::kRelease, [this](net::RpcCall& call, const wire::ReleaseRequest& req) {
          OL_RETURN_IF_ERROR(
              pool_.Release(call.connection().id,
                            absl::MakeConstSpan(req.pin_batches().data(), req.pin_batches_size()),
                            absl::MakeConstSpan(req.reserved().data(), req.reserved_size())));
          return Reply(call, wire::ReleaseResponse());
        });

    Add<wire::ExistsRequest>(
        wire::kExists, [this](net::RpcCall& call, const wire::ExistsRequest& req) {
          OL_ASSIGN_OR_RETURN(auto keys, wire::UnpackKeys(req.keys(), req.key_len()));
          OL_ASSIGN_OR_RETURN(auto r, ExistsTiers(Ref(req.ns()), keys));
          std::string present(r.present.size(), '\0');
          for (size_t i = 0; i < r.present.size(); ++i) present[i] = r.present[i] ? 1 : 0;
          const size_t prefix = r.prefix;
          OL_ASSIGN_OR_RETURN(std::optional<BlockKey> head,
                              PeersHead(req.local_only(), req.head(), keys));
          if (head && prefix < keys.size()) {
            // What follows the prefix may be on a peer: the answer waits for the owner's (or
            // the lookup timeout), and counts the keys it holds as present.
            auto pending = std::make_shared<net::RpcCall>(std::move(call));
            const bool started = remote_->Probe(
                req.ns().id(), *head, std::move(keys), prefix,
                [this, pending, prefix, present = present](size_t more) mutable {
                  remote_probe_hits_ += more;
                  for (size_t i = prefix; i < prefix + more && i < present.size(); ++i) {
                    present[i] = 1;
                  }
                  wire::ExistsResponse resp;
                  resp.set_prefix(static_cast<uint32_t>(prefix + more));
                  resp.set_present(std::move(present));
                  resp.set_on_peers(static_cast<uint32_t>(more));
                  (void)Reply(*pending, resp);
                });
            if (started) return absl::OkStatus();
            call = std::move(*pending);
          }
          wire::ExistsResponse resp;
          resp.set_prefix(static_cast<uint32_t>(prefix));
          resp.set_present(std::move(present));
          return Reply(call, resp);
        });

    Add<wire::RemoveRequest>(
        wire::kRemove, [this](net::RpcCall& call, const wire::RemoveRequest& req) {
          OL_ASSIGN_OR_RETURN(auto keys, wire::UnpackKeys(req.keys(), req.key_len()));
          OL_RETURN_IF_ERROR(pool_.MayWrite(Ref(req.ns()), CallerOf(call)));
          if (tier_) {
            // A key on both tiers counts once: the slab's copy is dropped second.
            uint32_t on_disk = 0;
            for (const BlockKey& k : keys) {
              if (!tier_->Contains(req.ns().id(), k)) continue;
              if (!pool_.Contains(req.ns().id(), k)) ++on_disk;
              tier_->Drop(req.ns().id(), k);
            }
            OL_ASSIGN_OR_RETURN(uint32_t in_ram, pool_.Remove(Ref(req.ns()), keys));
            wire::RemoveResponse resp;
            resp.set_removed(in_ram + on_disk);
            return Reply(call, resp);
          }
          OL_ASSIGN_OR_RETURN(uint32_t removed, pool_.Remove(Ref(req.ns()), keys));
          wire::RemoveResponse resp;
          resp.set_removed(removed);
          return Reply(call, resp);
        });

    Add<wire::ResetRequest>(wire::kReset,
                            [this](net::RpcCall& call, const wire::ResetRequest& req) {
                              OL_RETURN_IF_ERROR(pool_.MayWrite(Ref(req.ns()), CallerOf(call)));
                              OL_RETURN_IF_ERROR(pool_.Reset(Ref(req.ns())));
                              if (tier_) tier_->Reset(req.ns().id());
                              return Reply(call, wire::ResetResponse());
                            });

    Add<wire::StatsRequest>(wire::kStats, [this](net::RpcCall& call, const wire::StatsRequest&) {
      wire::StatsResponse resp;
      PoolStats st = Stats();
      st.sessions = server_->connection_count();
      wire::ToWire(st, &resp);
      return Reply(call, resp);
    });
  }

  // Blocks just committed: the disk tier's copies and the cluster's directory follow.
  void AfterCommit(uint32_t ns, absl::Span<const CommitEntry> entries) {
    if (tier_) {
      // Bytes the disk holds already need not be written again; an older version there must
      // not outlive the new one.
      for (const CommitEntry& e : entries) {
        if (tier_->Holds(ns, e.key, e.checksum)) {
          pool_.MarkClean(ns, e.key, e.checksum);
        } else {
          tier_->Drop(ns, e.key);
        }
      }
      PumpSpill();
    }
    if (remote_) remote_->Committed(ns, entries);
  }

  // The last step of a Lookup: answers what this daemon holds, unless the cluster may hold more
  // of the prefix; then pulls it first (within the call's deadline and the pull timeout) and
  // answers what this daemon holds after that.
  // The head of the chain a Lookup or Exists names, to find the cluster's owners by; none when it
  // is to be answered here only (no cluster, or the client asked for `local_only`).
  absl::StatusOr<std::optional<BlockKey>> PeersHead(bool local_only, const std::string& head,
                                                    const std::vector<BlockKey>& keys) const {
    if (head.size() > kMaxKeyBytes) {
      return absl::InvalidArgumentError(
          StrCat("chain head of ", head.size(), " bytes; keys are at most ", kMaxKeyBytes));
    }
    if (!remote_ || local_only || keys.empty()) return std::nullopt;
    return head.empty() ? keys[0] : BlockKey(head);
  }

  void AnswerLookup(net::RpcCall call, NsRef ref, std::vector<BlockKey> keys, Pins first,
                    bool compact, const std::optional<BlockKey>& head) {
    if (!head || first.hits.size() >= keys.size()) {
      (void)ReplyLookup(call, first, compact);
      return;
    }
    absl::Time deadline = absl::Now() + options_.cluster.pull_timeout;
    if (call.deadline_ns() != 0) {
      // Leave the answer a tenth of what is left, so that it arrives before the caller quits.
      const int64_t left = call.deadline_ns() - reactor_.now_ns();
      deadline = std::min(deadline, absl::Now() + absl::Nanoseconds(left - left / 10));
    }
    const uint64_t session = call.connection().id;
    const size_t have = first.hits.size();
    auto pending = std::make_shared<Pending>(Pending{std::move(call), std::move(first), compact});
    std::vector<BlockKey> asked = keys;
    const bool started = remote_->Pull(
        ref.id, *head, std::move(asked), have, deadline,
        [this, pending, ref, keys = std::move(keys), session](Pulled got) mutable {
          OnPulled(std::move(*pending), ref, std::move(keys), session, std::move(got));
        });
    if (!started) {
      (void)ReplyLookup(pending->call, pending->first, pending->compact);
      return;
    }
    ++promoting_[session].count;
  }

  struct Pending {
    net::RpcCall call;
    Pins first;
    bool compact;
  };

  void OnPulled(Pending p, NsRef ref, std::vector<BlockKey> keys, uint64_t session, Pulled got) {
    const int64_t now = NowNs();
    std::vector<uint64_t> unused = std::move(got.unused);
    if (!got.entries.empty()) {
      absl::Status st = pool_.Commit(Pool::kInternalSession, ref, got.entries, now);
      if (st.ok()) {
        AfterCommit(ref.id, got.entries);
        pulled_blocks_ += got.entries.size();
        pulled_bytes_ += got.entries.size() * uint64_t{pool_.BlockBytesOf(ref.id)};
      } else {
        OL_LOG_EVERY_N_SEC(kWarning, 5) << "KV cluster: blocks pulled from node " << got.node
                                        << " could not be committed: " << st.message();
        for (const CommitEntry& e : got.entries) unused.push_back(e.slot);
      }
    }
    if (!unused.empty()) (void)pool_.Release(Pool::kInternalSession, {}, unused);
    auto pit = promoting_.find(session);
    const bool closed = pit->second.closed;
    if (--pit->second.count == 0) promoting_.erase(pit);
    if (closed) return;  // the client left: its pins ended with its session
    if (got.entries.empty()) {
      (void)ReplyLookup(p.call, p.first, p.compact);
      return;
    }
    absl::StatusOr<Pins> second = pool_.Lookup(session, ref, keys, now, /*count=*/false);
    if (!second.ok()) {
      (void)ReplyLookup(p.call, p.first, p.compact);
      return;
    }
    if (p.first.batch != 0) (void)pool_.Release(session, {&p.first.batch, 1}, {});
    if (second->hits.size() > p.first.hits.size()) {
      const size_t more = second->hits.size() - p.first.hits.size();
      pool_.CountTierHits(more, pool_.BlockBytesOf(ref.id));
      second->from_peers = static_cast<uint32_t>(more);
      remote_hits_ += more;
    }
    second->from_disk = p.first.from_disk;
    (void)ReplyLookup(p.call, *second, p.compact);
  }

  void StopServing() {
    if (server_) server_.reset();  // stops listeners and sessions
    if (!unix_path_.empty()) unlink(unix_path_.c_str());
    unix_path_.clear();
  }

  // A compact answer (asked for by clients that map the slab) leaves out the offsets and
  // generations: half the bytes of a 1,000-key answer.
  static absl::Status ReplyLookup(net::RpcCall& call, const Pins& pinned, bool compact) {
    const std::vector<SlotHit>& hits = pinned.hits;
    wire::LookupResponse resp;
    resp.set_pin_batch(pinned.batch);
    resp.set_from_disk(pinned.from_disk);
    resp.set_from_peers(pinned.from_peers);
    const int n = static_cast<int>(hits.size());
    // Sized once and filled in place: no per-element capacity checks.
    resp.mutable_slots()->Resize(n, 0);
    resp.mutable_checksums()->Resize(n, 0);
    uint64_t* slots = resp.mutable_slots()->mutable_data();
    uint64_t* checksums = resp.mutable_checksums()->mutable_data();
    for (int i = 0; i < n; ++i) {
      slots[i] = hits[i].slot;
      checksums[i] = hits[i].checksum;
    }
    if (!compact) {
      resp.mutable_offsets()->Resize(n, 0);
      resp.mutable_generations()->Resize(n, 0);
      uint64_t* offsets = resp.mutable_offsets()->mutable_data();
      uint64_t* generations = resp.mutable_generations()->mutable_data();
      for (int i = 0; i < n; ++i) {
        offsets[i] = hits[i].offset;
        generations[i] = hits[i].generation;
      }
    }
    return Reply(call, resp);
  }

  // Reads keys[wanted] back from disk into fresh slab slots, commits them (clean), then answers
  // the Lookup as if they had been in the slab: one pin batch over the whole prefix.
  // The continuation of a Lookup past the slab: `pinned` is the slab's answer for `session`;
  // the keys after it that the disk tier holds are read back into the slab first, and `then`
  // gets the answer for the slab and the disk together (on the reactor; never when the session
  // closed meanwhile, since its pins ended with it).
  using LookupThen = absl::AnyInvocable<void(std::vector<BlockKey>, Pins)>;
  void LookupTiers(uint64_t session, NsRef ref, std::vector<BlockKey> keys, Pins pinned,
                   LookupThen then) {
    if (!tier_ || pinned.hits.size() == keys.size()) {
      then(std::move(keys), std::move(pinned));
      return;
    }
    // The keys after the slab's prefix that the disk holds, up to the first in neither.
    // At most a quarter of the slab per call, and kMaxPromote blocks.
    const uint64_t slot = layout::SlotBytesFor(pool_.BlockBytesOf(ref.id));
    const size_t most =
        std::min<uint64_t>(kMaxPromote, std::max<uint64_t>(1, slab_->size() / 4 / slot));
    std::vector<uint32_t> wanted;
    for (size_t i = pinned.hits.size(); i < keys.size() && wanted.size() < most; ++i) {
      if (pool_.Contains(ref.id, keys[i])) continue;
      if (!tier_->Contains(ref.id, keys[i])) break;
      wanted.push_back(static_cast<uint32_t>(i));
    }
    if (wanted.empty()) {
      then(std::move(keys), std::move(pinned));
      return;
    }
    Promote(session, ref, std::move(keys), std::move(pinned), std::move(wanted), std::move(then));
  }

  // Exists over both tiers of this daemon.
  absl::StatusOr<ExistsResult> ExistsTiers(NsRef ref, absl::Span<const BlockKey> keys) {
    OL_ASSIGN_OR_RETURN(auto r, pool_.Exists(ref, keys));
    if (tier_) {
      r.prefix = 0;
      bool prefix = true;
      for (size_t i = 0; i < keys.size(); ++i) {
        if (!r.present[i]) r.present[i] = tier_->Contains(ref.id, keys[i]);
        prefix = prefix && r.present[i];
        if (prefix) ++r.prefix;
      }
    }
    return r;
  }

  void Promote(uint64_t session, NsRef ref, std::vector<BlockKey> keys, Pins first,
               std::vector<uint32_t> wanted, LookupThen then) {
    // Keys between and after the read-back ones that the slab holds stay pinned until the
    // answer: the slots reserved below evict the oldest blocks, which they may be, and the
    // answer's prefix would stop at them.
    std::vector<uint64_t> held;
    const int64_t t0 = NowNs();
    auto hold = [&](size_t from, size_t n) {  // pins the slab's leading run of keys[from, from+n)
      absl::StatusOr<Pins> run =
          pool_.Lookup(Pool::kInternalSession, ref, absl::MakeConstSpan(keys).subspan(from, n), t0,
                       /*count=*/false);
      if (run.ok() && run->batch != 0) held.push_back(run->batch);
    };
    size_t i = first.hits.size();
    for (uint32_t w : wanted) {
      if (i < w) hold(i, w - i);  // keys [i, w) are the slab's
      i = w + 1;
    }
    if (i < keys.size()) hold(i, keys.size() - i);  // up to the first key the slab lacks
    auto grants = pool_.Reserve(Pool::kInternalSession, ref, static_cast<uint32_t>(wanted.size()),
                                /*allow_partial=*/true, t0);
    if (!grants.ok() || grants->empty()) {
      (void)pool_.Release(Pool::kInternalSession, held, {});
      then(std::move(keys), std::move(first));
      return;
    }
    wanted.resize(grants->size());
    const uint64_t room = layout::SlotBytesFor(pool_.BlockBytesOf(ref.id));
    std::vector<DiskTier::ReadItem> items(wanted.size());
    auto* base = static_cast<std::byte*>(slab_->base());
    for (size_t j = 0; j < wanted.size(); ++j) {
      items[j] = DiskTier::ReadItem{ref.id, keys[wanted[j]], base + (*grants)[j].offset, room};
    }
    ++promoting_[session].count;
    tier_->Read(std::move(items), [this, then = std::move(then), ref, keys = std::move(keys),
                                   first = std::move(first), wanted = std::move(wanted),
                                   grants = *std::move(grants), held = std::move(held),
                                   session](std::vector<DiskTier::ReadResult> res) mutable {
      std::vector<CommitEntry> entries;
      std::vector<uint64_t> unused;
      for (size_t j = 0; j < res.size(); ++j) {
        if (res[j].ok) {
          entries.push_back(
              CommitEntry{grants[j].slot, keys[wanted[j]], res[j].checksum, res[j].depth});
        } else {
          unused.push_back(grants[j].slot);
        }
      }
      (void)pool_.Release(Pool::kInternalSession, {}, unused);
      const int64_t now = NowNs();
      absl::StatusOr<uint32_t> bound = pool_.Promote(Pool::kInternalSession, ref, entries, now);
      if (!bound.ok()) {
        // The namespace went away meanwhile: free what was read.
        std::vector<uint64_t> slots;
        for (const CommitEntry& e : entries) slots.push_back(e.slot);
        (void)pool_.Release(Pool::kInternalSession, {}, slots);
      } else {
        promoted_blocks_ += *bound;
        promoted_bytes_ += uint64_t{*bound} * pool_.BlockBytesOf(ref.id);
      }
      auto pit = promoting_.find(session);
      const bool closed = pit->second.closed;
      if (--pit->second.count == 0) promoting_.erase(pit);
      if (closed) {  // the client left: its pins ended with its session
        (void)pool_.Release(Pool::kInternalSession, held, {});
        return;
      }
      absl::StatusOr<Pins> second = pool_.Lookup(session, ref, keys, now, /*count=*/false);
      (void)pool_.Release(Pool::kInternalSession, held, {});
      if (!second.ok()) {
        then(std::move(keys), std::move(first));
        return;
      }
      if (first.batch != 0) (void)pool_.Release(session, {&first.batch, 1}, {});
      const size_t before = first.hits.size();
      const size_t after = second->hits.size();
      if (after > before) pool_.CountTierHits(after - before, pool_.BlockBytesOf(ref.id));
      uint32_t from_disk = 0;
      for (size_t j = 0; j < wanted.size(); ++j) {
        if (wanted[j] < after && res[j].ok) ++from_disk;
      }
      second->from_disk = from_disk;
      disk_hits_ += from_disk;
      then(std::move(keys), *std::move(second));
    });
  }

  // Hands dirty blocks to the disk tier while it has room for another batch.
  void PumpSpill() {
    if (!tier_ || stopped_ || (!options_.disk.spill && !draining_)) return;
    while (tier_->CanSpill() && pool_.dirty_blocks() > 0) {
      auto blocks = std::make_shared<std::vector<SpillBlock>>();
      // Blocks being written stay pinned: a batch takes at most a sixteenth of the slab, and
      // the batches in flight a quarter, so writers and read-backs always find room, and four
      // batches fit in that quarter (the drive writes one while another syncs).
      const uint64_t cap = slab_->size() / 4;
      if (spill_batches_ >= 4 || spill_bytes_ >= cap) break;
      const uint64_t max_bytes =
          std::min<uint64_t>({kSpillBatchBytes, slab_->size() / 16, cap - spill_bytes_});
      if (pool_.TakeSpill(kSpillBatchBlocks, max_bytes, blocks.get()) == 0) break;
      std::vector<DiskTier::SpillItem> items(blocks->size());
      auto* base = static_cast<std::byte*>(slab_->base());
      for (size_t i = 0; i < blocks->size(); ++i) {
        const SpillBlock& b = (*blocks)[i];
        DiskTier::SpillItem& it = items[i];
        it.ns = b.ns;
        it.key = b.key;
        it.checksum = b.checksum;
        it.depth = b.depth;
        it.data = base + b.offset;
        it.length = static_cast<uint32_t>(b.slot_bytes % 4096 == 0 ? b.slot_bytes : b.block_bytes);
        it.token = b.slot;
        it.tag = b.generation;
      }
      uint64_t batch_bytes = 0;
      for (const SpillBlock& b : *blocks) batch_bytes += b.slot_bytes;
      ++spill_batches_;
      spill_bytes_ += batch_bytes;
      tier_->Spill(std::move(items),
                   [this, blocks, batch_bytes](std::vector<std::pair<uint64_t, bool>> done) {
                     --spill_batches_;
                     spill_bytes_ -= batch_bytes;
                     size_t stored = 0;
                     for (size_t i = 0; i < done.size(); ++i) {
                       pool_.EndSpill((*blocks)[i].slot, (*blocks)[i].generation, done[i].second);
                       stored += done[i].second;
                     }
                     if (stored > 0) {
                       reactor_.Defer([this] { PumpSpill(); });
                     } else if (!spill_retry_armed_ && !stopped_) {
                       // Nothing found room (the disk is evicting ahead, or full of blocks being
                       // read): try again shortly rather than spin.
                       spill_retry_armed_ = true;
                       spill_retry_ = reactor_.After(absl::Milliseconds(10), [this] {
                         spill_retry_armed_ = false;
                         PumpSpill();
                       });
                     }
                   });
    }
  }

  // A Lookup reads at most this many blocks back from disk (the rest of its prefix stays a miss
  // this time), and a spill batch is at most this large.
  static constexpr size_t kMaxPromote = 1024;
  static constexpr size_t kSpillBatchBlocks = 64;
  static constexpr uint64_t kSpillBatchBytes = 32ull << 20;

  struct Promoting {
    uint32_t count = 0;
    bool closed = false;
  };

  io::Reactor& reactor_;
  KvServiceOptions options_;
  std::unique_ptr<SlabMapping> slab_;
  Pool pool_;
  std::unique_ptr<DiskTier> tier_;
  absl::flat_hash_map<uint64_t, Promoting> promoting_;  // by session
  bool draining_ = false;
  uint32_t spill_batches_ = 0;  // in flight
  uint64_t spill_bytes_ = 0;    // slot bytes they pin
  bool spill_retry_armed_ = false;
  io::TimerId spill_retry_;
  uint64_t drain_start_blocks_ = 0;
  uint64_t disk_hits_ = 0;
  uint64_t promoted_blocks_ = 0;
  uint64_t promoted_bytes_ = 0;
  uint64_t pulled_blocks_ = 0;  // committed here from a pull
  uint64_t pulled_bytes_ = 0;
  uint64_t remote_hits_ = 0;        // keys of Lookup answers that pulls brought
  uint64_t remote_probe_hits_ = 0;  // keys Exists found on peers
  std::unique_ptr<Remote> remote_;
  MetricsRegistry metrics_;
  std::vector<HistogramId> latency_;
  CounterId errors_{};
  std::unique_ptr<net::RpcServer> server_;
  io::TimerId sweep_timer_;
  std::string unix_path_;
  bool stopped_ = false;
};

absl::StatusOr<std::unique_ptr<KvService>> KvService::Start(io::Runtime& runtime,
                                                            KvServiceOptions options) {
  if (options.reactor >= runtime.size()) {
    return absl::InvalidArgumentError(
        StrCat("reactor ", options.reactor, " does not exist (", runtime.size(), " running)"));
  }
  if (options.lease < absl::Milliseconds(10)) {
    return absl::InvalidArgumentError("the lease must be at least 10 ms");
  }
  // A small slab gets smaller segments (at least eight of them, each at least 1 MiB), so that
  // a test-sized pool still has room for several size classes.
  const uint64_t usable = options.slab_bytes > (2ull << 20) ? options.slab_bytes - (2ull << 20) : 0;
  while (options.segment_bytes > (1ull << 20) && usable / options.segment_bytes < 8) {
    // Halve, keeping whole MiB (so segments stay 4 KiB-aligned), never under 1 MiB.
    options.segment_bytes =
        std::max<uint64_t>(1ull << 20, (options.segment_bytes / 2) & ~((1ull << 20) - 1));
  }
  OL_ASSIGN_OR_RETURN(auto slab, SlabMapping::Create(options.slab_bytes, options.segment_bytes));
  std::unique_ptr<DiskTier> tier;
  if (!options.disk.paths.empty()) {
    DiskTierOptions to;
    to.paths = options.disk.paths;
    to.capacity_bytes = options.disk.capacity_bytes;
    to.min_segment_bytes = slab->header().segment_bytes;  // every block fits in a disk segment
    OL_ASSIGN_OR_RETURN(tier, DiskTier::Open(std::move(to)));
  }
  std::unique_ptr<KvService> svc(new KvService());
  svc->shutdown_spill_ = options.disk.shutdown_spill;
  svc->runtime_ = &runtime;
  svc->reactor_ = options.reactor;
  svc->slab_bytes_ = slab->size();
  svc->segment_bytes_ = slab->header().segment_bytes;
  absl::Status started;
  OL_RETURN_IF_ERROR(runtime.RunOn(options.reactor, [&] {
    svc->impl_ =
        std::make_shared<Impl>(runtime, options.reactor, std::move(slab), options, std::move(tier));
  }));
  if (DiskTier* t = svc->impl_->tier()) {
    // Blocking (it rewrites each index log), before the reactor touches the tier.
    OL_RETURN_IF_ERROR(t->Attach(runtime.reactor(options.reactor)));
  }
  OL_RETURN_IF_ERROR(runtime.RunOn(options.reactor, [&] {
    io::Reactor& r = runtime.reactor(options.reactor);
    started = svc->impl_->Start(&svc->tcp_address_, &svc->unix_socket_);
    if (!started.ok()) {
      svc->impl_->Stop();
      svc->impl_.reset();
      return;
    }
    // If the runtime stops before the service, close the sockets while the ring still exists.
    r.AtStop([weak = std::weak_ptr<Impl>(svc->impl_)] {
      if (auto impl = weak.lock()) impl->Stop();
    });
  }));
  OL_RETURN_IF_ERROR(started);
  return svc;
}

KvService::~KvService() { Stop(); }

void KvService::Stop() {
  if (stopped_ || !impl_) return;
  stopped_ = true;
  impl_->StopRemoteThreads();  // their remote answers would find the pool stopping
  if (impl_->tier() != nullptr && runtime_->running()) {
    // A planned stop: what only the slab holds goes to disk first, within the time allowed.
    const auto t0 = absl::Now();
    const absl::Time deadline = t0 + shutdown_spill_;
    bool drained = false;
    absl::Status st = runtime_->RunOn(reactor_, [this] { impl_->BeginDrain(); });
    while (st.ok() && !drained && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
      st = runtime_->RunOn(reactor_, [&] { drained = impl_->Drained(); });
    }
    uint64_t blocks = 0;
    bool idle = false;
    (void)runtime_->RunOn(reactor_, [&] {
      impl_->EndDrain();
      blocks = impl_->DrainedBlocks();
    });
    // Writes already issued finish (their completions point into the service).
    for (int i = 0; i < 500 && !idle; ++i) {
      if (!runtime_->RunOn(reactor_, [&] { idle = impl_->Idle(); }).ok()) break;
      if (!idle) absl::SleepFor(absl::Milliseconds(10));
    }
    OL_LOG(kInfo) << "KV disk tier: wrote " << blocks << " blocks from the slab before stopping"
                  << (drained ? "" : " (time was up before all of them)") << ", in "
                  << absl::FormatDuration(absl::Now() - t0);
    if (!idle) {
      // Disk I/O still in flight would complete into freed memory: keep the service alive.
      OL_LOG(kWarning) << "KV disk tier: I/O still in flight at stop; leaving it to the kernel";
      (void)runtime_->RunOn(reactor_, [this] { impl_->Stop(); });
      new std::shared_ptr<Impl>(std::move(impl_));  // deliberately leaked
      return;
    }
  }
  // On the reactor: the server and the pool live there.
  absl::Status st = runtime_->RunOn(reactor_, [this] {
    impl_->Stop();
    impl_.reset();
  });
  if (!st.ok()) {
    // The runtime stopped first; its AtStop hook already stopped the service on the reactor,
    // and no reactor thread is left to race with.
    impl_.reset();
  }
}

absl::StatusOr<PoolStats> KvService::Stats() {
  if (!impl_) return absl::FailedPreconditionError("the KV service is stopped");
  PoolStats s;
  OL_RETURN_IF_ERROR(runtime_->RunOn(reactor_, [&] { s = impl_->Stats(); }));
  return s;
}

MetricsSnapshot KvService::Metrics() const {
  if (!impl_) return MetricsSnapshot{};
  return impl_->metrics().Read();
}

}  // namespace openlake::kv

#include "openlake/kv/service.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "kv/pool.h"
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
  Impl(io::Reactor& r, std::unique_ptr<SlabMapping> slab, const KvServiceOptions& o)
      : reactor_(r),
        options_(o),
        slab_(std::move(slab)),
        pool_(slab_->base(), PoolOptionsFor(o, slab_->size())),
        metrics_(1) {
    const char* names[] = {"attach", "open_namespace", "reserve", "commit",
                           "lookup", "release",        "exists",  "reset",
                           "stats",  "find_namespace", "remove"};
    for (const char* n : names) {
      latency_.push_back(metrics_.AddHistogram(StrCat("kv_", n, "_us"),
                                               StrCat("Latency of KV ", n, " requests, µs")));
    }
    errors_ = metrics_.AddCounter("kv_request_errors_total", "KV requests answered with an error");
  }

  static PoolOptions PoolOptionsFor(const KvServiceOptions& o, uint64_t slab_bytes) {
    PoolOptions po;
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
    server_->OnDisconnect([this](const net::ConnectionInfo& info) { pool_.CloseSession(info.id); });
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
    stopped_ = true;
    if (server_) server_.reset();  // stops listeners and sessions
    if (!unix_path_.empty()) unlink(unix_path_.c_str());
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
          return Reply(call, wire::CommitResponse());
        });

    Add<wire::LookupRequest>(
        wire::kLookup, [this](net::RpcCall& call, const wire::LookupRequest& req) {
          OL_ASSIGN_OR_RETURN(auto keys, wire::UnpackKeys(req.keys(), req.key_len()));
          OL_ASSIGN_OR_RETURN(Pins pinned,
                              pool_.Lookup(call.connection().id, Ref(req.ns()), keys, NowNs()));
          const std::vector<SlotHit>& hits = pinned.hits;
          wire::LookupResponse resp;
          resp.set_pin_batch(pinned.batch);
          const int n = static_cast<int>(hits.size());
          // Sized once and filled in place: no per-element capacity checks.
          resp.mutable_slots()->Resize(n, 0);
          resp.mutable_offsets()->Resize(n, 0);
          resp.mutable_generations()->Resize(n, 0);
          resp.mutable_checksums()->Resize(n, 0);
          uint64_t* slots = resp.mutable_slots()->mutable_data();
          uint64_t* offsets = resp.mutable_offsets()->mutable_data();
          uint64_t* generations = resp.mutable_generations()->mutable_data();
          uint64_t* checksums = resp.mutable_checksums()->mutable_data();
          for (int i = 0; i < n; ++i) {
            slots[i] = hits[i].slot;
            offsets[i] = hits[i].offset;
            generations[i] = hits[i].generation;
            checksums[i] = hits[i].checksum;
          }
          return Reply(call, resp);
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
          OL_ASSIGN_OR_RETURN(auto r, pool_.Exists(Ref(req.ns()), keys));
          wire::ExistsResponse resp;
          resp.set_prefix(r.prefix);
          std::string present(r.present.size(), '\0');
          for (size_t i = 0; i < r.present.size(); ++i) present[i] = r.present[i] ? 1 : 0;
          resp.set_present(std::move(present));
          return Reply(call, resp);
        });

    Add<wire::RemoveRequest>(
        wire::kRemove, [this](net::RpcCall& call, const wire::RemoveRequest& req) {
          OL_ASSIGN_OR_RETURN(auto keys, wire::UnpackKeys(req.keys(), req.key_len()));
          OL_RETURN_IF_ERROR(pool_.MayWrite(Ref(req.ns()), CallerOf(call)));
          OL_ASSIGN_OR_RETURN(uint32_t removed, pool_.Remove(Ref(req.ns()), keys));
          wire::RemoveResponse resp;
          resp.set_removed(removed);
          return Reply(call, resp);
        });

    Add<wire::ResetRequest>(wire::kReset,
                            [this](net::RpcCall& call, const wire::ResetRequest& req) {
                              OL_RETURN_IF_ERROR(pool_.MayWrite(Ref(req.ns()), CallerOf(call)));
                              OL_RETURN_IF_ERROR(pool_.Reset(Ref(req.ns())));
                              return Reply(call, wire::ResetResponse());
                            });

    Add<wire::StatsRequest>(wire::kStats, [this](net::RpcCall& call, const wire::StatsRequest&) {
      wire::StatsResponse resp;
      PoolStats st = pool_.Stats();
      st.sessions = server_->connection_count();
      wire::ToWire(st, &resp);
      return Reply(call, resp);
    });
  }

  io::Reactor& reactor_;
  KvServiceOptions options_;
  std::unique_ptr<SlabMapping> slab_;
  Pool pool_;
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
  std::unique_ptr<KvService> svc(new KvService());
  svc->runtime_ = &runtime;
  svc->reactor_ = options.reactor;
  svc->slab_bytes_ = slab->size();
  svc->segment_bytes_ = slab->header().segment_bytes;
  absl::Status started;
  OL_RETURN_IF_ERROR(runtime.RunOn(options.reactor, [&] {
    io::Reactor& r = runtime.reactor(options.reactor);
    svc->impl_ = std::make_shared<Impl>(r, std::move(slab), options);
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
  OL_RETURN_IF_ERROR(runtime_->RunOn(reactor_, [&] { s = impl_->pool().Stats(); }));
  return s;
}

MetricsSnapshot KvService::Metrics() const {
  if (!impl_) return MetricsSnapshot{};
  return impl_->metrics().Read();
}

}  // namespace openlake::kv

// UCX transport: contexts, registered regions, reactor-driven workers, endpoints with peer
// failure detection, and batched one-sided gets (see openlake/net/ucx.h).
#include "openlake/net/ucx.h"

#include <net/if.h>
#include <poll.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

#include "openlake/log.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::net {

namespace {

absl::Status UcxError(std::string_view what, ucs_status_t st) {
  return absl::UnavailableError(StrCat(what, ": ", ucs_status_string(st)));
}

// Waits (progressing the worker) for an endpoint's close, which completes locally: at once when
// forced, after a flush otherwise. A flush to a peer that never answers is given up after a
// while; its request is then left to UCX.
void WaitClosed(ucp_worker_h worker, ucs_status_ptr_t req) {
  if (req == nullptr || UCS_PTR_IS_ERR(req)) return;
  const absl::Time give_up = absl::Now() + absl::Seconds(2);
  while (ucp_request_check_status(req) == UCS_INPROGRESS) {
    if (ucp_worker_progress(worker) == 0 && absl::Now() > give_up) {
      OL_LOG(kWarning) << "UCX endpoint close did not complete; left to UCX";
      return;
    }
  }
  ucp_request_free(req);
}

// Every device named in a UCX_NET_DEVICES list exists here: a network interface ("lo",
// "eth0") or an RDMA device with its port ("mlx5_0:1"). UCX itself only warns and goes on
// without it.
absl::Status CheckDevices(std::string_view list) {
  for (absl::string_view dev : absl::StrSplit(AV(list), ',', absl::SkipEmpty())) {
    if (dev == "all") continue;
    const std::string name(dev.substr(0, dev.find(':')));
    if (if_nametoindex(name.c_str()) != 0) continue;
    if (access(StrCat("/sys/class/infiniband/", name).c_str(), F_OK) == 0) continue;
    return absl::InvalidArgumentError(
        StrCat("UCX device \"", dev, "\" is neither a network interface nor an RDMA device here"));
  }
  return absl::OkStatus();
}

}  // namespace

bool UcxBuilt() { return true; }

// ---- context ----------------------------------------------------------------------------

struct UcxContext::Impl {
  ucp_context_h context = nullptr;
  // Only shared-memory transports were asked for: no peer failure handling to try.
  bool shm_only = false;
};

namespace {

bool SharedMemoryOnly(std::string_view tls) {
  if (tls.empty()) return false;
  for (absl::string_view t : absl::StrSplit(AV(tls), ',', absl::SkipEmpty())) {
    if (t != "sm" && t != "shm" && t != "sysv" && t != "posix" && t != "cma" && t != "knem" &&
        t != "xpmem" && t != "self") {
      return false;
    }
  }
  return true;
}

}  // namespace

UcxContext::UcxContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UcxContext::~UcxContext() {
  if (impl_->context != nullptr) ucp_cleanup(impl_->context);
}

absl::StatusOr<std::unique_ptr<UcxContext>> UcxContext::Create(const UcxOptions& options) {
  OL_RETURN_IF_ERROR(CheckDevices(options.net_devices));
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return UcxError("reading the UCX configuration", st);
  if (!options.tls.empty()) st = ucp_config_modify(config, "TLS", options.tls.c_str());
  if (st == UCS_OK && !options.net_devices.empty()) {
    st = ucp_config_modify(config, "NET_DEVICES", options.net_devices.c_str());
  }
  if (st != UCS_OK) {
    ucp_config_release(config);
    return absl::InvalidArgumentError(StrCat("UCX options tls=\"", options.tls, "\" net_devices=\"",
                                             options.net_devices, "\": ", ucs_status_string(st)));
  }
  ucp_params_t params{};
  params.field_mask =
      UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = options.shared_workers ? 1 : 0;
  params.name = "openlake";
  auto impl = std::make_unique<Impl>();
  impl->shm_only = SharedMemoryOnly(options.tls);
  st = ucp_init(&params, config, &impl->context);
  ucp_config_release(config);
  if (st != UCS_OK) {
    return UcxError(
        StrCat("starting UCX (tls \"", options.tls, "\", devices \"", options.net_devices, "\")"),
        st);
  }
  return std::unique_ptr<UcxContext>(new UcxContext(std::move(impl)));
}

std::string UcxContext::Describe() const {
  char* text = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&text, &len);
  if (f == nullptr) return "";
  ucp_context_print_info(impl_->context, f);
  fclose(f);
  std::string out(text, len);
  free(text);
  return out;
}

bool UcxContext::Supports(UcxMemory memory) const {
  if (memory == UcxMemory::kHost) return true;
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(impl_->context, &attr) != UCS_OK) return false;
  return (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
}

// ---- regions ----------------------------------------------------------------------------

struct UcxRegion::Impl {
  ucp_context_h context = nullptr;
  ucp_mem_h memh = nullptr;
  uint64_t address = 0;
  size_t length = 0;
  UcxMemory memory = UcxMemory::kHost;
  std::string packed;
};

UcxRegion::UcxRegion(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UcxRegion::~UcxRegion() {
  if (impl_->memh != nullptr) ucp_mem_unmap(impl_->context, impl_->memh);
}
uint64_t UcxRegion::address() const { return impl_->address; }
size_t UcxRegion::length() const { return impl_->length; }
UcxMemory UcxRegion::memory() const { return impl_->memory; }
const std::string& UcxRegion::packed_key() const { return impl_->packed; }

absl::StatusOr<std::unique_ptr<UcxRegion>> UcxRegion::Map(UcxContext& context, void* base,
                                                          size_t length, UcxMemory memory) {
  if (base == nullptr || length == 0) {
    return absl::InvalidArgumentError("a UCX region needs a base and a length");
  }
  if (!context.Supports(memory)) {
    return absl::FailedPreconditionError(
        "this UCX cannot register GPU memory: it was built without CUDA (as Debian's is); "
        "pulls into GPU memory need UCX built --with-cuda");
  }
  auto impl = std::make_unique<Impl>();
  impl->context = context.impl()->context;
  impl->address = reinterpret_cast<uint64_t>(base);
  impl->length = length;
  impl->memory = memory;
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
  params.address = base;
  params.length = length;
  params.memory_type =
      memory == UcxMemory::kCuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
  ucs_status_t st = ucp_mem_map(impl->context, &params, &impl->memh);
  if (st != UCS_OK) return UcxError(StrCat("registering ", length, " bytes with UCX"), st);
  void* key = nullptr;
  size_t key_len = 0;
  st = ucp_rkey_pack(impl->context, impl->memh, &key, &key_len);
  if (st != UCS_OK) {
    ucp_mem_unmap(impl->context, impl->memh);
    return UcxError("packing a UCX remote key", st);
  }
  impl->packed.assign(static_cast<const char*>(key), key_len);
  ucp_rkey_buffer_release(key);
  return std::unique_ptr<UcxRegion>(new UcxRegion(std::move(impl)));
}

// ---- workers ----------------------------------------------------------------------------

struct GetBatch;
void FreeOrphans(std::vector<GetBatch*>& orphans);

struct UcxWorker::Impl {
  bool shm_only = false;  // its context's
  // Polls the event fd through the reactor. Owned by the worker until the worker goes while a
  // poll is in flight; it then frees itself when the reactor hands the poll back.
  struct Poller final : io::Completion {
    Impl* worker = nullptr;
    bool in_flight = false;
    void Complete(int32_t, uint32_t) noexcept override {
      in_flight = false;
      if (worker == nullptr) {
        delete this;
        return;
      }
      worker->Drive();
    }
  };

  ucp_worker_h worker = nullptr;
  int efd = -1;
  std::string address;
  io::Reactor* reactor = nullptr;
  Poller* poller = nullptr;
  bool kick_pending = false;
  // GetMany batches whose gets are in flight: while there are any, or while the last progress
  // found work, the worker is progressed on every turn of the reactor (some transports, shared
  // memory's cma among them, complete a get over several progress calls and signal no event
  // meanwhile); only an idle worker waits for its event fd.
  size_t batches_in_flight = 0;
  // Batches whose endpoint closed before UCX gave their gets back: a late callback frees one;
  // what is left when the worker is destroyed, UCX will never answer.
  std::vector<GetBatch*> orphans;
  // Expires with the worker: a deferred Kick that finds it gone does nothing.
  std::shared_ptr<Impl*> self;

  unsigned Progress() {
    unsigned worked = 0;
    for (;;) {
      while (ucp_worker_progress(worker) != 0) ++worked;
      if ((worked > 0 || batches_in_flight > 0) && reactor != nullptr) {
        Kick();  // busy: again on the reactor's next turn, without waiting for an event
        return worked;
      }
      const ucs_status_t st = ucp_worker_arm(worker);
      if (st == UCS_ERR_BUSY) continue;  // events came in while arming: progress them first
      if (st != UCS_OK) {
        OL_LOG_EVERY_N_SEC(kWarning, 5) << "UCX worker arm: " << ucs_status_string(st);
      }
      return worked;
    }
  }

  // Progresses once more on the reactor's next turn (however often it is asked before then).
  void Kick() {
    if (reactor == nullptr || kick_pending) return;
    kick_pending = true;
    reactor->Defer([weak = std::weak_ptr<Impl*>(self)] {
      std::shared_ptr<Impl*> alive = weak.lock();
      if (!alive) return;
      (*alive)->kick_pending = false;
      (*alive)->Progress();
    });
  }

  void Drive() {
    Progress();
    poller->in_flight = true;
    reactor->PollAdd(efd, POLLIN, poller);
  }
};

UcxWorker::UcxWorker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

UcxWorker::~UcxWorker() {
  Impl& w = *impl_;
  w.self.reset();
  if (w.poller != nullptr) {
    if (w.poller->in_flight && io::Reactor::Current() == w.reactor) {
      w.poller->worker = nullptr;  // frees itself when the cancelled poll comes back
      w.reactor->Cancel(w.poller, nullptr);
    } else {
      delete w.poller;  // no poll in flight, or its reactor has stopped
    }
  }
  if (w.worker != nullptr) ucp_worker_destroy(w.worker);
  FreeOrphans(w.orphans);
}

absl::StatusOr<std::unique_ptr<UcxWorker>> UcxWorker::Create(UcxContext& context) {
  auto impl = std::make_unique<Impl>();
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucs_status_t st = ucp_worker_create(context.impl()->context, &params, &impl->worker);
  if (st != UCS_OK) return UcxError("creating a UCX worker", st);
  impl->shm_only = context.impl()->shm_only;
  auto out = std::unique_ptr<UcxWorker>(new UcxWorker(std::move(impl)));
  Impl& w = *out->impl_;
  w.self = std::make_shared<Impl*>(&w);
  st = ucp_worker_get_efd(w.worker, &w.efd);
  if (st != UCS_OK) return UcxError("the UCX worker's event fd", st);
  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS;
  st = ucp_worker_query(w.worker, &attr);
  if (st != UCS_OK) return UcxError("the UCX worker's address", st);
  w.address.assign(reinterpret_cast<const char*>(attr.address), attr.address_length);
  ucp_worker_release_address(w.worker, attr.address);
  w.Progress();  // armed from the start
  return out;
}

const std::string& UcxWorker::address() const { return impl_->address; }
unsigned UcxWorker::Progress() { return impl_->Progress(); }
int UcxWorker::event_fd() const { return impl_->efd; }

void UcxWorker::Attach(io::Reactor& reactor) {
  Impl& w = *impl_;
  if (w.reactor != nullptr) return;
  w.reactor = &reactor;
  w.poller = new Impl::Poller;
  w.poller->worker = &w;
  w.Drive();
}

void UcxWorker::Kick() { impl_->Kick(); }

// ---- endpoints and keys -----------------------------------------------------------------

// What an endpoint's gets in flight share with it, and keep while UCX still holds them.
struct UcxEndpointState {
  absl::Status failed;
  std::vector<GetBatch*> batches;  // GetMany calls not finished
};

struct UcxEndpoint::Impl {
  UcxWorker* worker = nullptr;
  ucp_ep_h ep = nullptr;
  bool peer_failure = true;  // created with UCP_ERR_HANDLING_MODE_PEER
  std::shared_ptr<UcxEndpointState> state = std::make_shared<UcxEndpointState>();

  // Closes the endpoint: forced (gets in flight complete with an error) where peer failure is
  // handled, which UCX requires for that; flushed otherwise.
  void Close() {
    if (ep == nullptr) return;
    ucp_request_param_t param{};
    if (peer_failure) {
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    }
    ucp_worker_h w = worker->impl()->worker;
    ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &param);
    ep = nullptr;
    WaitClosed(w, req);
    // The cancelled gets come back on later progress calls.
    const absl::Time give_up = absl::Now() + absl::Seconds(2);
    while (!state->batches.empty() && absl::Now() < give_up) ucp_worker_progress(w);
    if (!state->batches.empty()) OrphanBatches();
  }
  void OrphanBatches();

  static void OnError(void* arg, ucp_ep_h, ucs_status_t st) {
    UcxEndpointState& state = *static_cast<Impl*>(arg)->state;
    if (state.failed.ok()) state.failed = UcxError("UCX peer failed", st);
    OL_LOG_EVERY_N_SEC(kWarning, 5) << state.failed.message();
  }
};

UcxEndpoint::UcxEndpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UcxEndpoint::~UcxEndpoint() { impl_->Close(); }

absl::StatusOr<std::unique_ptr<UcxEndpoint>> UcxEndpoint::Connect(UcxWorker& worker,
                                                                  std::string_view peer_address) {
  if (peer_address.empty()) return absl::InvalidArgumentError("empty UCX worker address");
  auto impl = std::make_unique<Impl>();
  impl->worker = &worker;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(peer_address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &Impl::OnError;
  params.err_handler.arg = impl.get();
  ucs_status_t st = UCS_ERR_UNREACHABLE;
  if (!worker.impl()->shm_only) st = ucp_ep_create(worker.impl()->worker, &params, &impl->ep);
  if (st == UCS_ERR_UNREACHABLE) {
    // Shared memory (sysv, posix) has no peer failure handler in UCX 1.13: an endpoint without
    // it, whose gets (cma) need nothing from the peer.
    params.field_mask &= ~(UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER);
    impl->peer_failure = false;
    st = ucp_ep_create(worker.impl()->worker, &params, &impl->ep);
  }
  if (st != UCS_OK) return UcxError("connecting to a UCX peer", st);
  worker.Kick();
  return std::unique_ptr<UcxEndpoint>(new UcxEndpoint(std::move(impl)));
}

absl::Status UcxEndpoint::health() const {
  if (!impl_->state->failed.ok()) return impl_->state->failed;
  if (impl_->ep == nullptr) return absl::UnavailableError("UCX endpoint closed");
  return absl::OkStatus();
}

void UcxEndpoint::Abort(absl::Status why) {
  absl::Status& failed = impl_->state->failed;
  if (failed.ok()) failed = why.ok() ? absl::AbortedError("UCX endpoint aborted") : std::move(why);
}

bool UcxEndpoint::detects_peer_failure() const { return impl_->peer_failure; }

UcxWorker& UcxEndpoint::worker() const { return *impl_->worker; }

struct UcxRemoteKey::Impl {
  ucp_rkey_h rkey = nullptr;
};

UcxRemoteKey::UcxRemoteKey(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UcxRemoteKey::~UcxRemoteKey() {
  if (impl_->rkey != nullptr) ucp_rkey_destroy(impl_->rkey);
}

absl::StatusOr<std::unique_ptr<UcxRemoteKey>> UcxEndpoint::Unpack(std::string_view packed_key) {
  OL_RETURN_IF_ERROR(health());
  if (packed_key.empty()) return absl::InvalidArgumentError("empty UCX remote key");
  auto impl = std::make_unique<UcxRemoteKey::Impl>();
  const ucs_status_t st = ucp_ep_rkey_unpack(impl_->ep, packed_key.data(), &impl->rkey);
  if (st != UCS_OK) return UcxError("unpacking a UCX remote key", st);
  return std::unique_ptr<UcxRemoteKey>(new UcxRemoteKey(std::move(impl)));
}

// ---- gets -------------------------------------------------------------------------------

// One GetMany: counts its gets still in flight (plus one while they are being started).
struct GetBatch {
  std::shared_ptr<UcxEndpointState> endpoint;
  UcxWorker::Impl* worker = nullptr;  // counts it in flight; null once orphaned
  size_t pending = 1;
  absl::Status status;
  UcxDone done;  // empty once an orphan's caller has been answered
  UcxWorker::Impl* orphaned_in = nullptr;  // the worker that holds it once orphaned

  void Fail(ucs_status_t st) {
    if (!status.ok()) return;
    status = endpoint->failed.ok() ? UcxError("UCX get", st) : endpoint->failed;
  }
  void Finished() {
    if (--pending != 0) return;
    if (worker != nullptr) --worker->batches_in_flight;
    UcxDone fn = std::move(done);
    // Aborted while in flight: the bytes may have come, but after the caller gave up on them.
    absl::Status st = status.ok() ? endpoint->failed : std::move(status);
    std::vector<GetBatch*>& live =
        orphaned_in != nullptr ? orphaned_in->orphans : endpoint->batches;
    live.erase(std::remove(live.begin(), live.end(), this), live.end());
    delete this;
    if (fn) fn(std::move(st));
  }
  static void OnDone(void* request, ucs_status_t st, void* user) {
    auto* b = static_cast<GetBatch*>(user);
    if (st != UCS_OK) b->Fail(st);
    ucp_request_free(request);
    b->Finished();
  }
};

void FreeOrphans(std::vector<GetBatch*>& orphans) {
  for (GetBatch* b : orphans) delete b;
  orphans.clear();
}

// Gets that UCX did not give back when their endpoint closed (a flushed close to a peer that
// stopped answering): their callers are answered now; the batches move to the worker, for
// UCX's late callbacks or the worker's end.
void UcxEndpoint::Impl::OrphanBatches() {
  OL_LOG(kWarning) << state->batches.size()
                   << " UCX get batches outlive their endpoint; failing them";
  std::vector<GetBatch*> orphans = std::move(state->batches);
  state->batches.clear();
  const absl::Status why = state->failed.ok()
                               ? absl::UnavailableError("UCX endpoint closed with gets in flight")
                               : state->failed;
  std::vector<GetBatch*>& kept = worker->impl()->orphans;
  for (GetBatch* b : orphans) {
    b->orphaned_in = worker->impl();
    if (b->worker != nullptr) --b->worker->batches_in_flight;  // not waited for any more
    b->worker = nullptr;
    kept.push_back(b);
  }
  for (GetBatch* b : orphans) {
    UcxDone fn = std::move(b->done);
    b->done = nullptr;
    if (fn) fn(why);
  }
}

void GetMany(UcxEndpoint& endpoint, const UcxRemoteKey& key, absl::Span<const UcxGet> gets,
             const UcxRegion* local_region, UcxDone done) {
  UcxEndpoint::Impl& ep = *endpoint.impl();
  if (absl::Status health = endpoint.health(); !health.ok()) {
    done(std::move(health));
    return;
  }
  auto* batch = new GetBatch;
  batch->endpoint = ep.state;
  batch->worker = endpoint.worker().impl();
  ++batch->worker->batches_in_flight;
  ep.state->batches.push_back(batch);
  batch->done = std::move(done);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &GetBatch::OnDone;
  param.user_data = batch;
  if (local_region != nullptr) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.memh = local_region->impl()->memh;
    param.memory_type = local_region->memory() == UcxMemory::kCuda ? UCS_MEMORY_TYPE_CUDA
                                                                   : UCS_MEMORY_TYPE_HOST;
  }
  for (const UcxGet& g : gets) {
    const ucs_status_ptr_t req =
        ucp_get_nbx(ep.ep, g.local, g.length, g.remote, key.impl()->rkey, &param);
    if (req == nullptr) continue;  // completed in place
    if (UCS_PTR_IS_ERR(req)) {
      batch->Fail(UCS_PTR_STATUS(req));
      break;  // the rest would fail the same way
    }
    ++batch->pending;
  }
  endpoint.worker().Kick();
  batch->Finished();
}

}  // namespace openlake::net

// File: openlake/net/ucx.h
//
// UCX for moving blocks between daemons: one-sided reads (gets) of a peer's registered memory
// straight into local memory, over whatever UCX finds (RDMA verbs, shared memory, TCP).
//
// The pieces, each a thin owner of one UCP object:
//   UcxContext   ucp_context: the transports (UCX_TLS) and devices (UCX_NET_DEVICES) to use.
//   UcxRegion    ucp_mem_map of a range (the slab): its packed remote key is what a peer needs
//                to read it. Unmapping it voids that key on the peer's side.
//   UcxWorker    ucp_worker, single-threaded: one per reactor that uses UCX. Attached to a
//                reactor, its event fd is polled through that reactor's io_uring; each wake-up
//                runs ucp_worker_progress until idle and re-arms it. Nothing spins.
//   UcxEndpoint  ucp_ep to a peer's worker, with peer failure detection: when the peer dies (or
//                Abort is called) every get in flight on it fails instead of hanging.
//   UcxRemoteKey the peer's region key, unpacked on an endpoint.
//
// Worker addresses and packed keys are opaque strings the caller carries to the peer itself
// (the daemons exchange them over the authenticated RPC, so a peer that fails the handshake
// never learns a key). A worker and everything made from it belong to one thread: the reactor it
// is attached to, or the caller's own thread that runs Progress itself.
//
//   OL_ASSIGN_OR_RETURN(auto ctx, net::UcxContext::Create({.tls = "tcp,self"}));
//   OL_ASSIGN_OR_RETURN(auto worker, net::UcxWorker::Create(*ctx));
//   worker->Attach(*io::Reactor::Current());
//   OL_ASSIGN_OR_RETURN(auto ep, net::UcxEndpoint::Connect(*worker, peer_worker_address));
//   OL_ASSIGN_OR_RETURN(auto key, ep->Unpack(peer_packed_key));
//   net::GetMany(*ep, *key, gets, local_region, [](absl::Status st) { ... });
//
// Built only with -Ducx (UcxBuilt() says); without it every Create answers Unimplemented.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include "openlake/export.h"
#include "openlake/io/reactor.h"

namespace openlake::net {

// Whether this build has UCX.
OL_EXPORT bool UcxBuilt();

struct UcxOptions {
  // UCX_TLS for this context: "tcp,self", "sm,self", "rc,ud,self"... Empty: UCX's own choice,
  // or the environment's UCX_TLS.
  std::string tls;
  // UCX_NET_DEVICES: "lo", "veth0", "mlx5_0:1"... Empty: every device, or the environment's.
  std::string net_devices;
  // More than one worker (one per reactor) will be made from this context.
  bool shared_workers = false;
};

// Where a region's memory lives. kCuda (GPU memory, for GPUDirect RDMA: a peer's bytes land in
// the GPU without a host copy) needs a UCX built with CUDA; UcxContext::Supports says.
enum class UcxMemory { kHost, kCuda };

class UcxWorker;
class UcxEndpoint;

class OL_EXPORT UcxContext {
 public:
  static absl::StatusOr<std::unique_ptr<UcxContext>> Create(const UcxOptions& options);
  UcxContext(const UcxContext&) = delete;
  UcxContext& operator=(const UcxContext&) = delete;
  // Every region, worker and endpoint made from it must be gone first.
  ~UcxContext();

  // The transports UCX chose, as ucp_context_print_info names them (for logs).
  std::string Describe() const;
  // Whether this UCX can register and move memory of that kind (kHost always; kCuda only where
  // UCX was built with CUDA and a GPU driver loads, which Debian's UCX is not).
  bool Supports(UcxMemory memory) const;

  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  explicit UcxContext(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Memory registered with a context: readable by peers that hold its packed key, and a target
// of gets that UCX can fill without a bounce copy.
class OL_EXPORT UcxRegion {
 public:
  // `base` is a host address for kHost, a device pointer (cudaMalloc) for kCuda; a kCuda map
  // on a UCX without CUDA answers FailedPrecondition.
  static absl::StatusOr<std::unique_ptr<UcxRegion>> Map(UcxContext& context, void* base,
                                                        size_t length,
                                                        UcxMemory memory = UcxMemory::kHost);
  UcxRegion(const UcxRegion&) = delete;
  UcxRegion& operator=(const UcxRegion&) = delete;
  ~UcxRegion();

  uint64_t address() const;
  size_t length() const;
  UcxMemory memory() const;
  // What a peer unpacks (UcxEndpoint::Unpack) to read this region.
  const std::string& packed_key() const;

  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  explicit UcxRegion(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class OL_EXPORT UcxWorker {
 public:
  static absl::StatusOr<std::unique_ptr<UcxWorker>> Create(UcxContext& context);
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;
  // Its endpoints must be gone first. Destroy it on the thread of the reactor it is attached to
  // while that reactor runs, or after the reactor has stopped.
  ~UcxWorker();

  // The address a peer connects to (UcxEndpoint::Connect).
  const std::string& address() const;

  // Runs ucp_worker_progress until it finds nothing more to do, then arms the event fd (again
  // when events came in while arming). Returns how many progress calls did work.
  unsigned Progress();
  // Readable when the worker has work after Progress armed it.
  int event_fd() const;

  // Drives the worker from `reactor` (call on its thread): polls the event fd through the
  // reactor's io_uring and runs Progress on each wake-up. From then on the worker, its
  // endpoints and keys belong to that thread.
  void Attach(io::Reactor& reactor);
  // Progress on the attached reactor's next turn (once, however often it is asked before).
  // GetMany calls it; a caller that sends operations some other way calls it too.
  void Kick();

  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  explicit UcxWorker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class UcxRemoteKey;

class OL_EXPORT UcxEndpoint {
 public:
  // Connects to `peer_address` (a peer worker's address()). Peer failure is detected: when the
  // peer dies, its gets in flight fail with Unavailable and so does every later one.
  static absl::StatusOr<std::unique_ptr<UcxEndpoint>> Connect(UcxWorker& worker,
                                                              std::string_view peer_address);
  UcxEndpoint(const UcxEndpoint&) = delete;
  UcxEndpoint& operator=(const UcxEndpoint&) = delete;
  // Closes the endpoint: gets still in flight complete (with an error) before it returns (it
  // progresses the worker for them, up to 2 s; so not from inside a GetMany's `done`). The
  // close is forced where peer failure is detected; see detects_peer_failure. Its remote keys
  // must be gone first.
  ~UcxEndpoint();

  // OK until the peer failed or Abort was called; then why.
  absl::Status health() const;
  // Fails the endpoint for a caller whose deadline passed on a peer that stopped answering:
  // later gets fail at once with `why`, and gets in flight complete with `why` whenever UCX
  // returns them (their memory may be written until then, so keep it until their `done`).
  // The connection stays up: closing it under gets in flight would, with UCX 1.13's software
  // gets over TCP, make the peer's UCX abort its process when it answers them.
  void Abort(absl::Status why);
  // True when UCX watches the peer (UCP_ERR_HANDLING_MODE_PEER): its death fails gets in
  // flight. UCX 1.13's shared-memory transports cannot: such an endpoint relies on the caller's
  // deadline and Abort.
  bool detects_peer_failure() const;

  // A peer region's key (its UcxRegion::packed_key()) for gets on this endpoint.
  absl::StatusOr<std::unique_ptr<UcxRemoteKey>> Unpack(std::string_view packed_key);

  UcxWorker& worker() const;

  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  explicit UcxEndpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class OL_EXPORT UcxRemoteKey {
 public:
  UcxRemoteKey(const UcxRemoteKey&) = delete;
  UcxRemoteKey& operator=(const UcxRemoteKey&) = delete;
  // No get that uses it may be in flight.
  ~UcxRemoteKey();

  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  friend class UcxEndpoint;
  explicit UcxRemoteKey(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One read: `length` bytes at the peer's virtual address `remote` (inside its region) into
// `local`.
struct UcxGet {
  void* local = nullptr;
  uint64_t remote = 0;
  size_t length = 0;
};

using UcxDone = absl::AnyInvocable<void(absl::Status)>;

// Starts every get on `endpoint` at once and runs `done` once, on the worker's thread, when all
// have completed: OK, or the first failure (the endpoint failed or was aborted). `local_region`
// (may be null) is registered memory that holds every `local`; where it is GPU memory
// (UcxMemory::kCuda) the gets land there directly. `done` may run before GetMany
// returns (every get completed in place, or the endpoint had already failed). The memory at
// each `local` must stay valid until `done` runs.
OL_EXPORT void GetMany(UcxEndpoint& endpoint, const UcxRemoteKey& key,
                       absl::Span<const UcxGet> gets, const UcxRegion* local_region, UcxDone done);

}  // namespace openlake::net

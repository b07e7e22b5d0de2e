// File: openlake/kv/service.h
//
// The KV pool as a service: creates the shared-memory slab and serves the pool's RPC on one
// reactor, over a Unix socket (local clients: the slab's descriptor is passed there) and TCP
// (control from anywhere; beyond loopback only with a shared secret). The pool's state lives
// on that reactor alone, so no request takes a lock.
//
//   auto rt = io::Runtime::Create({}).value();
//   OL_RETURN_IF_ERROR(rt->Start());
//   kv::KvServiceOptions o;
//   o.slab_bytes = 8ull << 30;
//   o.unix_socket = "/run/user/1000/openlake/kv-9400.sock";
//   OL_ASSIGN_OR_RETURN(auto kv, kv::KvService::Start(*rt, o));
//   ...
//   kv->Stop();
//
// Each client connection is a session: its reservations and read pins end when it closes, or
// when their lease (`lease`) passes without a Release.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "openlake/cluster/membership.h"
#include "openlake/export.h"
#include "openlake/io/reactor.h"
#include "openlake/kv/types.h"
#include "openlake/metrics.h"
#include "openlake/net/rpc.h"

namespace openlake::kv {

// The disk tier (docs/kv-pool.md, "Disk tier"): blocks evicted from the slab are kept in a data
// file per path and read back on a later Lookup; the tier survives restarts.
struct KvDiskOptions {
  std::vector<std::string> paths;  // a folder per drive; empty: RAM only
  uint64_t capacity_bytes = 0;     // per path
  // Write committed blocks behind (so eviction finds them on disk already). Off: the tier is
  // written only when the service stops (a planned restart), and read as usual.
  bool spill = true;
  // How long Stop may spend writing the slab's blocks that the disk does not hold yet.
  absl::Duration shutdown_spill = absl::Seconds(30);
};

// The cluster pool (docs/kv-pool.md, "Cluster pool"): a Lookup or Exists that misses here asks
// the chain's home in the directory for owners and the first owner for the rest of the prefix;
// a Lookup then pulls those blocks with one-sided UCX gets into this slab and commits them here.
struct KvClusterOptions {
  // The cluster's members and their liveness (cluster/membership.h); null: this daemon is
  // alone. Must outlive the service.
  cluster::Membership* membership = nullptr;
  std::string secret;       // to reach peers whose listeners ask for it
  std::string ucx_tls;      // UCX_TLS ("tcp,self", "rc,self"...); empty: UCX's choice
  std::string ucx_devices;  // UCX_NET_DEVICES ("eth0", "mlx5_0:1"...); empty: every device
  // Finding an owner and its answer (a late peer is a miss); a pull's gets within pull_timeout
  // (load errors past it, and the engine recomputes).
  absl::Duration lookup_timeout = absl::Milliseconds(50);
  absl::Duration pull_timeout = absl::Seconds(2);
  size_t homes = 2;         // directory homes per chain head
  size_t max_queued = 256;  // remote requests waiting for an agent; more are local misses
};

struct KvServiceOptions {
  // "host:port"; empty: no TCP listener. Beyond loopback requires `secret`.
  std::string tcp_address = "127.0.0.1:9400";
  // Path of the Unix socket; empty: none (then no client can map the slab). Its folder is
  // created (0700) if missing, and must belong to this user and not be writable by others;
  // the socket itself is 0600.
  std::string unix_socket;
  uint64_t slab_bytes = 1ull << 30;
  // Segment size; halved (down to 1 MiB) until the slab holds at least eight.
  uint64_t segment_bytes = 64ull << 20;
  absl::Duration lease = absl::Seconds(60);
  std::string secret;
  unsigned reactor = 0;  // the reactor that owns the pool
  uint32_t max_frame_bytes = 64u << 20;
  // Connections open at once on each listener, kept apart so that clients of one (any local
  // user can reach the TCP port) never take the places of the other (the inference engine's
  // Unix socket).
  size_t max_unix_connections = 1024;
  size_t max_tcp_connections = 4096;
  // Memory every connection together may hold in requests half received and answers unsent
  // (net::RpcServerOptions::max_buffered_bytes).
  size_t max_buffered_bytes = 1u << 30;
  // Share of the slab one session (one connection) may hold reserved at once, 1..100: a
  // Reserve past it is cut (allow_partial) or refused before anything is evicted.
  uint32_t max_reserved_percent = 25;
  // A TCP connection that sends nothing for this long is closed (the engine's Unix socket
  // never is); its reservations and pins end with it.
  absl::Duration tcp_idle_timeout = absl::Minutes(10);
  // Local users admitted besides this one and root (net::RpcServerOptions::allowed_uids): they
  // may read every namespace and write the ones they created, but not map the slab.
  std::vector<uid_t> allowed_uids;
  // Registers more methods on the pool's RPC server, so they are served on the same listeners
  // (openlaked adds the node status). Runs once, on the pool's reactor, before it listens.
  std::function<void(net::RpcServer&)> extend;
  KvDiskOptions disk;
  KvClusterOptions cluster;
};

class OL_EXPORT KvService {
 public:
  // Creates the slab, then starts serving on reactor `options.reactor` of `runtime` (which must
  // be running). Call from a thread that is not one of its reactors.
  static absl::StatusOr<std::unique_ptr<KvService>> Start(io::Runtime& runtime,
                                                          KvServiceOptions options);
  ~KvService();  // Stop()

  // Closes the listeners and every session; with a disk tier, then writes the slab's blocks it
  // does not hold yet (for at most disk.shutdown_spill). Idempotent; not from a reactor thread.
  void Stop();

  // Where it listens ("127.0.0.1:9400" with the real port; "" when not listening).
  const std::string& tcp_address() const { return tcp_address_; }
  const std::string& unix_socket() const { return unix_socket_; }
  uint64_t slab_bytes() const { return slab_bytes_; }
  // Segment size in use (smaller than asked for when the slab is small).
  uint64_t segment_bytes() const { return segment_bytes_; }

  // A snapshot of the pool's figures (runs on the pool's reactor).
  absl::StatusOr<PoolStats> Stats();
  // Per-method latency histograms ("kv_<method>_us", µs) and kv_request_errors_total.
  MetricsSnapshot Metrics() const;

 private:
  class Impl;
  KvService() = default;
  io::Runtime* runtime_ = nullptr;
  unsigned reactor_ = 0;
  std::shared_ptr<Impl> impl_;
  std::string tcp_address_;
  std::string unix_socket_;
  uint64_t slab_bytes_ = 0;
  uint64_t segment_bytes_ = 0;
  absl::Duration shutdown_spill_;
  bool stopped_ = false;
};

}  // namespace openlake::kv

// File: openlake/node/status.h
//
// The node status RPC. Every openlaked answers it on its rpc_addr, whatever it serves, so an
// operator's tool (`openlake cluster status`, `cluster topology --probe`) asks each node of a
// config over the same authenticated RPC its clients use — not a bare TCP connect — whether it
// is up, what it serves, its version and uptime, and the live state of its drives.
//
// Server side, either on an RpcServer a service already runs (the KV pool's; the function runs
// on that server's reactor and must not block):
//
//   node::ServeStatus(server, [&] { return MakeStatus(); });
//
// or on a listener of its own, for a node that runs no other RPC service:
//
//   OL_ASSIGN_OR_RETURN(auto srv, node::StatusServer::Start(rt, 0, "127.0.0.1:9400", "", fn));
//
// Client side (any thread that is not a reactor):
//
//   OL_ASSIGN_OR_RETURN(node::NodeStatus st, node::QueryStatus("10.0.0.2:9400", {secret}));
//
// The wire format is in docs/rpc.md ("Node status").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "openlake/export.h"
#include "openlake/io/reactor.h"
#include "openlake/net/rpc.h"

namespace openlake::node {

// The RPC method number (the KV pool's methods are 1..11).
inline constexpr uint16_t kStatusMethod = 256;

struct DriveStatus {
  std::string path;
  int set = -1;       // erasure set, -1 when the drive could not be placed
  int position = -1;  // within its set
  bool online = false;
  std::string state;  // "ok", "missing", "replaced", ... (store::DriveInfo::state)
  std::string drive_id;
  uint64_t total_bytes = 0;  // capacity of the drive's file system; 0 when unknown
  uint64_t free_bytes = 0;   // available to this process
  uint64_t errors = 0;       // I/O errors and damaged data found since the node started
  // An object store over several nodes lists every drive of the cluster as this node sees it:
  // the node holding each, and whether it is another node's (reached over the drive RPC).
  uint32_t node = 0;
  bool remote = false;
};

// Another member of the cluster as the answering node sees it (cluster/membership.h).
struct PeerView {
  uint32_t id = 0;
  std::string rpc_addr;
  std::string state;      // "up", "down", "unknown"
  uint32_t missed = 0;    // probes unanswered in a row
  double since_secs = 0;  // since `state` last changed; 0 when it never did
};

struct NodeStatus {
  uint32_t node_id = 0;
  std::string version;
  double uptime_secs = 0;
  uint32_t reactors = 0;
  bool kv = false;  // serves the KV pool (on the address that answered)
  uint64_t kv_slab_bytes = 0;
  bool s3 = false;  // serves S3
  std::string s3_addr;
  std::string admin_addr;  // "" when the admin listener is off
  // The object store's layout; zero when the node has none.
  std::string deployment_id;
  int set_count = 0;
  int data_shards = 0;
  int parity_shards = 0;
  std::vector<DriveStatus> drives;
  // The other members of its [[nodes]] and their liveness as this node probes them; empty on a
  // node outside a cluster.
  std::vector<PeerView> peers;
  // How the KV pool pulls from its peers' slabs: over UCX (false: it does not), with these
  // UCX_TLS and UCX_NET_DEVICES ("" = UCX's own choice).
  bool kv_ucx = false;
  std::string kv_ucx_tls;
  std::string kv_ucx_devices;
};

using StatusFn = std::function<NodeStatus()>;

// Registers kStatusMethod on `server` (call on the server's reactor). `fn` runs there for each
// request.
OL_EXPORT void ServeStatus(net::RpcServer& server, StatusFn fn);

// Registers more methods on a server, on its reactor, before it listens.
using ExtendFn = std::function<void(net::RpcServer& server)>;

// An RpcServer that serves the status method (and what `extend` registers: a storage node's
// cluster services), on reactor `reactor` of `runtime` (which must be running; call from a
// thread that is not one of its reactors). Beyond loopback it needs `secret`, as every RPC
// listener does.
class OL_EXPORT StatusServer {
 public:
  static absl::StatusOr<std::unique_ptr<StatusServer>> Start(io::Runtime& runtime, unsigned reactor,
                                                             const std::string& address,
                                                             const std::string& secret,
                                                             StatusFn fn, ExtendFn extend = {});
  ~StatusServer();  // Stop()
  // Closes the listener. Idempotent; not from a reactor thread.
  void Stop();
  // The bound address ("127.0.0.1:9400", the real port when 0 was asked for).
  const std::string& address() const { return address_; }

 private:
  struct Holder;
  StatusServer() = default;
  io::Runtime* runtime_ = nullptr;
  unsigned reactor_ = 0;
  // Shared with the reactor's AtStop hook, which closes the server if the runtime stops first.
  std::shared_ptr<Holder> holder_;
  std::string address_;
};

struct QueryOptions {
  std::string secret;                         // the nodes' rpc_secret, for nodes beyond loopback
  absl::Duration timeout = absl::Seconds(3);  // connect, then the call
};

// Asks the node at `address` ("host:port" or "unix:PATH"). Unavailable or DeadlineExceeded when
// it cannot be reached; Unimplemented when something answers that is not an openlaked.
OL_EXPORT absl::StatusOr<NodeStatus> QueryStatus(const std::string& address,
                                                 const QueryOptions& options);
// The same over a connection the caller holds.
OL_EXPORT absl::StatusOr<NodeStatus> QueryStatus(net::RpcClient& client, absl::Duration timeout);

}  // namespace openlake::node

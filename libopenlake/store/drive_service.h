// The drive RPC's serving side: this node's drives, step by step, for the engines of the other
// nodes (docs/object-store.md, "Remote drives"). Each request runs on the RPC server's reactor
// as the same LocalDrive step the engine here would take, and answers once it is done.
//
// Only admin connections may use it: the daemon's own user (or root) on loopback, and holders
// of the cluster's shared secret beyond it (docs/rpc.md). Shard files a peer opens stay open
// here under a lease, so an overwrite that renames the data folder away cannot cut its reader
// off: until the peer closes the handle, its connection goes, or it sits unused for
// `handle_lease`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"

#include "store/drive_api.h"

#include "openlake/net/rpc.h"

namespace openlake::store {

struct DriveServiceOptions {
  // The drive with this index among the node's data_dirs, when it is online (else null: the
  // request answers Unavailable). Called on the server's reactor.
  std::function<DriveApi*(uint32_t index)> drive;
  uint32_t drive_count = 0;
  // The drives' folders, for the start-up steps (probe, format); empty: those answer
  // Unimplemented.
  std::vector<std::string> paths;
  // This node's id and its cluster layout's digest, which a hello compares.
  uint32_t node_id = 0;
  std::string layout_digest;
  absl::Duration handle_lease = absl::Minutes(5);
  uint32_t max_block_bytes = 16u << 20;  // largest read or write of one request
};

class DriveService {
 public:
  // Registers the drive methods on `server`. On the server's reactor; the service must outlive
  // the server's handlers (Stop the server first), and be destroyed on that reactor.
  static std::unique_ptr<DriveService> Attach(net::RpcServer& server, DriveServiceOptions options);
  ~DriveService();

  // Requests answered, and handles open now (tests, metrics).
  uint64_t requests() const;
  size_t open_handles() const;

  struct State;

 private:
  explicit DriveService(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace openlake::store

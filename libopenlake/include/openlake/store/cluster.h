// File: openlake/store/cluster.h
//
// The object store over several nodes (docs/object-store.md, "Clusters"): how a deployment's
// drives are laid out into erasure sets, the digest every node compares before it joins, and the
// services a node runs so that the others' engines can use its drives and lock its objects.
//
//   // On every node, before Store::Open (the others' engines start by reading these drives):
//   auto svc = store::ClusterServices::Attach(rpc_server, {self_id, data_dirs, digest});
//   store::StoreOptions o;  o.drives = data_dirs;  o.cluster = spec;  ...
//   auto st = store::Store::Open(o);      // waits for enough of the cluster, formats a blank one
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "openlake/export.h"
#include "openlake/net/rpc.h"
#include "openlake/store/store.h"

namespace openlake::store {

// One drive of the deployment: drive `index` (its place in data_dirs) of node `node`.
struct DriveSlot {
  uint32_t node = 0;
  uint32_t index = 0;
};

// Every drive of the deployment in set order (set = i / set_drive_count, position its
// remainder). The node varies fastest: the first drive of each node by id, then the second of
// each, ..., so a set holds at most ⌈set_drive_count / nodes⌉ drives of any node and losing one
// node costs each set at most that many shards. InvalidArgument when the drives do not divide
// into sets, or some set would hold more of one node than that (unequal disk counts).
OL_EXPORT absl::StatusOr<std::vector<DriveSlot>> ClusterLayout(
    const std::vector<ClusterNodeSpec>& nodes, int set_drive_count);

// A short hex digest of what placement depends on: the nodes' ids and disk counts, the set
// size, the parity and the layout's version. Nodes whose digests differ refuse each other.
OL_EXPORT std::string LayoutDigest(const std::vector<ClusterNodeSpec>& nodes, int set_drive_count,
                                   int parity);

struct ClusterServiceOptions {
  uint32_t node_id = 0;
  std::vector<std::string> drives;  // this node's data_dirs, in order
  std::string layout_digest;
};

// What a node serves its peers on its RPC server: its drive folders (the drive RPC, step by
// step for the peers' engines) and its share of the cluster's object locks. Attach on the
// server's reactor before the store opens; destroy there after the server has stopped.
class OL_EXPORT ClusterServices {
 public:
  static std::unique_ptr<ClusterServices> Attach(net::RpcServer& server,
                                                 ClusterServiceOptions options);
  ~ClusterServices();
  // Requests served (drive and lock), for metrics. On the server's reactor.
  uint64_t requests() const;

  struct Impl;

 private:
  explicit ClusterServices(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace openlake::store

// What openlaked answers to the node status RPC (openlake/node/status.h): its id, version,
// uptime, what it serves, and its drives. Parts are added as they start and removed before they
// stop, so a status request that comes in meanwhile sees only what is running.
#pragma once

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "daemon_config.h"
#include "object_store.h"

#include "openlake/cluster/membership.h"
#include "openlake/node/status.h"

class NodeStatusSource {
 public:
  NodeStatusSource(const openlake::tools::Config& cfg, uint32_t reactors, absl::Time started)
      : node_id_(cfg.self_id), reactors_(reactors), started_(started) {}

  void SetKv(uint64_t slab_bytes);
  void SetObjects(const ObjectStoreNode* objects);  // nullptr: stopping
  void SetAdmin(std::string address);
  // The cluster's members and their liveness (nullptr: none, or stopping).
  void SetMembership(const openlake::cluster::Membership* membership);
  // How the KV pool pulls from its peers: over UCX with these transports and devices.
  void SetKvUcx(std::string tls, std::string devices);

  // Any thread; never blocks for long (the RPC calls it on a reactor).
  openlake::node::NodeStatus Status() const;

 private:
  const uint32_t node_id_;
  const uint32_t reactors_;
  const absl::Time started_;
  mutable absl::Mutex mu_;
  uint64_t kv_slab_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  const ObjectStoreNode* objects_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::string admin_addr_ ABSL_GUARDED_BY(mu_);
  const openlake::cluster::Membership* membership_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool kv_ucx_ ABSL_GUARDED_BY(mu_) = false;
  std::string kv_ucx_tls_ ABSL_GUARDED_BY(mu_);
  std::string kv_ucx_devices_ ABSL_GUARDED_BY(mu_);
};

// The object-store half of openlaked: the erasure-coded engine over the config's data_dirs,
// the S3 server in front of it, and a healer thread that repairs what reads found damaged
// and rebuilds replaced drives.
#pragma once

#include <functional>
#include <memory>

#include "absl/status/statusor.h"

#include "daemon_config.h"

#include "openlake/io/reactor.h"
#include "openlake/node/status.h"
#include "openlake/prometheus.h"

class ObjectStoreNode {
 public:
  // Opens (formatting on first use) the drives and starts serving S3 on cfg.s3_addr. Prints
  // what it serves, and the credentials when it generated them. A cluster's node waits for its
  // peers until `cancelled` returns true (then: Cancelled).
  static absl::StatusOr<std::unique_ptr<ObjectStoreNode>> Start(
      const openlake::tools::Config& cfg, openlake::io::Runtime& rt,
      std::function<bool()> cancelled = {});
  ~ObjectStoreNode();  // Stop()
  // Stops the server, then the healer; the engine closes with the object. Not from a reactor.
  void Stop();

  // S3 requests, drives by state, the heal queue and what the healer repaired. Any thread.
  void WriteMetrics(openlake::PrometheusWriter& w) const;
  // Ready when every erasure set has a write quorum of drives online.
  bool Ready(std::string* why) const;
  // The S3 address, the layout and each drive's live state, with its capacity and free space
  // as of the healer's last check (so that it never blocks: the node status RPC calls it on a
  // reactor).
  void FillStatus(openlake::node::NodeStatus* st) const;

 private:
  struct Impl;
  explicit ObjectStoreNode(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

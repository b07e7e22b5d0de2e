// The object-store half of openlaked: the erasure-coded engine over the config's data_dirs,
// the S3 server in front of it, and a healer thread that repairs what reads found damaged
// and rebuilds replaced drives.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "openlake/config.h"
#include "openlake/io/reactor.h"

class ObjectStoreNode {
 public:
  // Opens (formatting on first use) the drives and starts serving S3 on cfg.s3_addr. Prints
  // what it serves, and the credentials when it generated them.
  static absl::StatusOr<std::unique_ptr<ObjectStoreNode>> Start(const openlake::Config& cfg,
                                                                openlake::io::Runtime& rt);
  ~ObjectStoreNode();  // Stop()
  // Stops the server, then the healer; the engine closes with the object. Not from a reactor.
  void Stop();

 private:
  struct Impl;
  explicit ObjectStoreNode(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

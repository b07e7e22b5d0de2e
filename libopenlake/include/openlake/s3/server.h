// File: openlake/s3/server.h
//
// The S3 server: HTTP/1.1 on the core-local runtime, SigV4 authentication, and the S3 API over
// an object engine (docs/s3.md). `openlaked` runs one on 127.0.0.1:9000 by default.
//
//   s3::S3ServerOptions o;
//   o.address = "127.0.0.1:9000";
//   o.credentials = {{"AKIA...", "secret"}};  // none: a pair is generated and kept in data_dir
//   o.data_dir = "./data";
//   OL_ASSIGN_OR_RETURN(auto server, s3::S3Server::Start(runtime, store, o));
//   ...
//   server->Stop();                        // before the store and the runtime go
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "openlake/export.h"
#include "openlake/io/reactor.h"
#include "openlake/io/task.h"
#include "openlake/prometheus.h"
#include "openlake/s3/credential.h"
#include "openlake/store/store.h"

namespace openlake::s3 {

struct S3ServerOptions {
  std::string address = "127.0.0.1:9000";  // host:port; port 0 picks a free one
  std::string region = "us-east-1";
  // Access keys. Empty: the pair kept in `data_dir` is used, generated on first start.
  std::vector<Credential> credentials;
  std::string data_dir = "./data";
  // Domains for virtual-host-style requests ("<bucket>.<domain>"); path style always works.
  std::vector<std::string> domains = {"localhost"};
  absl::Duration idle_timeout = absl::Seconds(60);
  // A request head must be whole this long after its first byte (408 otherwise).
  absl::Duration head_timeout = absl::Seconds(30);
  size_t max_connections = 4096;
  // Connections open at once from one client address; 0: no cap. At either cap a client
  // that holds a place idle, or trickles its head in, gives it up to the new connection.
  size_t max_connections_per_client = 1024;
  // The lifecycle scanner's bounds (RunLifecycleRound): keys looked at per round, and the
  // pace of its listing (keys per second; 0: unpaced).
  uint64_t lifecycle_keys_per_round = 10000;
  uint64_t lifecycle_keys_per_second = 2000;
  // How long a bucket's owner, policy, ACL and versioning state are served from memory. This
  // server's own changes update it at once; another server's (a cluster's other nodes) are
  // seen once the entry is this old. Infinite: a store no one else changes.
  absl::Duration bucket_cache_ttl = absl::InfiniteDuration();
};

class OL_EXPORT S3Server {
 public:
  // Listens and serves until Stop. The store must outlive the server.
  static absl::StatusOr<std::unique_ptr<S3Server>> Start(io::Runtime& rt, store::Store& store,
                                                         S3ServerOptions options);
  ~S3Server();

  uint16_t port() const;
  std::string address() const;  // "127.0.0.1:9000"
  // The access keys in use; generated_credentials() says whether this start made them (the
  // daemon prints them then), credentials_file() where a generated pair is kept.
  const std::vector<Credential>& credentials() const;
  bool generated_credentials() const;
  const std::string& credentials_file() const;

  // The server's metrics (requests, bytes and latency by operation, the lifecycle scanner's
  // counts) in Prometheus' format.
  void WriteMetrics(PrometheusWriter& w) const;

  // One bounded round of the bucket lifecycle rules at `now` (docs/s3.md, "Lifecycle"): what
  // the embedding program runs on a timer, on a reactor of the server's runtime, one round at
  // a time. Each round goes on where the previous one stopped; true when it finished a pass
  // over every bucket (false: it ran out of its budget of keys, and the next round goes on).
  // (An error only when the runtime cannot run it.)
  io::Task<absl::StatusOr<bool>> RunLifecycleRound(absl::Time now);

  // Stops accepting and ends every connection. Idempotent; not from a reactor thread.
  void Stop();

 private:
  struct Impl;
  explicit S3Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace openlake::s3

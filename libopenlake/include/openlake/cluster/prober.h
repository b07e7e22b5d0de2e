// File: openlake/cluster/prober.h
//
// Liveness for a Membership (membership.h): asks every peer's node-status RPC once an
// `interval`, over a connection it keeps (and opens again after a failure), and reports each
// answer or miss. An answer from a node with another id than the config gives for that address
// counts as a miss (two configs that disagree are a fault, not a member). Transitions are logged
// ("cluster: node 2 (10.0.0.2:9400) is down: ...").
//
//   OL_ASSIGN_OR_RETURN(auto prober, cluster::Prober::Start(membership, {.secret = secret}));
//   ...
//   prober->Stop();   // or its destructor
//
// One thread per peer, each asleep between its probes, so a peer that black-holes its
// connections costs its own timeout and never delays the others.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#include "openlake/cluster/membership.h"
#include "openlake/export.h"

namespace openlake::cluster {

struct ProberOptions {
  std::string secret;  // the nodes' rpc_secret (their listeners beyond loopback ask for it)
  absl::Duration interval = absl::Seconds(1);
  // For the connect and for the answer: a peer later than this missed the probe.
  absl::Duration timeout = absl::Milliseconds(800);
};

class OL_EXPORT Prober {
 public:
  // Starts probing every peer of `membership`, which must outlive the prober.
  static absl::StatusOr<std::unique_ptr<Prober>> Start(Membership& membership,
                                                       ProberOptions options);
  Prober(const Prober&) = delete;
  Prober& operator=(const Prober&) = delete;
  ~Prober();  // Stop()

  // Ends every probe thread (a probe in progress finishes or times out first). Idempotent.
  void Stop();

 private:
  Prober(Membership& membership, ProberOptions options)
      : membership_(membership), options_(std::move(options)) {}
  void Probe(const Member& peer);

  Membership& membership_;
  const ProberOptions options_;
  absl::Notification stop_;
  std::vector<std::thread> threads_;
};

}  // namespace openlake::cluster

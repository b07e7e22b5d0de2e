// Liveness probes over the node-status RPC (see openlake/cluster/prober.h).
#include "openlake/cluster/prober.h"

#include <algorithm>
#include <utility>

#include "openlake/io/socket.h"
#include "openlake/log.h"
#include "openlake/net/rpc.h"
#include "openlake/node/status.h"
#include "openlake/strings.h"

namespace openlake::cluster {

absl::StatusOr<std::unique_ptr<Prober>> Prober::Start(Membership& membership,
                                                      ProberOptions options) {
  if (options.interval <= absl::ZeroDuration() || options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("prober interval and timeout must be positive");
  }
  // Addresses are resolved at each connect, not here: a peer's DNS name (a Kubernetes pod's)
  // may not resolve until that peer runs, which is a miss, not a reason not to start.
  std::vector<Member> peers = membership.Peers();
  std::unique_ptr<Prober> prober(new Prober(membership, std::move(options)));
  for (Member& p : peers) {
    prober->threads_.emplace_back([raw = prober.get(), peer = std::move(p)] { raw->Probe(peer); });
  }
  return prober;
}

Prober::~Prober() { Stop(); }

void Prober::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void Prober::Probe(const Member& peer) {
  net::RpcClientOptions co;
  co.secret = options_.secret;
  co.connect_timeout = options_.timeout;
  co.call_timeout = options_.timeout;
  co.spin = absl::ZeroDuration();
  std::unique_ptr<net::RpcClient> client;
  for (;;) {
    const absl::Time started = absl::Now();
    absl::Status miss;
    if (client == nullptr) {
      absl::StatusOr<io::SocketAddress> addr = io::SocketAddress::Parse(peer.rpc_addr);
      absl::StatusOr<std::unique_ptr<net::RpcClient>> c =
          addr.ok() ? net::RpcClient::Connect(*addr, co) : addr.status();
      if (c.ok()) {
        client = *std::move(c);
      } else {
        miss = c.status();
      }
    }
    if (client != nullptr) {
      absl::StatusOr<node::NodeStatus> st = node::QueryStatus(*client, options_.timeout);
      if (!st.ok()) {
        miss = st.status();
        client.reset();  // a late answer must not be taken for the next probe's
      } else if (st->node_id != peer.id) {
        miss =
            absl::FailedPreconditionError(StrCat("answered as node ", st->node_id, ", not ",
                                                 peer.id, ": the nodes' [[nodes]] lists disagree"));
        client.reset();
      }
    }
    const absl::Time now = absl::Now();
    if (miss.ok()) {
      if (membership_.OnAnswer(peer.id, now)) {
        OL_LOG(kInfo) << "cluster: node " << peer.id << " (" << peer.rpc_addr << ") is up";
      }
    } else if (membership_.OnMiss(peer.id, now, miss)) {
      OL_LOG(kWarning) << "cluster: node " << peer.id << " (" << peer.rpc_addr
                       << ") is down: " << miss.message();
    }
    // The next probe an interval after this one started, however long this one took.
    const absl::Duration rest = std::max(absl::ZeroDuration(), started + options_.interval - now);
    if (stop_.WaitForNotificationWithTimeout(rest)) return;
  }
}

}  // namespace openlake::cluster

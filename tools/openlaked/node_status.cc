// openlaked's answer to the node status RPC (see node_status.h).
#include "node_status.h"

#include <utility>

#include "absl/time/clock.h"

#include "openlake/version.h"

void NodeStatusSource::SetKv(uint64_t slab_bytes) {
  absl::MutexLock lock(&mu_);
  kv_slab_bytes_ = slab_bytes;
}

void NodeStatusSource::SetObjects(const ObjectStoreNode* objects) {
  absl::MutexLock lock(&mu_);
  objects_ = objects;
}

void NodeStatusSource::SetAdmin(std::string address) {
  absl::MutexLock lock(&mu_);
  admin_addr_ = std::move(address);
}

void NodeStatusSource::SetMembership(const openlake::cluster::Membership* membership) {
  absl::MutexLock lock(&mu_);
  membership_ = membership;
}

openlake::node::NodeStatus NodeStatusSource::Status() const {
  openlake::node::NodeStatus st;
  st.node_id = node_id_;
  st.version = std::string(openlake::Version());
  st.uptime_secs = absl::ToDoubleSeconds(absl::Now() - started_);
  st.reactors = reactors_;
  absl::MutexLock lock(&mu_);
  st.kv = kv_slab_bytes_ > 0;
  st.kv_slab_bytes = kv_slab_bytes_;
  st.admin_addr = admin_addr_;
  if (objects_ != nullptr) objects_->FillStatus(&st);
  if (membership_ != nullptr) {
    const absl::Time now = absl::Now();
    for (const openlake::cluster::MemberState& m : membership_->Snapshot()) {
      if (m.self) continue;
      const bool changed = m.since != absl::InfinitePast();
      st.peers.push_back({m.member.id, m.member.rpc_addr, LivenessName(m.liveness), m.missed,
                          changed ? absl::ToDoubleSeconds(now - m.since) : 0.0});
    }
  }
  return st;
}

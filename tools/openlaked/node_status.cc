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

void NodeStatusSource::SetKvUcx(std::string tls, std::string devices) {
  absl::MutexLock lock(&mu_);
  kv_ucx_ = true;
  kv_ucx_tls_ = std::move(tls);
  kv_ucx_devices_ = std::move(devices);
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
  st.kv_ucx = kv_ucx_;
  st.kv_ucx_tls = kv_ucx_tls_;
  st.kv_ucx_devices = kv_ucx_devices_;
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

// File: openlake/cluster/membership.h
//
// Who is in the cluster and who is alive. The members are the config's [[nodes]] (the same list
// on every node); liveness comes from probing each peer's node-status RPC (node/status.h) every
// second: a peer is down after `down_after_misses` probes in a row went unanswered, and up again
// at its first answer. There is no consensus: every node keeps its own view, and what depends on
// it (the KV directory's placement) only ever costs a miss when two views differ.
//
//   cluster::Membership m(self_id, nodes, {});
//   m.OnAnswer(peer, absl::Now());            // a probe answered
//   m.OnMiss(peer, absl::Now(), status);      // a probe failed or timed out
//   std::shared_ptr<const cluster::LiveSet> live = m.live();   // cheap, from any thread
//
// Thread-safe: the prober updates it while reactors read `live()`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "openlake/export.h"

namespace openlake::cluster {

struct Member {
  uint32_t id = 0;
  std::string rpc_addr;
};

enum class Liveness {
  kUnknown,  // never probed yet: not live
  kUp,
  kDown,
};

OL_EXPORT const char* LivenessName(Liveness l);

// One member as this node sees it.
struct MemberState {
  Member member;
  bool self = false;
  Liveness liveness = Liveness::kUnknown;
  uint32_t missed = 0;  // probes unanswered in a row
  absl::Time last_answer = absl::InfinitePast();
  absl::Time since = absl::InfinitePast();  // when `liveness` last changed
  uint64_t transitions = 0;                 // up→down and down→up changes so far
  std::string last_error;                   // of the last missed probe
};

// The live members at one moment (this node always among them), sorted by id. `epoch` grows at
// every change, so a holder can tell whether what it derived from a set is stale.
struct OL_EXPORT LiveSet {
  uint64_t epoch = 0;
  std::vector<Member> members;

  bool Contains(uint32_t id) const;
  const Member* Find(uint32_t id) const;
};

struct MembershipOptions {
  uint32_t down_after_misses = 3;
};

class OL_EXPORT Membership {
 public:
  // `members` holds every node, this one (`self_id`) included; ids are unique.
  Membership(uint32_t self_id, std::vector<Member> members, MembershipOptions options);
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  uint32_t self_id() const { return self_id_; }
  // Every member but this one, in id order.
  std::vector<Member> Peers() const;

  // A probe of `id` answered at `now`. True when that made it live (it was down or unknown).
  bool OnAnswer(uint32_t id, absl::Time now);
  // A probe of `id` went unanswered (`why`). True when that took it out of the live set (a
  // member never heard from goes from unknown to down at its first miss, and stays out).
  bool OnMiss(uint32_t id, absl::Time now, const absl::Status& why);

  std::shared_ptr<const LiveSet> live() const;
  std::vector<MemberState> Snapshot() const;
  // How many members are live, this one included.
  size_t live_count() const;
  // How many members there are, live or not, this one included.
  size_t size() const { return size_; }

 private:
  void Publish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  MemberState* StateOf(uint32_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint32_t self_id_;
  const MembershipOptions options_;
  const size_t size_;
  mutable absl::Mutex mu_;
  std::vector<MemberState> states_ ABSL_GUARDED_BY(mu_);  // sorted by id
  std::shared_ptr<const LiveSet> live_ ABSL_GUARDED_BY(mu_);
};

}  // namespace openlake::cluster

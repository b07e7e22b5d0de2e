// Members and their liveness (see openlake/cluster/membership.h).
#include "openlake/cluster/membership.h"

#include <algorithm>
#include <utility>

namespace openlake::cluster {

const char* LivenessName(Liveness l) {
  switch (l) {
    case Liveness::kUnknown:
      return "unknown";
    case Liveness::kUp:
      return "up";
    case Liveness::kDown:
      return "down";
  }
  return "unknown";
}

bool LiveSet::Contains(uint32_t id) const { return Find(id) != nullptr; }

const Member* LiveSet::Find(uint32_t id) const {
  auto it = std::lower_bound(members.begin(), members.end(), id,
                             [](const Member& m, uint32_t v) { return m.id < v; });
  return it != members.end() && it->id == id ? &*it : nullptr;
}

Membership::Membership(uint32_t self_id, std::vector<Member> members, MembershipOptions options)
    : self_id_(self_id), options_(options), size_(members.size()) {
  std::sort(members.begin(), members.end(),
            [](const Member& a, const Member& b) { return a.id < b.id; });
  absl::MutexLock lock(&mu_);
  for (Member& m : members) {
    MemberState s;
    s.self = m.id == self_id;
    s.member = std::move(m);
    // This node is live by definition: it answers its own lookups.
    if (s.self) s.liveness = Liveness::kUp;
    states_.push_back(std::move(s));
  }
  Publish();
}

MemberState* Membership::StateOf(uint32_t id) {
  auto it = std::lower_bound(states_.begin(), states_.end(), id,
                             [](const MemberState& s, uint32_t v) { return s.member.id < v; });
  return it != states_.end() && it->member.id == id ? &*it : nullptr;
}

std::vector<Member> Membership::Peers() const {
  absl::MutexLock lock(&mu_);
  std::vector<Member> out;
  for (const MemberState& s : states_) {
    if (!s.self) out.push_back(s.member);
  }
  return out;
}

bool Membership::OnAnswer(uint32_t id, absl::Time now) {
  absl::MutexLock lock(&mu_);
  MemberState* s = StateOf(id);
  if (s == nullptr || s->self) return false;
  s->missed = 0;
  s->last_answer = now;
  if (s->liveness == Liveness::kUp) return false;
  if (s->liveness == Liveness::kDown) ++s->transitions;
  s->liveness = Liveness::kUp;
  s->since = now;
  Publish();
  return true;
}

bool Membership::OnMiss(uint32_t id, absl::Time now, const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  MemberState* s = StateOf(id);
  if (s == nullptr || s->self) return false;
  ++s->missed;
  s->last_error = why.ToString();
  // An unknown member that does not answer is down at once: it was never live to lose.
  const bool down = s->liveness == Liveness::kUnknown || s->missed >= options_.down_after_misses;
  if (!down || s->liveness == Liveness::kDown) return false;
  const bool was_up = s->liveness == Liveness::kUp;
  if (was_up) ++s->transitions;
  s->liveness = Liveness::kDown;
  s->since = now;
  if (was_up) Publish();
  return was_up;
}

void Membership::Publish() {
  auto set = std::make_shared<LiveSet>();
  set->epoch = live_ == nullptr ? 1 : live_->epoch + 1;
  for (const MemberState& s : states_) {
    if (s.liveness == Liveness::kUp) set->members.push_back(s.member);
  }
  live_ = std::move(set);
}

std::shared_ptr<const LiveSet> Membership::live() const {
  absl::MutexLock lock(&mu_);
  return live_;
}

std::vector<MemberState> Membership::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return states_;
}

size_t Membership::live_count() const { return live()->members.size(); }

}  // namespace openlake::cluster

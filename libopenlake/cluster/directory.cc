// The KV discovery directory: rendezvous placement of chain heads, the homes' soft state and the
// owners' announcements (see directory.h).
#include "cluster/directory.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "openlake/checksum.h"

namespace openlake::cluster {

uint64_t DirectoryKey(std::string_view ns_name, uint64_t fingerprint_digest,
                      std::string_view head_key) {
  // <name len u32 LE><name><digest u64 LE><key>: unambiguous, whatever the name holds.
  std::string enc;
  enc.reserve(4 + ns_name.size() + 8 + head_key.size());
  const auto n = static_cast<uint32_t>(ns_name.size());
  for (int i = 0; i < 4; ++i) enc.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  enc += ns_name;
  for (int i = 0; i < 8; ++i)
    enc.push_back(static_cast<char>((fingerprint_digest >> (8 * i)) & 0xff));
  enc += head_key;
  return Crc64(enc.data(), enc.size());
}

uint64_t RendezvousWeight(uint64_t head, uint32_t node) {
  // splitmix64's finaliser over the pair: every bit of both moves every bit of the weight.
  uint64_t z = head ^ (static_cast<uint64_t>(node) * 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

absl::InlinedVector<uint32_t, 4> Homes(uint64_t head, const LiveSet& live, size_t count) {
  struct Scored {
    uint64_t weight;
    uint32_t id;
  };
  absl::InlinedVector<Scored, 4> best;  // kept sorted, best first
  for (const Member& m : live.members) {
    const Scored s{RendezvousWeight(head, m.id), m.id};
    if (best.size() == count && s.weight <= best.back().weight) continue;
    auto at = std::find_if(best.begin(), best.end(),
                           [&](const Scored& b) { return s.weight > b.weight; });
    best.insert(at, s);
    if (best.size() > count) best.pop_back();
  }
  absl::InlinedVector<uint32_t, 4> out;
  for (const Scored& s : best) out.push_back(s.id);
  return out;
}

// ---- Directory ----------------------------------------------------------------------------

void Directory::Announce(uint32_t owner, const std::vector<uint64_t>& heads, absl::Time now) {
  const absl::Time expires = now + options_.ttl;
  for (uint64_t head : heads) {
    Owners& owners = map_[head];
    auto it =
        std::find_if(owners.begin(), owners.end(), [&](const Owner& o) { return o.node == owner; });
    if (it != owners.end()) {
      it->expires = expires;
    } else if (owners.size() < options_.owners_per_head) {
      owners.push_back(Owner{owner, expires});
    } else {
      // Full: the newcomer replaces the entry nearest to expiry.
      auto oldest =
          std::min_element(owners.begin(), owners.end(),
                           [](const Owner& a, const Owner& b) { return a.expires < b.expires; });
      *oldest = Owner{owner, expires};
    }
  }
  if (map_.size() > options_.max_heads) Trim(now);
}

void Directory::Withdraw(uint32_t owner, const std::vector<uint64_t>& heads) {
  for (uint64_t head : heads) {
    auto it = map_.find(head);
    if (it == map_.end()) continue;
    Owners& owners = it->second;
    owners.erase(std::remove_if(owners.begin(), owners.end(),
                                [&](const Owner& o) { return o.node == owner; }),
                 owners.end());
    if (owners.empty()) map_.erase(it);
  }
}

void Directory::DropOwner(uint32_t owner) {
  for (auto it = map_.begin(); it != map_.end();) {
    Owners& owners = it->second;
    owners.erase(std::remove_if(owners.begin(), owners.end(),
                                [&](const Owner& o) { return o.node == owner; }),
                 owners.end());
    if (owners.empty()) {
      map_.erase(it++);
    } else {
      ++it;
    }
  }
}

absl::InlinedVector<uint32_t, 4> Directory::Find(uint64_t head, absl::Time now,
                                                 absl::FunctionRef<bool(uint32_t)> usable,
                                                 size_t max) const {
  absl::InlinedVector<uint32_t, 4> out;
  auto it = map_.find(head);
  if (it == map_.end()) return out;
  Owners owners = it->second;
  std::sort(owners.begin(), owners.end(),
            [](const Owner& a, const Owner& b) { return a.expires > b.expires; });
  for (const Owner& o : owners) {
    if (out.size() == max) break;
    if (o.expires > now && usable(o.node)) out.push_back(o.node);
  }
  return out;
}

size_t Directory::Expire(absl::Time now) {
  size_t dropped = 0;
  for (auto it = map_.begin(); it != map_.end();) {
    Owners& owners = it->second;
    const size_t before = owners.size();
    owners.erase(std::remove_if(owners.begin(), owners.end(),
                                [&](const Owner& o) { return o.expires <= now; }),
                 owners.end());
    dropped += before - owners.size();
    if (owners.empty()) {
      map_.erase(it++);
    } else {
      ++it;
    }
  }
  return dropped;
}

void Directory::Trim(absl::Time now) {
  Expire(now);
  if (map_.size() <= options_.max_heads) return;
  // Still over: drop the heads whose freshest entry expires first, down to 7/8 of the bound.
  std::vector<std::pair<absl::Time, uint64_t>> by_expiry;
  by_expiry.reserve(map_.size());
  for (const auto& [head, owners] : map_) {
    absl::Time latest = absl::InfinitePast();
    for (const Owner& o : owners) latest = std::max(latest, o.expires);
    by_expiry.emplace_back(latest, head);
  }
  const size_t keep = options_.max_heads - options_.max_heads / 8;
  const size_t drop = by_expiry.size() - keep;
  std::nth_element(by_expiry.begin(), by_expiry.begin() + drop, by_expiry.end());
  for (size_t i = 0; i < drop; ++i) map_.erase(by_expiry[i].second);
}

// ---- Announcer ----------------------------------------------------------------------------

void Announcer::Add(uint64_t head) {
  if (held_.insert(head).second) added_.push_back(head);
}

void Announcer::Remove(uint64_t head) {
  if (held_.erase(head) > 0) removed_.push_back(head);
}

void Announcer::Route(uint64_t head, bool announce, const LiveSet& live,
                      absl::flat_hash_map<uint32_t, Announcement>* out) const {
  for (uint32_t home : Homes(head, live, options_.homes)) {
    Announcement& a = (*out)[home];
    a.home = home;
    (announce ? a.announce : a.withdraw).push_back(head);
  }
}

std::vector<Announcement> Announcer::Flush(const LiveSet& live, absl::Time now,
                                           absl::FunctionRef<void(const Announcement&)> local) {
  absl::flat_hash_map<uint32_t, Announcement> by_home;
  if (live.epoch != flushed_epoch_ && settled_refresh_ == absl::InfiniteFuture()) {
    settled_refresh_ = now + options_.settle;
  }
  if (now >= next_refresh_ || now >= settled_refresh_) {
    for (uint64_t head : held_) Route(head, true, live, &by_home);
    next_refresh_ = now + options_.refresh;
    settled_refresh_ = absl::InfiniteFuture();
    flushed_epoch_ = live.epoch;
  } else {
    // Added and then removed before this flush: only the removal matters, and it is harmless.
    for (uint64_t head : added_) {
      if (held_.contains(head)) Route(head, true, live, &by_home);
    }
  }
  for (uint64_t head : removed_) {
    if (!held_.contains(head)) Route(head, false, live, &by_home);
  }
  added_.clear();
  removed_.clear();
  std::vector<Announcement> out;
  for (auto& [home, a] : by_home) {
    if (home == self_) {
      local(a);
    } else {
      out.push_back(std::move(a));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Announcement& a, const Announcement& b) { return a.home < b.home; });
  return out;
}

}  // namespace openlake::cluster

// The cache of small objects (see inline_cache.h).
#include "store/inline_cache.h"

#include "openlake/strings.h"

namespace openlake::store {

size_t InlineCache::Cost(const Entry& e) {
  size_t meta = 0;
  for (const auto& [name, value] : e.info.user_meta) meta += name.size() + value.size();
  return e.data.size() + e.info.key.size() + e.info.content_type.size() + meta + 256;
}

std::shared_ptr<const InlineCache::Entry> InlineCache::Find(std::string_view name) const {
  if (max_bytes_ == 0) return nullptr;
  absl::MutexLock l(&mu_);
  auto it = map_.find(AV(name));
  return it == map_.end() ? nullptr : it->second;
}

void InlineCache::Insert(std::string name, std::shared_ptr<const Entry> entry) {
  const size_t cost = Cost(*entry);
  if (max_bytes_ == 0 || cost > max_bytes_ / 16) return;
  absl::MutexLock l(&mu_);
  auto [it, fresh] = map_.try_emplace(name, entry);
  if (!fresh) {
    bytes_ -= Cost(*it->second);
    it->second = std::move(entry);
  } else {
    order_.push_back(std::move(name));
  }
  // Names of invalidated entries linger in order_: drop them before they outnumber the rest.
  if (order_.size() > 2 * map_.size() + 64) {
    std::deque<std::string> live;
    absl::flat_hash_map<absl::string_view, bool> seen;
    for (std::string& n : order_) {
      if (map_.contains(n) && seen.emplace(absl::string_view(n), true).second) live.push_back(std::move(n));
    }
    order_ = std::move(live);
  }
  bytes_ += cost;
  // Oldest first; names already invalidated are skipped on the way.
  while (bytes_ > max_bytes_ && !order_.empty()) {
    auto old = map_.find(order_.front());
    if (old != map_.end()) {
      bytes_ -= Cost(*old->second);
      map_.erase(old);
    }
    order_.pop_front();
  }
}

void InlineCache::Invalidate(std::string_view name) {
  if (max_bytes_ == 0) return;
  absl::MutexLock l(&mu_);
  auto it = map_.find(AV(name));
  if (it == map_.end()) return;
  bytes_ -= Cost(*it->second);
  map_.erase(it);
  // Its name stays in order_ until it reaches the front (or is inserted again: then the old
  // position evicts the new entry early, which costs a read, never a wrong answer).
}

}  // namespace openlake::store

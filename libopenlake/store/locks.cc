#include "store/locks.h"

#include <vector>

#include "absl/hash/hash.h"

#include "openlake/strings.h"

namespace openlake::store {

void LockGuard::Release() {
  if (table_ == nullptr) return;
  table_->Unlock(name_, exclusive_);
  table_ = nullptr;
}

NamespaceLocks::Stripe& NamespaceLocks::StripeOf(std::string_view name) {
  return stripes_[absl::HashOf(AV(name)) % kStripes];
}

bool NamespaceLocks::TryGrant(std::string_view name, bool exclusive,
                              std::coroutine_handle<> h) {
  Stripe& s = StripeOf(name);
  absl::MutexLock lock(&s.mu);
  Entry& e = s.map[std::string(name)];
  const bool free = exclusive ? (!e.writer && e.readers == 0) : !e.writer;
  if (free && e.waiters.empty()) {
    if (exclusive) e.writer = true;
    else ++e.readers;
    return true;
  }
  e.waiters.push_back({exclusive, h, io::Reactor::Current()});
  return false;
}

bool NamespaceLocks::Acquire::await_suspend(std::coroutine_handle<> h) {
  return !t_->TryGrant(name_, exclusive_, h);  // granted at once: go on without suspending
}

void NamespaceLocks::Unlock(std::string_view name, bool exclusive) {
  std::vector<Waiter> wake;
  {
    Stripe& s = StripeOf(name);
    absl::MutexLock lock(&s.mu);
    auto it = s.map.find(std::string(name));
    if (it == s.map.end()) return;
    Entry& e = it->second;
    if (exclusive) e.writer = false;
    else --e.readers;
    // FIFO: a writer at the head waits for every holder; readers at the head go together.
    while (!e.waiters.empty()) {
      Waiter& w = e.waiters.front();
      if (w.exclusive) {
        if (e.writer || e.readers > 0) break;
        e.writer = true;
      } else {
        if (e.writer) break;
        ++e.readers;
      }
      wake.push_back(w);
      e.waiters.pop_front();
      if (e.writer) break;
    }
    if (!e.writer && e.readers == 0 && e.waiters.empty()) s.map.erase(it);
  }
  io::Reactor* here = io::Reactor::Current();
  for (const Waiter& w : wake) {
    std::coroutine_handle<> h = w.h;
    if (w.reactor == here && here != nullptr) {
      here->Defer([h] { h.resume(); });
    } else if (w.reactor != nullptr) {
      w.reactor->runtime().Post(w.reactor->id(), [h] { h.resume(); });
    } else {
      h.resume();
    }
  }
}

size_t NamespaceLocks::size() {
  size_t n = 0;
  for (Stripe& s : stripes_) {
    absl::MutexLock lock(&s.mu);
    n += s.map.size();
  }
  return n;
}

}  // namespace openlake::store

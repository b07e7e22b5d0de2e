#include "store/locks.h"

#include <vector>

#include "absl/hash/hash.h"

#include "openlake/io/task.h"
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
  // Each waiter goes on on the reactor it waited on (a message when that is another core).
  for (const Waiter& w : wake) {
    if (w.reactor != nullptr) {
      io::ResumeOn(*w.reactor, w.h);
    } else {
      w.h.resume();  // it waited off any reactor (a test thread)
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

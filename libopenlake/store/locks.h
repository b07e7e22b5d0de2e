// Namespace locks: the engine's only locking, in process, per resource name ("o:<bucket>/<key>",
// "u:<upload id>", "p:<upload id>/<part>", "b:<bucket>").
//
// A writer holds its object's lock exclusively only around the commit (reading the current
// metadata, renaming the new version in on every drive, cleaning up): never while the body
// streams in. A reader holds it shared while it reads metadata and opens shard files, then lets
// go and streams from the open files, which a later overwrite cannot take away (a replaced data
// folder is renamed into the trash; the open files stay readable). Two writers of one key are
// therefore serialised at commit and each drive ends with one whole version.
//
// Waiting is asynchronous: a coroutine that cannot have the lock suspends, and the holder's
// release resumes it on its own reactor (io::ResumeOn: a message on the reactors' queues when
// that is another core). The table is shared by every reactor, the store's one declared
// exception to core-local state (docs/architecture.md, "The object store across cores"): it is
// striped, and each stripe's mutex is held for a few instructions, never across a suspension.
// Grants are FIFO, so a stream of readers cannot starve a writer.
#pragma once

#include <coroutine>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

#include "openlake/io/reactor.h"

namespace openlake::store {

class NamespaceLocks;

class LockGuard {
 public:
  LockGuard() = default;
  LockGuard(NamespaceLocks* t, std::string name, bool exclusive)
      : table_(t), name_(std::move(name)), exclusive_(exclusive) {}
  LockGuard(LockGuard&& o) noexcept
      : table_(std::exchange(o.table_, nullptr)),
        name_(std::move(o.name_)),
        exclusive_(o.exclusive_) {}
  LockGuard& operator=(LockGuard&& o) noexcept {
    Release();
    table_ = std::exchange(o.table_, nullptr);
    name_ = std::move(o.name_);
    exclusive_ = o.exclusive_;
    return *this;
  }
  ~LockGuard() { Release(); }
  void Release();
  bool held() const { return table_ != nullptr; }

 private:
  NamespaceLocks* table_ = nullptr;
  std::string name_;
  bool exclusive_ = false;
};

class NamespaceLocks {
 public:
  // co_await locks.Lock(name, exclusive) → LockGuard.
  class Acquire {
   public:
    Acquire(NamespaceLocks* t, std::string name, bool exclusive)
        : t_(t), name_(std::move(name)), exclusive_(exclusive) {}
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> h);
    LockGuard await_resume() { return LockGuard(t_, std::move(name_), exclusive_); }

   private:
    NamespaceLocks* t_;
    std::string name_;
    bool exclusive_;
  };

  Acquire Lock(std::string name, bool exclusive) {
    return Acquire(this, std::move(name), exclusive);
  }

  // Held or waited-for names (tests).
  size_t size();

 private:
  friend class LockGuard;
  friend class Acquire;
  struct Waiter {
    bool exclusive;
    std::coroutine_handle<> h;
    io::Reactor* reactor;
  };
  struct Entry {
    int readers = 0;
    bool writer = false;
    std::deque<Waiter> waiters;
  };
  struct Stripe {
    absl::Mutex mu;
    absl::flat_hash_map<std::string, Entry> map ABSL_GUARDED_BY(mu);
  };
  static constexpr size_t kStripes = 64;

  Stripe& StripeOf(std::string_view name);
  // Grants `name` now if free; else queues (h, this reactor) to be resumed by Unlock.
  bool TryGrant(std::string_view name, bool exclusive, std::coroutine_handle<> h);
  void Unlock(std::string_view name, bool exclusive);

  Stripe stripes_[kStripes];
};

}  // namespace openlake::store

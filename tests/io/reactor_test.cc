#include "openlake/io/reactor.h"

#include <sched.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "io/test_util.h"

using openlake::io::Reactor;
using openlake::io::TaskFn;
using openlake::testing::StartRuntime;

TEST_CASE("Post and RunOn run on the target reactor's thread", "[io][reactor]") {
  auto rt = StartRuntime(2);
  REQUIRE(rt);
  for (unsigned i = 0; i < 2; ++i) {
    unsigned seen = 99;
    REQUIRE(rt->RunOn(i, [&] { seen = Reactor::Current()->id(); }).ok());
    CHECK(seen == i);
  }
  CHECK(Reactor::Current() == nullptr);
  CHECK(rt->reactor(0).deferred_taskrun());  // the kernel here has DEFER_TASKRUN
  rt->Stop();
  CHECK(!rt->Post(0, [] {}));
  CHECK(!rt->RunOn(0, [] {}).ok());
}

TEST_CASE("each reactor is pinned to its own CPU", "[io][reactor]") {
  const std::vector<int> cpus = openlake::io::AllowedCpus();
  REQUIRE(!cpus.empty());
  openlake::io::RuntimeOptions o;
  o.cpus = cpus;
  o.sq_entries = 64;
  auto rt = openlake::io::Runtime::Create(o);
  REQUIRE(rt.ok());
  REQUIRE((*rt)->Start().ok());
  for (unsigned i = 0; i < (*rt)->size(); ++i) {
    int on = -1;
    cpu_set_t set;
    int count = 0;
    REQUIRE((*rt)
                ->RunOn(i,
                        [&] {
                          on = sched_getcpu();
                          sched_getaffinity(0, sizeof(set), &set);
                          count = CPU_COUNT(&set);
                        })
                .ok());
    CHECK(on == cpus[i]);
    CHECK(count == 1);
    CHECK((*rt)->reactor(i).cpu() == cpus[i]);
  }
}

TEST_CASE("a CPU outside the affinity mask is refused", "[io][reactor]") {
  openlake::io::RuntimeOptions o;
  o.cpus = {4095};
  CHECK(openlake::io::Runtime::Create(o).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("timers fire in deadline order and can be cancelled", "[io][timer]") {
  auto rt = StartRuntime(1);
  REQUIRE(rt);
  std::promise<std::vector<int>> done;
  std::vector<int> order;
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(rt->RunOn(0, [&] {
              Reactor& r = *Reactor::Current();
              r.After(absl::Milliseconds(30), [&] { order.push_back(3); });
              r.After(absl::Milliseconds(10), [&] { order.push_back(1); });
              auto cancelled = r.After(absl::Milliseconds(20), [&] { order.push_back(99); });
              r.After(absl::Milliseconds(20), [&] { order.push_back(2); });
              CHECK(r.CancelTimer(cancelled));
              CHECK(!r.CancelTimer(cancelled));
              r.After(absl::Milliseconds(40), [&] { done.set_value(order); });
            }).ok());
  auto fut = done.get_future();
  REQUIRE(fut.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  CHECK(fut.get() == std::vector<int>{1, 2, 3});
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(40));
}

TEST_CASE("cross-core messages arrive in order, exactly once", "[io][queue]") {
  auto rt = StartRuntime(3);
  REQUIRE(rt);
  constexpr int kMessages = 20000;
  // Reactor 1 and 2 each send kMessages to reactor 0; reactor 0 checks per-sender FIFO order.
  std::vector<int> next(3, 0);  // owned by reactor 0
  std::atomic<int> received{0};
  std::atomic<bool> in_order{true};
  std::promise<void> all;
  // Each sender retries through Defer when the bounded queue is full.
  struct Sender {
    unsigned from;
    std::function<void(int)> deliver_from;  // builds the task for message i
    void Run(int i) {
      Reactor& me = *Reactor::Current();
      for (; i < kMessages; ++i) {
        TaskFn t = [this, i] { deliver_from(i); };
        if (!me.TrySendTo(0, t)) {
          me.Defer([this, i] { Run(i); });
          return;
        }
      }
    }
  };
  std::vector<std::unique_ptr<Sender>> senders;
  for (unsigned from = 1; from <= 2; ++from) {
    senders.push_back(std::make_unique<Sender>(Sender{from, [&, from](int i) {
                                                        if (next[from] != i) in_order = false;
                                                        next[from] = i + 1;
                                                        if (++received == 2 * kMessages) {
                                                          all.set_value();
                                                        }
                                                      }}));
  }
  for (auto& s : senders) rt->Post(s->from, [p = s.get()] { p->Run(0); });
  auto fut = all.get_future();
  REQUIRE(fut.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  CHECK(in_order);
  CHECK(received == 2 * kMessages);
}

TEST_CASE("a full queue answers false and leaves the task to the sender", "[io][queue]") {
  auto rt = StartRuntime(2, /*queue_capacity=*/4);
  REQUIRE(rt);
  std::promise<void> unblock;
  std::shared_future<void> gate = unblock.get_future().share();
  std::promise<void> blocked;
  // Park reactor 1 so it stops draining.
  rt->Post(1, [gate, &blocked] {
    blocked.set_value();
    gate.wait();
  });
  blocked.get_future().wait();
  std::atomic<int> ran{0};
  int accepted = 0;
  bool refused_kept = false;
  REQUIRE(rt->RunOn(0, [&] {
              Reactor& r = *Reactor::Current();
              for (int i = 0; i < 10; ++i) {
                TaskFn t = [&ran] { ++ran; };
                if (r.TrySendTo(1, t)) {
                  ++accepted;
                } else {
                  refused_kept = static_cast<bool>(t);
                }
              }
            }).ok());
  CHECK(accepted == 4);
  CHECK(refused_kept);
  unblock.set_value();
  CHECK(openlake::testing::WaitFor([&] { return ran == 4; }));
}

TEST_CASE("SendTo keeps what a full queue cannot take, and delivers it all in order",
          "[io][queue]") {
  auto rt = StartRuntime(2, /*queue_capacity=*/4);
  REQUIRE(rt);
  std::promise<void> unblock;
  std::shared_future<void> gate = unblock.get_future().share();
  std::promise<void> blocked;
  // Park reactor 1 so that its queue from reactor 0 fills up.
  REQUIRE(rt->Post(1, [gate, &blocked] {
    blocked.set_value();
    gate.wait();
  }));
  blocked.get_future().wait();
  constexpr int kMessages = 1000;
  std::vector<int> seen;
  std::atomic<int> done{0};
  TaskFn refused;
  REQUIRE(rt->RunOn(0, [&] {
              Reactor& r = *Reactor::Current();
              for (int i = 0; i < kMessages; ++i) {
                r.SendTo(1, [&seen, &done, i] {
                  seen.push_back(i);
                  ++done;
                });
              }
              // The backlog is not overtaken: TrySendTo refuses while it waits.
              refused = [] {};
              CHECK_FALSE(r.TrySendTo(1, refused));
            }).ok());
  CHECK(static_cast<bool>(refused));
  unblock.set_value();
  REQUIRE(openlake::testing::WaitFor([&] { return done == kMessages; }));
  std::vector<int> want(kMessages);
  for (int i = 0; i < kMessages; ++i) want[i] = i;
  CHECK(seen == want);
}

TEST_CASE("stop runs AtStop hooks on the reactor, then AtExit after the ring is gone",
          "[io][reactor]") {
  auto rt = StartRuntime(1);
  REQUIRE(rt);
  std::vector<std::string> events;
  REQUIRE(rt->RunOn(0, [&] {
              Reactor& r = *Reactor::Current();
              r.AtStop([&] {
                events.push_back(Reactor::Current() ? "stop-on-reactor" : "stop-elsewhere");
              });
              r.AtExit([&] { events.push_back("exit"); });
            }).ok());
  rt->Stop();
  CHECK(events == std::vector<std::string>{"stop-on-reactor", "exit"});
  rt->Stop();  // idempotent
}

TEST_CASE("a polling reactor still sleeps when idle and serves everything", "[io][reactor]") {
  openlake::io::RuntimeOptions o;
  o.cpus = {0, 0};
  o.pin = false;
  o.sq_entries = 64;
  o.poll_window = absl::Milliseconds(1);
  auto rt = openlake::io::Runtime::Create(o);
  REQUIRE(rt.ok());
  REQUIRE((*rt)->Start().ok());
  std::promise<void> fired;
  REQUIRE((*rt)
              ->RunOn(0,
                      [&] {
                        Reactor::Current()->After(absl::Milliseconds(20),
                                                  [&] { fired.set_value(); });
                      })
              .ok());
  REQUIRE(fired.get_future().wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  // Idle for a while: the loop must go to sleep once the window has passed, not spin on. (The
  // RunOn below is itself work, so up to a window's worth of polling follows it: 1 ms is a few
  // thousand iterations at most, 50 ms of spinning would be tens of thousands or more.)
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  uint64_t before = 0, after = 0;
  REQUIRE((*rt)->RunOn(0, [&] { before = Reactor::Current()->loop_stats().iterations; }).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE((*rt)->RunOn(0, [&] { after = Reactor::Current()->loop_stats().iterations; }).ok());
  CHECK(after - before < 25000);
  (*rt)->Stop();
}

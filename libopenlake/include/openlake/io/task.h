// File: openlake/io/task.h
//
// C++20 coroutines on the core-local runtime: the service layer over the reactor's
// kernel-facing layer (a Completion per operation; docs/architecture.md, "Two layers").
// Multi-step work such as an object write (stream windows, write shards on many drives in
// parallel, fsync, commit metadata) reads far better as straight-line code, so the object
// engine, the HTTP and S3 servers and every new service are written as coroutines:
//
//   io::Task<absl::Status> WriteAll(io::Reactor& r, const io::File& f, std::string data) {
//     int32_t n = co_await io::Op([&](io::Completion* c) {
//       f.Write(r, data.data(), data.size(), 0, c);
//     });
//     if (n < 0) co_return absl::InternalError("write failed");
//     co_return absl::OkStatus();
//   }
//   io::Spawn(WriteAll(r, f, "hello"));                         // detached, on this reactor
//   absl::Status s = io::BlockOn(runtime, 0, [&] { return WriteAll(...); });  // from a test
//
// Rules:
// - A Task is lazy: nothing runs until it is awaited (or handed to Spawn/BlockOn), and it is
//   awaited at most once. Awaiting runs it on the awaiting thread; when it suspends on I/O it
//   resumes on the reactor that completed that I/O, which is the one that issued it. A
//   coroutine therefore never changes core unless it explicitly sends work elsewhere.
// - A child that finishes without suspending lets its parent go on without suspending; one
//   that waited resumes its parent when it ends. Loops of awaits do not grow the stack.
// - Exceptions are not used: an exception escaping a coroutine terminates the process.
// - Parameters of a coroutine are copied into its frame; references and views passed to it
//   must outlive the Task (the usual coroutine rule).
// - g++ 12 miscompiles some statements that hold a co_await (docs/architecture.md, "Coroutines
//   and g++ 12"; docs/style.md): no ?:, no braced temporary, no lambda capturing by value in
//   such a statement, and no co_await in the head of an if, while, for or switch. Bind the
//   value to a named local first. tests/lint/co_await_check.py enforces it.
// - Op runs one reactor operation, TimedOp one with a deadline; IoBatch runs several in
//   parallel and waits for all of them without allocating per operation; WhenAll runs several
//   Tasks concurrently on this reactor; ResumeOn wakes a coroutine on its own reactor.
//
// A Runtime stopped while coroutines are suspended drops them (their frames are not freed):
// stop a runtime only once its work is done.
#pragma once

#include <cerrno>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <future>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

#include "openlake/io/reactor.h"

namespace openlake::io {

template <typename T = void>
class Task;

namespace internal {

struct PromiseBase {
  // Where the task stands relative to its awaiter (see Task::Awaiter).
  enum class State : uint8_t { kInline, kSuspended, kDone };
  std::coroutine_handle<> continuation = nullptr;
  State state = State::kInline;

  struct FinalAwaiter {
    bool await_ready() const noexcept { return false; }
    template <typename P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) const noexcept {
      PromiseBase& p = h.promise();
      if (p.state == State::kInline) {  // finished inside the awaiter's await_suspend
        p.state = State::kDone;
        return std::noop_coroutine();
      }
      return p.continuation;  // finished later, from an I/O completion: resume the awaiter
    }
    void await_resume() const noexcept {}
  };

  std::suspend_always initial_suspend() const noexcept { return {}; }
  FinalAwaiter final_suspend() const noexcept { return {}; }
  void unhandled_exception() const noexcept { std::terminate(); }
};

// Starts the awaited task inside await_suspend. A task that finishes without suspending tells
// its awaiter not to suspend at all; only a task that really waited resumes its awaiter from
// its final suspend point. Either way the stack does not grow with the number of awaits in a
// loop, whether or not the compiler turns symmetric transfer into a tail call (it does not
// under ASan).
template <typename P>
bool StartAwaited(std::coroutine_handle<P> h, std::coroutine_handle<> caller) {
  PromiseBase& p = h.promise();
  p.continuation = caller;
  p.state = PromiseBase::State::kInline;
  h.resume();
  if (p.state == PromiseBase::State::kDone) return false;
  p.state = PromiseBase::State::kSuspended;
  return true;
}

// Owns a coroutine frame: moves with its owner and destroys the frame with it.
template <typename P>
class OwnedCoroutine {
 public:
  OwnedCoroutine() = default;
  explicit OwnedCoroutine(std::coroutine_handle<P> h) : h_(h) {}
  OwnedCoroutine(OwnedCoroutine&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  OwnedCoroutine& operator=(OwnedCoroutine&& o) noexcept {
    if (this != &o) {
      if (h_) h_.destroy();
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  ~OwnedCoroutine() {
    if (h_) h_.destroy();
  }
  std::coroutine_handle<P> get() const { return h_; }

 private:
  std::coroutine_handle<P> h_ = nullptr;
};

// A fire-and-forget coroutine: starts at once and frees itself when it ends.
struct Detached {
  struct promise_type {
    Detached get_return_object() const noexcept { return {}; }
    std::suspend_never initial_suspend() const noexcept { return {}; }
    std::suspend_never final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() const noexcept { std::terminate(); }
  };
};

}  // namespace internal

template <typename T>
class [[nodiscard]] Task {
 public:
  struct promise_type : internal::PromiseBase {
    std::optional<T> value;
    Task get_return_object() noexcept {
      return Task(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    template <typename U>
    void return_value(U&& v) {
      value.emplace(std::forward<U>(v));
    }
  };
  using Handle = std::coroutine_handle<promise_type>;
  using value_type = T;

  Task() = default;  // moves; copying is not possible (the frame has one owner)

  bool valid() const { return static_cast<bool>(h_.get()); }

  struct Awaiter {
    Handle h;
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> caller) noexcept {
      return internal::StartAwaited(h, caller);
    }
    T await_resume() { return std::move(*h.promise().value); }
  };
  Awaiter operator co_await() && noexcept { return Awaiter{h_.get()}; }
  Awaiter operator co_await() & noexcept { return Awaiter{h_.get()}; }

 private:
  explicit Task(Handle h) : h_(h) {}
  internal::OwnedCoroutine<promise_type> h_;
};

template <>
class [[nodiscard]] Task<void> {
 public:
  struct promise_type : internal::PromiseBase {
    Task get_return_object() noexcept {
      return Task(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    void return_void() const noexcept {}
  };
  using Handle = std::coroutine_handle<promise_type>;
  using value_type = void;

  Task() = default;  // moves; copying is not possible (the frame has one owner)

  bool valid() const { return static_cast<bool>(h_.get()); }

  struct Awaiter {
    Handle h;
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> caller) noexcept {
      return internal::StartAwaited(h, caller);
    }
    void await_resume() const noexcept {}
  };
  Awaiter operator co_await() && noexcept { return Awaiter{h_.get()}; }
  Awaiter operator co_await() & noexcept { return Awaiter{h_.get()}; }

 private:
  explicit Task(Handle h) : h_(h) {}
  internal::OwnedCoroutine<promise_type> h_;
};

// Starts `t` now on the calling thread and lets it run to its end on its own.
inline void Spawn(Task<void> t) {
  [](Task<void> task) -> internal::Detached { co_await std::move(task); }(std::move(t));
}

// ---- Reactor operations.

// Awaitable for one reactor operation: `submit(completion)` issues it (Reactor::Write,
// File::Read, ...); co_await yields the operation's result (bytes or -errno).
template <typename Submit>
class [[nodiscard]] Op final : public Completion {
 public:
  explicit Op(Submit submit) : submit_(std::move(submit)) {}
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) {
    h_ = h;
    submit_(static_cast<Completion*>(this));
  }
  int32_t await_resume() const noexcept { return res_; }
  void Complete(int32_t res, uint32_t) noexcept override {
    res_ = res;
    h_.resume();  // may destroy *this: nothing after it
  }

 private:
  Submit submit_;
  std::coroutine_handle<> h_;
  int32_t res_ = 0;
};
template <typename Submit>
Op(Submit) -> Op<Submit>;

// Several reactor operations in flight at once; co_await waits until all have completed.
// Reserve the count up front: slots never move while operations are in flight, and nothing
// is allocated per operation.
//
//   io::IoBatch batch(n);
//   for (...) batch.Add([&](io::Completion* c) { files[i].Write(r, buf[i], len, off, c); });
//   co_await batch;
//   for (...) if (batch.result(i) != len) ...
class IoBatch {
 public:
  explicit IoBatch(size_t capacity) { slots_.reserve(capacity); }
  IoBatch(const IoBatch&) = delete;
  IoBatch& operator=(const IoBatch&) = delete;

  // Issues one operation; returns its index. No more than `capacity` per batch.
  template <typename Submit>
  size_t Add(Submit&& submit) {
    const size_t i = slots_.size();
    slots_.emplace_back(this);
    ++pending_;
    submit(static_cast<Completion*>(&slots_[i]));
    return i;
  }
  size_t size() const { return slots_.size(); }
  int32_t result(size_t i) const { return slots_[i].res; }
  // Forgets the finished operations so the batch can be reused. Only when none is pending.
  void Clear() { slots_.clear(); }

  bool await_ready() const noexcept { return pending_ == 0; }
  void await_suspend(std::coroutine_handle<> h) noexcept { waiter_ = h; }
  void await_resume() const noexcept {}

 private:
  struct Slot final : public Completion {
    explicit Slot(IoBatch* b) : batch(b) {}
    Slot(Slot&& o) noexcept : batch(o.batch), res(o.res) {}
    void Complete(int32_t r, uint32_t) noexcept override {
      res = r;
      if (--batch->pending_ == 0 && batch->waiter_) {
        std::coroutine_handle<> w = std::exchange(batch->waiter_, nullptr);
        w.resume();
      }
    }
    IoBatch* batch;
    int32_t res = 0;
  };
  std::vector<Slot> slots_;
  size_t pending_ = 0;
  std::coroutine_handle<> waiter_ = nullptr;
};

// One reactor operation with a deadline: `submit(completion)` issues it as Op does; past
// `timeout` the operation is cancelled and co_await yields -ETIMEDOUT (a result that came
// first is kept). For socket reads and writes a peer may leave hanging.
//
//   const int32_t n = co_await io::TimedOp(r, absl::Seconds(30), [&](io::Completion* c) {
//     r.Recv(fd, buf, len, 0, c);
//   });
template <typename Submit>
class [[nodiscard]] TimedOp final : public Completion {
 public:
  TimedOp(Reactor& r, absl::Duration timeout, Submit submit)
      : r_(r), timeout_(timeout), submit_(std::move(submit)) {}
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) {
    h_ = h;
    submit_(static_cast<Completion*>(this));
    timer_ = r_.After(timeout_, [this] {
      timed_out_ = true;
      r_.Cancel(this, nullptr);
    });
  }
  int32_t await_resume() const noexcept { return timed_out_ && res_ < 0 ? -ETIMEDOUT : res_; }
  void Complete(int32_t res, uint32_t) noexcept override {
    res_ = res;
    if (!timed_out_) r_.CancelTimer(timer_);
    h_.resume();  // may destroy *this: nothing after it
  }

 private:
  Reactor& r_;
  absl::Duration timeout_;
  Submit submit_;
  std::coroutine_handle<> h_;
  TimerId timer_;
  bool timed_out_ = false;
  int32_t res_ = 0;
};
template <typename Submit>
TimedOp(Reactor&, absl::Duration, Submit) -> TimedOp<Submit>;

// Resumes `h` on `home`'s thread, the reactor it suspended on: on a later turn of that loop when
// called there; through the ordered message queue (Reactor::SendTo) from another reactor of
// the same runtime; through Runtime::Post from any other thread. What wakes a coroutine that
// waits on shared state (a lock another core releases) uses it, so the coroutine never changes
// core.
inline void ResumeOn(Reactor& home, std::coroutine_handle<> h) {
  Reactor* here = Reactor::Current();
  if (here == &home) {
    here->Defer([h] { h.resume(); });
  } else if (here != nullptr && &here->runtime() == &home.runtime()) {
    here->SendTo(home.id(), [h] { h.resume(); });
  } else {
    (void)home.runtime().Post(home.id(), [h] { h.resume(); });
  }
}

// Resumes on a later turn of the current reactor's loop (lets other work run).
struct Yield {
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) const {
    Reactor::Current()->Defer([h] { h.resume(); });
  }
  void await_resume() const noexcept {}
};

// Resumes after `d` on the current reactor.
struct Sleep {
  absl::Duration d;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> h) const {
    Reactor::Current()->After(d, [h] { h.resume(); });
  }
  void await_resume() const noexcept {}
};

// Runs every task concurrently on this reactor; the results come back in order.
template <typename T>
Task<std::vector<T>> WhenAll(std::vector<Task<T>> tasks) {
  struct State {
    size_t remaining;
    std::coroutine_handle<> parent = nullptr;
  };
  struct Join {
    State* st;
    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> h) noexcept {
      st->parent = h;
      return --st->remaining != 0;
    }
    void await_resume() const noexcept {}
  };
  const size_t n = tasks.size();
  std::vector<std::optional<T>> slots(n);
  State st{n + 1};
  for (size_t i = 0; i < n; ++i) {
    [](Task<T> t, std::optional<T>* out, State* s) -> internal::Detached {
      out->emplace(co_await std::move(t));
      if (--s->remaining == 0) s->parent.resume();
    }(std::move(tasks[i]), &slots[i], &st);
  }
  co_await Join{&st};
  std::vector<T> out;
  out.reserve(n);
  for (auto& s : slots) out.push_back(std::move(*s));
  co_return out;
}

// ---- From threads that are not reactors (tests, control paths).

// Runs `make()` on reactor `core` of `rt` and blocks until the task it returns finishes.
// T is absl::Status or absl::StatusOr<...>: Unavailable when the runtime refuses the work.
template <typename F>
auto BlockOn(Runtime& rt, unsigned core, F make) -> typename std::invoke_result_t<F&>::value_type {
  using T = typename std::invoke_result_t<F&>::value_type;
  std::promise<T> done;
  std::future<T> fut = done.get_future();
  const bool posted = rt.Post(core, [&make, &done] {
    [](Task<T> t, std::promise<T>* p) -> internal::Detached {
      p->set_value(co_await std::move(t));
    }(make(), &done);
  });
  if (!posted) return T(absl::UnavailableError("runtime is not running"));
  return fut.get();
}

}  // namespace openlake::io

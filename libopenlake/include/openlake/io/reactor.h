// File: openlake/io/reactor.h
//
// The core-local runtime. A Runtime starts one Reactor per CPU it is given; each reactor is a
// thread pinned to its CPU (sched_setaffinity) that owns one io_uring, created on that thread
// with IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN (plain flags on kernels that
// refuse them). Only the owning thread ever touches a ring or the state of its reactor.
//
// Work is expressed as callbacks (not coroutines): an I/O call takes a Completion whose
// Complete(res, flags) runs on the reactor once the kernel answers, with `res` as liburing
// gives it (bytes or -errno). Hot paths embed a Completion in their own objects so nothing is
// allocated per I/O; other code wraps a lambda with Reactor::Callback(), which takes its
// node from a per-reactor free list.
//
// Cores talk only through messages: TrySendTo(core, task) moves a task into a bounded
// single-producer/single-consumer queue owned by the pair (this core → that core). A full queue
// answers false; the sender decides (retry on a timer, fail the request), or uses SendTo, which
// keeps what does not fit in an ordered backlog on the sender. Threads that are not reactors
// (main, signal handling, tests) use Runtime::Post, which goes through a small mutex-protected
// inbox: a control path, never a data path.
//
// Each loop iteration: run posted tasks and messages → fire due timers → one
// io_uring_submit_and_wait_timeout (sleeps until a completion, a message or the next timer) →
// copy CQEs out with io_uring_for_each_cqe in batches of up to 256, advancing the CQ once per
// batch, then run their completions.
//
//   auto rt = openlake::io::Runtime::Create({}).value();
//   OL_RETURN_IF_ERROR(rt->Start());
//   rt->Post(0, [] {
//     io::Reactor& r = *io::Reactor::Current();
//     r.After(absl::Milliseconds(5), [] { OL_LOG(kInfo) << "tick"; });
//   });
//   ...
//   rt->Stop();
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "openlake/export.h"

namespace openlake::io {

class Runtime;
class ReactorImpl;

// Called once per CQE of the operation it was given to (several times for multishot
// operations: `flags` then carries IORING_CQE_F_MORE while more will follow). Runs on the
// reactor thread and must not throw.
class Completion {
 public:
  virtual void Complete(int32_t res, uint32_t flags) noexcept = 0;

 protected:
  ~Completion() = default;
};

// Set in Complete's `flags` while a multishot operation stays armed (IORING_CQE_F_MORE).
inline constexpr uint32_t kCqeMore = 1u << 1;

using TaskFn = absl::AnyInvocable<void()>;
using IoCallback = absl::AnyInvocable<void(int32_t res)>;

struct TimerId {
  uint64_t value = 0;
};

class OL_EXPORT Reactor {
 public:
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;
  ~Reactor();

  // The reactor whose thread is calling, or nullptr on any other thread.
  static Reactor* Current();

  unsigned id() const { return id_; }
  int cpu() const { return cpu_; }  // the CPU this reactor is pinned to (-1: not pinned)
  Runtime& runtime() { return *runtime_; }
  // True when the ring was created with SINGLE_ISSUER|DEFER_TASKRUN (false: fallback flags).
  bool deferred_taskrun() const;
  // Monotonic time in nanoseconds, cached once per loop iteration.
  int64_t now_ns() const;

  // ---- I/O. Call only on this reactor's thread. `c` must stay alive until it is called.
  // Submission is batched: operations queue SQEs and the loop submits them all at once.
  void Read(int fd, void* buf, uint32_t len, uint64_t offset, Completion* c);
  void Write(int fd, const void* buf, uint32_t len, uint64_t offset, Completion* c);
  void Readv(int fd, const iovec* iov, unsigned n, uint64_t offset, Completion* c);
  void Writev(int fd, const iovec* iov, unsigned n, uint64_t offset, Completion* c);
  void Fsync(int fd, bool datasync, Completion* c);
  void Recv(int fd, void* buf, size_t len, int flags, Completion* c);
  void Send(int fd, const void* buf, size_t len, int flags, Completion* c);
  void SendMsg(int fd, const msghdr* msg, int flags, Completion* c);
  void RecvMsg(int fd, msghdr* msg, int flags, Completion* c);
  // Multishot where the kernel has it (one CQE per accepted connection, IORING_CQE_F_MORE set
  // while it stays armed); `multishot` false gives one-shot accept.
  void Accept(int fd, bool multishot, Completion* c);
  void Connect(int fd, const sockaddr* addr, socklen_t len, Completion* c);
  void OpenAt(int dirfd, const char* path, int flags, mode_t mode, Completion* c);
  void Close(int fd, Completion* c);
  void RenameAt(int olddirfd, const char* oldpath, int newdirfd, const char* newpath,
                Completion* c);
  void UnlinkAt(int dirfd, const char* path, int flags, Completion* c);
  // Poll for `events` (POLLIN...) once.
  void PollAdd(int fd, unsigned events, Completion* c);
  // Asks the kernel to cancel the operation that was given `target`; `c` (may be null) gets the
  // cancel's own result. The target still gets its CQE (usually -ECANCELED).
  void Cancel(Completion* target, Completion* c);

  // Wraps `fn` as a one-shot Completion taken from this reactor's free list; it returns to the
  // list after running. Use it for single-CQE operations only.
  Completion* Callback(IoCallback fn);

  // ---- Tasks and timers. This reactor's thread only.
  // Runs `fn` on a later iteration of this loop (before it sleeps again).
  void Defer(TaskFn fn);
  // Runs `fn` once after `delay`. The id cancels it.
  TimerId After(absl::Duration delay, TaskFn fn);
  // True when the timer was pending and is now cancelled.
  bool CancelTimer(TimerId id);

  // ---- Messages to other cores. This reactor's thread only.
  // Moves `fn` to reactor `target` (which runs it on its own thread). False when the bounded
  // queue from this core to `target` is full (or SendTo's backlog to it is not empty); `fn` is
  // then left untouched for the caller.
  bool TrySendTo(unsigned target, TaskFn& fn);
  // The same, never refused: when the queue is full, `fn` waits in a backlog on this reactor
  // that the loop moves into the queue as `target` drains it. Messages from this reactor to
  // `target` run in the order they were sent, whichever way each went. For work that must
  // arrive (resuming a coroutine on its own core, a connection handed over); a backlog left when
  // this reactor stops is dropped with it. A send to this reactor itself is a Defer.
  void SendTo(unsigned target, TaskFn fn);
  // Runs `fn` on this reactor's thread just before the runtime stops it (services close their
  // listeners here). LIFO order.
  void AtStop(TaskFn fn);
  // Runs `fn` on this thread after the ring has been torn down (the kernel has cancelled and
  // released every operation still in flight): the place to free objects such operations
  // pointed into. No I/O may be issued from it.
  void AtExit(TaskFn fn);

  // Operations queued but not yet completed.
  uint64_t in_flight() const;
  // Loop counters, for metrics: iterations, SQEs submitted, CQEs reaped, busy time. This
  // reactor's thread only.
  struct LoopStats {
    uint64_t iterations = 0;
    uint64_t submitted = 0;
    uint64_t reaped = 0;
    uint64_t busy_ns = 0;
    uint64_t idle_ns = 0;
  };
  LoopStats loop_stats() const;

 private:
  friend class Runtime;
  friend class ReactorImpl;
  Reactor(Runtime* runtime, unsigned id, int cpu);

  Runtime* runtime_;
  unsigned id_;
  int cpu_;
  std::unique_ptr<ReactorImpl> impl_;
};

struct RuntimeOptions {
  // CPUs to run reactors on, one reactor each. Empty: every CPU in the process's affinity mask.
  std::vector<int> cpus;
  // Pin each reactor thread to its CPU. Tests that run many runtimes may turn it off.
  bool pin = true;
  // Submission queue depth of each ring; the completion queue is 4× as deep.
  unsigned sq_entries = 4096;
  // Capacity of each core-to-core message queue (rounded up to a power of two). A queue's
  // memory is allocated when its sender first uses it.
  unsigned queue_capacity = 1024;
  // While completions are being handled, SQEs they queue are submitted as soon as this many
  // are waiting, instead of at the end of the loop turn: the device sees new work sooner
  // (deep random-read queues gain), at the cost of more io_uring_enter calls. 0: only once per
  // loop turn.
  unsigned submit_batch = 16;
  // Adaptive polling: a loop that did work less than this long ago polls its ring without
  // sleeping, so a request that follows closely is picked up without a wake-up (which costs
  // tens of µs on a VM). 0 turns it off; an idle reactor always sleeps.
  absl::Duration poll_window = absl::ZeroDuration();
  // Thread name prefix ("openlake-r" → "openlake-r0", ...).
  std::string thread_name = "openlake-r";
};

class OL_EXPORT Runtime {
 public:
  static absl::StatusOr<std::unique_ptr<Runtime>> Create(RuntimeOptions options);
  ~Runtime();  // stops the reactors if still running

  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Starts the reactor threads; each pins itself, creates its ring and probes opcodes. Fails
  // (and leaves nothing running) when a ring cannot be created.
  absl::Status Start();
  // Runs the AtStop hooks on every reactor, ends the loops and joins the threads. Operations
  // still in flight are dropped with their rings; their completions never run. Not from a
  // reactor thread. Idempotent.
  void Stop();

  unsigned size() const { return static_cast<unsigned>(reactors_.size()); }
  Reactor& reactor(unsigned i) { return *reactors_[i]; }

  // Queues `fn` to run on reactor `i`, from any thread. False once the runtime is stopping or
  // that reactor's loop has ended (then `fn` never runs).
  bool Post(unsigned i, TaskFn fn);
  // Runs `fn` on reactor `i` and waits for it to return. Not from a reactor thread.
  // Unavailable when it could not be queued.
  absl::Status RunOn(unsigned i, absl::AnyInvocable<void()> fn);

  bool running() const { return running_.load(std::memory_order_acquire); }

 private:
  friend class Reactor;
  friend class ReactorImpl;
  explicit Runtime(RuntimeOptions options);

  RuntimeOptions options_;
  std::vector<std::unique_ptr<Reactor>> reactors_;
  std::vector<std::thread> threads_;
  std::atomic<bool> running_{false};
  std::atomic<bool> stopping_{false};
};

// CPUs in this process's affinity mask, ascending.
OL_EXPORT std::vector<int> AllowedCpus();

}  // namespace openlake::io

#include "openlake/io/reactor.h"

#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <future>
#include <thread>

#include "absl/strings/str_cat.h"

#include "io/reactor_impl.h"

#include "openlake/log.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::io {
namespace {

thread_local Reactor* t_current = nullptr;

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

class NullCompletion final : public Completion {
 public:
  void Complete(int32_t, uint32_t) noexcept override {}
};
NullCompletion g_null_completion;

}  // namespace

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 0; i < n; ++i) cpus.push_back(i);
    return cpus;
  }
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &set)) cpus.push_back(i);
  }
  return cpus;
}

// ---------------------------------------------------------------------------------------------
// ReactorImpl

class ReactorImpl::WakeCompletion final : public Completion {
 public:
  explicit WakeCompletion(ReactorImpl* r) : r_(r) {}
  void Complete(int32_t res, uint32_t) noexcept override {
    if (res < 0 && res != -EINTR && res != -EAGAIN && res != -ECANCELED) {
      OL_LOG_EVERY_N_SEC(kWarning, 10)
          << "reactor " << r_->self_->id() << ": eventfd read failed: " << -res;
    }
    if (!r_->stop_requested_ || res != -ECANCELED) r_->ArmWake();
  }

 private:
  ReactorImpl* r_;
};

class ReactorImpl::CallbackNode final : public Completion {
 public:
  void Complete(int32_t res, uint32_t) noexcept override {
    IoCallback fn = std::move(fn_);
    fn_ = nullptr;
    owner_->FreeNode(this);
    fn(res);
  }
  ReactorImpl* owner_ = nullptr;
  IoCallback fn_;
  CallbackNode* next_ = nullptr;
};

ReactorImpl::ReactorImpl(Reactor* self, unsigned num_reactors, const RuntimeOptions& options)
    : self_(self) {
  for (unsigned i = 0; i < num_reactors; ++i) {
    inbound_.push_back(std::make_unique<SpscQueue<TaskFn>>(options.queue_capacity));
    backlog_.emplace_back();
  }
  wake_completion_ = std::make_unique<WakeCompletion>(this);
}

ReactorImpl::~ReactorImpl() {
  Shutdown();
  // Closed only here, once every thread that might write to it has been joined.
  if (wake_fd_ >= 0) close(wake_fd_);
}

void ReactorImpl::Shutdown() {
  if (ring_ready_) {
    ring_ready_ = false;
    io_uring_queue_exit(&ring_);
  }
  while (!at_exit_.empty()) {
    TaskFn fn = std::move(at_exit_.back());
    at_exit_.pop_back();
    fn();
  }
}

absl::Status ReactorImpl::Init() {
  const RuntimeOptions& opts = self_->runtime_->options_;
  if (self_->cpu_ >= 0 && opts.pin) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(self_->cpu_, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
      return ErrnoStatus(errno, StrCat("pin reactor ", self_->id_, " to cpu ", self_->cpu_));
    }
  }
  const std::string name = StrCat(opts.thread_name, self_->id_).substr(0, 15);
  pthread_setname_np(pthread_self(), name.c_str());

  // SINGLE_ISSUER: only this thread submits, which lets the kernel skip submission locking.
  // DEFER_TASKRUN: completions are processed only when this thread asks for events, so the
  // kernel never interrupts the loop with task work. CQSIZE: 4× the SQ, so a full SQ of
  // multishot or chained operations cannot overflow the CQ.
  io_uring_params p{};
  p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE;
  p.cq_entries = opts.sq_entries * 4;
  int rc = io_uring_queue_init_params(opts.sq_entries, &ring_, &p);
  if (rc == -EINVAL) {
    p = io_uring_params{};
    p.flags = IORING_SETUP_CQSIZE;
    p.cq_entries = opts.sq_entries * 4;
    rc = io_uring_queue_init_params(opts.sq_entries, &ring_, &p);
  } else if (rc == 0) {
    deferred_taskrun_ = true;
  }
  if (rc < 0) {
    return ErrnoStatus(rc, StrCat("io_uring_queue_init for reactor ", self_->id_));
  }
  ring_ready_ = true;
  wake_fd_ = eventfd(0, EFD_CLOEXEC);
  if (wake_fd_ < 0) return ErrnoStatus(errno, "eventfd");
  ArmWake();
  now_ns_ = MonotonicNs();
  poll_window_ns_ = absl::ToInt64Nanoseconds(opts.poll_window);
  submit_batch_ = opts.submit_batch;
  return absl::OkStatus();
}

void ReactorImpl::ArmWake() {
  io_uring_sqe* sqe = GetSqe();
  io_uring_prep_read(sqe, wake_fd_, &wake_buf_, sizeof(wake_buf_), 0);
  Track(sqe, wake_completion_.get());
}

io_uring_sqe* ReactorImpl::GetSqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (ABSL_PREDICT_FALSE(sqe == nullptr)) {
    // SQ full: hand the batch to the kernel now and take a fresh entry.
    const int n = io_uring_submit(&ring_);
    if (n > 0) stats_.submitted += static_cast<uint64_t>(n);
    sqe = io_uring_get_sqe(&ring_);
    OL_CHECK(sqe != nullptr) << "io_uring SQ still full after submit";
  }
  return sqe;
}

ReactorImpl::CallbackNode* ReactorImpl::AllocNode() {
  if (free_nodes_ == nullptr) {
    constexpr size_t kBlock = 256;
    auto block = std::make_unique<CallbackNode[]>(kBlock);
    for (size_t i = 0; i < kBlock; ++i) {
      block[i].owner_ = this;
      block[i].next_ = free_nodes_;
      free_nodes_ = &block[i];
    }
    node_blocks_.push_back(std::move(block));
  }
  CallbackNode* n = free_nodes_;
  free_nodes_ = n->next_;
  return n;
}

void ReactorImpl::FreeNode(CallbackNode* n) {
  n->next_ = free_nodes_;
  free_nodes_ = n;
}

bool ReactorImpl::PostExternal(TaskFn fn) {
  {
    absl::MutexLock lock(&external_mu_);
    if (external_closed_) return false;
    external_.push_back(std::move(fn));
    has_external_.store(true, std::memory_order_release);
  }
  Wake();
  return true;
}

void ReactorImpl::Wake() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_relaxed) && sleeping_.exchange(false)) {
    const uint64_t one = 1;
    // eventfd writes never block short of a 2^64-2 counter.
    [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
  }
}

bool ReactorImpl::HasInput() {
  if (!deferred_.empty() || has_external_.load(std::memory_order_acquire)) return true;
  for (const auto& q : inbound_) {
    if (!q->Empty()) return true;
  }
  return false;
}

void ReactorImpl::FlushBacklog() {
  for (size_t to = 0; to < backlog_.size() && backlogged_ > 0; ++to) {
    std::deque<TaskFn>& q = backlog_[to];
    if (q.empty()) continue;
    ReactorImpl& dst = *self_->runtime().reactor(static_cast<unsigned>(to)).impl_;
    SpscQueue<TaskFn>& ring = *dst.inbound_[self_->id()];
    bool moved = false;
    while (!q.empty() && ring.TryPush(q.front())) {
      q.pop_front();
      --backlogged_;
      moved = true;
    }
    if (moved) dst.Wake();
  }
}

bool ReactorImpl::RunTasks() {
  if (backlogged_ > 0) FlushBacklog();
  bool ran = false;
  if (!deferred_.empty()) {
    std::vector<TaskFn> batch;
    batch.swap(deferred_);
    for (TaskFn& t : batch) t();
    ran = true;
  }
  TaskFn t;
  for (const auto& q : inbound_) {
    // Bounded per iteration so one busy sender cannot starve I/O completions.
    for (int i = 0; i < 256 && q->TryPop(t); ++i) {
      t();
      ran = true;
    }
  }
  if (has_external_.load(std::memory_order_acquire)) {
    std::vector<TaskFn> batch;
    {
      absl::MutexLock lock(&external_mu_);
      batch.swap(external_);
      has_external_.store(false, std::memory_order_relaxed);
    }
    for (TaskFn& task : batch) task();
    ran = true;
  }
  return ran;
}

void ReactorImpl::FireTimers() {
  while (!timer_heap_.empty() && timer_heap_.top().deadline_ns <= now_ns_) {
    const uint64_t id = timer_heap_.top().id;
    timer_heap_.pop();
    auto it = timers_.find(id);
    if (it == timers_.end()) continue;  // cancelled
    TaskFn fn = std::move(it->second);
    timers_.erase(it);
    fn();
  }
}

void ReactorImpl::Reap() { (void)ReapCount(); }

unsigned ReactorImpl::ReapCount() {
  unsigned total = 0;
  // Copy a batch of CQEs out and advance the ring before running any completion, so a
  // completion that submits (and so may flush task work) never races our walk of the CQ.
  struct Done {
    Completion* c;
    int32_t res;
    uint32_t flags;
  };
  Done batch[256];
  for (;;) {
    unsigned head;
    unsigned n = 0;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      batch[n++] = Done{static_cast<Completion*>(io_uring_cqe_get_data(cqe)), cqe->res, cqe->flags};
      if (n == 256) break;
    }
    if (n == 0) return total;
    total += n;
    io_uring_cq_advance(&ring_, n);
    stats_.reaped += n;
    for (unsigned i = 0; i < n; ++i) {
      if (!(batch[i].flags & IORING_CQE_F_MORE)) --in_flight_;
      batch[i].c->Complete(batch[i].res, batch[i].flags);
      if (submit_batch_ != 0 && io_uring_sq_ready(&ring_) >= submit_batch_) {
        const int s = io_uring_submit(&ring_);
        if (s > 0) stats_.submitted += static_cast<uint64_t>(s);
      }
    }
    if (n < 256) return total;
  }
}

void ReactorImpl::Run() {
  t_current = self_;
  for (;;) {
    const int64_t t0 = MonotonicNs();
    now_ns_ = t0;
    ++stats_.iterations;
    if (RunTasks()) last_work_ns_ = t0;
    FireTimers();
    if (stop_requested_) {
      // Hooks may queue I/O (closing listeners): give it one non-blocking pass.
      while (!at_stop_.empty()) {
        TaskFn fn = std::move(at_stop_.back());
        at_stop_.pop_back();
        fn();
      }
      RunTasks();
      io_uring_submit_and_get_events(&ring_);
      Reap();
      break;
    }

    bool block = false;
    __kernel_timespec ts{};
    // Poll instead of sleeping while work was recent (see RuntimeOptions::poll_window).
    const bool polling = poll_window_ns_ > 0 && t0 - last_work_ns_ < poll_window_ns_;
    if (deferred_.empty() && !polling) {
      sleeping_.store(true, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (HasInput()) {
        sleeping_.store(false, std::memory_order_relaxed);
      } else {
        block = true;
        int64_t wait = 3600 * int64_t{1000000000};
        if (!timer_heap_.empty()) {
          wait = timer_heap_.top().deadline_ns - MonotonicNs();
          if (wait < 0) wait = 0;
        }
        // A backlog waits for its target to drain its queue: look again soon, without spinning.
        if (backlogged_ > 0) wait = std::min<int64_t>(wait, 100000);
        ts.tv_sec = wait / 1000000000;
        ts.tv_nsec = wait % 1000000000;
      }
    }
    const int64_t t1 = MonotonicNs();
    stats_.busy_ns += static_cast<uint64_t>(t1 - t0);
    const unsigned queued = io_uring_sq_ready(&ring_);
    int rc;
    if (block) {
      io_uring_cqe* cqe = nullptr;
      rc = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
      sleeping_.store(false, std::memory_order_relaxed);
    } else {
      rc = io_uring_submit_and_get_events(&ring_);
    }
    if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EBUSY && rc != -EAGAIN) {
      OL_LOG_EVERY_N_SEC(kError, 5) << "reactor " << self_->id() << ": io_uring_enter: " << -rc;
    }
    stats_.submitted += queued - io_uring_sq_ready(&ring_);
    const int64_t t2 = MonotonicNs();
    stats_.idle_ns += static_cast<uint64_t>(t2 - t1);
    now_ns_ = t2;
    if (ReapCount() > 0) last_work_ns_ = t2;
  }
  // Tasks posted while the stop request was in flight still run (RunOn waits for them); after
  // the inbox closes, Post refuses instead of queueing work that would never run.
  RunTasks();
  std::vector<TaskFn> last;
  {
    absl::MutexLock lock(&external_mu_);
    external_closed_ = true;
    last.swap(external_);
  }
  for (TaskFn& t : last) t();
  t_current = nullptr;
}

void ReactorImpl::RequestStop() {
  (void)PostExternal([this] { stop_requested_ = true; });
}

// ---------------------------------------------------------------------------------------------
// Reactor

Reactor::Reactor(Runtime* runtime, unsigned id, int cpu)
    : runtime_(runtime),
      id_(id),
      cpu_(cpu),
      impl_(std::make_unique<ReactorImpl>(
          this, static_cast<unsigned>(runtime->options_.cpus.size()), runtime->options_)) {}

Reactor::~Reactor() = default;

Reactor* Reactor::Current() { return t_current; }
bool Reactor::deferred_taskrun() const { return impl_->deferred_taskrun_; }
int64_t Reactor::now_ns() const { return impl_->now_ns_; }
uint64_t Reactor::in_flight() const { return impl_->in_flight_; }
Reactor::LoopStats Reactor::loop_stats() const { return impl_->stats_; }

void Reactor::Read(int fd, void* buf, uint32_t len, uint64_t offset, Completion* c) {
  io_uring_sqe* sqe = impl_->GetSqe();
  io_uring_prep_read(sqe, fd, buf, len, offset);
  impl_->Track(sqe, c);
}

void Reactor::Write(int fd, const void* buf, uint32_t len, uint64_t offset, Completion* c) {
  io_uring_sqe* sqe = impl_->GetSqe();
  io_uring_prep_write(sqe, fd, buf, len, offset);
  impl_->Track(sqe, c);
}

void Reactor::Readv(int fd, const iovec* iov, unsigned n, uint64_t offset, Completion* c) {
  io_uring_sqe* sqe = impl_->GetSqe();
  io_uring_prep_readv(sqe, fd, iov, n, offset);
  impl_->Track(sqe, c);
}

void Reactor::Writev(int fd, const iovec* iov, unsigned n, uint64_t offset, Completion* c) {
  io_uring_sqe* sqe = impl_->GetSqe();
  io_uring_prep_writev(sqe, fd, iov, n, offset);
  impl_->Track(sqe, c);
}

void Reactor::Fsync(int fd, bool datasync, Completion* c) {
  io_uring_sqe* sqe = impl_->GetSqe();
  io_uring_prep_fsync(sqe, fd, datasync ? IORING_FSYNC_DATASYNC : 0);
  impl_->Track(sqe, c);
}

void Reactor::Recv(int fd, void* buf, size_t len, int flags, Completion* c) {
  io_uring_sqe* sqe = impl_->GetSqe();
  io_uring_prep_recv(sqe, fd, buf, len, flags);
  impl_->Track(sqe, c);
}

void Reactor::Send(int fd, const void* buf, size_t len, int flags, Completion* c) {
  io_uring_sqe* sqe = impl_->GetSqe();
  io_uring_prep_send(sqe, fd, buf, len, flags | MSG_NOSIGNAL);
  impl_->Track(sqe, c);
}

void Reactor::SendMsg(int fd, const msghdr* msg, int flags, Completion* c) {
  io_uring_sqe* sqe = impl_->GetSqe();
  io_uring_prep_sendmsg(sqe, fd, msg, static_cast<unsigned>(flags | MSG_NOSIGNAL));
  impl_->Track(sqe, c);
}

void Reactor::RecvMsg(int fd, msghdr* msg, int flags, Completion* c) {
  io_uring_sqe* sqe = impl_->GetSqe();
  io_uring_prep_recvmsg(sqe, fd, msg, static_cast<unsigned>(flags));
  impl_->Track(sqe, c);
}

void Reactor::Accept(int fd, bool multishot, Completion* c) {
  io_uring_sqe* sqe = impl_->GetSqe();
  if (multishot) {
    io_uring_prep_multishot_accept(sqe, fd, nullptr, nullptr, SOCK_CLOEXEC);
  } else {
    io_uring_prep_accept(sqe, fd, nullptr, nullptr, SOCK_CLOEXEC);
  }
  impl_->Track(sqe, c);
}

void Reactor::Connect(int fd, const sockaddr* addr, socklen_t len, Completion* c) {
  io_uring_sqe* sqe = impl_->GetSqe();
  io_uring_prep_connect(sqe, fd, addr, len);
  impl_->Track(sqe, c);
}

void Reactor::OpenAt(int dirfd, const char* path, int flags, mode_t mode, Completion* c) {
  io_uring_sqe* sqe = impl_->GetSqe();
  io_uring_prep_openat(sqe, dirfd, path, flags, mode);
  impl_->Track(sqe, c);
}

void Reactor::Close(int fd, Completion* c) {
  io_uring_sqe* sqe = impl_->GetSqe();
  io_uring_prep_close(sqe, fd);
  impl_->Track(sqe, c ? c : &g_null_completion);
}

void Reactor::RenameAt(int olddirfd, const char* oldpath, int newdirfd, const char* newpath,
                       Completion* c) {
  io_uring_sqe* sqe = impl_->GetSqe();
  io_uring_prep_renameat(sqe, olddirfd, oldpath, newdirfd, newpath, 0);
  impl_->Track(sqe, c);
}

void Reactor::UnlinkAt(int dirfd, const char* path, int flags, Completion* c) {
  io_uring_sqe* sqe = impl_->GetSqe();
  io_uring_prep_unlinkat(sqe, dirfd, path, flags);
  impl_->Track(sqe, c ? c : &g_null_completion);
}

void Reactor::PollAdd(int fd, unsigned events, Completion* c) {
  io_uring_sqe* sqe = impl_->GetSqe();
  io_uring_prep_poll_add(sqe, fd, events);
  impl_->Track(sqe, c);
}

void Reactor::Cancel(Completion* target, Completion* c) {
  io_uring_sqe* sqe = impl_->GetSqe();
  io_uring_prep_cancel(sqe, target, 0);
  impl_->Track(sqe, c ? c : &g_null_completion);
}

Completion* Reactor::Callback(IoCallback fn) {
  ReactorImpl::CallbackNode* n = impl_->AllocNode();
  n->fn_ = std::move(fn);
  return n;
}

void Reactor::Defer(TaskFn fn) { impl_->deferred_.push_back(std::move(fn)); }

TimerId Reactor::After(absl::Duration delay, TaskFn fn) {
  const uint64_t id = impl_->next_timer_id_++;
  int64_t ns = absl::ToInt64Nanoseconds(delay);
  if (ns < 0) ns = 0;
  // Measured from the real clock, not the cached loop time, so a long iteration does not
  // shorten the delay.
  impl_->timer_heap_.push({MonotonicNs() + ns, id});
  impl_->timers_.emplace(id, std::move(fn));
  return TimerId{id};
}

bool Reactor::CancelTimer(TimerId id) { return impl_->timers_.erase(id.value) > 0; }

bool Reactor::TrySendTo(unsigned target, TaskFn& fn) {
  OL_DCHECK(target < runtime_->size());
  if (target == id_) {
    Defer(std::move(fn));
    return true;
  }
  if (!impl_->backlog_[target].empty()) return false;  // would overtake what waits there
  ReactorImpl& dst = *runtime_->reactor(target).impl_;
  if (!dst.inbound_[id_]->TryPush(fn)) return false;
  dst.Wake();
  return true;
}

void Reactor::SendTo(unsigned target, TaskFn fn) {
  if (TrySendTo(target, fn)) return;
  impl_->backlog_[target].push_back(std::move(fn));
  ++impl_->backlogged_;
}

void Reactor::AtStop(TaskFn fn) { impl_->at_stop_.push_back(std::move(fn)); }
void Reactor::AtExit(TaskFn fn) { impl_->at_exit_.push_back(std::move(fn)); }

// ---------------------------------------------------------------------------------------------
// Runtime

Runtime::Runtime(RuntimeOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create(RuntimeOptions options) {
  if (options.cpus.empty()) options.cpus = AllowedCpus();
  if (options.cpus.empty()) return absl::InternalError("no CPU available for reactors");
  if (options.sq_entries < 8 || options.sq_entries > 32768) {
    return absl::InvalidArgumentError("sq_entries must be in [8, 32768]");
  }
  const std::vector<int> allowed = AllowedCpus();
  for (int cpu : options.cpus) {
    if (options.pin && std::find(allowed.begin(), allowed.end(), cpu) == allowed.end()) {
      return absl::InvalidArgumentError(
          StrCat("cpu ", cpu, " is not in this process's affinity mask"));
    }
  }
  std::unique_ptr<Runtime> rt(new Runtime(std::move(options)));
  for (unsigned i = 0; i < rt->options_.cpus.size(); ++i) {
    rt->reactors_.push_back(std::unique_ptr<Reactor>(
        new Reactor(rt.get(), i, rt->options_.pin ? rt->options_.cpus[i] : -1)));
  }
  return rt;
}

Runtime::~Runtime() { Stop(); }

absl::Status Runtime::Start() {
  if (running_.load()) return absl::FailedPreconditionError("runtime already started");
  std::vector<std::promise<absl::Status>> ready(reactors_.size());
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < reactors_.size(); ++i) {
    threads.emplace_back([this, i, &ready] {
      ReactorImpl& impl = *reactors_[i]->impl_;
      absl::Status st = impl.Init();
      const bool ok = st.ok();
      ready[i].set_value(std::move(st));
      if (ok) {
        impl.Run();
        impl.Shutdown();
      }
    });
  }
  absl::Status first_error;
  for (auto& p : ready) {
    absl::Status st = p.get_future().get();
    if (!st.ok() && first_error.ok()) first_error = st;
  }
  threads_ = std::move(threads);
  running_.store(true, std::memory_order_release);
  if (!first_error.ok()) {
    Stop();
    return first_error;
  }
  return absl::OkStatus();
}

void Runtime::Stop() {
  if (!running_.load(std::memory_order_acquire) || stopping_.exchange(true)) return;
  for (auto& r : reactors_) {
    r->impl_->RequestStop();
  }
  for (auto& t : threads_) t.join();
  threads_.clear();
  running_.store(false, std::memory_order_release);
}

bool Runtime::Post(unsigned i, TaskFn fn) {
  if (i >= reactors_.size() || stopping_.load(std::memory_order_acquire) ||
      !running_.load(std::memory_order_acquire)) {
    return false;
  }
  return reactors_[i]->impl_->PostExternal(std::move(fn));
}

absl::Status Runtime::RunOn(unsigned i, absl::AnyInvocable<void()> fn) {
  if (Reactor::Current() != nullptr && Reactor::Current()->runtime_ == this) {
    return absl::FailedPreconditionError("RunOn called from a reactor thread");
  }
  std::promise<void> done;
  auto fut = done.get_future();
  if (!Post(i, [&fn, &done] {
        fn();
        done.set_value();
      })) {
    return absl::UnavailableError("runtime is not running");
  }
  fut.wait();
  return absl::OkStatus();
}

}  // namespace openlake::io

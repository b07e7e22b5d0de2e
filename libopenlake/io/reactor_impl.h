// Private state of a Reactor: its ring, queues, timers and the callback free list.
#pragma once

#include <liburing.h>

#include <deque>
#include <queue>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

#include "io/spsc_queue.h"

#include "openlake/io/reactor.h"

namespace openlake::io {

class ReactorImpl {
 public:
  ReactorImpl(Reactor* self, unsigned num_reactors, const RuntimeOptions& options);
  ~ReactorImpl();

  // On the reactor thread: pin, create the ring, arm the wake-up read.
  absl::Status Init();
  // The loop; returns after a stop request has been handled.
  void Run();
  void RequestStop();  // any thread (through the external inbox)
  // On the reactor thread once Run has returned: closes the ring, then runs AtExit hooks.
  void Shutdown();

  io_uring_sqe* GetSqe();
  void Track(io_uring_sqe* sqe, Completion* c) {
    io_uring_sqe_set_data(sqe, c);
    ++in_flight_;
  }

  bool PostExternal(TaskFn fn);  // any thread
  void Wake();                 // any thread: make the loop leave its wait

  Reactor* self_;
  io_uring ring_{};
  bool ring_ready_ = false;
  bool deferred_taskrun_ = false;
  int wake_fd_ = -1;
  int64_t now_ns_ = 0;
  int64_t last_work_ns_ = 0;  // when the loop last had completions or tasks
  int64_t poll_window_ns_ = 0;
  unsigned submit_batch_ = 0;
  uint64_t in_flight_ = 0;
  bool stop_requested_ = false;
  Reactor::LoopStats stats_;

  // Wake-up protocol: the loop sets `sleeping_` (seq_cst), fences, re-checks its inputs and only
  // then blocks; a sender makes its item visible, fences, and writes the eventfd if it sees
  // `sleeping_` (exchanging it back to false so one write serves one sleep). The two fences
  // order store-then-load on both sides, so at least one of them sees the other.
  std::atomic<bool> sleeping_{false};

  // inbound_[from] carries tasks from reactor `from` to this one.
  std::vector<std::unique_ptr<SpscQueue<TaskFn>>> inbound_;
  // backlog_[to]: what SendTo could not fit into reactor `to`'s queue from this one, in order;
  // FlushBacklog moves it on. `backlogged_` counts the tasks waiting in all of them.
  std::vector<std::deque<TaskFn>> backlog_;
  size_t backlogged_ = 0;
  void FlushBacklog();
  absl::Mutex external_mu_;
  std::vector<TaskFn> external_ ABSL_GUARDED_BY(external_mu_);
  bool external_closed_ ABSL_GUARDED_BY(external_mu_) = false;  // the loop has ended
  std::atomic<bool> has_external_{false};

  std::vector<TaskFn> deferred_;
  std::vector<TaskFn> at_stop_;
  std::vector<TaskFn> at_exit_;

  struct TimerEntry {
    int64_t deadline_ns;
    uint64_t id;
    bool operator>(const TimerEntry& o) const {
      return deadline_ns != o.deadline_ns ? deadline_ns > o.deadline_ns : id > o.id;
    }
  };
  std::priority_queue<TimerEntry, std::vector<TimerEntry>, std::greater<>> timer_heap_;
  absl::flat_hash_map<uint64_t, TaskFn> timers_;
  uint64_t next_timer_id_ = 1;

  class WakeCompletion;
  std::unique_ptr<WakeCompletion> wake_completion_;
  uint64_t wake_buf_ = 0;
  void ArmWake();

  class CallbackNode;
  CallbackNode* free_nodes_ = nullptr;
  std::vector<std::unique_ptr<CallbackNode[]>> node_blocks_;
  CallbackNode* AllocNode();
  void FreeNode(CallbackNode* n);

 private:
  bool RunTasks();       // true when any task ran
  unsigned ReapCount();  // Reap, returning how many CQEs it handled
  void FireTimers();
  bool HasInput();
  void Reap();
};

}  // namespace openlake::io

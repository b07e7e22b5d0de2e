// Bounded single-producer/single-consumer queue: one per ordered pair of cores.
//
// The slot array is allocated by the producer on its first push, so a runtime of N cores pays
// memory only for the pairs that really talk (N² pairs exist; few are used). The producer
// publishes the array with a release store; the consumer treats a null array as empty.
//
// Producer and consumer indices live on separate cache lines. The producer publishes an item
// with a release store of `tail_`; the consumer's acquire load of `tail_` makes the item's
// contents visible. Symmetrically, the consumer frees a slot with a release store of `head_`
// and the producer's acquire load of `head_` tells it the slot may be overwritten.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <memory>
#include <new>

namespace openlake::io {

template <typename T>
class SpscQueue {
 public:
  explicit SpscQueue(size_t capacity)
      : mask_(std::bit_ceil(capacity < 2 ? size_t{2} : capacity) - 1) {}
  ~SpscQueue() { delete[] slots_.load(std::memory_order_acquire); }

  SpscQueue(const SpscQueue&) = delete;
  SpscQueue& operator=(const SpscQueue&) = delete;

  // Producer only. False when full; `item` is then left as it was.
  bool TryPush(T& item) {
    T* slots = slots_.load(std::memory_order_relaxed);
    if (slots == nullptr) {
      slots = new T[mask_ + 1];
      slots_.store(slots, std::memory_order_release);
    }
    const size_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - cached_head_ > mask_) {
      cached_head_ = head_.load(std::memory_order_acquire);
      if (tail - cached_head_ > mask_) return false;
    }
    slots[tail & mask_] = std::move(item);
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }

  // Consumer only. False when empty.
  bool TryPop(T& out) {
    const size_t head = head_.load(std::memory_order_relaxed);
    if (head == cached_tail_) {
      cached_tail_ = tail_.load(std::memory_order_acquire);
      if (head == cached_tail_) return false;
    }
    // Non-null: tail_ moved, so the producer published the array before it.
    T* slots = slots_.load(std::memory_order_acquire);
    out = std::move(slots[head & mask_]);
    slots[head & mask_] = T();
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

  // Either side; a snapshot that may be stale by the time it returns.
  bool Empty() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }
  size_t capacity() const { return mask_ + 1; }

 private:
  const size_t mask_;
  std::atomic<T*> slots_{nullptr};
  alignas(64) std::atomic<size_t> head_{0};  // written by the consumer
  size_t cached_tail_ = 0;                   // consumer's view of tail_
  alignas(64) std::atomic<size_t> tail_{0};  // written by the producer
  size_t cached_head_ = 0;                   // producer's view of head_
};

}  // namespace openlake::io

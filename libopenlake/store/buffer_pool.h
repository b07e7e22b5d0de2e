// Shard buffers kept for the next read or write on the same thread (a reactor's). A fresh
// buffer's pages each cost a fault when first touched, which on some machines (2.7–4 s per GiB
// on this project's VMs) takes longer than the disk I/O the buffer is for. Sizes are rounded up
// to a power of two of at least 64 KiB; a thread keeps at most 64 MiB, and no buffer over
// 16 MiB. A buffer taken holds whatever its last user left: every user writes the bytes it
// reads (a reader's shard block, a writer's window, whose tail it zeroes itself).
#pragma once

#include <cstddef>

#include "openlake/io/buffer.h"

namespace openlake::store {

class BufferPool {
 public:
  // A buffer of at least `size` bytes (its size() is the rounded size), or one whose
  // operator bool is false when memory ran out.
  static io::AlignedBuffer Take(size_t size);
  // Keeps `b` for a later Take on this thread when there is room; a buffer whose size is not
  // one Take hands out is freed.
  static void Give(io::AlignedBuffer b);

  static constexpr size_t kSmallest = 64 << 10;
  static constexpr size_t kLargest = 16 << 20;
  static constexpr size_t kMaxHeld = 64 << 20;
};

}  // namespace openlake::store

#include "store/buffer_pool.h"

#include <utility>
#include <vector>

namespace openlake::store {
namespace {

size_t Class(size_t size) {
  size_t c = BufferPool::kSmallest;
  while (c < size) c <<= 1;
  return c;
}

struct Kept {
  std::vector<io::AlignedBuffer> free;
  size_t held = 0;
};

Kept& Here() {
  thread_local Kept kept;
  return kept;
}

}  // namespace

io::AlignedBuffer BufferPool::Take(size_t size) {
  const size_t cls = Class(size);
  Kept& k = Here();
  for (size_t i = 0; i < k.free.size(); ++i) {
    if (k.free[i].size() == cls) {
      io::AlignedBuffer b = std::move(k.free[i]);
      k.free.erase(k.free.begin() + static_cast<std::ptrdiff_t>(i));
      k.held -= cls;
      return b;
    }
  }
  return io::AlignedBuffer(cls);
}

void BufferPool::Give(io::AlignedBuffer b) {
  const size_t size = b.size();
  Kept& k = Here();
  if (!b || size == 0 || size > kLargest || Class(size) != size || k.held + size > kMaxHeld) {
    return;
  }
  k.held += size;
  k.free.push_back(std::move(b));
}

}  // namespace openlake::store

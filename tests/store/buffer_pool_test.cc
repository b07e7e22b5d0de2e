#include "store/buffer_pool.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <thread>
#include <vector>

namespace openlake::store {
namespace {

TEST_CASE("buffers are rounded up to a power of two of at least 64 KiB", "[buffer_pool]") {
  CHECK(BufferPool::Take(1).size() == (64u << 10));
  CHECK(BufferPool::Take(64 << 10).size() == (64u << 10));
  CHECK(BufferPool::Take((64 << 10) + 1).size() == (128u << 10));
  CHECK(BufferPool::Take(3 << 20).size() == (4u << 20));
}

// A fresh buffer is zeroed; a pooled one holds what its last user left in it.
io::AlignedBuffer Marked(size_t size) {
  io::AlignedBuffer b = BufferPool::Take(size);
  REQUIRE(b);
  std::memset(b.data(), 0x5a, b.size());
  return b;
}

bool Reused(const io::AlignedBuffer& b) {
  return b.size() > 0 && b.data()[b.size() - 1] == std::byte{0x5a};
}

TEST_CASE("a buffer given back is the next one taken of its size, on its thread",
          "[buffer_pool]") {
  std::thread([] {
    BufferPool::Give(Marked(2 << 20));
    CHECK_FALSE(Reused(BufferPool::Take(1 << 20)));  // another size: a new buffer
    std::thread([] { CHECK_FALSE(Reused(BufferPool::Take(2 << 20))); }).join();
    io::AlignedBuffer again = BufferPool::Take((2 << 20) - 100);
    CHECK(again.size() == (2u << 20));
    CHECK(Reused(again));
    CHECK_FALSE(Reused(BufferPool::Take(2 << 20)));  // taken once only
  }).join();
}

TEST_CASE("the pool keeps only buffers it hands out, and only up to its limit",
          "[buffer_pool]") {
  std::thread([] {
    io::AlignedBuffer odd(100 << 10);  // not a size Take hands out
    std::memset(odd.data(), 0x5a, odd.size());
    BufferPool::Give(std::move(odd));
    CHECK_FALSE(Reused(BufferPool::Take(128 << 10)));
    CHECK_FALSE(Reused(BufferPool::Take(64 << 10)));

    BufferPool::Give(Marked(32 << 20));  // over the largest kept
    CHECK_FALSE(Reused(BufferPool::Take(32 << 20)));

    // 64 MiB of 16 MiB buffers fill the pool: of five given back, four come back.
    std::vector<io::AlignedBuffer> bufs;
    for (int i = 0; i < 5; ++i) bufs.push_back(Marked(16 << 20));
    for (io::AlignedBuffer& b : bufs) BufferPool::Give(std::move(b));
    int reused = 0;
    for (int i = 0; i < 5; ++i) {
      bufs[i] = BufferPool::Take(16 << 20);
      reused += Reused(bufs[i]) ? 1 : 0;
    }
    CHECK(reused == 4);
  }).join();
}

}  // namespace
}  // namespace openlake::store

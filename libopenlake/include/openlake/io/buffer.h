// File: openlake/io/buffer.h
//
// AlignedBuffer: an owned, zero-initialised byte buffer aligned for O_DIRECT and DMA (4096 by
// default). Move-only.
//
//   io::AlignedBuffer buf(1 << 20);           // 1 MiB, 4096-aligned
//   file.Read(reactor, buf.data(), buf.size(), 0, &completion);
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace openlake::io {

inline constexpr size_t kDirectAlignment = 4096;

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t size, size_t alignment = kDirectAlignment) : size_(size) {
    if (size == 0) return;
    const size_t rounded = (size + alignment - 1) / alignment * alignment;
    data_ = static_cast<std::byte*>(std::aligned_alloc(alignment, rounded));
    if (data_) std::memset(data_, 0, rounded);
  }
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  // False when the allocation failed.
  explicit operator bool() const { return data_ != nullptr || size_ == 0; }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace openlake::io

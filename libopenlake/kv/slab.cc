#include "kv/slab.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "common/random.h"

#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::kv {

using layout::SlabHeader;

absl::Status ValidateSlabHeader(const SlabHeader& h, uint64_t mapped_bytes) {
  if (mapped_bytes < sizeof(SlabHeader)) {
    return absl::InvalidArgumentError(StrCat("slab of ", mapped_bytes, " bytes is too small"));
  }
  if (h.magic != layout::kSlabMagic) {
    return absl::InvalidArgumentError("not an OpenLake KV slab (bad magic)");
  }
  if (h.version != layout::kSlabVersion) {
    return absl::FailedPreconditionError(StrCat("slab format version ", h.version,
                                                " is not supported (this library reads ",
                                                layout::kSlabVersion, ")"));
  }
  if (h.header_bytes != sizeof(SlabHeader) || h.total_bytes != mapped_bytes ||
      h.segment_bytes < (1u << 20) || h.segment_bytes % layout::kPage != 0 ||
      h.segments_offset % layout::kSegmentAlign != 0 || h.segments_offset < h.header_bytes) {
    return absl::InvalidArgumentError("slab header geometry is inconsistent");
  }
  // Overflow-safe: segment_count * segment_bytes must fit after segments_offset.
  if (h.segments_offset > mapped_bytes ||
      h.segment_count > (mapped_bytes - h.segments_offset) / h.segment_bytes) {
    return absl::InvalidArgumentError("slab segments extend past the end of the slab");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SlabMapping>> SlabMapping::Create(uint64_t total_bytes,
                                                                 uint64_t segment_bytes) {
  if (segment_bytes < (1u << 20) || segment_bytes % layout::kPage != 0) {
    return absl::InvalidArgumentError("segment size must be a multiple of 4 KiB, at least 1 MiB");
  }
  const uint64_t seg_off = layout::kSegmentAlign;
  if (total_bytes < seg_off + segment_bytes) {
    return absl::InvalidArgumentError(
        StrCat("a slab of ", total_bytes, " bytes cannot hold one segment of ", segment_bytes));
  }
  const uint64_t count = (total_bytes - seg_off) / segment_bytes;
  const uint64_t size = seg_off + count * segment_bytes;
  const int fd = memfd_create("openlake-kv-slab", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return ErrnoStatus(errno, "memfd_create for the KV slab");
  auto m = std::unique_ptr<SlabMapping>(new SlabMapping());
  m->fd_ = fd;
  fchmod(fd, 0600);
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    return ErrnoStatus(errno, StrCat("size the KV slab to ", size, " bytes"));
  }
  // Clients get this descriptor; sealing its size means none of them can truncate the memory
  // out from under the daemon.
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return ErrnoStatus(errno, "seal the KV slab's size");
  }
  // MAP_NORESERVE: the slab is committed lazily, page by page, as segments are used.
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (base == MAP_FAILED) return ErrnoStatus(errno, StrCat("map the KV slab (", size, " bytes)"));
  m->base_ = base;
  m->size_ = size;
  SlabHeader* h = layout::Header(base);
  std::memset(h, 0, sizeof(*h));
  h->version = layout::kSlabVersion;
  h->header_bytes = sizeof(SlabHeader);
  h->total_bytes = size;
  h->segment_bytes = segment_bytes;
  h->segments_offset = seg_off;
  h->segment_count = static_cast<uint32_t>(count);
  h->owner_pid = static_cast<uint32_t>(getpid());
  RandomBytes(&h->instance_id, sizeof(h->instance_id));
  h->created_unix_ms =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
  // The magic last: a header is valid only once everything else is in place.
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = layout::kSlabMagic;
  return m;
}

absl::StatusOr<std::unique_ptr<SlabMapping>> SlabMapping::Attach(int fd) {
  auto m = std::unique_ptr<SlabMapping>(new SlabMapping());
  m->fd_ = fd;
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrnoStatus(errno, "fstat the KV slab");
  if (st.st_size < static_cast<off_t>(sizeof(SlabHeader))) {
    return absl::InvalidArgumentError("the descriptor passed as the KV slab is too small");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (base == MAP_FAILED) return ErrnoStatus(errno, "map the KV slab");
  m->base_ = base;
  m->size_ = size;
  OL_RETURN_IF_ERROR(ValidateSlabHeader(*layout::Header(base), size));
  return m;
}

SlabMapping::~SlabMapping() {
  if (base_) munmap(base_, size_);
  if (fd_ >= 0) close(fd_);
}

}  // namespace openlake::kv

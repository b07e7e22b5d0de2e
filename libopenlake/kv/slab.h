// The slab's memory: creation (daemon) and attachment (client) of the memfd, and validation of
// its header.
//
// The daemon creates an anonymous memfd (no name in any file system; only processes it hands
// the descriptor to can map it), makes it owner-only, sizes it with ftruncate and seals its
// size, so no client can shrink it under the daemon (which would fault). Pages are committed
// lazily: a 100 GiB slab costs nothing until segments are used.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

#include "kv/layout.h"

namespace openlake::kv {

class SlabMapping {
 public:
  // Daemon: a new slab of `total_bytes` carved into `segment_bytes` segments.
  static absl::StatusOr<std::unique_ptr<SlabMapping>> Create(uint64_t total_bytes,
                                                             uint64_t segment_bytes);
  // Client: maps the slab behind `fd` (takes ownership of fd) and validates its header.
  static absl::StatusOr<std::unique_ptr<SlabMapping>> Attach(int fd);
  ~SlabMapping();

  void* base() const { return base_; }
  uint64_t size() const { return size_; }
  int fd() const { return fd_; }
  const layout::SlabHeader& header() const { return *layout::Header(base_); }

 private:
  SlabMapping() = default;
  void* base_ = nullptr;
  uint64_t size_ = 0;
  int fd_ = -1;
};

// Checks a slab header against the size of its mapping: magic, version, geometry in bounds.
// InvalidArgument / FailedPrecondition with the reason otherwise. Exposed for tests and fuzzing.
absl::Status ValidateSlabHeader(const layout::SlabHeader& h, uint64_t mapped_bytes);

}  // namespace openlake::kv

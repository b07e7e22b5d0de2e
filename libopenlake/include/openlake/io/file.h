// File: openlake/io/file.h
//
// Files on the core-local runtime. A File keeps two descriptors on the same inode: one opened
// with O_DIRECT (when the file system accepts it) and one buffered. Reads and writes whose
// buffer address, length and offset all meet the direct-I/O alignment go through the O_DIRECT
// descriptor, bypassing the page cache; anything unaligned falls back to the buffered one.
// (The kernel keeps the two coherent: a direct write invalidates cached pages of its range.)
//
//   OL_ASSIGN_OR_RETURN(io::File f, io::File::Open(path, O_RDWR | O_CREAT));
//   io::AlignedBuffer buf(4096);
//   f.Read(reactor, buf.data(), 4096, 0, reactor.Callback([](int32_t res) { ... }));
//
// Opening is blocking (control path: startup, first use of a drive). The I/O calls are
// asynchronous and must be made on the reactor's thread.
//
// AtomicWriteFileSync replaces a file's contents, blocking (control paths: a drive's identity,
// generated credentials), so that a crash at any point leaves either the old file or the new
// one: write a temporary beside it → fsync → rename over → fsync the folder. A failure before
// the rename leaves the old file untouched (the temporary is removed); a failure of the
// folder's fsync, after the rename, is reported too: the new contents are then in place but
// the rename may not survive a crash. (The object store replaces its metadata the same way
// through the reactors, store/drive_io.cc's AtomicReplace, on its drives' file backends.)
#pragma once

#include <fcntl.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "openlake/export.h"
#include "openlake/io/reactor.h"

namespace openlake::io {

class OL_EXPORT File {
 public:
  File() = default;
  ~File();
  File(File&& o) noexcept;
  File& operator=(File&& o) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // `flags` as for open(2) (O_DIRECT is added by File itself). Errors: NotFound,
  // PermissionDenied, InvalidArgument, ...
  static absl::StatusOr<File> Open(const std::string& path, int flags, mode_t mode = 0644);
  // The buffered descriptor alone (no O_DIRECT one, no alignment probe): for small files read
  // or written whole, where the second open would double the system calls.
  static absl::StatusOr<File> OpenBuffered(const std::string& path, int flags,
                                           mode_t mode = 0644);

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }                // buffered descriptor
  int direct_fd() const { return direct_fd_; }  // -1 when O_DIRECT is unavailable
  // Alignment of address, length and offset that O_DIRECT needs here (e.g. 512 or 4096).
  uint32_t direct_alignment() const { return align_; }
  const std::string& path() const { return path_; }

  // True when (buf, len, offset) may use the O_DIRECT descriptor.
  bool CanDirect(const void* buf, uint64_t len, uint64_t offset) const;

  // Asynchronous positional I/O on `r` (its thread only). The result is bytes transferred or
  // -errno; short transfers are possible and left to the caller.
  void Read(Reactor& r, void* buf, uint32_t len, uint64_t offset, Completion* c) const;
  void Write(Reactor& r, const void* buf, uint32_t len, uint64_t offset, Completion* c) const;
  void Sync(Reactor& r, bool datasync, Completion* c) const;

  // Blocking helpers for control paths (never on a reactor thread). They loop over short
  // transfers; reading past the end is OutOfRange.
  absl::Status PreadAll(void* buf, size_t len, uint64_t offset) const;
  absl::Status PwriteAll(const void* buf, size_t len, uint64_t offset) const;
  absl::Status SyncNow() const;
  absl::StatusOr<uint64_t> Size() const;

 private:
  int fd_ = -1;
  int direct_fd_ = -1;
  uint32_t align_ = 4096;
  std::string path_;
};

// Atomically replaces `path` with `data` (see the file comment). Blocking.
OL_EXPORT absl::Status AtomicWriteFileSync(const std::string& path, std::string_view data,
                                           mode_t mode = 0644);

// fsyncs the folder holding `path` (so a rename or create in it is durable). Blocking.
OL_EXPORT absl::Status SyncParentDir(const std::string& path);

// syncfs(2) of the file system holding the folder `dir`: everything written to it before the
// call is durable when it returns. Blocking.
OL_EXPORT absl::Status SyncFileSystem(const std::string& dir);

}  // namespace openlake::io

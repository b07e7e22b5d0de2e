// File: openlake/store/file_backend.h
//
// The file-system seam of the object engine. Every byte the engine reads or writes on a drive
// goes through a FileBackend: one per drive, rooted at the drive's folder, taking paths
// relative to that root. The local backend maps it onto the kernel (io_uring for data and
// fsync, plain system calls for namespace operations); tests wrap it to inject faults (a drive
// that is gone, that returns errors, that flips bits or tears a write); the cluster work will
// put remote drives behind the same interface.
//
// Threading: a backend is shared by every reactor. Namespace calls are synchronous and
// thread-safe. A FileHandle is used by one reactor at a time; its Read/Write/Sync are
// asynchronous on that reactor and report through an io::Completion (bytes or -errno), so a
// caller can keep many in flight with io::IoBatch without allocating.
//
// Paths never contain "..": the engine builds them from validated names (store/key.h), and the
// local backend refuses any path that is absolute or has a "." or ".." component.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "openlake/export.h"
#include "openlake/io/reactor.h"

namespace openlake::store {

class OL_EXPORT FileHandle {
 public:
  virtual ~FileHandle() = default;
  // Positional I/O; the completion gets bytes transferred or -errno. Buffers 4096-aligned in
  // address, length and offset go through O_DIRECT where the file system has it.
  virtual void Read(io::Reactor& r, void* buf, uint32_t len, uint64_t offset,
                    io::Completion* c) = 0;
  virtual void Write(io::Reactor& r, const void* buf, uint32_t len, uint64_t offset,
                     io::Completion* c) = 0;
  // fdatasync for files, fsync for folders; 0 or -errno.
  virtual void Sync(io::Reactor& r, io::Completion* c) = 0;
  virtual absl::StatusOr<uint64_t> Size() = 0;
};

enum class OpenMode {
  kRead,       // an existing file, read-only
  kReadSmall,  // the same, for a small file read whole (metadata): no O_DIRECT descriptor
  kCreate,     // create or truncate, write-only
  kCreateSmall,  // the same, for a small file written whole (a record): no O_DIRECT descriptor
  kDirectory,  // an existing folder, for Sync
  kJournal,    // read-write, created when missing, never truncated, no O_DIRECT (a drive's
               // commit journal, rewritten in place)
};

struct DirEntry {
  std::string name;
  bool is_dir = false;
};

class OL_EXPORT FileBackend {
 public:
  virtual ~FileBackend() = default;

  // The drive's folder, for messages.
  virtual const std::string& root() const = 0;

  // NotFound when the file (or a folder on its path) does not exist. "" with kDirectory is the
  // drive's own folder.
  virtual absl::StatusOr<std::unique_ptr<FileHandle>> Open(std::string_view path,
                                                           OpenMode mode) = 0;
  // Creates `path` and any missing parents, each new folder made durable in its parent.
  // `parents_from`: the prefix of `path` that must already exist (NotFound otherwise), so a
  // bucket folder is never recreated under a racing delete. With `unsynced`, the parents are
  // not fsynced here: the folders created are appended to it (relative paths, outermost
  // first) and the caller makes them durable (the engine does it through io_uring).
  virtual absl::Status MakeDirs(std::string_view path, std::string_view parents_from,
                                std::vector<std::string>* unsynced = nullptr) = 0;
  // rename(2): replaces a file, or an empty folder, at `to`.
  virtual absl::Status Rename(std::string_view from, std::string_view to) = 0;
  // link(2): a second name for a file (no data is copied).
  virtual absl::Status Link(std::string_view from, std::string_view to) = 0;
  virtual absl::Status Unlink(std::string_view path) = 0;
  // Removes an empty folder; FailedPrecondition when it is not empty.
  virtual absl::Status RemoveDir(std::string_view path) = 0;
  // Removes a file or a whole tree (missing is fine). Can be slow: the engine renames into the
  // trash first and leaves this to the purger thread.
  virtual absl::Status RemoveAll(std::string_view path) = 0;
  // Entries of a folder ("" for the drive's own), unsorted, without "." and "..".
  virtual absl::StatusOr<std::vector<DirEntry>> ReadDir(std::string_view path) = 0;
  // True when `path` exists; `is_dir` tells which kind.
  virtual absl::StatusOr<bool> Exists(std::string_view path, bool* is_dir = nullptr) = 0;
  // Bytes free on the drive's file system.
  virtual absl::StatusOr<uint64_t> FreeBytes() = 0;
  // syncfs(2) of the file system the drive is on: everything written and renamed before the
  // call is durable when it returns. Blocking. The commit journal calls it once per journal
  // file it reclaims (store/journal.h).
  virtual absl::Status SyncAll() = 0;
};

// The kernel's file system under `root` (which must exist).
OL_EXPORT std::unique_ptr<FileBackend> NewLocalFileBackend(std::string root);

// Builds the backend of a drive from its folder; StoreOptions takes one to inject faults.
using FileBackendFactory = std::function<std::unique_ptr<FileBackend>(const std::string& root)>;

}  // namespace openlake::store

#include "openlake/io/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <memory>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"

#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::io {
namespace {

// Direct-I/O alignment of the file behind `fd`: statx(STATX_DIOALIGN) where the kernel knows
// it (6.1+), else 4096, which satisfies every logical block size in use.
uint32_t DirectAlignment(int fd) {
  struct statx stx {};
  if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
      (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align != 0) {
    uint32_t a = stx.stx_dio_offset_align;
    if (stx.stx_dio_mem_align > a) a = stx.stx_dio_mem_align;
    return a;
  }
  return 4096;
}

std::string ParentDir(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string TempName(const std::string& path) {
  absl::BitGen gen;
  return StrCat(path, ".tmp.", absl::Hex(absl::Uniform<uint64_t>(gen), absl::kZeroPad16));
}

// `sync` (fsync or syncfs) on the folder `dir`; `what` names it in a failure.
absl::Status SyncFolder(const std::string& dir, int (*sync)(int), const char* what) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, StrCat("open folder ", dir));
  const int rc = sync(fd);
  const int err = errno;
  close(fd);
  if (rc != 0) return ErrnoStatus(err, StrCat(what, " ", dir));
  return absl::OkStatus();
}

}  // namespace

File::~File() {
  if (fd_ >= 0) close(fd_);
  if (direct_fd_ >= 0) close(direct_fd_);
}

File::File(File&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)),
      direct_fd_(std::exchange(o.direct_fd_, -1)),
      align_(o.align_),
      path_(std::move(o.path_)) {}

File& File::operator=(File&& o) noexcept {
  std::swap(fd_, o.fd_);
  std::swap(direct_fd_, o.direct_fd_);
  std::swap(align_, o.align_);
  std::swap(path_, o.path_);
  return *this;
}

absl::StatusOr<File> File::Open(const std::string& path, int flags, mode_t mode) {
  File f;
  f.path_ = path;
  f.fd_ = open(path.c_str(), (flags & ~O_DIRECT) | O_CLOEXEC, mode);
  if (f.fd_ < 0) return ErrnoStatus(errno, StrCat("open ", path));
  // The second descriptor must not create or truncate again.
  const int dflags = (flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_APPEND)) | O_DIRECT | O_CLOEXEC;
  f.direct_fd_ = open(path.c_str(), dflags);
  if (f.direct_fd_ >= 0) f.align_ = DirectAlignment(f.direct_fd_);
  return f;
}

absl::StatusOr<File> File::OpenBuffered(const std::string& path, int flags, mode_t mode) {
  File f;
  f.path_ = path;
  f.fd_ = open(path.c_str(), (flags & ~O_DIRECT) | O_CLOEXEC, mode);
  if (f.fd_ < 0) return ErrnoStatus(errno, StrCat("open ", path));
  return f;
}

bool File::CanDirect(const void* buf, uint64_t len, uint64_t offset) const {
  if (direct_fd_ < 0) return false;
  const uint64_t mask = align_ - 1;
  return ((reinterpret_cast<uintptr_t>(buf) | len | offset) & mask) == 0;
}

void File::Read(Reactor& r, void* buf, uint32_t len, uint64_t offset, Completion* c) const {
  r.Read(CanDirect(buf, len, offset) ? direct_fd_ : fd_, buf, len, offset, c);
}

void File::Write(Reactor& r, const void* buf, uint32_t len, uint64_t offset, Completion* c) const {
  r.Write(CanDirect(buf, len, offset) ? direct_fd_ : fd_, buf, len, offset, c);
}

void File::Sync(Reactor& r, bool datasync, Completion* c) const { r.Fsync(fd_, datasync, c); }

absl::Status File::PreadAll(void* buf, size_t len, uint64_t offset) const {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    const int fd = CanDirect(p, len, offset) ? direct_fd_ : fd_;
    const ssize_t n = pread(fd, p, len, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, StrCat("pread ", path_));
    }
    if (n == 0) return absl::OutOfRangeError(StrCat("pread ", path_, ": end of file"));
    p += n;
    len -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

absl::Status File::PwriteAll(const void* buf, size_t len, uint64_t offset) const {
  auto* p = static_cast<const char*>(buf);
  while (len > 0) {
    const int fd = CanDirect(p, len, offset) ? direct_fd_ : fd_;
    const ssize_t n = pwrite(fd, p, len, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, StrCat("pwrite ", path_));
    }
    p += n;
    len -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

absl::Status File::SyncNow() const {
  if (fsync(fd_) != 0) return ErrnoStatus(errno, StrCat("fsync ", path_));
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> File::Size() const {
  struct stat st;
  if (fstat(fd_, &st) != 0) return ErrnoStatus(errno, StrCat("fstat ", path_));
  return static_cast<uint64_t>(st.st_size);
}

absl::Status SyncParentDir(const std::string& path) {
  return SyncFolder(ParentDir(path), fsync, "fsync folder");
}

absl::Status SyncFileSystem(const std::string& dir) { return SyncFolder(dir, syncfs, "syncfs"); }

absl::Status AtomicWriteFileSync(const std::string& path, std::string_view data, mode_t mode) {
  const std::string tmp = TempName(path);
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoStatus(errno, StrCat("create ", tmp));
  absl::Status st;
  size_t done = 0;
  while (st.ok() && done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = ErrnoStatus(errno, StrCat("write ", tmp));
    } else {
      done += static_cast<size_t>(n);
    }
  }
  if (st.ok() && fsync(fd) != 0) st = ErrnoStatus(errno, StrCat("fsync ", tmp));
  close(fd);
  if (st.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    st = ErrnoStatus(errno, StrCat("rename ", tmp, " to ", path));
  }
  if (!st.ok()) {
    unlink(tmp.c_str());
    return st;
  }
  return SyncParentDir(path);
}

}  // namespace openlake::io

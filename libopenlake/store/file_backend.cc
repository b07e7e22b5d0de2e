// The local FileBackend: paths under a drive folder, data through the reactor's io_uring.
#include "openlake/store/file_backend.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <filesystem>

#include "openlake/io/file.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::store {
namespace {

// Relative, no empty, "." or ".." component: nothing the engine builds can leave the drive.
absl::Status CheckRelative(std::string_view p) {
  if (p.empty() || p.front() == '/') {
    return absl::InvalidArgumentError(StrCat("drive path \"", p, "\" is not relative"));
  }
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string_view::npos) end = p.size();
    const std::string_view c = p.substr(start, end - start);
    if (c.empty() || c == "." || c == "..") {
      return absl::InvalidArgumentError(StrCat("drive path \"", p, "\" has an empty, \".\" or "
                                               "\"..\" component"));
    }
    if (end == p.size()) break;
    start = end + 1;
  }
  if (p.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError("drive path contains NUL");
  }
  return absl::OkStatus();
}

class LocalFile final : public FileHandle {
 public:
  explicit LocalFile(io::File f) : f_(std::move(f)) {}
  void Read(io::Reactor& r, void* buf, uint32_t len, uint64_t off, io::Completion* c) override {
    f_.Read(r, buf, len, off, c);
  }
  void Write(io::Reactor& r, const void* buf, uint32_t len, uint64_t off,
             io::Completion* c) override {
    f_.Write(r, buf, len, off, c);
  }
  void Sync(io::Reactor& r, io::Completion* c) override { f_.Sync(r, true, c); }
  absl::StatusOr<uint64_t> Size() override { return f_.Size(); }

 private:
  io::File f_;
};

class LocalDir final : public FileHandle {
 public:
  LocalDir(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~LocalDir() override { close(fd_); }
  void Read(io::Reactor& r, void*, uint32_t, uint64_t, io::Completion* c) override {
    r.Read(-1, nullptr, 0, 0, c);  // -EBADF: a folder has no bytes
  }
  void Write(io::Reactor& r, const void*, uint32_t, uint64_t, io::Completion* c) override {
    r.Write(-1, nullptr, 0, 0, c);
  }
  void Sync(io::Reactor& r, io::Completion* c) override { r.Fsync(fd_, false, c); }
  absl::StatusOr<uint64_t> Size() override { return 0; }

 private:
  int fd_;
  std::string path_;
};

class LocalBackend final : public FileBackend {
 public:
  explicit LocalBackend(std::string root) : root_(std::move(root)) {
    while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  }

  const std::string& root() const override { return root_; }

  absl::StatusOr<std::unique_ptr<FileHandle>> Open(std::string_view path,
                                                   OpenMode mode) override {
    if (mode == OpenMode::kDirectory && path.empty()) {  // the drive's own folder
      const int fd = open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) return ErrnoStatus(errno, StrCat("open folder ", root_));
      return std::unique_ptr<FileHandle>(new LocalDir(fd, root_));
    }
    OL_RETURN_IF_ERROR(CheckRelative(path));
    const std::string full = Full(path);
    if (mode == OpenMode::kDirectory) {
      const int fd = open(full.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) return ErrnoStatus(errno, StrCat("open folder ", full));
      return std::unique_ptr<FileHandle>(new LocalDir(fd, full));
    }
    if (mode == OpenMode::kReadSmall || mode == OpenMode::kCreateSmall) {
      const int flags = mode == OpenMode::kReadSmall ? O_RDONLY : (O_WRONLY | O_CREAT | O_TRUNC);
      OL_ASSIGN_OR_RETURN(io::File f, io::File::OpenBuffered(full, flags, 0600));
      return std::unique_ptr<FileHandle>(new LocalFile(std::move(f)));
    }
    if (mode == OpenMode::kJournal) {
      OL_ASSIGN_OR_RETURN(io::File f, io::File::OpenBuffered(full, O_RDWR | O_CREAT, 0600));
      return std::unique_ptr<FileHandle>(new LocalFile(std::move(f)));
    }
    const int flags = mode == OpenMode::kRead ? O_RDONLY : (O_WRONLY | O_CREAT | O_TRUNC);
    OL_ASSIGN_OR_RETURN(io::File f, io::File::Open(full, flags, 0600));
    return std::unique_ptr<FileHandle>(new LocalFile(std::move(f)));
  }

  absl::Status MakeDirs(std::string_view path, std::string_view parents_from,
                        std::vector<std::string>* unsynced) override {
    OL_RETURN_IF_ERROR(CheckRelative(path));
    if (!parents_from.empty() &&
        (path.substr(0, parents_from.size()) != parents_from ||
         (path.size() > parents_from.size() && path[parents_from.size()] != '/'))) {
      return absl::InvalidArgumentError(StrCat(parents_from, " is not a prefix of ", path));
    }
    // Most calls find every parent in place (a new key beside others): try the last folder
    // alone first. Made, or there already, its parents exist, `parents_from` with them.
    const std::string leaf = Full(path);
    if (mkdir(leaf.c_str(), 0700) == 0) {
      if (unsynced != nullptr) {
        unsynced->emplace_back(path);
        return absl::OkStatus();
      }
      return io::SyncParentDir(leaf);
    }
    if (errno == EEXIST) return absl::OkStatus();
    if (errno != ENOENT) return ErrnoStatus(errno, StrCat("mkdir ", leaf));
    if (!parents_from.empty()) {
      struct stat st;
      const std::string base = Full(parents_from);
      if (stat(base.c_str(), &st) != 0) return ErrnoStatus(errno, StrCat("stat ", base));
    }
    size_t pos = parents_from.empty() ? 0 : parents_from.size() + 1;
    while (pos <= path.size()) {
      size_t end = path.find('/', pos);
      if (end == std::string_view::npos) end = path.size();
      const std::string dir = Full(path.substr(0, end));
      if (mkdir(dir.c_str(), 0700) == 0) {
        if (unsynced != nullptr) {
          unsynced->emplace_back(path.substr(0, end));
        } else {
          OL_RETURN_IF_ERROR(io::SyncParentDir(dir));
        }
      } else if (errno != EEXIST) {
        return ErrnoStatus(errno, StrCat("mkdir ", dir));
      }
      if (end == path.size()) break;
      pos = end + 1;
    }
    return absl::OkStatus();
  }

  absl::Status Rename(std::string_view from, std::string_view to) override {
    OL_RETURN_IF_ERROR(CheckRelative(from));
    OL_RETURN_IF_ERROR(CheckRelative(to));
    const std::string f = Full(from), t = Full(to);
    if (rename(f.c_str(), t.c_str()) != 0) {
      return ErrnoStatus(errno, StrCat("rename ", f, " to ", t));
    }
    return absl::OkStatus();
  }

  absl::Status Link(std::string_view from, std::string_view to) override {
    OL_RETURN_IF_ERROR(CheckRelative(from));
    OL_RETURN_IF_ERROR(CheckRelative(to));
    const std::string f = Full(from), t = Full(to);
    if (link(f.c_str(), t.c_str()) != 0) return ErrnoStatus(errno, StrCat("link ", f, " ", t));
    return absl::OkStatus();
  }

  absl::Status Unlink(std::string_view path) override {
    OL_RETURN_IF_ERROR(CheckRelative(path));
    const std::string f = Full(path);
    if (unlink(f.c_str()) != 0) return ErrnoStatus(errno, StrCat("unlink ", f));
    return absl::OkStatus();
  }

  absl::Status RemoveDir(std::string_view path) override {
    OL_RETURN_IF_ERROR(CheckRelative(path));
    const std::string f = Full(path);
    if (rmdir(f.c_str()) != 0) {
      if (errno == ENOTEMPTY || errno == EEXIST) {
        return absl::FailedPreconditionError(StrCat(f, " is not empty"));
      }
      return ErrnoStatus(errno, StrCat("rmdir ", f));
    }
    return absl::OkStatus();
  }

  absl::Status RemoveAll(std::string_view path) override {
    OL_RETURN_IF_ERROR(CheckRelative(path));
    std::error_code ec;
    std::filesystem::remove_all(Full(path), ec);
    if (ec) return absl::InternalError(StrCat("remove ", Full(path), ": ", ec.message()));
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<DirEntry>> ReadDir(std::string_view path) override {
    std::string full = root_;
    if (!path.empty()) {
      OL_RETURN_IF_ERROR(CheckRelative(path));
      full = Full(path);
    }
    DIR* d = opendir(full.c_str());
    if (d == nullptr) return ErrnoStatus(errno, StrCat("opendir ", full));
    std::vector<DirEntry> out;
    while (dirent* e = readdir(d)) {
      const std::string_view name(e->d_name);
      if (name == "." || name == "..") continue;
      bool is_dir = e->d_type == DT_DIR;
      if (e->d_type == DT_UNKNOWN) {
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
          is_dir = S_ISDIR(st.st_mode);
        }
      }
      out.push_back({std::string(name), is_dir});
    }
    closedir(d);
    return out;
  }

  absl::StatusOr<bool> Exists(std::string_view path, bool* is_dir) override {
    OL_RETURN_IF_ERROR(CheckRelative(path));
    struct stat st;
    const std::string f = Full(path);
    if (stat(f.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return false;
      return ErrnoStatus(errno, StrCat("stat ", f));
    }
    if (is_dir) *is_dir = S_ISDIR(st.st_mode);
    return true;
  }

  absl::StatusOr<uint64_t> FreeBytes() override {
    struct statvfs v;
    if (statvfs(root_.c_str(), &v) != 0) return ErrnoStatus(errno, StrCat("statvfs ", root_));
    return static_cast<uint64_t>(v.f_bavail) * v.f_frsize;
  }

  absl::Status SyncAll() override { return io::SyncFileSystem(root_); }

 private:
  std::string Full(std::string_view rel) const { return StrCat(root_, "/", rel); }
  std::string root_;
};

}  // namespace

std::unique_ptr<FileBackend> NewLocalFileBackend(std::string root) {
  return std::make_unique<LocalBackend>(std::move(root));
}

}  // namespace openlake::store

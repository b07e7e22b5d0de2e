#include <cstring>

#include "store/engine.h"
#include "store/names.h"

#include "openlake/io/buffer.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::store {

std::string ParentOf(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string() : std::string(path.substr(0, slash));
}

std::string TmpName(std::string_view what) {
  return StrCat(kTmpDir, "/", Hex(NewVersionId()), ".", what);
}

uint64_t BlockCount(uint64_t part_size, uint32_t k, uint32_t block_size) {
  const uint64_t window = static_cast<uint64_t>(k) * block_size;
  return (part_size + window - 1) / window;
}

uint64_t ShardBlockLen(uint64_t part_size, uint64_t b, uint32_t k, uint32_t block_size,
                       bool inline_data) {
  const uint64_t window = static_cast<uint64_t>(k) * block_size;
  const uint64_t start = b * window;
  if (start >= part_size) return 0;
  const uint64_t len = std::min(window, part_size - start);
  if (len == window) return block_size;
  const uint64_t per_shard = (len + k - 1) / k;
  if (inline_data) return per_shard;
  return (per_shard + io::kDirectAlignment - 1) / io::kDirectAlignment * io::kDirectAlignment;
}

io::Task<absl::StatusOr<std::string>> ReadWholeFile(FileBackend& fs, std::string path) {
  OL_CO_ASSIGN_OR_RETURN(std::unique_ptr<FileHandle> f, fs.Open(path, OpenMode::kReadSmall));
  OL_CO_ASSIGN_OR_RETURN(uint64_t size, f->Size());
  if (size > (256u << 20)) {
    co_return absl::DataLossError(StrCat(fs.root(), "/", path, ": ", size,
                                         " bytes is too large for a metadata file"));
  }
  std::string out(size, '\0');
  io::Reactor& r = *io::Reactor::Current();
  uint64_t done = 0;
  while (done < size) {
    const auto want = static_cast<uint32_t>(std::min<uint64_t>(size - done, 1u << 30));
    const int32_t n = co_await io::Op([&](io::Completion* c) {
      f->Read(r, out.data() + done, want, done, c);
    });
    if (n < 0) co_return ErrnoStatus(n, StrCat("read ", fs.root(), "/", path));
    if (n == 0) break;  // shrank under us: the envelope check will say so
    done += static_cast<uint64_t>(n);
  }
  out.resize(done);
  co_return out;
}

io::Task<absl::Status> WriteAllAt(FileHandle* f, std::string_view bytes, uint64_t offset,
                                  std::string name) {
  io::Reactor& r = *io::Reactor::Current();
  uint64_t done = 0;
  while (done < bytes.size()) {
    const auto want = static_cast<uint32_t>(std::min<uint64_t>(bytes.size() - done, 1u << 30));
    const char* src = bytes.data() + done;
    const uint64_t at = offset + done;
    const int32_t n = co_await io::Op([&](io::Completion* c) { f->Write(r, src, want, at, c); });
    if (n < 0) co_return ErrnoStatus(n, StrCat("write ", name));
    if (n == 0) co_return absl::InternalError(StrCat("write ", name, ": no progress"));
    done += static_cast<uint64_t>(n);
  }
  co_return absl::OkStatus();
}

io::Task<absl::Status> WriteWholeFile(FileBackend& fs, std::string path, std::string data,
                                      bool sync) {
  OL_CO_ASSIGN_OR_RETURN(std::unique_ptr<FileHandle> f, fs.Open(path, OpenMode::kCreateSmall));
  std::string name = StrCat(fs.root(), "/", path);
  const absl::Status written = co_await WriteAllAt(f.get(), data, 0, std::move(name));
  OL_CO_RETURN_IF_ERROR(written);
  if (!sync) co_return absl::OkStatus();
  io::Reactor& r = *io::Reactor::Current();
  const int32_t s = co_await io::Op([&](io::Completion* c) { f->Sync(r, c); });
  if (s < 0) co_return ErrnoStatus(s, StrCat("fdatasync ", fs.root(), "/", path));
  co_return absl::OkStatus();
}

io::Task<absl::Status> SyncDir(FileBackend& fs, std::string path) {
  OL_CO_ASSIGN_OR_RETURN(std::unique_ptr<FileHandle> d, fs.Open(path, OpenMode::kDirectory));
  io::Reactor& r = *io::Reactor::Current();
  const int32_t s = co_await io::Op([&](io::Completion* c) { d->Sync(r, c); });
  if (s < 0) co_return ErrnoStatus(s, StrCat("fsync folder ", fs.root(), "/", path));
  co_return absl::OkStatus();
}

io::Task<absl::Status> MakeDirsDurable(FileBackend& fs, std::string path, std::string from) {
  std::vector<std::string> created;
  OL_CO_RETURN_IF_ERROR(fs.MakeDirs(path, from, &created));
  for (const std::string& dir : created) {
    OL_CO_RETURN_IF_ERROR(co_await SyncDir(fs, ParentOf(dir)));
  }
  co_return absl::OkStatus();
}

io::Task<absl::Status> AtomicReplace(FileBackend& fs, std::string path, std::string data,
                                     bool sync_dir, bool sync_data) {
  const std::string tmp = TmpName("rec");
  absl::Status s = co_await WriteWholeFile(fs, tmp, std::move(data), sync_data);
  if (s.ok()) s = fs.Rename(tmp, path);
  if (!s.ok()) {
    (void)fs.Unlink(tmp);
    co_return s;
  }
  if (sync_dir) OL_CO_RETURN_IF_ERROR(co_await SyncDir(fs, ParentOf(path)));
  co_return absl::OkStatus();
}

}  // namespace openlake::store

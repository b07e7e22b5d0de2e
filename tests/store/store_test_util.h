// Helpers for the object-engine tests: drive folders, a runtime, blocking wrappers around the
// coroutine API, and a fault-injecting FileBackend.
#pragma once

#include <atomic>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "io/test_util.h"

#include "openlake/io/task.h"
#include "openlake/status.h"
#include "openlake/store/store.h"

namespace openlake::testing {

// Shared switches of one drive's faults; flipped by the test while the store runs.
struct DriveFaults {
  std::atomic<bool> fail_all{false};          // every call fails with EIO
  std::atomic<bool> fail_writes{false};       // data writes and syncs fail with EIO
  std::atomic<bool> no_new_dirs{false};       // MakeDirs fails with EROFS (a read-only remount)
  std::atomic<int> flip_reads{0};             // flip a bit in this many more data reads
  std::atomic<bool> tear_next_meta{false};    // the next metadata write keeps half its bytes
  std::atomic<int> reads{0};
};

class FaultyFile final : public store::FileHandle {
 public:
  FaultyFile(std::unique_ptr<store::FileHandle> inner, DriveFaults* f, bool is_meta)
      : inner_(std::move(inner)), f_(f), is_meta_(is_meta) {}

  void Read(io::Reactor& r, void* buf, uint32_t len, uint64_t off, io::Completion* c) override {
    if (f_->fail_all) return Fail(r, c);
    f_->reads++;
    if (!is_meta_ && f_->flip_reads.load() > 0 && f_->flip_reads.fetch_sub(1) > 0) {
      // Let the read happen, then damage what it returns.
      auto* w = new Flip(c, static_cast<uint8_t*>(buf));
      return inner_->Read(r, buf, len, off, w);
    }
    inner_->Read(r, buf, len, off, c);
  }
  void Write(io::Reactor& r, const void* buf, uint32_t len, uint64_t off,
             io::Completion* c) override {
    if (f_->fail_all || (!is_meta_ && f_->fail_writes)) return Fail(r, c);
    if (is_meta_ && f_->tear_next_meta.exchange(false)) {
      // A torn write: half the bytes land, then the "machine" reports an error.
      auto* w = new Tear(c);
      return inner_->Write(r, buf, len / 2, off, w);
    }
    inner_->Write(r, buf, len, off, c);
  }
  void Sync(io::Reactor& r, io::Completion* c) override {
    if (f_->fail_all || (!is_meta_ && f_->fail_writes)) return Fail(r, c);
    inner_->Sync(r, c);
  }
  absl::StatusOr<uint64_t> Size() override {
    if (f_->fail_all) return absl::InternalError("injected EIO");
    return inner_->Size();
  }

 private:
  // A completion that runs on the reactor with -EIO (a read of fd -1 would be -EBADF).
  static void Fail(io::Reactor& r, io::Completion* c) {
    r.Defer([c] { c->Complete(-EIO, 0); });
  }
  struct Flip final : io::Completion {
    Flip(io::Completion* o, uint8_t* b) : outer(o), buf(b) {}
    void Complete(int32_t res, uint32_t flags) noexcept override {
      if (res > 0) buf[res / 2] ^= 0x10;
      io::Completion* o = outer;
      delete this;
      o->Complete(res, flags);
    }
    io::Completion* outer;
    uint8_t* buf;
  };
  struct Tear final : io::Completion {
    explicit Tear(io::Completion* o) : outer(o) {}
    void Complete(int32_t, uint32_t flags) noexcept override {
      io::Completion* o = outer;
      delete this;
      o->Complete(-EIO, flags);
    }
    io::Completion* outer;
  };

  std::unique_ptr<store::FileHandle> inner_;
  DriveFaults* f_;
  bool is_meta_;
};

class FaultyBackend final : public store::FileBackend {
 public:
  FaultyBackend(std::unique_ptr<store::FileBackend> inner, DriveFaults* f)
      : inner_(std::move(inner)), f_(f) {}

  const std::string& root() const override { return inner_->root(); }
  absl::StatusOr<std::unique_ptr<store::FileHandle>> Open(std::string_view path,
                                                          store::OpenMode mode) override {
    if (f_->fail_all) return absl::InternalError("injected EIO");
    OL_ASSIGN_OR_RETURN(auto h, inner_->Open(path, mode));
    // The commit journal's files take data faults (failed writes), not a torn record.
    const bool is_meta = (path.find("/part.") == std::string_view::npos ||
                          path.substr(path.size() - 5) == ".meta") &&
                         path.find("/journal/") == std::string_view::npos;
    return std::unique_ptr<store::FileHandle>(new FaultyFile(std::move(h), f_, is_meta));
  }
#define OL_FAULT_GUARD() \
  if (f_->fail_all) return absl::InternalError("injected EIO")
  absl::Status MakeDirs(std::string_view p, std::string_view from,
                        std::vector<std::string>* unsynced) override {
    OL_FAULT_GUARD();
    if (f_->no_new_dirs) return ErrnoStatus(EROFS, "injected mkdir");
    return inner_->MakeDirs(p, from, unsynced);
  }
  absl::Status Rename(std::string_view a, std::string_view b) override {
    OL_FAULT_GUARD();
    return inner_->Rename(a, b);
  }
  absl::Status Link(std::string_view a, std::string_view b) override {
    OL_FAULT_GUARD();
    return inner_->Link(a, b);
  }
  absl::Status Unlink(std::string_view p) override {
    OL_FAULT_GUARD();
    return inner_->Unlink(p);
  }
  absl::Status RemoveDir(std::string_view p) override {
    OL_FAULT_GUARD();
    return inner_->RemoveDir(p);
  }
  absl::Status RemoveAll(std::string_view p) override {
    OL_FAULT_GUARD();
    return inner_->RemoveAll(p);
  }
  absl::StatusOr<std::vector<store::DirEntry>> ReadDir(std::string_view p) override {
    OL_FAULT_GUARD();
    return inner_->ReadDir(p);
  }
  absl::StatusOr<bool> Exists(std::string_view p, bool* is_dir) override {
    OL_FAULT_GUARD();
    return inner_->Exists(p, is_dir);
  }
  absl::StatusOr<uint64_t> FreeBytes() override {
    OL_FAULT_GUARD();
    return inner_->FreeBytes();
  }
  absl::Status SyncAll() override {
    OL_FAULT_GUARD();
    return inner_->SyncAll();
  }
#undef OL_FAULT_GUARD

 private:
  std::unique_ptr<store::FileBackend> inner_;
  DriveFaults* f_;
};

inline std::string RandomBytes(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  std::mt19937_64 g(seed);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t v = g();
    std::memcpy(s.data() + i, &v, 8);
  }
  for (; i < n; ++i) s[i] = static_cast<char>(g());
  return s;
}

inline absl::Span<const std::byte> Bytes(const std::string& s) {
  return absl::MakeConstSpan(reinterpret_cast<const std::byte*>(s.data()), s.size());
}

// A store over `drives` folders in a temporary directory, with one reactor.
class StoreFixture {
 public:
  // `reactors` > 1 lets the writer hash on another reactor (as in the daemon).
  explicit StoreFixture(int drives, int set_drive_count = 0, int parity = -1,
                        uint32_t block_size = 64 << 10, bool faulty = true,
                        unsigned reactors = 1)
      : count_(drives) {
    for (int i = 0; i < drives; ++i) {
      paths_.push_back(dir_.path() + "/d" + std::to_string(i));
      std::filesystem::create_directories(paths_.back());
      faults_.push_back(std::make_unique<DriveFaults>());
    }
    options_.drives = paths_;
    options_.set_drive_count = set_drive_count;
    options_.parity = parity;
    options_.block_size = block_size;
    options_.inline_threshold = 16 << 10;
    options_.min_part_size = 64 << 10;
    options_.purge_trash = false;
    if (faulty) {
      options_.backend_factory = [this](const std::string& root) {
        DriveFaults* f = nullptr;
        for (size_t i = 0; i < paths_.size(); ++i) {
          if (paths_[i] == root) f = faults_[i].get();
        }
        return std::unique_ptr<store::FileBackend>(
            new FaultyBackend(store::NewLocalFileBackend(root), f));
      };
    }
    rt_ = StartRuntime(reactors);
  }

  absl::Status Open() {
    store_.reset();
    auto s = store::Store::Open(options_);
    if (!s.ok()) return s.status();
    store_ = *std::move(s);
    return absl::OkStatus();
  }
  void Close() { store_.reset(); }

  store::Store& st() { return *store_; }
  io::Runtime& rt() { return *rt_; }
  store::StoreOptions& options() { return options_; }
  DriveFaults& faults(int i) { return *faults_[static_cast<size_t>(i)]; }
  const std::string& drive_path(int i) const { return paths_[static_cast<size_t>(i)]; }
  int drives() const { return count_; }

  template <typename F>
  auto Run(F make) {
    return io::BlockOn(*rt_, 0, std::move(make));
  }

  absl::Status MakeBucket(const std::string& b) {
    return Run([&] { return store_->MakeBucket(b); });
  }

  // Writes `data` in `chunk`-byte pieces.
  absl::StatusOr<store::ObjectInfo> Put(const std::string& b, const std::string& k,
                                        const std::string& data, store::PutOptions o = {},
                                        size_t chunk = 100000) {
    return Run([&]() -> io::Task<absl::StatusOr<store::ObjectInfo>> {
      OL_CO_ASSIGN_OR_RETURN(auto w, co_await store_->CreateObject(b, k, o));
      for (size_t at = 0; at < data.size(); at += chunk) {
        const size_t n = std::min(chunk, data.size() - at);
        OL_CO_RETURN_IF_ERROR(co_await w->Write(Bytes(data).subspan(at, n)));
      }
      co_return co_await w->Commit();
    });
  }

  absl::StatusOr<std::string> Get(const std::string& b, const std::string& k,
                                  store::GetOptions o = {}) {
    return Run([&]() -> io::Task<absl::StatusOr<std::string>> {
      OL_CO_ASSIGN_OR_RETURN(auto r, co_await store_->OpenObject(b, k, o));
      std::string out;
      while (true) {
        OL_CO_ASSIGN_OR_RETURN(absl::Span<const std::byte> chunk, co_await r->Next());
        if (chunk.empty()) break;
        out.append(reinterpret_cast<const char*>(chunk.data()), chunk.size());
      }
      co_return out;
    });
  }

  absl::StatusOr<store::ObjectInfo> Stat(const std::string& b, const std::string& k) {
    return Run([&] { return store_->StatObject(b, k, {}); });
  }
  absl::Status Delete(const std::string& b, const std::string& k) {
    return Run([&] { return store_->DeleteObject(b, k); });
  }
  absl::StatusOr<store::ListResult> List(const std::string& b, store::ListOptions o) {
    return Run([&] { return store_->ListObjects(b, o); });
  }
  absl::StatusOr<store::HealResult> Heal(const std::string& b = "", const std::string& p = "") {
    return Run([&] { return store_->Heal(b, p); });
  }
  absl::StatusOr<store::HealResult> Drain() {
    return Run([&] { return store_->DrainHealQueue(); });
  }
  absl::StatusOr<store::ObjectInfo> PutPart(const std::string& b, const std::string& k,
                                            const std::string& id, int n,
                                            const std::string& data) {
    return Run([&]() -> io::Task<absl::StatusOr<store::ObjectInfo>> {
      OL_CO_ASSIGN_OR_RETURN(auto w, co_await store_->UploadPart(b, k, id, n,
                                                                 static_cast<int64_t>(data.size())));
      OL_CO_RETURN_IF_ERROR(co_await w->Write(Bytes(data)));
      co_return co_await w->Commit();
    });
  }

 private:
  TempDir dir_;
  int count_;
  std::vector<std::string> paths_;
  std::vector<std::unique_ptr<DriveFaults>> faults_;
  store::StoreOptions options_;
  std::unique_ptr<io::Runtime> rt_;
  std::unique_ptr<store::Store> store_;
};

}  // namespace openlake::testing

// Streaming an object (or a multipart part) in (docs/object-store.md, "Write path").
//
// The body is copied into a window of k × block_size bytes; a full window is hashed (MD5, for
// the ETag), encoded into m parity shards, each of its k + m shard blocks checksummed (CRC-64)
// and written to its drive's staging file at once, all drives in parallel, without waiting:
// the caller fills the next window while the drives write. `window_depth` windows rotate; a
// window is reused only after its writes have completed. A drive whose write fails is dropped
// from this object (and queued for healing); fewer than a write quorum left fails the write.
// Small objects (no full window, at most inline_threshold bytes) never touch a data file: their
// shards go into the metadata.

#include <cstring>
#include <tuple>

#include "common/digest.h"
#include "store/buffer_pool.h"
#include "store/engine.h"
#include "store/errors.h"
#include "store/names.h"

#include "openlake/checksum.h"
#include "openlake/io/buffer.h"
#include "openlake/log.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::store {
namespace {

// Windows smaller than this are hashed in place (posting costs more than hashing them).
constexpr uint64_t kHashOffloadMin = 256 << 10;

using Md5 = ::openlake::Digest;

struct Window {
  io::AlignedBuffer data;    // k × block_size: shard i at i × L
  io::AlignedBuffer parity;  // m × parity_stride: parity j at j × parity_stride
  uint64_t parity_stride = 0;
  std::unique_ptr<io::IoBatch> batch;
  std::vector<int> slot_pos;  // position written by each batch slot
  uint32_t shard_len = 0;
  bool in_flight = false;
};

// Everything a writer owns, kept apart so that a writer destroyed with writes in flight can
// hand it to a clean-up coroutine that waits for them.
struct WriterState {
  ~WriterState() {
    for (Window& w : windows) {
      BufferPool::Give(std::move(w.data));
      BufferPool::Give(std::move(w.parity));
    }
  }

  Engine* e = nullptr;
  WriteTarget target;
  int64_t expected = -1;
  uint32_t k = 0, m = 0, n = 0, block = 0;
  const ec::Codec* codec = nullptr;  // RS(k + m)
  uint64_t window_bytes = 0;
  WriteResult result;
  std::vector<std::unique_ptr<FileHandle>> files;  // per position; null when not writing
  std::vector<bool> failed;                        // per position
  std::vector<Window> windows;
  size_t cur = 0;
  uint64_t fill = 0;
  uint64_t blocks = 0;
  bool files_opened = false;
  bool committed = false;
  Md5 md5{Digest::kMd5};
  bool hash_offloaded = false;  // some window's MD5 was handed to another reactor
  int full = 0;                 // drives dropped for want of room (ENOSPC, EDQUOT)
  absl::Status error;
};

// Buffers from the thread's pool, whose pages an earlier object faulted in; those of a small
// object, below the pool's smallest, from the heap, which recycles them as well.
io::AlignedBuffer WindowBuffer(size_t bytes) {
  if (bytes < BufferPool::kSmallest) return io::AlignedBuffer(bytes);
  return BufferPool::Take(bytes);
}

int Usable(const WriterState& st) {
  int n = 0;
  for (uint32_t p = 0; p < st.n; ++p) n += st.failed[p] ? 0 : 1;
  return n;
}

void DropDrive(WriterState& st, uint32_t p, const absl::Status& why) {
  if (st.failed[p]) return;
  st.failed[p] = true;
  if (absl::IsResourceExhausted(why)) ++st.full;
  // A drive that went offline is not counted again for each write that finds it so.
  if (st.e->api(st.target.set, static_cast<int>(p)) != nullptr) {
    st.e->CountDriveError(st.target.set, static_cast<int>(p));
  }
  st.files[p].reset();
  OL_LOG_EVERY_N_SEC(kWarning, 5) << "store: writing " << st.target.bucket << "/"
                                  << st.target.key << ": drive "
                                  << st.e->drive(st.target.set, static_cast<int>(p)).path
                                  << " dropped: " << why;
}

absl::Status QuorumCheck(WriterState& st) {
  const int quorum = st.e->QuorumOf(st.k, st.m);
  if (Usable(st) >= quorum) return absl::OkStatus();
  if (st.full > 0) {
    return Error(ErrorKind::kStorageFull,
                 StrCat(st.full, " drives are full; only ", Usable(st), " of ", st.n,
                        " could take the write, ", quorum, " needed"));
  }
  return Error(ErrorKind::kInsufficientDrives,
               StrCat("only ", Usable(st), " of ", st.n, " drives could take the write; ",
                      quorum, " needed"));
}

// Waits for a window's writes and drops the drives that failed them.
io::Task<absl::Status> Reap(WriterState& st, Window& w) {
  if (!w.in_flight) co_return absl::OkStatus();
  io::IoBatch& batch = *w.batch;
  co_await batch;
  w.in_flight = false;
  for (size_t i = 0; i < w.batch->size(); ++i) {
    if (w.slot_pos[i] < 0) continue;  // the window's MD5
    const int32_t res = w.batch->result(i);
    if (res != static_cast<int32_t>(w.shard_len)) {
      // A regular file written short has run out of room (the next write would say ENOSPC).
      DropDrive(st, static_cast<uint32_t>(w.slot_pos[i]),
                res < 0 ? ErrnoStatus(res, "shard write")
                        : absl::ResourceExhaustedError("short shard write: the drive is full"));
    }
  }
  w.batch->Clear();
  w.slot_pos.clear();
  co_return QuorumCheck(st);
}

// Makes the staging folder and opens the shard file on one drive.
io::Task<absl::StatusOr<std::unique_ptr<FileHandle>>> OpenShard(DriveApi* f, std::string dir,
                                                                std::string file) {
  std::string from(kTmpDir);
  OL_CO_RETURN_IF_ERROR(co_await f->MakeDirs(dir, from));
  std::string path = StrCat(dir, "/", file);
  absl::StatusOr<std::unique_ptr<FileHandle>> h = co_await f->OpenFile(path, OpenMode::kCreate);
  co_return h;
}

io::Task<absl::Status> OpenFiles(WriterState& st) {
  st.files_opened = true;
  std::vector<io::Task<absl::StatusOr<std::unique_ptr<FileHandle>>>> opens;
  std::vector<uint32_t> who;
  for (uint32_t p = 0; p < st.n; ++p) {
    if (st.failed[p]) continue;
    DriveApi* f = st.e->api(st.target.set, static_cast<int>(p));
    if (f == nullptr) {
      DropDrive(st, p, absl::UnavailableError("offline"));
      continue;
    }
    opens.push_back(OpenShard(f, st.result.staged_dir, st.result.file_name));
    who.push_back(p);
  }
  std::vector<absl::StatusOr<std::unique_ptr<FileHandle>>> opened =
      co_await io::WhenAll(std::move(opens));
  for (size_t i = 0; i < opened.size(); ++i) {
    if (opened[i].ok()) {
      st.files[who[i]] = *std::move(opened[i]);
    } else {
      DropDrive(st, who[i], opened[i].status());
    }
  }
  co_return QuorumCheck(st);
}

// Hashes `len` bytes of window `w` for the ETag. MD5 is serial and about as fast as the disk, so
// where the runtime has another reactor the hash runs there (sent as messages, which run in the
// order they were sent, so the updates do too), while this one encodes, checksums and writes: it
// is one more operation of the window's batch, which completes back here by a message, and the
// window is not reused before it is done.
void HashWindow(WriterState& st, Window& w, const std::byte* data, uint64_t len) {
  if (!st.e->options().etag_md5) return;  // the ETag comes from the CRC-64s (CrcEtag)
  io::Reactor& r = *io::Reactor::Current();
  io::Runtime& rt = r.runtime();
  // Once one window went to the helper, all later ones follow it there: updates stay in order.
  if (rt.size() < 2 || (len < kHashOffloadMin && !st.hash_offloaded)) {
    st.md5.Update(data, len);
    return;
  }
  st.hash_offloaded = true;
  const unsigned origin = r.id();
  const unsigned helper = (origin + 1) % rt.size();
  Md5* md5 = &st.md5;
  w.slot_pos.push_back(-1);
  w.batch->Add([&](io::Completion* c) {
    r.SendTo(helper, [md5, data, len, origin, c] {
      md5->Update(data, len);
      io::Reactor::Current()->SendTo(origin, [c] { c->Complete(0, 0); });
    });
  });
}

// The ETag of an object written with StoreOptions::etag_md5 off: the MD5 of its size and of
// its data shards' block CRC-64s in shard order (so it does not depend on where the shards
// went), 16 bytes like an MD5.
std::string CrcEtag(const WriterState& st) {
  Md5 h(Digest::kMd5);
  const uint64_t size = st.result.size;
  h.Update(&size, sizeof(size));
  for (uint32_t shard = 0; shard < st.k; ++shard) {
    for (uint32_t p = 0; p < st.n; ++p) {
      if (ShardAt(st.target.rotation, p, st.n) != shard) continue;
      const auto& crcs = st.result.crcs[p];
      h.Update(crcs.data(), crcs.size() * sizeof(uint64_t));
    }
  }
  return h.Final();
}

// Encodes the current window (`len` bytes of body) and starts its shard writes.
io::Task<absl::Status> FlushWindow(WriterState& st, uint64_t len) {
  Window& w = st.windows[st.cur];
  const uint32_t L = static_cast<uint32_t>(
      ShardBlockLen(len, 0, st.k, st.block, /*inline_data=*/false));
  w.shard_len = L;
  std::byte* data = w.data.data();
  std::memset(data + len, 0, st.k * static_cast<uint64_t>(L) - len);
  if (!st.files_opened) OL_CO_RETURN_IF_ERROR(co_await OpenFiles(st));
  // From here to `in_flight` nothing returns early: the hash may already be running elsewhere.
  HashWindow(st, w, data, len);
  const uint8_t* dptr[ec::kMaxShards];
  uint8_t* pptr[ec::kMaxShards];
  for (uint32_t i = 0; i < st.k; ++i) dptr[i] = reinterpret_cast<uint8_t*>(data) + i * L;
  for (uint32_t j = 0; j < st.m; ++j) {
    pptr[j] = reinterpret_cast<uint8_t*>(w.parity.data()) + j * w.parity_stride;
  }
  if (st.m > 0) st.codec->Encode(L, dptr, pptr);
  io::Reactor& r = *io::Reactor::Current();
  const uint64_t offset = st.blocks * st.block;
  for (uint32_t p = 0; p < st.n; ++p) {
    const uint32_t shard = ShardAt(st.target.rotation, p, st.n);
    const uint8_t* src = shard < st.k ? dptr[shard] : pptr[shard - st.k];
    st.result.crcs[p].push_back(Crc64(src, L));
    if (st.failed[p]) continue;
    FileHandle* fh = st.files[p].get();
    w.slot_pos.push_back(static_cast<int>(p));
    w.batch->Add([&](io::Completion* c) { fh->Write(r, src, L, offset, c); });
  }
  w.in_flight = true;
  ++st.blocks;
  st.cur = (st.cur + 1) % st.windows.size();
  st.fill = 0;
  // The next window to fill must be free.
  co_return co_await Reap(st, st.windows[st.cur]);
}

// Waits for everything in flight, then trashes the staging folders. Counted as background
// work of the engine (BackgroundStarted was called by the spawner).
io::Task<void> DiscardState(std::unique_ptr<WriterState> st) {
  for (Window& w : st->windows) {
    io::IoBatch& batch = *w.batch;
    if (w.in_flight) co_await batch;
    w.in_flight = false;
  }
  st->files.clear();
  if (st->files_opened) st->e->DiscardStaging(st->target.set, st->result.staged_dir);
  st->e->BackgroundDone();
}

class EcWriter final : public ObjectWriter {
 public:
  explicit EcWriter(std::unique_ptr<WriterState> st) : st_(std::move(st)) {}

  ~EcWriter() override {
    if (!st_ || st_->committed) return;
    bool busy = st_->files_opened;
    for (const Window& w : st_->windows) busy = busy || w.in_flight;
    if (!busy) return;
    if (io::Reactor::Current() != nullptr) {
      st_->e->BackgroundStarted();
      io::Spawn(DiscardState(std::move(st_)));
    } else {
      // Not on a reactor (nothing can be in flight then): staging is swept at the next start.
      st_.release();  // in-flight buffers must not be freed; this only happens on misuse
    }
  }

  uint64_t bytes_written() const override { return st_->result.size; }

  // Kept in the target's user metadata: CommitPut stores it with the object, CommitPart with
  // the part.
  void SetMeta(std::string name, std::string value) override {
    st_->target.options.user_meta[std::move(name)] = std::move(value);
  }

  io::Task<absl::Status> Write(absl::Span<const std::byte> data) override {
    WriterState& st = *st_;
    if (!st.error.ok()) co_return st.error;
    if (st.committed) co_return absl::FailedPreconditionError("write after commit");
    const uint64_t limit = st.e->options().max_part_size;
    if (st.result.size + data.size() > limit ||
        (st.expected >= 0 && st.result.size + data.size() > static_cast<uint64_t>(st.expected))) {
      st.error = Error(ErrorKind::kEntityTooLarge,
                       st.expected >= 0 && st.result.size + data.size() <= limit
                           ? StrCat("body longer than the declared ", st.expected, " bytes")
                           : StrCat("object larger than the limit of ", limit, " bytes"));
      co_return st.error;
    }
    while (!data.empty()) {
      Window& w = st.windows[st.cur];
      const uint64_t n = std::min<uint64_t>(data.size(), st.window_bytes - st.fill);
      std::memcpy(w.data.data() + st.fill, data.data(), n);
      st.fill += n;
      st.result.size += n;
      data = data.subspan(n);
      if (st.fill == st.window_bytes) {
        absl::Status s = co_await FlushWindow(st, st.fill);
        if (!s.ok()) {
          st.error = s;
          co_return s;
        }
      }
    }
    co_return absl::OkStatus();
  }

  io::Task<absl::StatusOr<ObjectInfo>> Commit() override {
    WriterState& st = *st_;
    if (!st.error.ok()) co_return st.error;
    if (st.committed) co_return absl::FailedPreconditionError("already committed");
    if (st.expected >= 0 && st.result.size != static_cast<uint64_t>(st.expected)) {
      st.error = absl::InvalidArgumentError(StrCat("body ended after ", st.result.size,
                                                   " of the declared ", st.expected, " bytes"));
      co_return st.error;
    }
    const bool is_part = !st.target.upload_id.empty();
    WriteResult& res = st.result;
    if (!is_part && !st.files_opened && res.size <= st.e->options().inline_threshold) {
      // Inline: encode the one window straight into per-drive shards.
      Window& w = st.windows[st.cur];
      const uint64_t L = ShardBlockLen(res.size, 0, st.k, st.block, /*inline_data=*/true);
      std::byte* data = w.data.data();
      std::memset(data + res.size, 0, st.k * L - res.size);
      st.md5.Update(data, res.size);
      std::vector<std::string> shards(st.k + st.m, std::string(L, '\0'));
      for (uint32_t i = 0; i < st.k; ++i) std::memcpy(shards[i].data(), data + i * L, L);
      if (st.m > 0 && L > 0) {
        const uint8_t* dptr[ec::kMaxShards];
        uint8_t* pptr[ec::kMaxShards];
        for (uint32_t i = 0; i < st.k; ++i) dptr[i] = reinterpret_cast<const uint8_t*>(shards[i].data());
        for (uint32_t j = 0; j < st.m; ++j) pptr[j] = reinterpret_cast<uint8_t*>(shards[st.k + j].data());
        st.codec->Encode(L, dptr, pptr);
      }
      res.inline_data = true;
      for (uint32_t p = 0; p < st.n; ++p) {
        const uint32_t shard = ShardAt(st.target.rotation, p, st.n);
        res.inline_shard[p] = shards[shard];
        if (L > 0) res.crcs[p].push_back(Crc64(shards[shard].data(), L));
        res.wrote[p] = !st.failed[p];
      }
    } else {
      if (st.fill > 0) {
        absl::Status s = co_await FlushWindow(st, st.fill);
        if (!s.ok()) {
          st.error = s;
          co_return s;
        }
      }
      for (Window& w : st.windows) {
        absl::Status s = co_await Reap(st, w);
        if (!s.ok()) {
          st.error = s;
          co_return s;
        }
      }
      // Durable before anything points at it.
      if (st.files_opened) {
        io::Reactor& r = *io::Reactor::Current();
        io::IoBatch syncs(st.n);
        std::vector<uint32_t> who;
        for (uint32_t p = 0; p < st.n; ++p) {
          if (st.failed[p] || !st.files[p]) continue;
          FileHandle* fh = st.files[p].get();
          who.push_back(p);
          syncs.Add([&](io::Completion* c) { fh->Sync(r, c); });
        }
        co_await syncs;
        for (size_t i = 0; i < who.size(); ++i) {
          if (syncs.result(i) < 0) DropDrive(st, who[i], ErrnoStatus(syncs.result(i), "fdatasync"));
        }
        st.files.clear();
        st.files.resize(st.n);
        // The staged folder too: its files must still have their names after a power loss,
        // before the commit renames the folder into place. Not a part's: its commit moves the
        // file out of the staged folder into the upload's, and syncs that one.
        std::vector<io::Task<absl::Status>> dir_syncs;
        std::vector<uint32_t> dir_who;
        for (uint32_t p = 0; p < st.n && !is_part; ++p) {
          DriveApi* f = st.failed[p] ? nullptr : st.e->api(st.target.set, static_cast<int>(p));
          if (f == nullptr) continue;
          dir_who.push_back(p);
          dir_syncs.push_back(f->SyncDir(st.result.staged_dir));
        }
        std::vector<absl::Status> dir_done = co_await io::WhenAll(std::move(dir_syncs));
        for (size_t i = 0; i < dir_done.size(); ++i) {
          if (!dir_done[i].ok()) DropDrive(st, dir_who[i], dir_done[i]);
        }
        absl::Status q = QuorumCheck(st);
        if (!q.ok()) {
          st.error = q;
          co_return q;
        }
      }
      for (uint32_t p = 0; p < st.n; ++p) res.wrote[p] = !st.failed[p];
    }
    res.md5 = res.inline_data || st.e->options().etag_md5 ? st.md5.Final() : CrcEtag(st);
    res.mod_time_ns = NowNs();
    // (No co_await inside ?: — GCC 12 destroys such temporaries twice.)
    absl::StatusOr<ObjectInfo> info;
    if (is_part) {
      info = co_await st.e->CommitPart(st.target, res);
    } else {
      info = co_await st.e->CommitPut(st.target, res);
    }
    if (!info.ok()) {
      st.error = info.status();
      co_return info;
    }
    st.committed = true;
    co_return info;
  }

 private:
  std::unique_ptr<WriterState> st_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ObjectWriter>> Engine::NewWriter(WriteTarget t, int64_t size) {
  if (size >= 0 && static_cast<uint64_t>(size) > opts_.max_part_size) {
    return Error(ErrorKind::kEntityTooLarge, StrCat(size, " bytes is more than the limit of ",
                                                    opts_.max_part_size));
  }
  if (t.k == 0) std::tie(t.k, t.m) = LayoutFor(false);
  auto st = std::make_unique<WriterState>();
  st->e = this;
  st->target = std::move(t);
  st->expected = size;
  st->k = st->target.k;
  st->m = st->target.m;
  st->codec = CodecFor(st->k, st->m);
  if (st->codec == nullptr) {
    return absl::FailedPreconditionError(
        StrCat("store: no codec for RS(", st->k, "+", st->m, ")"));
  }
  st->n = static_cast<uint32_t>(n_);
  st->block = opts_.block_size;
  st->window_bytes = static_cast<uint64_t>(st->k) * st->block;
  st->failed.assign(st->n, false);
  st->files.resize(st->n);
  for (uint32_t p = 0; p < st->n; ++p) {
    if (api(st->target.set, static_cast<int>(p)) == nullptr) st->failed[p] = true;
  }
  OL_RETURN_IF_ERROR(QuorumCheck(*st));
  WriteResult& r = st->result;
  r.version_id = NewVersionId();
  r.staged_dir = StrCat(kTmpDir, "/", Hex(r.version_id));
  r.file_name = st->target.upload_id.empty() ? "part.1"
                                             : StrCat("part.", st->target.part_number);
  r.wrote.assign(st->n, false);
  r.inline_shard.assign(st->n, std::string());
  r.crcs.assign(st->n, {});
  // A body known to be smaller than a window needs one buffer of its size (plus a page, so
  // that it never fills up and flushes before Commit decides between inline and files).
  const size_t depth = static_cast<size_t>(opts_.window_depth);
  const bool small = size >= 0 && static_cast<uint64_t>(size) < st->window_bytes;
  const uint64_t bytes =
      small ? st->k * ShardBlockLen(static_cast<uint64_t>(size), 0, st->k, st->block, false) +
                  io::kDirectAlignment
            : st->window_bytes;
  st->windows.resize(small ? 1 : depth);
  for (Window& w : st->windows) {
    w.parity_stride =
        small ? ShardBlockLen(static_cast<uint64_t>(size), 0, st->k, st->block, false) : st->block;
    const size_t parity_bytes = std::max<size_t>(st->m * w.parity_stride, 1);
    w.data = WindowBuffer(bytes);
    w.parity = WindowBuffer(parity_bytes);
    if (!w.data || !w.parity) {
      return absl::ResourceExhaustedError("store: out of memory for a window");
    }
    w.batch = std::make_unique<io::IoBatch>(st->n + 1);  // the shard writes and the hash
    w.slot_pos.reserve(st->n);
  }
  st->window_bytes = bytes;  // a pooled buffer may be larger
  return std::unique_ptr<ObjectWriter>(new EcWriter(std::move(st)));
}

namespace {

io::Task<void> DiscardDetached(Engine* e, int set, std::string dir) {
  co_await e->TrashOnSet(set, std::move(dir));
  e->BackgroundDone();
}

}  // namespace

void Engine::DiscardStaging(int set, const std::string& staged_dir) {
  BackgroundStarted();
  io::Spawn(DiscardDetached(this, set, staged_dir));
}

io::Task<void> Engine::TrashOnSet(int set, std::string path) {
  std::vector<io::Task<absl::Status>> trashes;
  for (int p = 0; p < n_; ++p) {
    DriveApi* f = api(set, p);
    if (f != nullptr) trashes.push_back(f->Trash(path));
  }
  (void)co_await io::WhenAll(std::move(trashes));
}

io::Task<absl::StatusOr<std::unique_ptr<ObjectWriter>>> Engine::CreateObject(std::string bucket,
                                                                              std::string key,
                                                                              PutOptions options) {
  OL_CO_RETURN_IF_ERROR(ValidateBucketName(bucket));
  OL_CO_RETURN_IF_ERROR(ValidateObjectKey(key));
  WriteTarget t;
  const Placement pl = PlaceObject(bucket, key);
  t.set = static_cast<int>(pl.set);
  t.rotation = pl.rotation;
  std::tie(t.k, t.m) = LayoutFor(options.reduced_redundancy);
  const bool exists = co_await BucketExistsOnSet(t.set, bucket);
  if (!exists) {
    co_return Error(ErrorKind::kNoSuchBucket, StrCat("bucket \"", bucket, "\" does not exist"));
  }
  if (Conditional(options.when)) {
    // Checked first here, so that a write bound to fail sends no byte to the drives; again,
    // atomically, as it commits (CommitPut).
    Resolved cur = co_await ReadAndResolve(t.set, bucket, key);
    const absl::Status held = CheckWriteConditions(cur, options.when);
    if (!held.ok()) co_return held;
  }
  const int64_t size = options.size;
  t.bucket = std::move(bucket);
  t.key = std::move(key);
  t.options = std::move(options);
  co_return NewWriter(std::move(t), size);
}

io::Task<absl::StatusOr<ObjectInfo>> Engine::CommitPut(const WriteTarget& t, WriteResult w) {
  pb::ObjectVersion base;
  base.set_version_id(w.version_id);
  base.set_mod_time_ns(w.mod_time_ns);
  base.set_size(w.size);
  base.set_etag(Hex(w.md5));
  base.set_content_type(t.options.content_type);
  for (const auto& [name, value] : t.options.user_meta) (*base.mutable_user_meta())[name] = value;
  base.set_data_shards(t.k);
  base.set_parity_shards(t.m);
  base.set_block_size(opts_.block_size);
  base.set_rotation(t.rotation);
  base.set_inline_data(w.inline_data);
  base.set_versioned(t.options.versioning == Versioning::kEnabled);
  pb::Part* part = base.add_parts();
  part->set_number(1);
  part->set_size(w.size);
  part->set_etag(base.etag());
  part->set_mod_time_ns(w.mod_time_ns);
  part->set_file(w.inline_data ? "" : w.file_name);

  std::vector<DriveCommit> commits(static_cast<size_t>(n_));
  for (int p = 0; p < n_; ++p) {
    DriveCommit& dc = commits[static_cast<size_t>(p)];
    dc.use = w.wrote[static_cast<size_t>(p)];
    if (!dc.use) continue;
    dc.version = base;
    dc.version.set_shard_index(ShardAt(t.rotation, static_cast<uint32_t>(p),
                                       static_cast<uint32_t>(n_)));
    for (uint64_t c : w.crcs[static_cast<size_t>(p)]) dc.version.mutable_parts(0)->add_block_crc(c);
    if (w.inline_data) {
      dc.version.set_inline_shard(w.inline_shard[static_cast<size_t>(p)]);
    } else {
      dc.staged_dir = w.staged_dir;
    }
  }
  absl::Status s;
  {
    std::string lock_name = StrCat("o:", t.bucket, "/", t.key);
    absl::StatusOr<NsLock> lock = co_await Lock(lock_name, true);
    s = lock.status();
    if (s.ok() && Conditional(t.options.when)) {
      Resolved cur = co_await ReadAndResolve(t.set, t.bucket, t.key);
      s = CheckWriteConditions(cur, t.options.when);
      const ErrorKind kind = ErrorKindOf(s);
      if (kind == ErrorKind::kPreconditionFailed || kind == ErrorKind::kNoSuchKey) {
        // It held when the write began: another write got in between.
        s = Error(ErrorKind::kConditionalConflict,
                  StrCat("a conflicting write to \"", t.key, "\" committed first"));
      }
    }
    if (s.ok()) s = StillHeld(*lock, t.key);
    if (s.ok()) {
      inline_cache_.Invalidate(StrCat(t.bucket, "/", t.key));
      int64_t mod_time = 0;
      s = co_await CommitVersion(t.set, t.bucket, t.key, std::move(commits),
                                 QuorumOf(t.k, t.m), &mod_time);
      base.set_mod_time_ns(mod_time);
    }
  }
  if (!s.ok()) {
    if (!w.inline_data) DiscardStaging(t.set, w.staged_dir);
    co_return s;
  }
  co_return ToObjectInfo(t.bucket, t.key, base);
}

}  // namespace openlake::store

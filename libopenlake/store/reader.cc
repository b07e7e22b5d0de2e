// Streaming an object out (docs/object-store.md, "Read path"). Block by block: read the k data
// shards of the block from their drives in parallel, check each against its CRC-64, and when
// one is missing, unreadable or damaged, read parity shards instead and reconstruct. The read
// returns correct bytes or an error, never damaged bytes; every shard found wanting queues the
// object for healing. The next blocks (kReadAhead) are read ahead while the caller consumes
// this one.
#include <algorithm>
#include <cstring>
#include <vector>

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

// Blocks read ahead of the one the caller consumes: each keeps the k data shards' reads of a
// block in flight while the connection sends. One left the drives idle between a block's
// reads and the next (a stream's depth was the k reads of one block).
constexpr size_t kReadAhead = 2;

struct BlockBuf {
  io::AlignedBuffer data;    // k × cap (the largest shard block); shard s at s × L
  io::AlignedBuffer parity;  // m × cap, taken when a block first needs parity; j at j × cap
  int part = -1;
  uint64_t block = 0;
  uint64_t len = 0;  // object bytes in this block
  bool loading = false;
  bool ready = false;
  absl::Status status;
  std::coroutine_handle<> waiter = nullptr;  // Next, waiting for this block to land
};

class ReaderCore : public std::enable_shared_from_this<ReaderCore> {
 public:
  ReaderCore(Engine* e, int set, std::string bucket, std::string key, ObjectInfo info,
           pb::ObjectVersion v, std::vector<std::optional<pb::ObjectVersion>> copies,
           uint64_t offset, uint64_t length)
      : e_(e),
        set_(set),
        bucket_(std::move(bucket)),
        key_(std::move(key)),
        info_(std::move(info)),
        v_(std::move(v)),
        copies_(std::move(copies)),
        offset_(offset),
        length_(length),
        pos_(offset),
        end_(offset + length) {
    k_ = v_.data_shards();
    m_ = v_.parity_shards();
    n_ = k_ + m_;
    codec_ = e_->CodecFor(k_, m_);
    block_ = v_.block_size();
    uint64_t at = 0;
    for (const pb::Part& p : v_.parts()) {
      part_start_.push_back(at);
      at += p.size();
    }
    files_.resize(static_cast<size_t>(v_.parts_size()));
    opening_.assign(static_cast<size_t>(v_.parts_size()), false);
    dead_.assign(n_, false);
  }

  const ObjectInfo& info() const { return info_; }
  uint64_t offset() const { return offset_; }
  uint64_t length() const { return length_; }

  // Opens the shard files of `part` on every drive holding the version (under the caller's
  // shared lock for the first part; later parts are opened when reached).
  // A read-ahead that needs the part while another load opens it waits for that one.
  io::Task<void> OpenPart(int part) {
    const auto i = static_cast<size_t>(part);
    while (opening_[i]) co_await io::Yield();
    if (!files_[i].empty()) co_return;
    opening_[i] = true;
    const std::string dir = StrCat(ObjectDir(bucket_, key_), "/", DataDirOf(v_));
    std::vector<io::Task<absl::StatusOr<std::unique_ptr<FileHandle>>>> opens;
    std::vector<uint32_t> who;
    for (uint32_t p = 0; p < n_; ++p) {
      if (!copies_[p] || dead_[p]) continue;
      DriveApi* f = e_->api(set_, static_cast<int>(p));
      if (f == nullptr) continue;
      std::string path = StrCat(dir, "/", v_.parts(part).file());
      opens.push_back(f->OpenFile(std::move(path), OpenMode::kRead));
      who.push_back(p);
    }
    std::vector<absl::StatusOr<std::unique_ptr<FileHandle>>> opened =
        co_await io::WhenAll(std::move(opens));
    std::vector<std::unique_ptr<FileHandle>> files(n_);
    for (size_t j = 0; j < opened.size(); ++j) {
      if (opened[j].ok()) {
        files[who[j]] = *std::move(opened[j]);
      } else {
        e_->QueueHeal(bucket_, key_);
      }
    }
    files_[i] = std::move(files);
    opening_[i] = false;
  }

  absl::Status LoadInline() {
    const uint64_t size = v_.size();
    const uint64_t L = ShardBlockLen(size, 0, k_, block_, /*inline_data=*/true);
    inline_.assign(k_ * L + 1, '\0');
    if (size == 0) return absl::OkStatus();
    std::vector<std::string> shards(n_, std::string(L, '\0'));
    std::vector<bool> present(n_, false);
    int good = 0;
    for (uint32_t p = 0; p < n_; ++p) {
      if (!copies_[p]) continue;
      const pb::ObjectVersion& c = *copies_[p];
      const uint32_t s = c.shard_index();
      if (s >= n_ || present[s] || c.inline_shard().size() != L || c.parts_size() < 1 ||
          c.parts(0).block_crc_size() < 1 ||
          Crc64(c.inline_shard().data(), L) != c.parts(0).block_crc(0)) {
        e_->CountDriveError(set_, static_cast<int>(p));
        e_->QueueHeal(bucket_, key_);
        continue;
      }
      shards[s] = c.inline_shard();
      present[s] = true;
      ++good;
    }
    if (good < static_cast<int>(k_)) {
      return Error(ErrorKind::kCorrupt, StrCat(bucket_, "/", key_, ": only ", good, " of ", k_,
                                               " needed shards are intact"));
    }
    uint8_t* ptrs[ec::kMaxShards];
    for (uint32_t s = 0; s < n_; ++s) ptrs[s] = reinterpret_cast<uint8_t*>(shards[s].data());
    bool all_data = true;
    for (uint32_t s = 0; s < k_; ++s) all_data = all_data && present[s];
    if (!all_data) {
      std::unique_ptr<bool[]> pr(new bool[n_]);
      for (uint32_t s = 0; s < n_; ++s) pr[s] = present[s];
      OL_RETURN_IF_ERROR(CheckCodec());
      OL_RETURN_IF_ERROR(codec_->Reconstruct(L, ptrs, absl::MakeConstSpan(pr.get(), n_)));
    }
    for (uint32_t s = 0; s < k_; ++s) std::memcpy(inline_.data() + s * L, shards[s].data(), L);
    return absl::OkStatus();
  }

  // The whole object's bytes after LoadInline.
  std::string_view inline_bytes() const { return std::string_view(inline_).substr(0, v_.size()); }

  io::Task<absl::StatusOr<absl::Span<const std::byte>>> Next() {
    if (pos_ >= end_) co_return absl::Span<const std::byte>();
    if (v_.inline_data()) {
      auto out = absl::MakeConstSpan(reinterpret_cast<const std::byte*>(inline_.data()) + pos_,
                                     end_ - pos_);
      pos_ = end_;
      co_return out;
    }
    // Which part and block hold pos_.
    int part = 0;
    while (part + 1 < v_.parts_size() && part_start_[static_cast<size_t>(part + 1)] <= pos_) ++part;
    const uint64_t window = static_cast<uint64_t>(k_) * block_;
    const uint64_t in_part = pos_ - part_start_[static_cast<size_t>(part)];
    const uint64_t block = in_part / window;
    BlockBuf* cur = Find(part, block);
    if (cur == nullptr) {
      cur = Free(part, block);
      if (cur == nullptr) co_return absl::InternalError("store: reader has no idle buffer");
      co_await Load(*cur, part, block);
    } else if (cur->loading) {
      co_await Wait(*cur);
    }
    if (!cur->status.ok()) co_return cur->status;
    const uint64_t block_start = part_start_[static_cast<size_t>(part)] + block * window;
    const uint64_t n = std::min(block_start + cur->len - pos_, end_ - pos_);
    auto out = absl::MakeConstSpan(cur->data.data() + (pos_ - block_start), n);
    pos_ += n;
    // Read the next blocks ahead while the caller consumes this one: as many as there are
    // buffers besides this one, none past the read's end.
    int npart = part;
    uint64_t nblock = block;
    for (size_t ahead = 1; ahead < bufs_.size(); ++ahead) {
      ++nblock;
      if (nblock * window >= v_.parts(npart).size()) {
        ++npart;
        nblock = 0;
      }
      if (npart >= v_.parts_size() ||
          part_start_[static_cast<size_t>(npart)] + nblock * window >= end_) {
        break;
      }
      if (Find(npart, nblock) != nullptr) continue;
      BlockBuf* b = Free(part, block);
      if (b == nullptr) break;
      e_->BackgroundStarted();
      io::Spawn(LoadDetached(shared_from_this(), b, npart, nblock));
    }
    co_return out;
  }

  // Buffers as large as this version's largest shard block (a small object's is far below the
  // block size), and read-ahead ones only for the blocks there are to read ahead: fresh pages
  // cost a fault each, which on some machines takes longer than the read itself. Parity
  // buffers come when a block first needs one.
  bool InitBuffers() {
    uint64_t blocks = 0;
    for (const pb::Part& p : v_.parts()) {
      cap_ = std::max(cap_, ShardBlockLen(p.size(), 0, k_, block_, false));
      blocks += BlockCount(p.size(), k_, block_);
    }
    bufs_.resize(static_cast<size_t>(std::clamp<uint64_t>(blocks, 1, 1 + kReadAhead)));
    for (BlockBuf& b : bufs_) {
      b.data = BufferPool::Take(k_ * cap_);
      if (!b.data) return false;
    }
    return true;
  }

  ~ReaderCore() {
    for (BlockBuf& b : bufs_) {
      BufferPool::Give(std::move(b.data));
      BufferPool::Give(std::move(b.parity));
    }
  }

 private:
  BlockBuf* Find(int part, uint64_t block) {
    for (BlockBuf& b : bufs_) {
      if (b.part == part && b.block == block && (b.ready || b.loading)) return &b;
    }
    return nullptr;
  }
  // A buffer to load into, given that the caller is at (part, block): one never used, or one
  // whose block lies behind it (consumed); never one loading, the caller's own, or one read
  // ahead. Null when there is none.
  BlockBuf* Free(int part, uint64_t block) {
    for (BlockBuf& b : bufs_) {
      if (b.loading) continue;
      if (!b.ready || b.part < part || (b.part == part && b.block < block)) return &b;
    }
    return nullptr;
  }

  struct WaitFor {
    BlockBuf* b;
    bool await_ready() const noexcept { return !b->loading; }
    void await_suspend(std::coroutine_handle<> h) noexcept { b->waiter = h; }
    void await_resume() const noexcept {}
  };
  WaitFor Wait(BlockBuf& b) { return WaitFor{&b}; }

  // The read-ahead owns a reference: a reader dropped mid-flight stays alive until it lands.
  static io::Task<void> LoadDetached(std::shared_ptr<ReaderCore> self, BlockBuf* b, int part,
                                     uint64_t block) {
    co_await self->Load(*b, part, block);
    Engine* e = self->e_;
    if (b->waiter) std::exchange(b->waiter, nullptr).resume();
    e->BackgroundDone();
  }

  io::Task<void> Load(BlockBuf& b, int part, uint64_t block) {
    b.part = part;
    b.block = block;
    b.loading = true;
    b.ready = false;
    b.status = co_await Read(b, part, block);
    b.loading = false;
    b.ready = true;
  }

  // Where each shard of `b`'s block (L bytes each) goes: data shard s at s × L, parity j at
  // j × cap in the parity buffer (null while it has none).
  void PointAt(BlockBuf& b, uint32_t L, uint8_t** ptrs) const {
    for (uint32_t s = 0; s < n_; ++s) {
      if (s < k_) {
        ptrs[s] = reinterpret_cast<uint8_t*>(b.data.data()) + s * static_cast<uint64_t>(L);
      } else if (b.parity.data() != nullptr) {
        ptrs[s] = reinterpret_cast<uint8_t*>(b.parity.data()) + (s - k_) * cap_;
      } else {
        ptrs[s] = nullptr;
      }
    }
  }

  io::Task<absl::Status> Read(BlockBuf& b, int part, uint64_t block) {
    co_await OpenPart(part);
    auto& files = files_[static_cast<size_t>(part)];
    const pb::Part& pinfo = v_.parts(part);
    const uint64_t window = static_cast<uint64_t>(k_) * block_;
    b.len = std::min(window, pinfo.size() - block * window);
    const auto L = static_cast<uint32_t>(ShardBlockLen(pinfo.size(), block, k_, block_, false));
    const uint64_t off = block * block_;
    enum State : uint8_t { kUnread, kGood, kBad };
    std::vector<State> state(n_, kUnread);
    uint8_t* ptrs[ec::kMaxShards];
    PointAt(b, L, ptrs);
    io::Reactor& r = *io::Reactor::Current();
    int good = 0;
    while (good < static_cast<int>(k_)) {
      // The next shards to try: data shards first, then parity.
      std::vector<uint32_t> pick;
      for (uint32_t s = 0; s < n_ && good + static_cast<int>(pick.size()) < static_cast<int>(k_);
           ++s) {
        if (state[s] != kUnread) continue;
        const uint32_t p = ShardPosition(v_.rotation(), s, n_);
        if (!copies_[p] || dead_[p] || !files[p]) {
          state[s] = kBad;
          if (!copies_[p] || !files[p]) e_->QueueHeal(bucket_, key_);
          continue;
        }
        pick.push_back(s);
      }
      if (pick.empty()) break;
      if (pick.back() >= k_ && b.parity.data() == nullptr) {
        b.parity = BufferPool::Take(m_ * cap_);
        if (b.parity.data() == nullptr) {
          co_return absl::ResourceExhaustedError("store: out of memory for a read");
        }
        PointAt(b, L, ptrs);
      }
      io::IoBatch batch(pick.size());
      for (uint32_t s : pick) {
        FileHandle* fh = files[ShardPosition(v_.rotation(), s, n_)].get();
        uint8_t* dst = ptrs[s];
        batch.Add([&](io::Completion* c) { fh->Read(r, dst, L, off, c); });
      }
      co_await batch;
      for (size_t i = 0; i < pick.size(); ++i) {
        const uint32_t s = pick[i];
        const uint32_t p = ShardPosition(v_.rotation(), s, n_);
        const int32_t res = batch.result(i);
        const pb::Part& mine = copies_[p]->parts(part);
        if (res < 0) {
          dead_[p] = true;
          state[s] = kBad;
          OL_LOG_EVERY_N_SEC(kWarning, 5) << "store: reading " << bucket_ << "/" << key_
                                          << " on " << e_->drive(set_, static_cast<int>(p)).path
                                          << ": " << ErrnoStatus(res, "read");
        } else if (static_cast<uint32_t>(res) != L ||
                   block >= static_cast<uint64_t>(mine.block_crc_size()) ||
                   Crc64(ptrs[s], L) != mine.block_crc(static_cast<int>(block))) {
          state[s] = kBad;
          OL_LOG_EVERY_N_SEC(kWarning, 5)
              << "store: bitrot in " << bucket_ << "/" << key_ << " part " << pinfo.number()
              << " block " << block << " shard " << s << " on "
              << e_->drive(set_, static_cast<int>(p)).path << "; rebuilt from parity";
        } else {
          state[s] = kGood;
          ++good;
          continue;
        }
        e_->CountDriveError(set_, static_cast<int>(p));
        e_->QueueHeal(bucket_, key_);
      }
    }
    if (good < static_cast<int>(k_)) {
      co_return Error(ErrorKind::kCorrupt,
                      StrCat(bucket_, "/", key_, " part ", pinfo.number(), " block ", block,
                             ": only ", good, " of the ", k_, " needed shards are intact"));
    }
    bool all_data = true;
    for (uint32_t s = 0; s < k_; ++s) all_data = all_data && state[s] == kGood;
    if (!all_data) {
      std::unique_ptr<bool[]> present(new bool[n_]);
      for (uint32_t s = 0; s < n_; ++s) present[s] = state[s] == kGood;
      OL_CO_RETURN_IF_ERROR(CheckCodec());
      OL_CO_RETURN_IF_ERROR(
          codec_->Reconstruct(L, ptrs, absl::MakeConstSpan(present.get(), n_)));
    }
    co_return absl::OkStatus();
  }

 private:
  absl::Status CheckCodec() const {
    if (codec_ != nullptr) return absl::OkStatus();
    return Error(ErrorKind::kCorrupt, StrCat(bucket_, "/", key_, ": no codec for RS(", k_, "+",
                                             m_, ")"));
  }

  Engine* e_;
  int set_;
  std::string bucket_, key_;
  ObjectInfo info_;
  pb::ObjectVersion v_;
  std::vector<std::optional<pb::ObjectVersion>> copies_;
  uint64_t offset_, length_, pos_, end_;
  uint32_t k_ = 0, m_ = 0, n_ = 0, block_ = 0;
  uint64_t cap_ = 0;  // the largest shard block of any part (InitBuffers)
  const ec::Codec* codec_ = nullptr;  // RS(k + m); null for a layout there can be no codec of
  std::vector<uint64_t> part_start_;
  std::vector<std::vector<std::unique_ptr<FileHandle>>> files_;
  std::vector<bool> opening_;  // per part: OpenPart is at work on it
  std::vector<bool> dead_;
  std::vector<BlockBuf> bufs_;  // InitBuffers: the block being consumed and those read ahead
  std::string inline_;
};

// A small object served from the inline cache: no drive is touched.
class CachedReader final : public ObjectReader {
 public:
  CachedReader(std::shared_ptr<const InlineCache::Entry> e, uint64_t offset, uint64_t length)
      : e_(std::move(e)), offset_(offset), length_(length) {}
  const ObjectInfo& info() const override { return e_->info; }
  uint64_t offset() const override { return offset_; }
  uint64_t length() const override { return length_; }
  io::Task<absl::StatusOr<absl::Span<const std::byte>>> Next() override {
    if (done_ || length_ == 0) co_return absl::Span<const std::byte>();
    done_ = true;
    co_return absl::MakeConstSpan(reinterpret_cast<const std::byte*>(e_->data.data()) + offset_,
                                  length_);
  }

 private:
  std::shared_ptr<const InlineCache::Entry> e_;
  uint64_t offset_;
  uint64_t length_;
  bool done_ = false;
};

class EcReader final : public ObjectReader {
 public:
  explicit EcReader(std::shared_ptr<ReaderCore> core) : core_(std::move(core)) {}
  const ObjectInfo& info() const override { return core_->info(); }
  uint64_t offset() const override { return core_->offset(); }
  uint64_t length() const override { return core_->length(); }
  io::Task<absl::StatusOr<absl::Span<const std::byte>>> Next() override { return core_->Next(); }

 private:
  std::shared_ptr<ReaderCore> core_;
};

}  // namespace

io::Task<absl::StatusOr<std::unique_ptr<ObjectReader>>> Engine::OpenObject(std::string bucket,
                                                                            std::string key,
                                                                            GetOptions options) {
  OL_CO_RETURN_IF_ERROR(ValidateBucketName(bucket));
  OL_CO_RETURN_IF_ERROR(ValidateObjectKey(key));
  OL_CO_ASSIGN_OR_RETURN(std::optional<std::string> want,
                         ParseVersionId(options.conditions.version_id));
  std::string name = StrCat(bucket, "/", key);
  std::shared_ptr<const InlineCache::Entry> hit;
  if (!want) hit = inline_cache_.Find(name);  // the cache holds current versions only
  if (hit) {
    OL_CO_RETURN_IF_ERROR(CheckConditions(hit->info, options.conditions));
    uint64_t offset = 0, length = 0;
    OL_CO_RETURN_IF_ERROR(ResolveRange(hit->info.size, options.range, &offset, &length));
    co_return std::unique_ptr<ObjectReader>(new CachedReader(std::move(hit), offset, length));
  }
  const Placement pl = PlaceObject(bucket, key);
  const int set = static_cast<int>(pl.set);
  // Shared: a commit cannot swap the version between reading metadata and opening files.
  std::string lock_name = StrCat("o:", bucket, "/", key);
  OL_CO_ASSIGN_OR_RETURN(NsLock lock, co_await Lock(lock_name, false));
  Resolved r = co_await ResolveForRead(set, bucket, key, want);
  OL_CO_RETURN_IF_ERROR(r.status);
  ObjectInfo info = ToObjectInfo(bucket, key, r.version);
  info.is_latest = r.versions.front()->version_id() == r.version.version_id();
  OL_CO_RETURN_IF_ERROR(CheckConditions(info, options.conditions));
  uint64_t offset = 0, length = 0;
  OL_CO_RETURN_IF_ERROR(ResolveRange(info.size, options.range, &offset, &length));
  std::vector<std::optional<pb::ObjectVersion>> copies(static_cast<size_t>(n_));
  for (int p = 0; p < n_; ++p) {
    if (r.copy[static_cast<size_t>(p)] != nullptr) copies[static_cast<size_t>(p)] = *r.copy[static_cast<size_t>(p)];
  }
  auto core = std::make_shared<ReaderCore>(this, set, bucket, key, std::move(info), r.version,
                                           std::move(copies), offset, length);
  if (r.version.inline_data()) {
    OL_CO_RETURN_IF_ERROR(core->LoadInline());
    if (r.clean && info.is_latest) {  // every drive agrees: cache it (the lock is still held shared)
      auto entry = std::make_shared<InlineCache::Entry>();
      entry->info = core->info();
      entry->data = std::string(core->inline_bytes());
      inline_cache_.Insert(std::move(name), std::move(entry));
    }
  } else {
    if (!core->InitBuffers()) co_return absl::ResourceExhaustedError("store: out of memory for a read");
    // The part holding the first byte, opened while the lock holds the version in place.
    int part = 0;
    uint64_t at = 0;
    while (part + 1 < r.version.parts_size() && at + r.version.parts(part).size() <= offset) {
      at += r.version.parts(part).size();
      ++part;
    }
    if (r.version.parts_size() > 0) co_await core->OpenPart(part);
  }
  co_return std::unique_ptr<ObjectReader>(new EcReader(std::move(core)));
}

}  // namespace openlake::store

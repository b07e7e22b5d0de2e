// A drive's packed metadata records (pack.h).
#include "store/pack.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "absl/synchronization/mutex.h"

#include "store/meta.h"
#include "store/names.h"

#include "openlake/io/file.h"
#include "openlake/log.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::store {
namespace {

constexpr std::string_view kPackDir = ".openlake.sys/pack";

std::string IndexKey(std::string_view bucket, std::string_view key) {
  std::string out;
  out.reserve(bucket.size() + 1 + key.size());
  out.append(bucket);
  out.push_back('\0');
  out.append(key);
  return out;
}

// The first string after every string starting with `p` ("" when there is none).
std::string PrefixSuccessor(std::string p) {
  while (!p.empty()) {
    const auto c = static_cast<unsigned char>(p.back());
    if (c != 0xff) {
      p.back() = static_cast<char>(c + 1);
      return p;
    }
    p.pop_back();
  }
  return p;
}

absl::Status PWriteAll(int fd, std::string_view bytes, uint64_t at, const std::string& name) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = pwrite(fd, bytes.data() + done, bytes.size() - done,
                             static_cast<off_t>(at + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoStatus(n < 0 ? errno : EIO, StrCat("write ", name));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status PReadAll(int fd, char* dst, size_t len, uint64_t at, const std::string& name) {
  size_t done = 0;
  while (done < len) {
    const ssize_t n = pread(fd, dst + done, len - done, static_cast<off_t>(at + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, StrCat("read ", name));
    if (n == 0) return absl::DataLossError(StrCat(name, ": a packed record is cut short"));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Walks the records written back to back in `image`, calling `fn(offset, length, entry)` for
// each that checks out. One that does not but whose header gives a length inside the image (a
// torn write with later records after it, a damaged byte) is skipped and counted in `*skipped`.
// Returns where the walk stopped: the image's end, or the first place where no record header
// starts (a torn tail). Every load of the same bytes stops at the same place.
template <typename Fn>
uint64_t ForEachRecord(std::string_view image, uint64_t* skipped, Fn fn) {
  uint64_t off = 0;
  while (off < image.size()) {
    const std::string_view rest = image.substr(off);
    const size_t n = RecordSizeAt(rest);
    if (n == 0 || n > rest.size()) break;
    pb::JournalEntry e;
    if (DecodeRecord(RecordType::kPackEntry, rest.substr(0, n), &e).ok()) {
      fn(off, n, e);
    } else {
      ++*skipped;
    }
    off += n;
  }
  return off;
}

absl::Mutex registry_mu(absl::kConstInit);
absl::flat_hash_map<std::string, std::weak_ptr<MetaPack>>* registry
    ABSL_GUARDED_BY(registry_mu) = nullptr;

}  // namespace

MetaPack::Segment::~Segment() {
  if (fd >= 0) close(fd);
}

absl::StatusOr<std::shared_ptr<MetaPack>> MetaPack::For(const std::string& root,
                                                        Options options) {
  // One pack per folder, however its path is spelled.
  std::string key = root;
  if (char* real = realpath(root.c_str(), nullptr)) {
    key = real;
    free(real);
  }
  absl::MutexLock lock(&registry_mu);
  if (registry == nullptr) registry = new absl::flat_hash_map<std::string, std::weak_ptr<MetaPack>>;
  if (std::shared_ptr<MetaPack> held = (*registry)[key].lock()) return held;
  std::shared_ptr<MetaPack> pack(new MetaPack(root, options));
  OL_RETURN_IF_ERROR(pack->Load());
  if (options.background) {
    pack->compactor_ = std::thread([raw = pack.get()] { raw->Compactor(); });
  }
  (*registry)[key] = pack;
  return pack;
}

MetaPack::~MetaPack() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (compactor_.joinable()) compactor_.join();
}

std::string MetaPack::Dir() const { return StrCat(root_, "/", kPackDir); }

absl::Status MetaPack::OpenSegment(uint64_t id, bool create, std::shared_ptr<Segment>* out) {
  const std::string name = StrCat(Dir(), "/", id);
  int flags = O_RDWR | O_CLOEXEC;
  if (create) flags |= O_CREAT | O_EXCL;
  int fd = open(name.c_str(), flags, 0600);
  if (fd < 0 && create && errno == ENOENT) {
    // The drive's folder was made again (or the pack's never was): so is the pack's.
    if (mkdir(Dir().c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoStatus(errno, StrCat("mkdir ", Dir()));
    }
    OL_RETURN_IF_ERROR(io::SyncParentDir(Dir()));
    fd = open(name.c_str(), flags, 0600);
  }
  if (fd < 0) return ErrnoStatus(errno, StrCat("open ", name));
  auto seg = std::make_shared<Segment>();
  seg->id = id;
  seg->fd = fd;
  // A new segment's name is made durable at once: a record's own fdatasync does not cover it.
  if (create) OL_RETURN_IF_ERROR(io::SyncParentDir(name));
  *out = std::move(seg);
  return absl::OkStatus();
}

absl::Status MetaPack::Load() {
  std::lock_guard<std::mutex> lock(mu_);
  return LoadLocked();
}

absl::Status MetaPack::LoadLocked() {
  if (mkdir(Dir().c_str(), 0700) == 0) {
    OL_RETURN_IF_ERROR(io::SyncParentDir(Dir()));
  } else if (errno != EEXIST) {
    return ErrnoStatus(errno, StrCat("mkdir ", Dir()));
  }
  std::vector<uint64_t> ids;
  DIR* d = opendir(Dir().c_str());
  if (d == nullptr) return ErrnoStatus(errno, StrCat("opendir ", Dir()));
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const unsigned long long id = std::strtoull(e->d_name, &end, 10);
    if (e->d_name[0] < '1' || e->d_name[0] > '9' || *end != '\0') continue;
    ids.push_back(id);
  }
  closedir(d);
  std::sort(ids.begin(), ids.end());
  for (size_t i = 0; i < ids.size(); ++i) {
    OL_RETURN_IF_ERROR(LoadSegment(ids[i], i + 1 == ids.size()));
  }
  return absl::OkStatus();
}

absl::Status MetaPack::LoadSegment(uint64_t id, bool newest) {
  std::shared_ptr<Segment> seg;
  OL_RETURN_IF_ERROR(OpenSegment(id, /*create=*/false, &seg));
  const std::string name = StrCat(Dir(), "/", id);
  struct stat st;
  if (fstat(seg->fd, &st) != 0) return ErrnoStatus(errno, StrCat("stat ", name));
  std::string image(static_cast<size_t>(st.st_size), '\0');
  OL_RETURN_IF_ERROR(PReadAll(seg->fd, image.data(), image.size(), 0, name));
  segments_[id] = seg;
  uint64_t skipped = 0;
  const uint64_t end =
      ForEachRecord(image, &skipped, [&](uint64_t off, size_t n, const pb::JournalEntry& e) {
        Index(e, Loc{seg, off, static_cast<uint32_t>(n)});
      });
  seg->size = end;  // skipped records count as dead bytes
  total_ += end;
  if (skipped > 0) {
    OL_LOG(kWarning) << "store: " << name << ": " << skipped
                     << " damaged or torn records skipped";
  }
  if (end < image.size()) {
    // Appended after the last sync and cut by a crash (the journal replays those steps), or
    // damaged. Nothing is removed: the segment is never appended to again, so every load stops
    // here and no whole record beyond a torn one is ever read back over newer ones; the next
    // record opens a new segment, and compaction drops this one in its turn.
    OL_LOG(kWarning) << "store: " << name << ": " << image.size() - end
                     << " bytes after the last record header ignored";
    if (newest) roll_ = true;
  }
  return absl::OkStatus();
}

void MetaPack::Forget(const std::string& bucket, const std::string& key) {
  auto it = index_.find(MetaPath(bucket, key));
  if (it == index_.end()) return;
  it->second.seg->live -= it->second.length;
  live_ -= it->second.length;
  index_.erase(it);
  keys_.erase(IndexKey(bucket, key));
}

void MetaPack::Index(const pb::JournalEntry& e, const Loc& at) {
  switch (e.op()) {
    case pb::JournalEntry::PUT_META: {
      Forget(e.bucket(), e.key());
      index_[MetaPath(e.bucket(), e.key())] = at;
      keys_.insert(IndexKey(e.bucket(), e.key()));
      at.seg->live += at.length;
      live_ += at.length;
      break;
    }
    case pb::JournalEntry::REMOVE:
      Forget(e.bucket(), e.key());
      break;
    case pb::JournalEntry::DROP_BUCKET: {
      const std::string from = IndexKey(e.bucket(), "");
      std::vector<std::string> gone;
      for (auto it = keys_.lower_bound(from); it != keys_.end() && it->starts_with(from); ++it) {
        gone.push_back(it->substr(from.size()));
      }
      for (const std::string& k : gone) Forget(e.bucket(), k);
      break;
    }
    default:
      break;
  }
}

bool MetaPack::Gone() {
  if (segments_.empty()) return false;
  struct stat st;
  const Segment& s = *segments_.rbegin()->second;
  if (fstat(s.fd, &st) == 0 && st.st_nlink > 0) return false;
  OL_LOG(kWarning) << "store: " << Dir() << " was removed while running: its records are gone";
  Clear();
  return true;
}

absl::Status MetaPack::Append(std::string_view record, Loc* at) {
  Gone();
  if (segments_.empty() || roll_ ||
      (segments_.rbegin()->second->size > 0 &&
       segments_.rbegin()->second->size + record.size() > opts_.segment_bytes)) {
    uint64_t id = segments_.empty() ? 1 : segments_.rbegin()->first + 1;
    std::shared_ptr<Segment> seg;
    absl::Status s = OpenSegment(id, /*create=*/true, &seg);
    // A number taken by a file the index does not know (left by a folder that was cleared
    // while running): the next one.
    for (int tries = 0; absl::IsAlreadyExists(s) && tries < 64; ++tries) {
      s = OpenSegment(++id, /*create=*/true, &seg);
    }
    OL_RETURN_IF_ERROR(s);
    segments_[id] = std::move(seg);
    roll_ = false;
  }
  const std::shared_ptr<Segment>& seg = segments_.rbegin()->second;
  OL_RETURN_IF_ERROR(PWriteAll(seg->fd, record, seg->size, StrCat(Dir(), "/", seg->id)));
  *at = Loc{seg, seg->size, static_cast<uint32_t>(record.size())};
  seg->size += record.size();
  total_ += record.size();
  return absl::OkStatus();
}

absl::Status MetaPack::Sync(const Segment& seg) const {
  if (fdatasync(seg.fd) != 0) return ErrnoStatus(errno, StrCat("fdatasync ", Dir(), "/", seg.id));
  return absl::OkStatus();
}

absl::Status MetaPack::Change(const pb::JournalEntry& e, bool sync) {
  const std::string record = EncodeRecord(RecordType::kPackEntry, e);
  std::shared_ptr<Segment> seg;
  bool compact = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Loc at;
    OL_RETURN_IF_ERROR(Append(record, &at));
    Index(e, at);
    seg = at.seg;
    compact = NeedsCompaction();
  }
  if (compact) wake_.notify_all();
  if (sync) return Sync(*seg);
  return absl::OkStatus();
}

absl::Status MetaPack::Put(const std::string& bucket, const std::string& key,
                           const std::string& meta, bool sync) {
  pb::JournalEntry e;
  e.set_op(pb::JournalEntry::PUT_META);
  e.set_bucket(bucket);
  e.set_key(key);
  e.set_meta(meta);
  return Change(e, sync);
}

absl::Status MetaPack::Remove(const std::string& bucket, const std::string& key, bool sync) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!index_.contains(MetaPath(bucket, key))) return absl::OkStatus();
  }
  pb::JournalEntry e;
  e.set_op(pb::JournalEntry::REMOVE);
  e.set_bucket(bucket);
  e.set_key(key);
  return Change(e, sync);
}

absl::Status MetaPack::DropBucket(const std::string& bucket, bool sync) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string from = IndexKey(bucket, "");
    auto it = keys_.lower_bound(from);
    if (it == keys_.end() || !it->starts_with(from)) return absl::OkStatus();
  }
  pb::JournalEntry e;
  e.set_op(pb::JournalEntry::DROP_BUCKET);
  e.set_bucket(bucket);
  return Change(e, sync);
}

absl::StatusOr<std::string> MetaPack::Read(const std::string& meta_path) {
  Loc at;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(meta_path);
    if (it == index_.end() || Gone()) return absl::NotFoundError(meta_path);
    at = it->second;
    ++reads_;
  }
  // A compaction may delete the segment meanwhile; the descriptor `at` holds still reads it.
  std::string rec(at.length, '\0');
  OL_RETURN_IF_ERROR(
      PReadAll(at.seg->fd, rec.data(), rec.size(), at.offset, StrCat(Dir(), "/", at.seg->id)));
  pb::JournalEntry e;
  OL_RETURN_IF_ERROR(DecodeRecord(RecordType::kPackEntry, rec, &e));
  if (e.op() != pb::JournalEntry::PUT_META) {
    return absl::DataLossError(StrCat(Dir(), "/", at.seg->id, ": the record of ", meta_path,
                                      " is not one"));
  }
  return std::move(*e.mutable_meta());
}

bool MetaPack::Holds(const std::string& meta_path) const {
  std::lock_guard<std::mutex> lock(mu_);
  return index_.contains(meta_path);
}

std::vector<WalkItem> MetaPack::Walk(const WalkRequest& r) const {
  std::vector<WalkItem> out;
  if (r.limit == 0) return out;
  const std::string base = IndexKey(r.bucket, "");
  std::string last_prefix;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = keys_.lower_bound(base + r.prefix);
  if (r.marker >= r.prefix) it = keys_.upper_bound(base + r.marker);
  while (it != keys_.end() && out.size() < r.limit) {
    if (!it->starts_with(base)) break;
    const std::string_view key = std::string_view(*it).substr(base.size());
    if (!key.starts_with(r.prefix)) break;
    const std::string cp = RollUp(key, r);
    if (cp.empty()) {
      out.push_back({std::string(key), false});
      ++it;
      continue;
    }
    if (cp > r.marker && cp != last_prefix) {
      out.push_back({cp, true});
      last_prefix = cp;
    }
    const std::string next = PrefixSuccessor(base + cp);
    if (next.empty()) break;
    it = keys_.lower_bound(next);
  }
  return out;
}

void MetaPack::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  Clear();
  // What the folder holds now: nothing when it was made anew, the old segments when only the
  // drive's identity was lost (its object folders stay too).
  const absl::Status s = LoadLocked();
  if (!s.ok()) OL_LOG(kWarning) << "store: reloading " << Dir() << ": " << s;
}

void MetaPack::Clear() {
  index_.clear();
  keys_.clear();
  segments_.clear();
  live_ = total_ = 0;
  roll_ = false;
}

MetaPack::Stats MetaPack::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s;
  s.objects = index_.size();
  s.segments = segments_.size();
  s.live_bytes = live_;
  s.dead_bytes = total_ - live_;
  s.compactions = compactions_;
  s.reads = reads_;
  return s;
}

bool MetaPack::NeedsCompaction() const {
  const uint64_t dead = total_ - live_;
  return segments_.size() >= 2 && dead >= opts_.min_garbage && dead > live_;
}

void MetaPack::Compactor() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::seconds(30), [&] { return stop_ || NeedsCompaction(); });
    if (stop_) break;
    if (!NeedsCompaction()) continue;
    lock.unlock();
    const absl::Status s = Compact();
    if (!s.ok()) OL_LOG(kWarning) << "store: compacting " << Dir() << ": " << s;
    lock.lock();
    // A failure is tried again at the next wake, not at once.
    if (!s.ok()) wake_.wait_for(lock, std::chrono::seconds(10), [&] { return stop_; });
  }
}

absl::Status MetaPack::Compact(bool force) {
  std::lock_guard<std::mutex> one(compact_mu_);
  uint64_t stop_at = 0;  // with `force`: the newest segment when it started
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!segments_.empty()) stop_at = segments_.rbegin()->first;
  }
  for (;;) {
    std::shared_ptr<Segment> old;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (segments_.size() < 2) return absl::OkStatus();
      if (force ? segments_.begin()->first >= stop_at : !NeedsCompaction()) {
        return absl::OkStatus();
      }
      old = segments_.begin()->second;
    }
    const std::string name = StrCat(Dir(), "/", old->id);
    std::string image(old->size, '\0');
    OL_RETURN_IF_ERROR(PReadAll(old->fd, image.data(), image.size(), 0, name));
    std::vector<std::shared_ptr<Segment>> written;
    absl::Status copied;
    uint64_t skipped = 0;
    ForEachRecord(image, &skipped, [&](uint64_t off, size_t n, const pb::JournalEntry& e) {
      if (!copied.ok() || e.op() != pb::JournalEntry::PUT_META) return;
      std::lock_guard<std::mutex> lock(mu_);
      auto it = index_.find(MetaPath(e.bucket(), e.key()));
      if (it == index_.end() || it->second.seg != old || it->second.offset != off) return;
      Loc at;
      copied = Append(std::string_view(image).substr(off, n), &at);
      if (!copied.ok()) return;
      Index(e, at);
      if (written.empty() || written.back() != at.seg) written.push_back(at.seg);
    });
    OL_RETURN_IF_ERROR(copied);
    // The copies are durable before the only other copy goes.
    for (const auto& seg : written) OL_RETURN_IF_ERROR(Sync(*seg));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (segments_.empty() || segments_.begin()->second != old) return absl::OkStatus();
      if (old->live != 0) {
        return absl::InternalError(StrCat(name, ": records still live after its compaction"));
      }
      segments_.erase(segments_.begin());
      total_ -= old->size;
      ++compactions_;
    }
    if (unlink(name.c_str()) != 0 && errno != ENOENT) {
      return ErrnoStatus(errno, StrCat("unlink ", name));
    }
    OL_RETURN_IF_ERROR(io::SyncParentDir(name));
  }
}

}  // namespace openlake::store

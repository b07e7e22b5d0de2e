#include "kv/disk_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "common/random.h"
#include "kv/wire.h"

#include "openlake/checksum.h"
#include "openlake/io/file.h"
#include "openlake/log.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::kv {

namespace {

constexpr const char* kDataFile = "kv-blocks.dat";
constexpr const char* kLogFile = "kv-index.log";
constexpr uint32_t kBatchesPerPath = 4;

std::string ErrnoText(int err) { return std::string(std::strerror(err)); }

bool Aligned(const void* p, uint64_t len, uint64_t off) {
  return (reinterpret_cast<uintptr_t>(p) | len | off) % 4096 == 0;
}

}  // namespace

// One batch of Spill, shared by its writes' completions.
struct SpillBatch {
  uint32_t path = 0;
  std::vector<DiskTier::SpillItem> items;
  std::vector<bool> written;  // a slot was allocated and its write issued
  std::vector<DiskTier::Ref> refs;
  size_t writes = 0;
  bool failed = false;
  int error = 0;
  DiskTier::SpillDoneFn done;
};

DiskTier::~DiskTier() {
  for (Path& p : paths_) {
    for (int fd : {p.data_fd, p.direct_fd, p.log_fd, p.dir_fd}) {
      if (fd >= 0) close(fd);
    }
  }
}

// ---- Opening and recovery -------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<DiskTier>> DiskTier::Open(DiskTierOptions options) {
  if (options.paths.empty()) return absl::InvalidArgumentError("kv_disk: no paths given");
  if (options.capacity_bytes < (64ull << 20)) {
    return absl::InvalidArgumentError(StrCat("kv_disk: capacity of ", options.capacity_bytes,
                                             " bytes per path; at least 64 MiB"));
  }
  options.min_segment_bytes = (options.min_segment_bytes + 4095) / 4096 * 4096;
  if (options.capacity_bytes < options.min_segment_bytes) {
    return absl::InvalidArgumentError(
        StrCat("kv_disk: capacity of ", options.capacity_bytes, " bytes per path is less than one ",
               "segment of ", options.min_segment_bytes,
               " bytes (the slab's segment size, which bounds a block)"));
  }
  if (options.evict_sample == 0) options.evict_sample = 1;
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<DiskTier> t(new DiskTier(std::move(options)));
  t->paths_.resize(t->options_.paths.size());
  for (uint32_t i = 0; i < t->paths_.size(); ++i) {
    t->paths_[i].dir = t->options_.paths[i];
    std::vector<std::pair<uint32_t, disklog::Record>> unused;
    absl::Status st = t->OpenPath(i, &unused);
    if (!st.ok()) {
      t->paths_[i].online = false;
      t->paths_[i].why_offline = std::string(st.message());
      OL_LOG(kError) << "KV disk tier: path " << t->paths_[i].dir << " is offline: " << st.message()
                     << "; the RAM tier serves without it";
    }
  }
  t->counters_.recovery_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return t;
}

absl::Status DiskTier::OpenPath(uint32_t pi, std::vector<std::pair<uint32_t, disklog::Record>>*) {
  Path& p = paths_[pi];
  std::error_code ec;
  std::filesystem::create_directories(p.dir, ec);
  if (ec) return absl::UnavailableError(StrCat("create ", p.dir, ": ", ec.message()));
  chmod(p.dir.c_str(), 0700);
  const uint64_t floor = std::max<uint64_t>(4ull << 20, options_.min_segment_bytes);
  uint64_t seg = std::max(options_.segment_bytes, options_.min_segment_bytes);
  while (options_.capacity_bytes / seg < 16 && seg / 2 >= floor) seg /= 2;
  p.segment_bytes = seg;
  p.data_bytes = options_.capacity_bytes / seg * seg;
  const std::string data_path = StrCat(p.dir, "/", kDataFile);
  const std::string log_path = StrCat(p.dir, "/", kLogFile);
  p.dir_fd = open(p.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (p.dir_fd < 0) return ErrnoStatus(errno, StrCat("open ", p.dir));
  p.data_fd = open(data_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (p.data_fd < 0) return ErrnoStatus(errno, StrCat("open ", data_path));
  p.direct_fd = open(data_path.c_str(), O_RDWR | O_DIRECT | O_CLOEXEC);

  // The log, whole: a full 100 GiB tier of 256 KiB blocks logs about 30 MiB.
  std::string log;
  if (auto f = io::File::OpenBuffered(log_path, O_RDONLY); f.ok()) {
    OL_ASSIGN_OR_RETURN(uint64_t size, f->Size());
    log.resize(size);
    OL_RETURN_IF_ERROR(f->PreadAll(log.data(), size, 0));
  }
  disklog::Parsed parsed = disklog::ParseLog(log);
  struct stat st {};
  fstat(p.data_fd, &st);
  bool usable = !parsed.records.empty();
  if (usable) {
    const disklog::Header& h = parsed.records[0].header;
    usable = h.version == disklog::kDiskLogVersion && h.data_bytes == p.data_bytes &&
             h.segment_bytes == p.segment_bytes &&
             static_cast<uint64_t>(st.st_size) == p.data_bytes;
    if (!usable) {
      OL_LOG(kWarning) << "KV disk tier: " << p.dir
                       << " was laid out for another capacity or format; starting it empty";
    }
  } else if (!log.empty()) {
    OL_LOG(kWarning) << "KV disk tier: " << log_path << " has no valid header; starting empty";
  }
  if (!usable) {
    if (ftruncate(p.data_fd, 0) != 0) return ErrnoStatus(errno, StrCat("truncate ", data_path));
    RandomBytes(&p.tier_id, sizeof(p.tier_id));
    parsed.records.clear();
  } else {
    p.tier_id = parsed.records[0].header.tier_id;
    if (parsed.torn) {
      ++counters_.torn_records;
      OL_LOG(kInfo) << "KV disk tier: " << log_path << ": cut a torn tail of "
                    << log.size() - parsed.valid_bytes << " bytes";
    }
  }
  // Preallocated: a full file system shows now, not as a failed spill later.
  if (const int err = posix_fallocate(p.data_fd, 0, static_cast<off_t>(p.data_bytes)); err != 0) {
    return ErrnoStatus(err, StrCat("allocate ", p.data_bytes, " bytes for ", data_path));
  }
  const uint64_t nseg = p.data_bytes / p.segment_bytes;
  p.segments.resize(nseg);
  for (uint64_t i = nseg; i-- > 0;) p.free_segments.push_back(static_cast<uint32_t>(i));
  p.online = true;
  Recover(pi, parsed.records);
  return absl::OkStatus();
}

void DiskTier::Recover(uint32_t pi, const std::vector<disklog::Record>& records) {
  Path& p = paths_[pi];
  struct Live {
    disklog::PutRec put;
    uint32_t rec_ns;
    int64_t order;
  };
  absl::flat_hash_map<uint32_t, uint32_t> ns_of_log;  // log id → recovered_ index
  absl::flat_hash_map<uint64_t, Live> live;           // by offset
  int64_t order = 0;
  const uint64_t nseg = p.segments.size();
  for (size_t i = 1; i < records.size(); ++i) {
    const disklog::Record& r = records[i];
    switch (r.type) {
      case disklog::Type::kHeader:
        break;
      case disklog::Type::kNamespace: {
        uint32_t idx = 0;
        for (; idx < recovered_.size(); ++idx) {
          if (recovered_[idx].name == r.ns.name && recovered_fp_[idx] == r.ns.fingerprint &&
              recovered_[idx].block_bytes == r.ns.block_bytes) {
            break;
          }
        }
        if (idx == recovered_.size()) {
          wire::Fingerprint fp;
          RecoveredNamespace rn;
          rn.name = r.ns.name;
          rn.block_bytes = r.ns.block_bytes;
          rn.owner = r.ns.owner;
          if (fp.ParseFromString(r.ns.fingerprint)) rn.fingerprint = wire::FromWire(fp);
          recovered_.push_back(std::move(rn));
          recovered_fp_.push_back(r.ns.fingerprint);
        }
        ns_of_log[r.ns.id] = idx;
        break;
      }
      case disklog::Type::kPut: {
        auto it = ns_of_log.find(r.put.ns);
        const uint64_t slot_bytes =
            it == ns_of_log.end() ? 0 : SlotBytesFor(recovered_[it->second].block_bytes);
        const uint64_t seg = r.put.offset / p.segment_bytes;
        const uint64_t within = r.put.offset % p.segment_bytes;
        if (slot_bytes == 0 || seg >= nseg || within % slot_bytes != 0 ||
            within + slot_bytes > p.segment_bytes) {
          ++counters_.torn_records;  // does not fit this file: never trust it
          break;
        }
        live[r.put.offset] = Live{r.put, it->second, order++};
        break;
      }
      case disklog::Type::kFree:
        live.erase(r.offset);
        break;
      case disklog::Type::kReset: {
        auto it = ns_of_log.find(r.reset_ns);
        if (it == ns_of_log.end()) break;
        absl::erase_if(live, [&](const auto& kv) { return kv.second.rec_ns == it->second; });
        break;
      }
    }
  }
  // Oldest first, so the newest of two entries for one key wins and LRU order survives.
  std::vector<std::pair<int64_t, uint64_t>> by_order;
  by_order.reserve(live.size());
  for (const auto& [off, l] : live) by_order.emplace_back(l.order, off);
  std::sort(by_order.begin(), by_order.end());
  for (const auto& [ord, off] : by_order) {
    const Live& l = live[off];
    const uint64_t slot_bytes = SlotBytesFor(recovered_[l.rec_ns].block_bytes);
    const auto seg = static_cast<uint32_t>(off / p.segment_bytes);
    const auto idx = static_cast<uint32_t>((off % p.segment_bytes) / slot_bytes);
    Segment& s = p.segments[seg];
    if (s.slot_bytes == 0) {
      p.free_segments.erase(std::find(p.free_segments.begin(), p.free_segments.end(), seg));
      FormatSegment(p, seg, ClassOf(p, slot_bytes));
    } else if (s.slot_bytes != slot_bytes) {
      ++counters_.torn_records;  // a segment cannot hold two sizes: the log contradicts itself
      continue;
    }
    Slot& sl = s.slots[idx];
    if (sl.st != St::kFree) continue;
    s.free.erase(std::find(s.free.begin(), s.free.end(), idx));
    ++s.used;
    --p.classes[ClassOf(p, slot_bytes)].free_slots;
    p.used_slot_bytes += slot_bytes;
    sl.st = St::kLive;
    sl.ns = 0;
    sl.key = l.put.key;
    sl.checksum = l.put.checksum;
    sl.depth = l.put.depth;
    sl.stamp = ++clock_;
    s.stamp = sl.stamp;
    pending_.push_back(Pending{pi, l.rec_ns, l.put, sl.stamp});
  }
}

void DiskTier::BindRecovered(size_t i, uint32_t pool_ns) {
  if (i >= recovered_.size() || pool_ns == 0) return;
  NsInfo& info = namespaces_[pool_ns];
  info.name = recovered_[i].name;
  info.fingerprint = recovered_fp_[i];
  info.block_bytes = recovered_[i].block_bytes;
  info.owner = recovered_[i].owner;
  for (Pending& pend : pending_) {
    if (pend.recovered_ns != i) continue;
    Path& p = paths_[pend.path];
    const uint64_t slot_bytes = SlotBytesFor(info.block_bytes);
    Ref r{pend.path, static_cast<uint32_t>(pend.put.offset / p.segment_bytes),
          static_cast<uint32_t>((pend.put.offset % p.segment_bytes) / slot_bytes)};
    Slot& sl = SlotAt(r);
    sl.ns = pool_ns;
    pend.recovered_ns = ~0u;  // bound
    auto [it, inserted] = index_.try_emplace(NsKey{pool_ns, sl.key}, r);
    if (!inserted) {
      // The same key on two paths (a crash between a spill and the Free of an older copy):
      // the newer stays.
      Slot& old = SlotAt(it->second);
      Ref loser = old.stamp < sl.stamp ? it->second : r;
      if (old.stamp < sl.stamp) it->second = r;
      SlotAt(loser).st = St::kDoomed;
      SlotAt(loser).free_logged = true;
      ReleaseSlot(loser);
      continue;
    }
    ++p.classes[ClassOf(p, slot_bytes)].live;
    ++p.live_blocks;
  }
}

absl::Status DiskTier::Attach(io::Reactor& r) {
  // Blocks of namespaces nobody bound are forgotten.
  for (Pending& pend : pending_) {
    if (pend.recovered_ns == ~0u) continue;
    Path& p = paths_[pend.path];
    const uint64_t slot_bytes = SlotBytesFor(recovered_[pend.recovered_ns].block_bytes);
    Ref ref{pend.path, static_cast<uint32_t>(pend.put.offset / p.segment_bytes),
            static_cast<uint32_t>((pend.put.offset % p.segment_bytes) / slot_bytes)};
    SlotAt(ref).st = St::kDoomed;
    SlotAt(ref).free_logged = true;
    ReleaseSlot(ref);
  }
  pending_.clear();
  counters_.recovered_blocks = index_.size();
  for (uint32_t pi = 0; pi < paths_.size(); ++pi) {
    Path& p = paths_[pi];
    if (!p.online) continue;
    const std::string snap = Snapshot(pi);
    const std::string log_path = StrCat(p.dir, "/", kLogFile);
    absl::Status st = io::AtomicWriteFileSync(log_path, snap, 0600);
    if (st.ok()) {
      p.log_fd = open(log_path.c_str(), O_WRONLY | O_CLOEXEC);
      if (p.log_fd < 0) st = ErrnoStatus(errno, StrCat("open ", log_path));
    }
    if (!st.ok()) {
      reactor_ = &r;
      Offline(pi, std::string(st.message()));
      continue;
    }
    p.log_bytes = p.log_durable = p.snapshot_bytes = snap.size();
  }
  reactor_ = &r;
  return absl::OkStatus();
}

std::string DiskTier::Snapshot(uint32_t pi) {
  Path& p = paths_[pi];
  std::string out;
  disklog::Header h;
  h.data_bytes = p.data_bytes;
  h.segment_bytes = p.segment_bytes;
  h.tier_id = p.tier_id;
  disklog::AppendHeader(h, &out);
  p.ns_logged.clear();
  std::vector<std::pair<int64_t, Ref>> live;
  for (uint32_t si = 0; si < p.segments.size(); ++si) {
    const Segment& s = p.segments[si];
    for (uint32_t i = 0; i < s.slots.size(); ++i) {
      if (s.slots[i].st == St::kLive) live.emplace_back(s.slots[i].stamp, Ref{pi, si, i});
    }
  }
  std::sort(live.begin(), live.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [stamp, ref] : live) {
    const Slot& sl = SlotAt(ref);
    auto ns = namespaces_.find(sl.ns);
    if (ns == namespaces_.end()) continue;
    if (p.ns_logged.insert(sl.ns).second) {
      disklog::AppendNamespace(
          disklog::NamespaceRec{sl.ns, ns->second.block_bytes, ns->second.owner, ns->second.name,
                                ns->second.fingerprint},
          &out);
    }
    disklog::AppendPut(disklog::PutRec{sl.ns, sl.depth, OffsetOf(ref), sl.checksum, sl.key}, &out);
  }
  return out;
}

// ---- Slots ------------------------------------------------------------------------------------

uint64_t DiskTier::OffsetOf(const Ref& r) const {
  const Path& p = paths_[r.path];
  return uint64_t{r.seg} * p.segment_bytes + uint64_t{r.idx} * p.segments[r.seg].slot_bytes;
}

int32_t DiskTier::ClassOf(Path& p, uint64_t slot_bytes) {
  for (size_t i = 0; i < p.classes.size(); ++i) {
    if (p.classes[i].slot_bytes == slot_bytes) return static_cast<int32_t>(i);
  }
  Class c;
  c.slot_bytes = slot_bytes;
  p.classes.push_back(std::move(c));
  return static_cast<int32_t>(p.classes.size() - 1);
}

void DiskTier::FormatSegment(Path& p, uint32_t seg, int32_t cls) {
  Class& c = p.classes[cls];
  Segment& s = p.segments[seg];
  const auto n = static_cast<uint32_t>(p.segment_bytes / c.slot_bytes);
  s.slot_bytes = c.slot_bytes;
  s.slots.assign(n, Slot{});
  s.free.clear();
  for (uint32_t i = n; i-- > 0;) s.free.push_back(i);
  s.used = 0;
  s.stamp = 0;
  c.segments.push_back(seg);
  c.with_free.push_back(seg);
  s.listed = true;
  c.free_slots += n;
}

bool DiskTier::Allocate(uint32_t pi, uint64_t slot_bytes, Ref* out) {
  Path& p = paths_[pi];
  if (slot_bytes > p.segment_bytes) return false;
  const int32_t cls = ClassOf(p, slot_bytes);
  Class& c = p.classes[cls];
  for (int pass = 0; pass < 2; ++pass) {
    while (!c.with_free.empty()) {
      const uint32_t seg = c.with_free.back();
      Segment& s = p.segments[seg];
      if (s.slot_bytes != slot_bytes || s.free.empty()) {
        c.with_free.pop_back();
        if (s.slot_bytes == slot_bytes) s.listed = false;
        continue;
      }
      const uint32_t idx = s.free.back();
      s.free.pop_back();
      ++s.used;
      --c.free_slots;
      p.used_slot_bytes += slot_bytes;
      *out = Ref{pi, seg, idx};
      return true;
    }
    if (p.free_segments.empty()) return false;
    const uint32_t seg = p.free_segments.back();
    p.free_segments.pop_back();
    FormatSegment(p, seg, cls);
  }
  return false;
}

void DiskTier::ReleaseSlot(const Ref& r) {
  Path& p = paths_[r.path];
  Segment& s = p.segments[r.seg];
  Slot& sl = s.slots[r.idx];
  if (sl.st == St::kFree) return;
  sl = Slot{};
  s.free.push_back(r.idx);
  --s.used;
  p.used_slot_bytes -= s.slot_bytes;
  const int32_t cls = ClassOf(p, s.slot_bytes);
  Class& c = p.classes[cls];
  ++c.free_slots;
  if (s.used == 0) {
    // The segment is empty: any class may have it.
    const auto pos = std::find(c.segments.begin(), c.segments.end(), r.seg) - c.segments.begin();
    c.segments.erase(c.segments.begin() + pos);
    if (c.hand_seg > static_cast<size_t>(pos)) {
      --c.hand_seg;
    } else if (c.hand_seg == static_cast<size_t>(pos)) {
      c.hand_idx = 0;
    }
    c.free_slots -= s.slots.size();
    s.slot_bytes = 0;
    s.slots.clear();
    s.free.clear();
    s.listed = false;
    p.free_segments.push_back(r.seg);
    return;
  }
  if (!s.listed) {
    c.with_free.push_back(r.seg);
    s.listed = true;
  }
}

void DiskTier::Insert(const Ref& r) {
  Path& p = paths_[r.path];
  Slot& sl = SlotAt(r);
  auto [it, inserted] = index_.try_emplace(NsKey{sl.ns, sl.key}, r);
  if (!inserted) {
    Doom(it->second, true);  // erases the entry: insert again
    index_.emplace(NsKey{sl.ns, sl.key}, r);
  }
  sl.st = St::kLive;
  ++p.classes[ClassOf(p, p.segments[r.seg].slot_bytes)].live;
  ++p.live_blocks;
}

void DiskTier::Doom(Ref r, bool log) {
  Path& p = paths_[r.path];
  Slot& sl = SlotAt(r);
  if (sl.st == St::kLive) {
    if (auto it = index_.find(NsKey{sl.ns, sl.key});
        it != index_.end() && it->second.path == r.path && it->second.seg == r.seg &&
        it->second.idx == r.idx) {
      index_.erase(it);
    }
    --p.classes[ClassOf(p, p.segments[r.seg].slot_bytes)].live;
    --p.live_blocks;
  }
  sl.st = St::kDoomed;
  if (!p.online) return;  // nothing is reused there any more
  if (!log) return;       // the caller logs what frees it (a Reset) and releases it then

  std::string rec;
  disklog::AppendFree(OffsetOf(r), &rec);
  LogAppend(r.path, rec, [this, r] {
    Slot& s = SlotAt(r);
    s.free_logged = true;
    if (s.readers == 0) ReleaseSlot(r);
  });
}

void DiskTier::FinishRead(const Ref& r) {
  Slot& sl = SlotAt(r);
  --sl.readers;
  if (sl.readers == 0 && sl.st == St::kDoomed && sl.free_logged) ReleaseSlot(r);
}

void DiskTier::EvictAhead(uint32_t pi, int32_t cls, uint32_t n) {
  Path& p = paths_[pi];
  for (uint32_t k = 0; k < n; ++k) {
    Class& c = p.classes[cls];
    uint64_t total = 0;
    for (uint32_t seg : c.segments) total += p.segments[seg].slots.size();
    bool found_one = false;
    Ref victim{};
    const Slot* best = nullptr;
    uint32_t found = 0;
    for (uint64_t scanned = 0; scanned < total && found < options_.evict_sample;) {
      if (c.hand_seg >= c.segments.size()) {
        c.hand_seg = 0;
        c.hand_idx = 0;
      }
      const uint32_t seg = c.segments[c.hand_seg];
      Segment& s = p.segments[seg];
      if (c.hand_idx >= s.slots.size()) {
        ++c.hand_seg;
        c.hand_idx = 0;
        continue;
      }
      const uint32_t idx = c.hand_idx++;
      ++scanned;
      const Slot& sl = s.slots[idx];
      if (sl.st != St::kLive || sl.readers != 0) continue;
      ++found;
      if (best == nullptr || sl.stamp < best->stamp ||
          (sl.stamp == best->stamp && sl.depth > best->depth)) {
        best = &sl;
        victim = Ref{pi, seg, idx};
        found_one = true;
      }
    }
    if (!found_one) {
      if (!ReclaimSegment(pi, cls)) return;
      continue;
    }
    ++counters_.evictions;
    Doom(victim, true);
  }
}

bool DiskTier::ReclaimSegment(uint32_t pi, int32_t cls) {
  Path& p = paths_[pi];
  int64_t best = -1;
  for (uint32_t i = 0; i < p.segments.size(); ++i) {
    const Segment& s = p.segments[i];
    if (s.slot_bytes == 0 || s.slot_bytes == p.classes[cls].slot_bytes) continue;
    bool evictable = true;
    for (const Slot& sl : s.slots) {
      if (sl.st != St::kFree && (sl.st != St::kLive || sl.readers != 0)) {
        evictable = false;
        break;
      }
    }
    if (evictable && (best < 0 || s.stamp < p.segments[best].stamp)) best = i;
  }
  if (best < 0) return false;
  Segment& s = p.segments[best];
  for (uint32_t i = 0; i < s.slots.size(); ++i) {
    if (s.slots[i].st == St::kLive) {
      ++counters_.evictions;
      Doom(Ref{pi, static_cast<uint32_t>(best), i}, true);
    }
  }
  return true;
}

// ---- The log ------------------------------------------------------------------------------------

void DiskTier::EnsureNsLogged(uint32_t pi, uint32_t ns) {
  Path& p = paths_[pi];
  if (!p.ns_logged.insert(ns).second) return;
  const NsInfo& info = namespaces_[ns];
  std::string rec;
  disklog::AppendNamespace(
      disklog::NamespaceRec{ns, info.block_bytes, info.owner, info.name, info.fingerprint}, &rec);
  LogAppend(pi, rec, nullptr);
}

void DiskTier::LogAppend(uint32_t pi, const std::string& bytes, absl::AnyInvocable<void()> fn) {
  Path& p = paths_[pi];
  if (!p.online) {
    // Nothing is written there any more; whoever waits learns it (they check `online`).
    if (fn) reactor_->Defer(std::move(fn));
    return;
  }
  p.log_pending += bytes;
  if (fn) p.log_waiters.push_back(LogWaiter{p.log_bytes + p.log_pending.size(), std::move(fn)});
  if (!p.log_writing && !p.compacting) FlushLog(pi);
}

// Writes all of `buf` at `at` (looping over short writes), then fdatasyncs; `done` gets 0 or
// -errno.
static void WriteAllAndSync(io::Reactor& r, int fd, std::shared_ptr<std::string> buf, size_t done,
                            uint64_t at, absl::AnyInvocable<void(int)> cb) {
  const uint32_t len = static_cast<uint32_t>(buf->size() - done);
  if (len == 0) {
    r.Fsync(fd, true,
            r.Callback([cb = std::move(cb)](int32_t res) mutable { cb(res < 0 ? res : 0); }));
    return;
  }
  r.Write(fd, buf->data() + done, len, at + done,
          r.Callback([&r, fd, buf, done, at, cb = std::move(cb)](int32_t res) mutable {
            if (res <= 0) {
              cb(res < 0 ? res : -EIO);
              return;
            }
            WriteAllAndSync(r, fd, std::move(buf), done + static_cast<size_t>(res), at,
                            std::move(cb));
          }));
}

void DiskTier::FlushLog(uint32_t pi) {
  Path& p = paths_[pi];
  if (p.log_pending.empty() || !p.online || p.log_writing) return;
  auto buf = std::make_shared<std::string>(std::move(p.log_pending));
  p.log_pending.clear();
  const uint64_t at = p.log_bytes;
  p.log_bytes += buf->size();
  p.log_writing = true;
  ++busy_;
  const uint64_t upto = p.log_bytes;
  WriteAllAndSync(*reactor_, p.log_fd, buf, 0, at, [this, pi, upto](int err) {
    --busy_;
    Path& path = paths_[pi];
    path.log_writing = false;
    if (err < 0) {
      ++counters_.io_errors;
      Offline(pi, StrCat("writing its index log: ", ErrnoText(-err)));
      return;
    }
    LogDurable(pi, upto);
    if (!path.log_pending.empty()) {
      FlushLog(pi);
    } else {
      MaybeCompact(pi);
    }
  });
}

void DiskTier::LogDurable(uint32_t pi, uint64_t upto) {
  Path& p = paths_[pi];
  p.log_durable = upto;
  size_t n = 0;
  while (n < p.log_waiters.size() && p.log_waiters[n].upto <= upto) ++n;
  std::vector<LogWaiter> ready(std::make_move_iterator(p.log_waiters.begin()),
                               std::make_move_iterator(p.log_waiters.begin() + n));
  p.log_waiters.erase(p.log_waiters.begin(), p.log_waiters.begin() + n);
  for (LogWaiter& w : ready) w.fn();
}

void DiskTier::MaybeCompact(uint32_t pi) {
  Path& p = paths_[pi];
  if (!p.online || p.log_writing || p.compacting || !p.log_pending.empty() ||
      p.log_bytes < std::max<uint64_t>(options_.min_compact_bytes, 2 * p.snapshot_bytes)) {
    return;
  }
  p.compacting = true;
  ++busy_;
  auto snap = std::make_shared<std::string>(Snapshot(pi));
  auto tmp = std::make_shared<std::string>(StrCat(p.dir, "/", kLogFile, ".tmp"));
  auto final_path = std::make_shared<std::string>(StrCat(p.dir, "/", kLogFile));
  io::Reactor& r = *reactor_;
  // Any failure leaves the old log in place and serving; compaction is tried again later.
  auto fail = [this, pi](int fd, int err) {
    --busy_;
    Path& path = paths_[pi];
    if (fd >= 0) close(fd);
    path.compacting = false;
    path.snapshot_bytes = path.log_bytes;  // not again before the log doubles
    OL_LOG(kWarning) << "KV disk tier: " << path.dir
                     << ": rewriting the index log failed: " << ErrnoText(-err);
    FlushLog(pi);
  };
  r.OpenAt(AT_FDCWD, tmp->c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600,
           r.Callback([this, pi, snap, tmp, final_path, fail, &r](int32_t fd) mutable {
             if (fd < 0) return fail(-1, fd);
             WriteAllAndSync(r, fd, snap, 0, 0, [=, this, &r](int err) mutable {
               if (err < 0) return fail(fd, err);
               r.RenameAt(AT_FDCWD, tmp->c_str(), AT_FDCWD, final_path->c_str(),
                          r.Callback([=, this, &r](int32_t res) mutable {
                            if (res < 0) return fail(fd, res);
                            Path& path = paths_[pi];
                            r.Fsync(path.dir_fd, false, r.Callback([=, this](int32_t) mutable {
                              --busy_;
                              Path& pa = paths_[pi];
                              close(pa.log_fd);
                              pa.log_fd = fd;
                              const uint64_t old_end = pa.log_bytes;
                              pa.log_bytes = pa.log_durable = pa.snapshot_bytes = snap->size();
                              pa.compacting = false;
                              // Waiters (records appended meanwhile, still pending) count in
                              // the new log's positions from here on.
                              for (LogWaiter& w : pa.log_waiters) {
                                w.upto = w.upto - old_end + pa.log_bytes;
                              }
                              FlushLog(pi);
                            }));
                          }));
             });
           }));
}

void DiskTier::Offline(uint32_t pi, const std::string& why) {
  Path& p = paths_[pi];
  if (!p.online) return;
  p.online = false;
  p.why_offline = why;
  OL_LOG(kError) << "KV disk tier: path " << p.dir << " is offline: " << why
                 << "; its blocks are no longer served, the RAM tier and other paths keep serving";
  absl::erase_if(index_, [pi](const auto& kv) { return kv.second.path == pi; });
  p.live_blocks = 0;
  // Whoever waits on this log learns the path is gone (they check `online`).
  std::vector<LogWaiter> waiters = std::move(p.log_waiters);
  p.log_waiters.clear();
  p.log_pending.clear();
  for (LogWaiter& w : waiters) w.fn();
}

// ---- Namespaces, lookups ----------------------------------------------------------------------

void DiskTier::BindNamespace(uint32_t ns, const std::string& name, const LayoutFingerprint& fp,
                             uint32_t block_bytes, uint32_t owner) {
  if (namespaces_.contains(ns)) return;
  NsInfo& info = namespaces_[ns];
  info.name = name;
  wire::Fingerprint w;
  wire::ToWire(fp, &w);
  info.fingerprint = w.SerializeAsString();
  info.block_bytes = block_bytes;
  info.owner = owner;
}

bool DiskTier::Contains(uint32_t ns, const BlockKey& key) const {
  return index_.contains(NsKey{ns, key});
}

void DiskTier::ForEachHead(absl::FunctionRef<void(uint32_t, const BlockKey&)> fn) const {
  for (const auto& [k, r] : index_) {
    if (paths_[r.path].segments[r.seg].slots[r.idx].depth == 0) fn(k.ns, k.key);
  }
}

bool DiskTier::Holds(uint32_t ns, const BlockKey& key, uint64_t checksum) const {
  auto it = index_.find(NsKey{ns, key});
  if (it == index_.end()) return false;
  const Ref& r = it->second;
  return paths_[r.path].segments[r.seg].slots[r.idx].checksum == checksum;
}

void DiskTier::Drop(uint32_t ns, const BlockKey& key) {
  if (auto it = index_.find(NsKey{ns, key}); it != index_.end()) Doom(it->second, true);
}

void DiskTier::Reset(uint32_t ns) {
  std::vector<std::vector<Ref>> doomed(paths_.size());
  for (const auto& [k, r] : index_) {
    if (k.ns == ns) doomed[r.path].push_back(r);
  }
  for (uint32_t pi = 0; pi < paths_.size(); ++pi) {
    Path& p = paths_[pi];
    // Blocks still being written are cancelled: they are freed once their write ends.
    for (Segment& s : p.segments) {
      for (Slot& sl : s.slots) {
        if (sl.st == St::kWriting && sl.ns == ns) sl.cancelled = true;
      }
    }
    if (!p.online) continue;
    for (const Ref& r : doomed[pi]) Doom(r, false);
    if (!p.ns_logged.contains(ns)) continue;
    // One Reset record stands for every Free: recovery drops what came before it.
    std::string rec;
    disklog::AppendReset(ns, &rec);
    p.ns_logged.erase(ns);
    LogAppend(pi, rec, [this, refs = std::move(doomed[pi])] {
      for (const Ref& r : refs) {
        Slot& sl = SlotAt(r);
        sl.free_logged = true;
        if (sl.readers == 0) ReleaseSlot(r);
      }
    });
  }
}

// ---- Spill ----------------------------------------------------------------------------------

bool DiskTier::CanSpill() const {
  for (const Path& p : paths_) {
    if (p.online && p.batches < kBatchesPerPath && !p.compacting) return true;
  }
  return false;
}

void DiskTier::Spill(std::vector<SpillItem> items, SpillDoneFn done) {
  auto b = std::make_shared<SpillBatch>();
  b->items = std::move(items);
  b->done = std::move(done);
  const size_t n = b->items.size();
  b->written.assign(n, false);
  b->refs.resize(n);
  // The next online path with room, round robin.
  int64_t chosen = -1;
  for (uint32_t k = 0; k < paths_.size(); ++k) {
    const uint32_t pi = (next_path_ + k) % paths_.size();
    if (paths_[pi].online && paths_[pi].batches < kBatchesPerPath && !paths_[pi].compacting) {
      chosen = pi;
      break;
    }
  }
  if (chosen < 0) {
    std::vector<std::pair<uint64_t, bool>> out;
    for (const SpillItem& it : b->items) out.emplace_back(it.token, false);
    reactor_->Defer([b, out = std::move(out)]() mutable { b->done(std::move(out)); });
    return;
  }
  const auto pi = static_cast<uint32_t>(chosen);
  next_path_ = pi + 1;
  b->path = pi;
  Path& p = paths_[pi];
  ++p.batches;
  ++busy_;
  ++clock_;
  // Slot size → blocks of this batch of that size, and those that found no slot.
  absl::flat_hash_map<uint64_t, std::pair<uint32_t, uint32_t>> need;
  for (size_t i = 0; i < n; ++i) {
    const SpillItem& it = b->items[i];
    auto ns = namespaces_.find(it.ns);
    if (ns == namespaces_.end()) continue;
    const uint64_t slot_bytes = SlotBytesFor(ns->second.block_bytes);
    if (it.length > slot_bytes || it.length < ns->second.block_bytes) continue;
    ++need[slot_bytes].first;
    Ref r;
    if (!Allocate(pi, slot_bytes, &r)) {
      ++need[slot_bytes].second;
      continue;
    }
    Slot& sl = SlotAt(r);
    sl.st = St::kWriting;
    sl.ns = it.ns;
    sl.key = it.key;
    sl.checksum = it.checksum;
    sl.depth = it.depth;
    sl.stamp = clock_;
    p.segments[r.seg].stamp = clock_;
    b->refs[i] = r;
    b->written[i] = true;
    ++b->writes;
  }
  // Make room for the next batches (as many blocks again, and those that found none): evicted
  // slots come free once their Frees are durable.
  for (const auto& [slot_bytes, counts] : need) {
    if (slot_bytes > p.segment_bytes || !p.free_segments.empty()) continue;
    const int32_t cls = ClassOf(p, slot_bytes);
    const uint64_t want = uint64_t{counts.first} + counts.second;
    if (p.classes[cls].free_slots >= want) continue;
    EvictAhead(pi, cls, static_cast<uint32_t>(want - p.classes[cls].free_slots));
  }
  if (b->writes == 0) {
    FinishSpill(pi, b);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!b->written[i]) continue;
    const SpillItem& it = b->items[i];
    const uint64_t off = OffsetOf(b->refs[i]);
    const int fd = p.direct_fd >= 0 && Aligned(it.data, it.length, off) ? p.direct_fd : p.data_fd;
    reactor_->Write(fd, it.data, it.length, off, reactor_->Callback([this, b, i, pi](int32_t res) {
      if (res != static_cast<int32_t>(b->items[i].length)) {
        b->failed = true;
        b->error = res < 0 ? -res : EIO;
      }
      if (--b->writes > 0) return;
      if (b->failed) {
        ++counters_.io_errors;
        Offline(pi, StrCat("writing blocks: ", ErrnoText(b->error)));
        FinishSpill(pi, b);
        return;
      }
      // The blocks' bytes durable before any Put names them.
      reactor_->Fsync(paths_[pi].data_fd, true, reactor_->Callback([this, b, pi](int32_t res2) {
        if (res2 < 0) {
          ++counters_.io_errors;
          Offline(pi, StrCat("syncing blocks: ", ErrnoText(-res2)));
        }
        FinishSpill(pi, b);
      }));
    }));
  }
}

void DiskTier::FinishSpill(uint32_t pi, std::shared_ptr<SpillBatch> b) {
  Path& p = paths_[pi];
  const size_t n = b->items.size();
  auto report = [this, b, pi] {
    Path& path = paths_[pi];
    std::vector<std::pair<uint64_t, bool>> out;
    out.reserve(b->items.size());
    for (size_t i = 0; i < b->items.size(); ++i) {
      bool stored = false;
      if (b->written[i]) {
        Slot& sl = SlotAt(b->refs[i]);
        if (!path.online) {
          // Nothing more happens on this path; the slot is simply abandoned.
        } else if (sl.cancelled) {
          Doom(b->refs[i], true);  // logged, then dropped: a Free follows its Put
        } else {
          Insert(b->refs[i]);
          stored = true;
          ++counters_.spilled_blocks;
          counters_.spilled_bytes += b->items[i].length;
        }
      }
      out.emplace_back(b->items[i].token, stored);
    }
    --path.batches;
    --busy_;
    b->done(std::move(out));
  };
  if (!p.online) {
    report();
    return;
  }
  std::string recs;
  for (size_t i = 0; i < n; ++i) {
    if (!b->written[i]) continue;
    Slot& sl = SlotAt(b->refs[i]);
    if (sl.cancelled || (confirm_ && !confirm_(b->items[i]))) {
      // Not wanted any more and never logged: the slot is free again at once.
      b->written[i] = false;
      sl.st = St::kDoomed;
      ReleaseSlot(b->refs[i]);
      continue;
    }
    EnsureNsLogged(pi, sl.ns);
    disklog::AppendPut(disklog::PutRec{sl.ns, sl.depth, OffsetOf(b->refs[i]), sl.checksum, sl.key},
                       &recs);
  }
  if (recs.empty()) {
    report();
    return;
  }
  LogAppend(pi, recs, std::move(report));
}

// ---- Read -----------------------------------------------------------------------------------

void DiskTier::Read(std::vector<ReadItem> items,
                    absl::AnyInvocable<void(std::vector<ReadResult>)> done) {
  struct State {
    std::vector<ReadItem> items;
    std::vector<ReadResult> results;
    size_t remaining = 0;
    absl::AnyInvocable<void(std::vector<ReadResult>)> done;
  };
  auto st = std::make_shared<State>();
  st->items = std::move(items);
  st->results.resize(st->items.size());
  st->done = std::move(done);
  st->remaining = 1;  // held until every read is issued
  for (size_t i = 0; i < st->items.size(); ++i) {
    const ReadItem& it = st->items[i];
    auto f = index_.find(NsKey{it.ns, it.key});
    if (f == index_.end()) continue;
    const Ref r = f->second;
    Path& p = paths_[r.path];
    auto nsi = namespaces_.find(it.ns);
    const uint32_t block = nsi == namespaces_.end() ? 0 : nsi->second.block_bytes;
    uint64_t len = p.segments[r.seg].slot_bytes;
    if (len > it.room) len = block;
    if (len > it.room || block == 0) continue;
    Slot& sl = SlotAt(r);
    ++sl.readers;
    sl.stamp = ++clock_;
    p.segments[r.seg].stamp = clock_;
    ++st->remaining;
    ++busy_;
    const uint64_t off = OffsetOf(r);
    const int fd = p.direct_fd >= 0 && Aligned(it.dest, len, off) ? p.direct_fd : p.data_fd;
    reactor_->Read(
        fd, it.dest, static_cast<uint32_t>(len), off,
        reactor_->Callback([this, st, i, r, block](int32_t res) {
          --busy_;
          Slot& s = SlotAt(r);
          const ReadItem& item = st->items[i];
          if (res < 0) {
            ++counters_.io_errors;
            Offline(r.path, StrCat("reading blocks: ", ErrnoText(-res)));
          } else if (static_cast<uint32_t>(res) < block || Crc64(item.dest, block) != s.checksum) {
            ++counters_.checksum_errors;
            OL_LOG(kWarning) << "KV disk tier: a block read back from " << paths_[r.path].dir
                             << " at offset " << OffsetOf(r)
                             << " does not match its CRC-64; dropped (a miss, not bad bytes)";
            if (s.st == St::kLive) Doom(r, true);
          } else if (s.st == St::kLive) {
            st->results[i] = ReadResult{true, s.checksum, s.depth};
            ++counters_.read_blocks;
            counters_.read_bytes += block;
          }
          FinishRead(r);
          if (--st->remaining == 0) st->done(std::move(st->results));
        }));
  }
  reactor_->Defer([st] {
    if (--st->remaining == 0) st->done(std::move(st->results));
  });
}

// ---- Health and figures -------------------------------------------------------------------------

void DiskTier::Tick() {
  for (uint32_t pi = 0; pi < paths_.size(); ++pi) {
    Path& p = paths_[pi];
    if (!p.online) continue;
    struct stat st {};
    if (fstat(p.data_fd, &st) == 0 && st.st_nlink == 0) {
      Offline(pi, StrCat(kDataFile, " was deleted"));
      continue;
    }
    if (fstat(p.dir_fd, &st) == 0 && st.st_nlink == 0) {
      Offline(pi, "its folder was deleted");
      continue;
    }
    MaybeCompact(pi);
  }
}

DiskTierStats DiskTier::Stats() const {
  DiskTierStats s = counters_;
  s.paths = static_cast<uint32_t>(paths_.size());
  for (const Path& p : paths_) {
    if (!p.online) continue;
    ++s.paths_online;
    s.capacity_bytes += p.data_bytes;
    s.used_bytes += p.used_slot_bytes;
  }
  s.blocks = index_.size();
  return s;
}

}  // namespace openlake::kv

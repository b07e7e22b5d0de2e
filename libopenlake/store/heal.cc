// Healing (docs/object-store.md, "Healing"). Reads queue the objects where they met a missing,
// unreadable or damaged shard, or drives that disagree; DrainHealQueue repairs them, and Heal
// walks whole buckets (a replaced drive is rebuilt this way). Repairing one object, under its
// exclusive lock: resolve the version the set agrees on; verify every drive's copy block by
// block against its checksums; rebuild each block of every drive found wanting from any k
// intact shards of that block; write the rebuilt shards to the drive's staging area, fsync,
// and commit them there with the same per-drive commit a write uses. Drives left with extra
// versions or metadata of a write that never reached quorum are cleaned the same way.
#include <cstring>

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

constexpr size_t kMaxHealQueue = 100000;

// Reads one shard block of `pos` and checks it; false when missing, short or damaged.
io::Task<bool> ReadShardBlock(FileHandle* f, uint8_t* dst, uint32_t len, uint64_t off,
                              uint64_t crc) {
  if (f == nullptr) co_return false;
  io::Reactor& r = *io::Reactor::Current();
  const int32_t n = co_await io::Op([&](io::Completion* c) { f->Read(r, dst, len, off, c); });
  co_return n == static_cast<int32_t>(len) && Crc64(dst, len) == crc;
}

// Puts `v` among a drive's records in place of its earlier copy.
void Hold(std::vector<pb::ObjectVersion>& held, const pb::ObjectVersion& v) {
  for (pb::ObjectVersion& h : held) {
    if (h.version_id() == v.version_id()) {
      h = v;
      return;
    }
  }
  held.push_back(v);
}

}  // namespace

void Engine::QueueHeal(const std::string& bucket, const std::string& key) {
  std::string id = StrCat(bucket, "/", key);
  absl::MutexLock l(&heal_mu_);
  if (heal_queue_.size() >= kMaxHealQueue || heal_queued_.contains(id)) return;
  heal_queued_.insert(std::move(id));
  heal_queue_.emplace_back(bucket, key);
}

size_t Engine::heal_backlog() const {
  absl::MutexLock l(&heal_mu_);
  return heal_queue_.size();
}

io::Task<absl::StatusOr<HealResult>> Engine::DrainHealQueue() {
  HealResult total;
  while (true) {
    std::pair<std::string, std::string> item;
    {
      absl::MutexLock l(&heal_mu_);
      if (heal_queue_.empty()) break;
      item = std::move(heal_queue_.front());
      heal_queue_.pop_front();
      heal_queued_.erase(StrCat(item.first, "/", item.second));
    }
    absl::StatusOr<HealOutcome> r = co_await HealOne(item.first, item.second);
    ++total.objects_scanned;
    if (!r.ok()) {
      ++total.objects_failed;
      OL_LOG(kWarning) << "store: healing " << item.first << "/" << item.second << ": "
                       << r.status();
      continue;
    }
    if (r->healed) ++total.objects_healed;
    total.shards_written += r->shards;
    total.bytes_written += r->bytes;
  }
  co_return total;
}

io::Task<absl::StatusOr<HealResult>> Engine::HealObject(std::string bucket, std::string key) {
  OL_CO_RETURN_IF_ERROR(ValidateBucketName(bucket));
  OL_CO_RETURN_IF_ERROR(ValidateObjectKey(key));
  OL_CO_ASSIGN_OR_RETURN(auto r, co_await HealOne(bucket, key));
  HealResult out;
  out.objects_scanned = 1;
  out.objects_healed = r.healed ? 1 : 0;
  out.shards_written = r.shards;
  out.bytes_written = r.bytes;
  co_return out;
}

io::Task<absl::StatusOr<HealOutcome>> Engine::HealOne(std::string bucket, std::string key) {
  const int set = static_cast<int>(PlaceObject(bucket, key).set);
  std::string lock_name = StrCat("o:", bucket, "/", key);
  OL_CO_ASSIGN_OR_RETURN(NsLock lock, co_await Lock(lock_name, true));
  inline_cache_.Invalidate(StrCat(bucket, "/", key));
  Resolved r = co_await ReadAndResolve(set, bucket, key);
  if (r.versions.empty()) {
    if (ErrorKindOf(r.status) != ErrorKind::kNoSuchKey) co_return r.status;
    // Not an object (deleted, or a write that never reached quorum): clear what is left.
    bool cleaned = false;
    for (int p = 0; p < n_; ++p) {
      if (api(set, p) == nullptr) continue;
      if (r.reads[static_cast<size_t>(p)].kind == MetaRead::kNotFound) continue;
      if (r.reads[static_cast<size_t>(p)].kind == MetaRead::kError &&
          ErrorKindOf(r.reads[static_cast<size_t>(p)].error) == ErrorKind::kInsufficientDrives) {
        continue;
      }
      OL_CO_RETURN_IF_ERROR(co_await RemoveObjectOnDrive(set, p, bucket, key));
      cleaned = true;
    }
    co_return HealOutcome{cleaned, 0, 0};
  }
  // Each version in turn; `drives` follows what every drive holds as they are rebuilt.
  HealDrives drives;
  drives.held.resize(static_cast<size_t>(n_));
  drives.stale.assign(static_cast<size_t>(n_), false);
  for (int p = 0; p < n_; ++p) {
    const MetaRead& m = r.reads[static_cast<size_t>(p)];
    if (api(set, p) == nullptr) continue;
    drives.held[static_cast<size_t>(p)] = GoodRecords(m, r.versions);
    // Records beyond the agreed ones (a write that never reached quorum, superseded ones).
    drives.stale[static_cast<size_t>(p)] =
        m.kind == MetaRead::kOk &&
        m.meta.versions_size() != static_cast<int>(drives.held[static_cast<size_t>(p)].size());
  }
  HealOutcome out{!r.clean, 0, 0};
  for (const pb::ObjectVersion* v : r.versions) {
    std::vector<const pb::ObjectVersion*> copy(static_cast<size_t>(n_), nullptr);
    for (int p = 0; p < n_; ++p) {
      for (const pb::ObjectVersion& c : r.reads[static_cast<size_t>(p)].meta.versions()) {
        if (c.version_id() == v->version_id() && SameVersion(c, *v)) copy[static_cast<size_t>(p)] = &c;
      }
    }
    OL_CO_RETURN_IF_ERROR(co_await HealVersion(set, bucket, key, *v, std::move(copy), drives, out));
  }
  // Drives whose records changed without a commit (inline shards, delete markers) or hold
  // more than the agreed versions.
  for (int p = 0; p < n_; ++p) {
    std::vector<pb::ObjectVersion>& held = drives.held[static_cast<size_t>(p)];
    if (!drives.stale[static_cast<size_t>(p)] || held.empty() || api(set, p) == nullptr) continue;
    DriveCommit dc;
    dc.use = true;
    dc.version = held.front();
    OL_CO_RETURN_IF_ERROR(co_await HealCommit(set, p, bucket, key, dc, held));
  }
  co_return out;
}

io::Task<absl::Status> Engine::HealVersion(int set, std::string bucket, std::string key,
                                           pb::ObjectVersion v,
                                           std::vector<const pb::ObjectVersion*> copy,
                                           HealDrives& drives, HealOutcome& out) {
  const uint32_t k = v.data_shards(), m = v.parity_shards(), n = k + m, B = v.block_size();
  const ec::Codec* codec = CodecFor(k, m);
  if (n != static_cast<uint32_t>(n_) || (codec == nullptr && !v.delete_marker())) {
    co_return absl::FailedPreconditionError("object layout does not match the set");
  }
  std::vector<bool> bad(n, false);
  std::vector<bool> online(n, false);
  for (uint32_t p = 0; p < n; ++p) {
    online[p] = api(set, static_cast<int>(p)) != nullptr;
    bad[p] = online[p] && copy[p] == nullptr;
  }
  const std::string data_dir = StrCat(ObjectDir(bucket, key), "/", DataDirOf(v));
  uint64_t written = 0;
  uint64_t bytes = 0;

  // Per position, the copy to commit (per-drive fields rebuilt below).
  std::vector<pb::ObjectVersion> fixed(n, v);
  for (uint32_t p = 0; p < n; ++p) {
    fixed[p].set_shard_index(ShardAt(v.rotation(), p, n));
    for (pb::Part& part : *fixed[p].mutable_parts()) part.clear_block_crc();
    fixed[p].clear_inline_shard();
  }

  if (v.inline_data()) {
    const uint64_t L = ShardBlockLen(v.size(), 0, k, B, true);
    std::vector<std::string> shards(n, std::string(L, '\0'));
    std::unique_ptr<bool[]> present(new bool[n]);
    int good = 0;
    for (uint32_t s = 0; s < n; ++s) present[s] = false;
    for (uint32_t p = 0; p < n; ++p) {
      const pb::ObjectVersion* c = copy[p];
      if (c == nullptr) continue;
      const bool ok = c->inline_shard().size() == L &&
                      (L == 0 || (c->parts_size() > 0 && c->parts(0).block_crc_size() > 0 &&
                                  Crc64(c->inline_shard().data(), L) == c->parts(0).block_crc(0)));
      if (!ok || c->shard_index() >= n) {
        bad[p] = true;
        continue;
      }
      shards[c->shard_index()] = c->inline_shard();
      if (!present[c->shard_index()]) ++good;
      present[c->shard_index()] = true;
    }
    bool any_bad = false;
    for (uint32_t p = 0; p < n; ++p) any_bad = any_bad || bad[p];
    if (any_bad && L > 0) {
      if (good < static_cast<int>(k)) {
        co_return Error(ErrorKind::kCorrupt, StrCat(bucket, "/", key, ": only ", good,
                                                    " intact shards, ", k, " needed"));
      }
      uint8_t* ptrs[ec::kMaxShards];
      for (uint32_t s = 0; s < n; ++s) ptrs[s] = reinterpret_cast<uint8_t*>(shards[s].data());
      OL_CO_RETURN_IF_ERROR(codec->Reconstruct(L, ptrs, absl::MakeConstSpan(present.get(), n)));
    }
    for (uint32_t p = 0; p < n; ++p) {
      const std::string& sh = shards[fixed[p].shard_index()];
      fixed[p].set_inline_shard(sh);
      if (L > 0) fixed[p].mutable_parts(0)->add_block_crc(Crc64(sh.data(), L));
    }
  } else if (!v.delete_marker()) {
    // Pass 1: which drives hold every block intact, checked on the drives, all at once.
    for (int pi = 0; pi < v.parts_size(); ++pi) {
      const pb::Part& part = v.parts(pi);
      std::vector<io::Task<absl::StatusOr<bool>>> checks;
      std::vector<uint32_t> who;
      for (uint32_t p = 0; p < n; ++p) {
        if (!online[p] || bad[p]) continue;
        const pb::ObjectVersion* c = copy[p];
        VerifyRequest req;
        req.path = StrCat(data_dir, "/", part.file());
        req.part_size = part.size();
        req.data_shards = k;
        req.block_size = B;
        req.block_crcs.assign(c->parts(pi).block_crc().begin(), c->parts(pi).block_crc().end());
        checks.push_back(api(set, static_cast<int>(p))->VerifyFile(std::move(req)));
        who.push_back(p);
      }
      std::vector<absl::StatusOr<bool>> verdicts = co_await io::WhenAll(std::move(checks));
      for (size_t i = 0; i < verdicts.size(); ++i) {
        if (!verdicts[i].ok() || !*verdicts[i]) bad[who[i]] = true;
      }
    }
    bool any_bad = false;
    for (uint32_t p = 0; p < n; ++p) any_bad = any_bad || bad[p];
    if (any_bad) {
      // Pass 2: rebuild every block of the bad drives into their staging areas.
      const std::string staged = StrCat(kTmpDir, "/heal-", Hex(NewVersionId()));
      io::AlignedBuffer data(static_cast<size_t>(n) * B);
      if (!data) co_return absl::ResourceExhaustedError("store: out of memory for healing");
      for (uint32_t p = 0; p < n; ++p) {
        if (!bad[p]) continue;
        std::string from(kTmpDir);
        absl::Status s = co_await api(set, static_cast<int>(p))->MakeDirs(staged, from);
        if (!s.ok()) {
          MarkOffline(set, static_cast<int>(p), s);
          bad[p] = false;
          online[p] = false;
        }
      }
      io::Reactor& rr = *io::Reactor::Current();
      for (int pi = 0; pi < v.parts_size(); ++pi) {
        const pb::Part& part = v.parts(pi);
        const uint64_t blocks = BlockCount(part.size(), k, B);
        std::vector<std::unique_ptr<FileHandle>> src(n), dst(n);
        for (uint32_t p = 0; p < n; ++p) {
          if (!online[p]) continue;
          DriveApi* f = api(set, static_cast<int>(p));
          if (f == nullptr) continue;
          if (bad[p]) {
            std::string path = StrCat(staged, "/", part.file());
            absl::StatusOr<std::unique_ptr<FileHandle>> h =
                co_await f->OpenFile(path, OpenMode::kCreate);
            if (!h.ok()) co_return h.status();
            dst[p] = *std::move(h);
          }
          // Every drive is a source, a bad one too: its other blocks may be intact, and when
          // every drive has some damage (each in another stripe) they are what rebuilds it.
          // Each block read is checked against its CRC-64.
          const pb::ObjectVersion* c = copy[p];
          if (c == nullptr || c->parts_size() <= pi ||
              c->parts(pi).block_crc_size() != static_cast<int>(blocks)) {
            continue;  // its metadata cannot vouch for its blocks
          }
          std::string path = StrCat(data_dir, "/", part.file());
          absl::StatusOr<std::unique_ptr<FileHandle>> h =
              co_await f->OpenFile(path, OpenMode::kRead);
          if (h.ok()) src[p] = *std::move(h);
        }
        for (uint64_t b = 0; b < blocks; ++b) {
          const auto L = static_cast<uint32_t>(ShardBlockLen(part.size(), b, k, B, false));
          uint8_t* ptrs[ec::kMaxShards];
          std::unique_ptr<bool[]> present(new bool[n]);
          int good = 0;
          for (uint32_t s = 0; s < n; ++s) {
            ptrs[s] = reinterpret_cast<uint8_t*>(data.data()) + static_cast<uint64_t>(s) * B;
            present[s] = false;
          }
          for (uint32_t p = 0; p < n && good < static_cast<int>(k); ++p) {
            if (!src[p]) continue;
            const uint32_t s = ShardAt(v.rotation(), p, n);
            const bool ok = co_await ReadShardBlock(src[p].get(), ptrs[s], L, b * B,
                                                    copy[p]->parts(pi).block_crc(static_cast<int>(b)));
            if (ok) {
              present[s] = true;
              ++good;
            }
          }
          if (good < static_cast<int>(k)) {
            for (uint32_t p = 0; p < n; ++p) {
              DriveApi* f = bad[p] ? api(set, static_cast<int>(p)) : nullptr;
              if (f != nullptr) (void)co_await f->Trash(staged);
            }
            co_return Error(ErrorKind::kCorrupt,
                            StrCat(bucket, "/", key, " part ", part.number(), " block ", b,
                                   ": only ", good, " intact shards, ", k, " needed"));
          }
          OL_CO_RETURN_IF_ERROR(codec->Reconstruct(L, ptrs, absl::MakeConstSpan(present.get(), n)));
          io::IoBatch batch(n);
          std::vector<uint32_t> who;
          for (uint32_t p = 0; p < n; ++p) {
            if (!dst[p]) continue;
            const uint32_t s = ShardAt(v.rotation(), p, n);
            fixed[p].mutable_parts(pi)->add_block_crc(Crc64(ptrs[s], L));
            FileHandle* fh = dst[p].get();
            uint8_t* sp = ptrs[s];
            who.push_back(p);
            batch.Add([&](io::Completion* c) { fh->Write(rr, sp, L, b * B, c); });
          }
          co_await batch;
          for (size_t i = 0; i < who.size(); ++i) {
            if (batch.result(i) != static_cast<int32_t>(L)) {
              co_return ErrnoStatus(batch.result(i) < 0 ? batch.result(i) : -EIO,
                                    StrCat("heal write on ", drive(set, static_cast<int>(who[i])).path));
            }
          }
          bytes += static_cast<uint64_t>(L) * who.size();
        }
        io::IoBatch syncs(n);
        for (uint32_t p = 0; p < n; ++p) {
          if (!dst[p]) continue;
          FileHandle* fh = dst[p].get();
          syncs.Add([&](io::Completion* c) { fh->Sync(rr, c); });
        }
        co_await syncs;
        for (size_t i = 0; i < syncs.size(); ++i) {
          if (syncs.result(i) < 0) co_return ErrnoStatus(syncs.result(i), "heal fdatasync");
        }
      }
      for (uint32_t p = 0; p < n; ++p) {
        if (!bad[p]) continue;
        DriveCommit dc;
        dc.use = true;
        dc.version = fixed[p];
        dc.staged_dir = staged;
        std::vector<pb::ObjectVersion>& held = drives.held[p];
        absl::Status s = co_await HealCommit(set, static_cast<int>(p), bucket, key, dc, held);
        if (!s.ok()) co_return s;
        Hold(held, fixed[p]);
        drives.stale[p] = false;  // the commit wrote exactly what it holds
        ++written;
      }
    }
  }
  if (v.inline_data() || v.delete_marker()) {
    // Their bytes (if any) are in the records: the drives' final rewrite carries them.
    for (uint32_t p = 0; p < n; ++p) {
      if (!online[p] || !bad[p]) continue;
      Hold(drives.held[p], fixed[p]);
      drives.stale[p] = true;
      ++written;
      bytes += fixed[p].inline_shard().size();
    }
  }
  out.healed = out.healed || written > 0;
  out.shards += written;
  out.bytes += bytes;
  co_return absl::OkStatus();
}

io::Task<absl::Status> Engine::HealCommit(int set, int pos, const std::string& bucket,
                                          const std::string& key, const DriveCommit& dc,
                                          std::vector<pb::ObjectVersion> others) {
  absl::Status s = co_await CommitOnDrive(set, pos, bucket, key, dc, others);
  const bool no_bucket = !s.ok() && ErrorKindOf(s) == ErrorKind::kNoSuchBucket;
  if (no_bucket) {
    absl::StatusOr<HealResult> dirs = co_await HealBucketDirs(bucket);
    if (dirs.ok()) {
      s = co_await CommitOnDrive(set, pos, bucket, key, dc, std::move(others));
    }
  }
  if (!s.ok()) s = Annotate(s, StrCat("heal commit on ", drive(set, pos).path));
  co_return s;
}

io::Task<absl::StatusOr<HealResult>> Engine::HealBucketDirs(std::string bucket) {
  HealResult out;
  // The newest record (a drive offline during a policy change holds an older one).
  std::string record;
  int64_t newest = -1;
  std::vector<int64_t> updated(drives_.size(), -1);
  const std::string path = BucketMetaPath(bucket);
  for (size_t i = 0; i < drives_.size(); ++i) {
    Drive& d = *drives_[i];
    if (!d.online.load()) continue;
    absl::StatusOr<std::string> bytes = co_await d.api->ReadFile(path);
    pb::BucketMeta meta;
    if (bytes.ok() && DecodeRecord(RecordType::kBucketMeta, *bytes, &meta).ok()) {
      updated[i] = meta.updated_ns();
      if (meta.updated_ns() > newest) {
        newest = meta.updated_ns();
        record = *bytes;
      }
    }
  }
  for (size_t i = 0; i < drives_.size(); ++i) {
    Drive& d = *drives_[i];
    if (!d.online.load()) continue;
    absl::StatusOr<bool> e = co_await d.api->Exists(bucket);
    if (e.ok() && *e) {
      if (!record.empty() && updated[i] >= 0 && updated[i] < newest) {
        absl::Status s = co_await d.api->WriteFile(path, record, true);
        if (!s.ok()) co_return Annotate(s, StrCat("updating bucket ", bucket, " on ", d.path));
        ++out.buckets_healed;
      }
      continue;
    }
    std::string none;
    absl::Status s = co_await d.api->MakeDirs(bucket, none);
    if (s.ok() && !record.empty()) s = co_await d.api->WriteFile(path, record, true);
    if (!s.ok()) co_return Annotate(s, StrCat("recreating bucket ", bucket, " on ", d.path));
    ++out.buckets_healed;
  }
  co_return out;
}

io::Task<absl::StatusOr<HealResult>> Engine::Heal(std::string bucket, std::string prefix) {
  std::vector<std::string> buckets;
  if (bucket.empty()) {
    OL_CO_ASSIGN_OR_RETURN(std::vector<BucketInfo> all, co_await ListBuckets());
    for (BucketInfo& b : all) buckets.push_back(std::move(b.name));
  } else {
    OL_CO_RETURN_IF_ERROR((co_await StatBucket(bucket)).status());
    buckets.push_back(bucket);
  }
  if (!ValidatePrefix(prefix).ok()) co_return HealResult{};
  HealResult total;
  for (const std::string& b : buckets) {
    OL_CO_ASSIGN_OR_RETURN(HealResult br, co_await HealBucketDirs(b));
    total.buckets_healed += br.buckets_healed;
    for (int s = 0; s < sets_; ++s) {
      std::string marker;
      while (true) {
        // Any drive's copy counts here: a write that reached fewer than k drives is cleaned.
        WalkRequest req;
        req.bucket = b;
        req.prefix = prefix;
        req.marker = marker;
        req.limit = 1000;
        OL_CO_ASSIGN_OR_RETURN(std::vector<WalkItem> items, co_await WalkSet(s, req, 1));
        if (items.empty()) break;
        for (const WalkItem& it : items) {
          absl::StatusOr<HealOutcome> r = co_await HealOne(b, it.key);
          ++total.objects_scanned;
          if (!r.ok()) {
            ++total.objects_failed;
            OL_LOG(kWarning) << "store: healing " << b << "/" << it.key << ": " << r.status();
            continue;
          }
          if (r->healed) ++total.objects_healed;
          total.shards_written += r->shards;
          total.bytes_written += r->bytes;
        }
        marker = items.back().key;
        if (items.size() < 1000) break;
      }
    }
  }
  co_return total;
}

}  // namespace openlake::store

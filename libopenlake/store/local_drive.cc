#include "store/local_drive.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/container/flat_hash_set.h"

#include "store/engine.h"
#include "store/errors.h"
#include "store/names.h"

#include "openlake/checksum.h"
#include "openlake/io/buffer.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::store {
namespace {

// An object's metadata file ("<bucket>/<escaped key>/%meta"), which may be packed.
bool IsObjectMetaPath(std::string_view path) {
  const std::string_view tail = "/%meta";
  return path.size() > tail.size() && path.substr(path.size() - tail.size()) == tail &&
         path.substr(0, kSysDir.size()) != kSysDir;
}

// Two walk pages in key order, merged into one of at most `limit` items.
std::vector<WalkItem> MergeWalks(std::vector<WalkItem> a, std::vector<WalkItem> b,
                                 size_t limit) {
  std::vector<WalkItem> out;
  out.reserve(std::min(limit, a.size() + b.size()));
  size_t i = 0, j = 0;
  while (out.size() < limit && (i < a.size() || j < b.size())) {
    if (j == b.size() || (i < a.size() && a[i].key < b[j].key)) {
      out.push_back(std::move(a[i++]));
    } else if (i == a.size() || b[j].key < a[i].key) {
      out.push_back(std::move(b[j++]));
    } else {
      // The same name from both: a common prefix holding keys of both kinds.
      out.push_back(std::move(a[i++]));
      ++j;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<MetaPack*> LocalDrive::Pack() {
  absl::MutexLock lock(&pack_mu_);
  if (pack_ == nullptr) {
    OL_ASSIGN_OR_RETURN(pack_, MetaPack::For(fs_->root()));
  }
  return pack_.get();
}

void LocalDrive::ResetPack() {
  absl::StatusOr<MetaPack*> pack = Pack();
  if (pack.ok()) (*pack)->Reset();
}

io::Task<absl::StatusOr<std::string>> LocalDrive::ReadFile(std::string path) {
  if (IsObjectMetaPath(path)) {
    absl::StatusOr<MetaPack*> pack = Pack();
    if (!pack.ok()) co_return pack.status();
    absl::StatusOr<std::string> packed = (*pack)->Read(path);
    if (!absl::IsNotFound(packed.status())) {
      // The drive must still answer, and hold the bucket's folder (one removed under a
      // running store took the bucket's objects on this drive with it).
      absl::StatusOr<bool> bucket_there = fs_->Exists(path.substr(0, path.find('/')));
      if (!bucket_there.ok()) co_return bucket_there.status();
      if (!*bucket_there) co_return absl::NotFoundError(path);
      co_return packed;
    }
  }
  absl::StatusOr<std::string> out = co_await ReadWholeFile(*fs_, std::move(path));
  co_return out;
}

io::Task<absl::Status> LocalDrive::WriteFile(std::string path, std::string data, bool sync_dir) {
  const absl::Status s = co_await AtomicReplace(*fs_, std::move(path), std::move(data), sync_dir);
  co_return s;
}

io::Task<absl::StatusOr<std::unique_ptr<FileHandle>>> LocalDrive::OpenFile(std::string path,
                                                                           OpenMode mode) {
  co_return fs_->Open(path, mode);
}

io::Task<absl::Status> LocalDrive::MakeDirs(std::string path, std::string parents_from) {
  const absl::Status s = co_await MakeDirsDurable(*fs_, std::move(path), std::move(parents_from));
  co_return s;
}

io::Task<absl::StatusOr<std::vector<DirEntry>>> LocalDrive::ReadDir(std::string path) {
  co_return fs_->ReadDir(path);
}

io::Task<absl::StatusOr<bool>> LocalDrive::Exists(std::string path) {
  co_return fs_->Exists(path);
}

io::Task<absl::Status> LocalDrive::Rename(std::string from, std::string to) {
  co_return fs_->Rename(from, to);
}

io::Task<absl::Status> LocalDrive::LinkInto(std::string dir, std::vector<LinkPair> links) {
  std::string from(kTmpDir);
  OL_CO_RETURN_IF_ERROR(co_await MakeDirsDurable(*fs_, dir, from));
  for (const LinkPair& l : links) OL_CO_RETURN_IF_ERROR(fs_->Link(l.from, l.to));
  co_return absl::OkStatus();
}

io::Task<absl::Status> LocalDrive::Unlink(std::string path) { co_return fs_->Unlink(path); }

io::Task<absl::Status> LocalDrive::RemoveDir(std::string path) { co_return fs_->RemoveDir(path); }

absl::Status LocalDrive::TrashNow(const std::string& path) {
  auto exists = fs_->Exists(path);
  if (!exists.ok()) return exists.status();
  if (!*exists) return absl::OkStatus();
  OL_RETURN_IF_ERROR(fs_->Rename(path, StrCat(kTrashDir, "/", Hex(NewVersionId()))));
  if (trashed_) trashed_();
  return absl::OkStatus();
}

io::Task<absl::Status> LocalDrive::Trash(std::string path) {
  // A bucket's folder (a name at the top, outside the system folder): the journal's earlier
  // steps in it must not come back with a bucket of the same name.
  if (path.find('/') == std::string::npos && path.rfind(kSysDir, 0) != 0) {
    pb::JournalEntry e;
    e.set_op(pb::JournalEntry::DROP_BUCKET);
    e.set_bucket(path);
    DriveJournal::Applying applying;
    OL_CO_RETURN_IF_ERROR(co_await Log(std::move(e), &applying));
    OL_CO_ASSIGN_OR_RETURN(MetaPack * pack, Pack());
    OL_CO_RETURN_IF_ERROR(pack->DropBucket(path, /*sync=*/journal_ == nullptr));
    co_return TrashNow(path);
  }
  co_return TrashNow(path);
}

io::Task<absl::Status> LocalDrive::SyncDir(std::string path) {
  const absl::Status s = co_await store::SyncDir(*fs_, std::move(path));
  co_return s;
}

io::Task<absl::StatusOr<DriveUsage>> LocalDrive::Usage() {
  OL_CO_ASSIGN_OR_RETURN(uint64_t free, fs_->FreeBytes());
  DriveUsage u;
  u.free_bytes = free;
  co_return u;
}

io::Task<absl::Status> LocalDrive::Log(pb::JournalEntry e, DriveJournal::Applying* applying) {
  if (journal_ == nullptr) co_return absl::OkStatus();
  const absl::Status s = co_await journal_->Log(std::move(e), applying);
  co_return s;
}

io::Task<absl::Status> LocalDrive::CommitObject(CommitStep step) {
  OL_CO_ASSIGN_OR_RETURN(MetaPack * pack, Pack());
  if (journal_ != nullptr && step.staged_dir.empty() && step.keep_data_dirs.empty() &&
      step.meta.size() <= MetaPack::kMaxRecord) {
    // No version has a data folder: the record is packed, and the key needs no folder.
    absl::StatusOr<bool> bucket_there = fs_->Exists(step.bucket);
    if (!bucket_there.ok()) co_return bucket_there.status();
    if (!*bucket_there) {
      co_return Error(ErrorKind::kNoSuchBucket,
                      StrCat("bucket \"", step.bucket, "\" is missing on ", fs_->root()));
    }
    pb::JournalEntry e;
    e.set_op(pb::JournalEntry::PUT_META);
    e.set_bucket(step.bucket);
    e.set_key(step.key);
    e.set_meta(step.meta);
    e.set_packed(true);
    DriveJournal::Applying applying;
    OL_CO_RETURN_IF_ERROR(co_await Log(std::move(e), &applying));
    co_return PutPackedNow(step.bucket, step.key, step.meta);
  }
  const std::string dir = ObjectDir(step.bucket, step.key);
  absl::Status s;
  bool new_dir = false;  // made here: it holds no data folder to clean up
  if (journal_ != nullptr && step.staged_dir.empty()) {
    // The folders need not be durable yet: a replay of the step makes them again.
    std::vector<std::string> unsynced;
    s = fs_->MakeDirs(dir, step.bucket, &unsynced);
    new_dir = !unsynced.empty();
  } else {
    s = co_await MakeDirsDurable(*fs_, dir, step.bucket);
  }
  if (absl::IsNotFound(s)) {
    co_return Error(ErrorKind::kNoSuchBucket,
                    StrCat("bucket \"", step.bucket, "\" is missing on ", fs_->root()));
  }
  OL_CO_RETURN_IF_ERROR(s);
  if (!step.staged_dir.empty()) {
    // A data folder of this version may be there already (a heal, a retried commit). The
    // rename is made durable here: the journal holds metadata, never data.
    const std::string data = StrCat(dir, "/", step.data_dir);
    OL_CO_RETURN_IF_ERROR(TrashNow(data));
    OL_CO_RETURN_IF_ERROR(fs_->Rename(step.staged_dir, data));
    OL_CO_RETURN_IF_ERROR(co_await store::SyncDir(*fs_, dir));
  }
  const std::string meta_path = StrCat(dir, "/", kMetaName);
  if (journal_ != nullptr) {
    pb::JournalEntry e;
    e.set_op(pb::JournalEntry::PUT_META);
    e.set_bucket(step.bucket);
    e.set_key(step.key);
    e.set_meta(step.meta);
    DriveJournal::Applying applying;
    OL_CO_RETURN_IF_ERROR(co_await Log(std::move(e), &applying));
    OL_CO_RETURN_IF_ERROR(co_await AtomicReplace(*fs_, meta_path, std::move(step.meta),
                                                 /*sync_dir=*/false, /*sync_data=*/false));
  } else {
    OL_CO_RETURN_IF_ERROR(
        co_await AtomicReplace(*fs_, meta_path, std::move(step.meta), step.sync_dir));
  }
  // A packed record of the key would hide the new file: it goes (durably, when no journal
  // step covers it; until then a read finds the older record, as after a failed commit).
  OL_CO_RETURN_IF_ERROR(pack->Remove(step.bucket, step.key, /*sync=*/journal_ == nullptr));
  // Data folders no record uses (failed writes, versions already replaced) go.
  if (new_dir) co_return absl::OkStatus();
  absl::flat_hash_set<std::string> used(step.keep_data_dirs.begin(), step.keep_data_dirs.end());
  auto entries = fs_->ReadDir(dir);
  if (entries.ok()) {
    for (const DirEntry& e : *entries) {
      if (e.name.rfind(kDataPrefix, 0) == 0 && !used.contains(e.name)) {
        (void)TrashNow(StrCat(dir, "/", e.name));
      }
    }
  }
  co_return absl::OkStatus();
}

io::Task<absl::Status> LocalDrive::RemoveObject(std::string bucket, std::string key) {
  pb::JournalEntry e;
  e.set_op(pb::JournalEntry::REMOVE);
  e.set_bucket(bucket);
  e.set_key(key);
  DriveJournal::Applying applying;
  OL_CO_RETURN_IF_ERROR(co_await Log(std::move(e), &applying));
  co_return RemoveObjectNow(bucket, key, /*sync=*/journal_ == nullptr);
}

absl::Status LocalDrive::RemoveObjectNow(const std::string& bucket, const std::string& key,
                                         bool sync) {
  OL_ASSIGN_OR_RETURN(MetaPack * pack, Pack());
  OL_RETURN_IF_ERROR(pack->Remove(bucket, key, sync));
  return RemoveFolderNow(bucket, key);
}

absl::Status LocalDrive::PutPackedNow(const std::string& bucket, const std::string& key,
                                      const std::string& meta) {
  OL_ASSIGN_OR_RETURN(MetaPack * pack, Pack());
  OL_RETURN_IF_ERROR(pack->Put(bucket, key, meta, /*sync=*/false));
  return RemoveFolderNow(bucket, key);
}

absl::Status LocalDrive::RemoveFolderNow(const std::string& bucket, const std::string& key) {
  std::string dir = ObjectDir(bucket, key);
  auto entries = fs_->ReadDir(dir);
  if (!entries.ok()) {
    if (absl::IsNotFound(entries.status())) return absl::OkStatus();
    return entries.status();
  }
  for (const DirEntry& e : *entries) {
    if (e.name == kMetaName) {
      OL_RETURN_IF_ERROR(fs_->Unlink(StrCat(dir, "/", e.name)));
    } else if (e.name.rfind(kDataPrefix, 0) == 0) {
      OL_RETURN_IF_ERROR(TrashNow(StrCat(dir, "/", e.name)));
    }
  }
  // Prune folders left empty, up to (not including) the bucket.
  while (dir.size() > bucket.size()) {
    if (!fs_->RemoveDir(dir).ok()) break;
    dir = ParentOf(dir);
  }
  return absl::OkStatus();
}

absl::Status LocalDrive::OpenJournal(bool keep) {
  OL_RETURN_IF_ERROR(Pack().status());
  OL_ASSIGN_OR_RETURN(journal_, DriveJournal::Open(fs_, [this](const pb::JournalEntry& e) {
                        return ApplyNow(e);
                      }));
  if (!keep) journal_.reset();
  return absl::OkStatus();
}

absl::Status LocalDrive::ApplyNow(const pb::JournalEntry& e) {
  // What is replayed is made durable by one syncfs after the replay: nothing syncs here.
  OL_ASSIGN_OR_RETURN(MetaPack * pack, Pack());
  if (e.op() == pb::JournalEntry::REMOVE) return RemoveObjectNow(e.bucket(), e.key(), false);
  if (e.op() == pb::JournalEntry::DROP_BUCKET) return pack->DropBucket(e.bucket(), false);
  if (e.op() != pb::JournalEntry::PUT_META) return absl::OkStatus();
  OL_ASSIGN_OR_RETURN(bool bucket_there, fs_->Exists(e.bucket()));
  if (!bucket_there) return absl::OkStatus();  // deleted since: nothing to bring back
  if (e.packed()) return PutPackedNow(e.bucket(), e.key(), e.meta());
  OL_RETURN_IF_ERROR(pack->Remove(e.bucket(), e.key(), /*sync=*/false));
  const std::string dir = ObjectDir(e.bucket(), e.key());
  std::vector<std::string> unsynced;  // the syncfs after the replay covers them
  OL_RETURN_IF_ERROR(fs_->MakeDirs(dir, e.bucket(), &unsynced));
  const std::string tmp = TmpName("rec");
  const std::string full = StrCat(fs_->root(), "/", tmp);
  const int fd = open(full.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(errno, StrCat("open ", full));
  const std::string& meta = e.meta();
  size_t done = 0;
  while (done < meta.size()) {
    const ssize_t n = write(fd, meta.data() + done, meta.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      close(fd);
      return ErrnoStatus(err, StrCat("write ", full));
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  return fs_->Rename(tmp, StrCat(dir, "/", kMetaName));
}

io::Task<absl::StatusOr<std::vector<WalkItem>>> LocalDrive::Walk(WalkRequest request) {
  OL_CO_ASSIGN_OR_RETURN(MetaPack * pack, Pack());
  OL_CO_ASSIGN_OR_RETURN(bool bucket_there, fs_->Exists(request.bucket));
  if (!bucket_there) co_return std::vector<WalkItem>();
  std::vector<WalkItem> packed = pack->Walk(request);
  std::vector<WalkItem> folders = WalkDrive(*fs_, request);
  if (packed.empty()) co_return folders;
  co_return MergeWalks(std::move(folders), std::move(packed), request.limit);
}

io::Task<absl::StatusOr<bool>> LocalDrive::VerifyFile(VerifyRequest request) {
  const uint32_t k = request.data_shards, B = request.block_size;
  if (k == 0 || B == 0) co_return absl::InvalidArgumentError("verify: no layout");
  const uint64_t blocks = BlockCount(request.part_size, k, B);
  if (request.block_crcs.size() != blocks) co_return false;
  if (blocks == 0) co_return true;
  absl::StatusOr<std::unique_ptr<FileHandle>> h = fs_->Open(request.path, OpenMode::kRead);
  if (!h.ok()) co_return false;
  io::AlignedBuffer buf(B);
  if (!buf) co_return absl::ResourceExhaustedError("store: out of memory for a verify");
  io::Reactor& r = *io::Reactor::Current();
  FileHandle* f = h->get();
  for (uint64_t b = 0; b < blocks; ++b) {
    const auto len =
        static_cast<uint32_t>(ShardBlockLen(request.part_size, b, k, B, /*inline_data=*/false));
    std::byte* dst = buf.data();
    const uint64_t off = b * B;
    const int32_t n =
        co_await io::Op([&](io::Completion* c) { f->Read(r, dst, len, off, c); });
    if (n != static_cast<int32_t>(len) || Crc64(dst, len) != request.block_crcs[b]) {
      co_return false;
    }
  }
  co_return true;
}

}  // namespace openlake::store

// Stat, delete and copy of objects; conditional requests and byte ranges.
#include <algorithm>

#include "store/engine.h"
#include "store/errors.h"
#include "store/names.h"

#include "openlake/log.h"
#include "openlake/strings.h"

namespace openlake::store {
namespace {

io::Task<absl::Status> Done() { co_return absl::OkStatus(); }

std::string Unquote(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '"')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '"')) s.remove_suffix(1);
  return std::string(s);
}

// "a", "\"a\", b" or "*" against an ETag.
bool EtagMatches(std::string_view list, std::string_view etag) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    std::string one = Unquote(list.substr(start, end - start));
    if (one.rfind("W/", 0) == 0) one = Unquote(one.substr(2));
    if (one == "*" || one == etag) return true;
    start = end + 1;
  }
  return false;
}

// HTTP dates have whole seconds.
absl::Time Seconds(absl::Time t) { return absl::FromUnixSeconds(absl::ToUnixSeconds(t)); }

}  // namespace

absl::Status CheckConditions(const ObjectInfo& info, const Conditions& c) {
  const absl::Time mtime = Seconds(info.mod_time);
  if (!c.if_match.empty()) {
    if (!EtagMatches(c.if_match, info.etag)) {
      return Error(ErrorKind::kPreconditionFailed, "If-Match: the ETag differs");
    }
  } else if (c.if_unmodified_since && mtime > *c.if_unmodified_since) {
    return Error(ErrorKind::kPreconditionFailed, "If-Unmodified-Since: modified since");
  }
  if (!c.if_none_match.empty()) {
    if (EtagMatches(c.if_none_match, info.etag)) {
      return Error(ErrorKind::kNotModified, "If-None-Match: the ETag matches");
    }
  } else if (c.if_modified_since && mtime <= *c.if_modified_since) {
    return Error(ErrorKind::kNotModified, "If-Modified-Since: not modified since");
  }
  return absl::OkStatus();
}

absl::Status CheckWriteConditions(const Resolved& cur, const WriteConditions& when) {
  if (!Conditional(when)) return absl::OkStatus();
  const bool exists = cur.status.ok();
  const ErrorKind kind = ErrorKindOf(cur.status);
  // A key whose current version is a delete marker does not exist.
  if (!exists && kind != ErrorKind::kNoSuchKey && kind != ErrorKind::kDeleteMarker) {
    return cur.status;
  }
  if (when.if_none_match && exists) {
    return Error(ErrorKind::kPreconditionFailed, "If-None-Match: the key exists");
  }
  if (!when.if_match.empty()) {
    // NoSuchKey, as S3 answers an If-Match of a missing key.
    if (!exists) return Error(ErrorKind::kNoSuchKey, "If-Match: no such key");
    if (!EtagMatches(when.if_match, cur.version.etag())) {
      return Error(ErrorKind::kPreconditionFailed, "If-Match: the ETag differs");
    }
  }
  return absl::OkStatus();
}

absl::Status ResolveRange(uint64_t size, const std::optional<RangeSpec>& range, uint64_t* offset,
                          uint64_t* length) {
  *offset = 0;
  *length = size;
  if (!range) return absl::OkStatus();
  const RangeSpec& r = *range;
  if (r.suffix) {
    if (*r.suffix == 0) {
      return Error(ErrorKind::kInvalidRange, "the range asks for the last 0 bytes");
    }
    const uint64_t n = std::min(*r.suffix, size);
    if (n == 0) return Error(ErrorKind::kInvalidRange, "the object is empty");
    *offset = size - n;
    *length = n;
    return absl::OkStatus();
  }
  if (!r.first) return absl::OkStatus();
  if (*r.first >= size) {
    return Error(ErrorKind::kInvalidRange,
                 StrCat("the range starts at ", *r.first, ", past the ", size, "-byte object"));
  }
  uint64_t last = size - 1;
  if (r.last) {
    if (*r.last < *r.first) return absl::OkStatus();  // not a valid range: the whole object
    last = std::min(last, *r.last);
  }
  *offset = *r.first;
  *length = last - *r.first + 1;
  return absl::OkStatus();
}

io::Task<absl::StatusOr<ObjectInfo>> Engine::StatObject(std::string bucket, std::string key,
                                                        Conditions conditions) {
  OL_CO_RETURN_IF_ERROR(ValidateBucketName(bucket));
  OL_CO_RETURN_IF_ERROR(ValidateObjectKey(key));
  OL_CO_ASSIGN_OR_RETURN(std::optional<std::string> want, ParseVersionId(conditions.version_id));
  if (!want) {
    if (std::shared_ptr<const InlineCache::Entry> hit =
            inline_cache_.Find(StrCat(bucket, "/", key))) {
      OL_CO_RETURN_IF_ERROR(CheckConditions(hit->info, conditions));
      co_return hit->info;
    }
  }
  const int set = static_cast<int>(PlaceObject(bucket, key).set);
  Resolved r = co_await ResolveForRead(set, bucket, key, want);
  OL_CO_RETURN_IF_ERROR(r.status);
  ObjectInfo info = ToObjectInfo(bucket, key, r.version);
  info.is_latest = !r.versions.empty() && r.versions.front()->version_id() == r.version.version_id();
  OL_CO_RETURN_IF_ERROR(CheckConditions(info, conditions));
  co_return info;
}

io::Task<absl::Status> Store::DeleteObject(std::string bucket, std::string key) {
  DeleteOptions options;
  absl::StatusOr<DeleteResult> r =
      co_await DeleteObject(std::move(bucket), std::move(key), std::move(options));
  co_return r.status();
}

io::Task<absl::StatusOr<DeleteResult>> Engine::DeleteObject(std::string bucket, std::string key,
                                                            DeleteOptions options) {
  OL_CO_RETURN_IF_ERROR(ValidateBucketName(bucket));
  OL_CO_RETURN_IF_ERROR(ValidateObjectKey(key));
  OL_CO_ASSIGN_OR_RETURN(std::optional<std::string> want, ParseVersionId(options.version_id));
  const Placement pl = PlaceObject(bucket, key);
  const int set = static_cast<int>(pl.set);
  std::string lock_name = StrCat("o:", bucket, "/", key);
  OL_CO_ASSIGN_OR_RETURN(NsLock lock, co_await Lock(lock_name, true));
  inline_cache_.Invalidate(StrCat(bucket, "/", key));
  Resolved r = co_await ReadAndResolve(set, bucket, key, want);
  if (want) co_return co_await RemoveVersion(set, bucket, key, std::move(r));
  const ErrorKind kind = ErrorKindOf(r.status);
  // A key with versions of its own ids is never removed whole by a delete that does not know
  // the bucket is versioned (a stale view of its state): it gets a null delete marker.
  for (const pb::ObjectVersion* v : r.versions) {
    if (options.versioning == Versioning::kUnversioned && v->versioned()) {
      options.versioning = Versioning::kSuspended;
    }
  }
  if (options.versioning == Versioning::kUnversioned) {
    if (!r.status.ok()) {
      if (kind != ErrorKind::kNoSuchKey && kind != ErrorKind::kDeleteMarker) co_return r.status;
      // Leftovers of failed writes that never reached quorum go quietly.
      if (!r.clean) QueueHeal(bucket, key);
      const absl::Status missing = co_await NotFoundError(set, bucket, key);
      co_return missing;
    }
  } else if (!r.status.ok() && kind != ErrorKind::kDeleteMarker) {
    if (kind != ErrorKind::kNoSuchKey) co_return r.status;
    const bool exists = co_await BucketExistsOnSet(set, bucket);
    if (!exists) {
      const absl::Status missing = co_await NotFoundError(set, bucket, key);
      co_return missing;
    }
  }
  // Without versioning, a tombstone first (phase 1), so that a crash mid-delete leaves the
  // object or nothing. With it, a delete marker: a version of its own (Suspended: the null
  // one).
  pb::ObjectVersion mark;
  mark.set_version_id(NewVersionId());
  mark.set_mod_time_ns(NowNs());
  if (options.versioning == Versioning::kUnversioned) {
    mark.set_deleted(true);
  } else {
    mark.set_delete_marker(true);
    mark.set_versioned(options.versioning == Versioning::kEnabled);
  }
  mark.set_data_shards(static_cast<uint32_t>(k_));
  mark.set_parity_shards(static_cast<uint32_t>(m_));
  mark.set_block_size(opts_.block_size);
  mark.set_rotation(pl.rotation);
  std::vector<DriveCommit> commits(static_cast<size_t>(n_));
  for (int p = 0; p < n_; ++p) {
    DriveCommit& dc = commits[static_cast<size_t>(p)];
    dc.use = api(set, p) != nullptr;
    dc.version = mark;
    dc.version.set_shard_index(ShardAt(pl.rotation, static_cast<uint32_t>(p),
                                       static_cast<uint32_t>(n_)));
  }
  int64_t mod_time = 0;
  OL_CO_RETURN_IF_ERROR(StillHeld(lock, key));
  OL_CO_RETURN_IF_ERROR(
      co_await CommitVersion(set, bucket, key, std::move(commits), write_quorum_, &mod_time));
  DeleteResult out;
  if (mark.delete_marker()) {
    out.delete_marker = true;
    out.version_id = S3VersionIdOf(mark);
  }
  co_return out;
}

io::Task<absl::StatusOr<DeleteResult>> Engine::RemoveVersion(int set, std::string bucket,
                                                             std::string key, Resolved r) {
  const ErrorKind kind = ErrorKindOf(r.status);
  if (!r.status.ok() && kind != ErrorKind::kDeleteMarker) {
    // Removing a version that is not there succeeds, as in S3.
    if (kind == ErrorKind::kNoSuchKey || kind == ErrorKind::kNoSuchVersion) {
      const bool exists = co_await BucketExistsOnSet(set, bucket);
      if (!exists) {
        const absl::Status missing = co_await NotFoundError(set, bucket, key);
        co_return missing;
      }
      co_return DeleteResult{};
    }
    co_return r.status;
  }
  DeleteResult out;
  out.version_id = S3VersionIdOf(r.version);
  out.delete_marker = r.version.delete_marker();
  // Every drive is rewritten without the version's records (a drive holding only those loses
  // the key); the records of other versions stay.
  const std::string identity = IdentityOf(r.version);
  std::vector<io::Task<absl::Status>> writes;
  for (int p = 0; p < n_; ++p) {
    const MetaRead& m = r.reads[static_cast<size_t>(p)];
    if (m.kind != MetaRead::kOk || api(set, p) == nullptr) continue;
    std::vector<pb::ObjectVersion> rest = GoodRecords(m, r.versions);
    rest.erase(std::remove_if(rest.begin(), rest.end(),
                              [&](const pb::ObjectVersion& v) {
                                return IdentityOf(v) == identity;
                              }),
               rest.end());
    if (static_cast<int>(rest.size()) == m.meta.versions_size()) {
      writes.push_back(Done());  // nothing of it here, nothing stray
      continue;
    }
    writes.push_back(RewriteRecords(set, p, bucket, key, std::move(rest)));
  }
  std::vector<absl::Status> results = co_await io::WhenAll(std::move(writes));
  int ok = 0;
  for (const absl::Status& s : results) ok += s.ok() ? 1 : 0;
  if (ok < static_cast<int>(results.size())) QueueHeal(bucket, key);
  if (ok < write_quorum_) {
    co_return Error(ErrorKind::kInsufficientDrives,
                    StrCat("removing the version reached ", ok, " drives; ", write_quorum_,
                           " needed"));
  }
  co_return out;
}

io::Task<absl::Status> Engine::RewriteRecords(int set, int pos, std::string bucket,
                                              std::string key,
                                              std::vector<pb::ObjectVersion> records) {
  if (records.empty()) {
    const absl::Status s = co_await RemoveObjectOnDrive(set, pos, bucket, key);
    co_return s;
  }
  DriveCommit dc;
  dc.use = true;
  dc.version = records.front();
  co_return co_await CommitOnDrive(set, pos, bucket, key, dc, std::move(records));
}

io::Task<absl::StatusOr<ObjectInfo>> Engine::UpdateObjectMeta(std::string bucket,
                                                              std::string key,
                                                              MetaUpdate update) {
  OL_CO_RETURN_IF_ERROR(ValidateBucketName(bucket));
  OL_CO_RETURN_IF_ERROR(ValidateObjectKey(key));
  OL_CO_ASSIGN_OR_RETURN(std::optional<std::string> want, ParseVersionId(update.version_id));
  const int set = static_cast<int>(PlaceObject(bucket, key).set);
  const std::string lock_name = StrCat("o:", bucket, "/", key);
  OL_CO_ASSIGN_OR_RETURN(NsLock lock, co_await Lock(lock_name, true));
  inline_cache_.Invalidate(StrCat(bucket, "/", key));
  Resolved cur = co_await ReadAndResolve(set, bucket, key, want);
  if (!cur.status.ok()) {
    if (ErrorKindOf(cur.status) == ErrorKind::kNoSuchKey) {
      const absl::Status missing = co_await NotFoundError(set, bucket, key);
      co_return missing;
    }
    co_return cur.status;
  }
  WriteConditions when;
  when.if_match = update.if_match;
  OL_CO_RETURN_IF_ERROR(CheckWriteConditions(cur, when));
  // A new record over the same shards: each drive that holds the version gets its own copy
  // (per-drive fields and inline shard kept) with the new metadata and the version's S3
  // identity. It is newer by a nanosecond, which no answer shows, so that it supersedes the
  // old record on every read quorum.
  const std::string id = NewVersionId();
  const std::string data_id = DataIdOf(cur.version);
  const std::string identity = IdentityOf(cur.version);
  std::vector<DriveCommit> commits(static_cast<size_t>(n_));
  int holders = 0;
  for (int p = 0; p < n_; ++p) {
    const pb::ObjectVersion* held = cur.copy[static_cast<size_t>(p)];
    if (held == nullptr || api(set, p) == nullptr) continue;
    DriveCommit& dc = commits[static_cast<size_t>(p)];
    dc.use = true;
    dc.version = *held;
    dc.version.set_version_id(id);
    dc.version.set_data_id(data_id);
    if (cur.version.versioned()) dc.version.set_origin_id(identity);
    dc.version.set_mod_time_ns(cur.version.mod_time_ns() + 1);
    auto& meta = *dc.version.mutable_user_meta();
    for (const auto& [name, value] : update.set) meta[name] = value;
    for (const std::string& name : update.erase) meta.erase(name);
    ++holders;
  }
  const int quorum = QuorumOf(cur.version.data_shards(), cur.version.parity_shards());
  if (holders < quorum) {
    co_return Error(ErrorKind::kInsufficientDrives,
                    StrCat("only ", holders, " drives hold the object; ", quorum,
                           " must take its new metadata"));
  }
  pb::ObjectVersion result;
  for (const DriveCommit& dc : commits) {
    if (dc.use) result = dc.version;
  }
  OL_CO_RETURN_IF_ERROR(StillHeld(lock, key));
  OL_CO_RETURN_IF_ERROR(
      co_await CommitVersion(set, bucket, key, std::move(commits), quorum, nullptr));
  co_return ToObjectInfo(bucket, key, result);
}

io::Task<absl::StatusOr<ObjectInfo>> Engine::CopyObject(std::string src_bucket,
                                                        std::string src_key,
                                                        std::string dst_bucket,
                                                        std::string dst_key,
                                                        std::optional<PutOptions> replace,
                                                        Conditions conditions,
                                                        WriteConditions when) {
  GetOptions get;
  get.conditions = std::move(conditions);
  OL_CO_ASSIGN_OR_RETURN(std::unique_ptr<ObjectReader> in,
                         co_await OpenObject(src_bucket, src_key, std::move(get)));
  PutOptions put;
  if (replace) {
    put = *std::move(replace);
  } else {
    // The source's metadata; an unversioned destination.
    put.content_type = in->info().content_type;
    put.user_meta = in->info().user_meta;
  }
  put.size = static_cast<int64_t>(in->info().size);
  put.when = std::move(when);
  OL_CO_ASSIGN_OR_RETURN(std::unique_ptr<ObjectWriter> out,
                         co_await CreateObject(dst_bucket, dst_key, std::move(put)));
  while (true) {
    OL_CO_ASSIGN_OR_RETURN(absl::Span<const std::byte> chunk, co_await in->Next());
    if (chunk.empty()) break;
    OL_CO_RETURN_IF_ERROR(co_await out->Write(chunk));
  }
  co_return co_await out->Commit();
}

}  // namespace openlake::store

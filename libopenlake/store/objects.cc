// Stat, delete and copy of objects; conditional requests and byte ranges.
#include "store/engine.h"
#include "store/errors.h"
#include "store/names.h"

#include "openlake/log.h"
#include "openlake/strings.h"

namespace openlake::store {
namespace {

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
  if (!exists && ErrorKindOf(cur.status) != ErrorKind::kNoSuchKey) return cur.status;
  if (when.if_none_match && exists) {
    return Error(ErrorKind::kPreconditionFailed, "If-None-Match: the key exists");
  }
  if (!when.if_match.empty()) {
    if (!exists) return cur.status;  // NoSuchKey, as S3 answers an If-Match of a missing key
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
  if (std::shared_ptr<const InlineCache::Entry> hit =
          inline_cache_.Find(StrCat(bucket, "/", key))) {
    OL_CO_RETURN_IF_ERROR(CheckConditions(hit->info, conditions));
    co_return hit->info;
  }
  const int set = static_cast<int>(PlaceObject(bucket, key).set);
  Resolved r = co_await ResolveForRead(set, bucket, key);
  OL_CO_RETURN_IF_ERROR(r.status);
  ObjectInfo info = ToObjectInfo(bucket, key, r.version);
  OL_CO_RETURN_IF_ERROR(CheckConditions(info, conditions));
  co_return info;
}

io::Task<absl::Status> Engine::DeleteObject(std::string bucket, std::string key) {
  OL_CO_RETURN_IF_ERROR(ValidateBucketName(bucket));
  OL_CO_RETURN_IF_ERROR(ValidateObjectKey(key));
  const Placement pl = PlaceObject(bucket, key);
  const int set = static_cast<int>(pl.set);
  LockGuard lock = co_await locks_.Lock(StrCat("o:", bucket, "/", key), true);
  inline_cache_.Invalidate(StrCat(bucket, "/", key));
  Resolved r = co_await ReadAndResolve(set, bucket, key);
  if (!r.status.ok()) {
    if (ErrorKindOf(r.status) == ErrorKind::kNoSuchKey) {
      // Leftovers of failed writes that never reached quorum go quietly.
      if (!r.clean) QueueHeal(bucket, key);
      co_return NotFoundError(set, bucket, key);
    }
    co_return r.status;
  }
  // A tombstone first (phase 1), so that a crash mid-delete leaves the object or nothing.
  pb::ObjectVersion tomb;
  tomb.set_version_id(NewVersionId());
  tomb.set_mod_time_ns(std::max(NowNs(), r.version.mod_time_ns() + 1));
  tomb.set_deleted(true);
  tomb.set_data_shards(static_cast<uint32_t>(k_));
  tomb.set_parity_shards(static_cast<uint32_t>(m_));
  tomb.set_block_size(opts_.block_size);
  tomb.set_rotation(pl.rotation);
  std::vector<DriveCommit> commits(static_cast<size_t>(n_));
  for (int p = 0; p < n_; ++p) {
    DriveCommit& dc = commits[static_cast<size_t>(p)];
    dc.use = fs(set, p) != nullptr;
    dc.version = tomb;
    dc.version.set_shard_index(ShardAt(pl.rotation, static_cast<uint32_t>(p),
                                       static_cast<uint32_t>(n_)));
  }
  co_return co_await CommitVersion(set, bucket, key, std::move(commits), write_quorum_);
}

io::Task<absl::StatusOr<ObjectInfo>> Engine::UpdateObjectMeta(std::string bucket,
                                                              std::string key,
                                                              MetaUpdate update) {
  OL_CO_RETURN_IF_ERROR(ValidateBucketName(bucket));
  OL_CO_RETURN_IF_ERROR(ValidateObjectKey(key));
  const int set = static_cast<int>(PlaceObject(bucket, key).set);
  const std::string lock_name = StrCat("o:", bucket, "/", key);
  LockGuard lock = co_await locks_.Lock(lock_name, true);
  inline_cache_.Invalidate(StrCat(bucket, "/", key));
  Resolved cur = co_await ReadAndResolve(set, bucket, key);
  if (!cur.status.ok()) {
    if (ErrorKindOf(cur.status) == ErrorKind::kNoSuchKey) co_return NotFoundError(set, bucket, key);
    co_return cur.status;
  }
  WriteConditions when;
  when.if_match = update.if_match;
  OL_CO_RETURN_IF_ERROR(CheckWriteConditions(cur, when));
  // A new version over the same shards: each drive that holds the current one gets its own
  // copy (per-drive fields and inline shard kept) with the new metadata. It is newer by a
  // nanosecond, which no answer shows, so that it wins over the old one on every read quorum.
  const std::string id = NewVersionId();
  const std::string data_id = DataIdOf(cur.version);
  std::vector<DriveCommit> commits(static_cast<size_t>(n_));
  int holders = 0;
  for (int p = 0; p < n_; ++p) {
    const pb::ObjectVersion* held = cur.copy[static_cast<size_t>(p)];
    if (held == nullptr || fs(set, p) == nullptr) continue;
    DriveCommit& dc = commits[static_cast<size_t>(p)];
    dc.use = true;
    dc.version = *held;
    dc.version.set_version_id(id);
    dc.version.set_data_id(data_id);
    dc.version.set_mod_time_ns(cur.version.mod_time_ns() + 1);
    auto& meta = *dc.version.mutable_user_meta();
    for (const auto& [name, value] : update.set) meta[name] = value;
    for (const std::string& name : update.erase) meta.erase(name);
    ++holders;
  }
  if (holders < write_quorum_) {
    co_return Error(ErrorKind::kInsufficientDrives,
                    StrCat("only ", holders, " drives hold the object; ", write_quorum_,
                           " must take its new metadata"));
  }
  pb::ObjectVersion result;
  for (const DriveCommit& dc : commits) {
    if (dc.use) result = dc.version;
  }
  OL_CO_RETURN_IF_ERROR(co_await CommitVersion(set, bucket, key, std::move(commits), write_quorum_));
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

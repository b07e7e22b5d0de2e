// Multipart uploads (docs/object-store.md, "Multipart"). An upload is a folder on each drive of
// the object's set, .openlake.sys/multipart/<bucket>/<upload id>/, holding upload.meta and,
// per part, the drive's shard file part.<n>.<part version> with its record part.<n>.meta.
// Parts stream in exactly like objects. Complete links each listed part's shard file into the
// new version's data folder (no byte is copied) and commits it like a PUT; the upload folder is
// removed only after that commit, so a Complete that fails can be repeated.
#include <openssl/evp.h>

#include <algorithm>
#include <map>

#include "store/engine.h"
#include "store/errors.h"
#include "store/names.h"

#include "openlake/log.h"
#include "openlake/strings.h"

namespace openlake::store {
namespace {

constexpr int kMaxPartNumber = 10000;

// One drive's share of a part's commit: its shard file (`from`, when the part has bytes) moved
// in beside the upload's other parts as `file`, then its record `meta_name` written and the
// upload's folder synced (which makes both names durable), then older uploads of the same
// part number on that drive trashed.
io::Task<absl::Status> CommitPartOn(DriveApi* f, std::string dir, std::string from,
                                    std::string file, std::string meta_name, std::string record,
                                    int part_number) {
  if (!from.empty()) {
    std::string to = StrCat(dir, "/", file);
    const absl::Status moved = co_await f->Rename(std::move(from), std::move(to));
    OL_CO_RETURN_IF_ERROR(moved);
  }
  std::string path = StrCat(dir, "/", meta_name);
  const absl::Status written = co_await f->WriteFile(std::move(path), std::move(record), true);
  OL_CO_RETURN_IF_ERROR(written);
  absl::StatusOr<std::vector<DirEntry>> entries = co_await f->ReadDir(dir);
  if (entries.ok()) {
    const std::string mine = StrCat("part.", part_number, ".");
    for (const DirEntry& e : *entries) {
      if (e.name.rfind(mine, 0) == 0 && e.name != file && e.name != meta_name) {
        std::string old = StrCat(dir, "/", e.name);
        (void)co_await f->Trash(std::move(old));
      }
    }
  }
  co_return absl::OkStatus();
}

std::string UnquoteEtag(std::string_view s) {
  while (!s.empty() && (s.front() == '"' || s.front() == ' ')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == '"' || s.back() == ' ')) s.remove_suffix(1);
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string UnHex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    auto v = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return 0;
    };
    out += static_cast<char>(v(hex[i]) * 16 + v(hex[i + 1]));
  }
  return out;
}

absl::Status NoSuchUpload(std::string_view id) {
  return Error(ErrorKind::kNoSuchUpload,
               StrCat("no multipart upload \"", id.substr(0, 64), "\" (aborted or completed?)"));
}

// True when `v` is what completing upload `upload_id` with `parts` made: a retried Complete
// whose first try succeeded (its answer lost) gets the same answer, as S3 gives it.
bool CompletedBy(const pb::ObjectVersion& v, std::string_view upload_id,
                 const std::vector<CompletePart>& parts) {
  if (v.deleted() || v.upload_id() != upload_id ||
      static_cast<size_t>(v.parts_size()) != parts.size()) {
    return false;
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    const pb::Part& p = v.parts(static_cast<int>(i));
    if (static_cast<int>(p.number()) != parts[i].number || p.etag() != UnquoteEtag(parts[i].etag)) {
      return false;
    }
  }
  return true;
}

// Per part number: the part version enough drives agree on, and each drive's record of it.
struct PartVotes {
  pb::PartMeta meta;
  std::vector<std::optional<pb::PartMeta>> copy;  // per position
  int count = 0;
};

}  // namespace

// Reads an upload's record on the drives of its set; NoSuchUpload unless k drives have it.
static io::Task<absl::StatusOr<pb::UploadMeta>> ReadUpload(Engine* e, int set,
                                                           std::string bucket,
                                                           std::string key,
                                                           std::string upload_id) {
  if (!ValidUploadId(upload_id)) co_return NoSuchUpload(upload_id);
  int count = 0;
  pb::UploadMeta found;
  for (int p = 0; p < e->n(); ++p) {
    DriveApi* f = e->api(set, p);
    if (f == nullptr) continue;
    std::string path = StrCat(UploadDir(bucket, upload_id), "/upload.meta");
    absl::StatusOr<std::string> bytes = co_await f->ReadFile(path);
    if (!bytes.ok()) continue;
    pb::UploadMeta m;
    if (!DecodeRecord(RecordType::kUploadMeta, *bytes, &m).ok()) continue;
    if (m.bucket() != bucket || m.key() != key || m.upload_id() != upload_id) continue;
    found = m;
    ++count;
  }
  if (count < e->k()) co_return NoSuchUpload(upload_id);
  co_return found;
}

static io::Task<std::map<int, PartVotes>> ReadParts(Engine* e, int set, std::string bucket,
                                                    std::string upload_id) {
  const std::string dir = UploadDir(bucket, upload_id);
  // (number, part version) → votes
  std::map<std::pair<int, std::string>, PartVotes> votes;
  for (int p = 0; p < e->n(); ++p) {
    DriveApi* f = e->api(set, p);
    if (f == nullptr) continue;
    absl::StatusOr<std::vector<DirEntry>> entries = co_await f->ReadDir(dir);
    if (!entries.ok()) continue;
    for (const DirEntry& de : *entries) {
      if (de.name.rfind("part.", 0) != 0 || de.name.size() < 6 ||
          de.name.substr(de.name.size() - 5) != ".meta") {
        continue;
      }
      std::string path = StrCat(dir, "/", de.name);
      absl::StatusOr<std::string> bytes = co_await f->ReadFile(path);
      if (!bytes.ok()) continue;
      pb::PartMeta m;
      if (!DecodeRecord(RecordType::kPartMeta, *bytes, &m).ok()) continue;
      PartVotes& v = votes[{static_cast<int>(m.number()), m.part_version()}];
      if (v.copy.empty()) {
        v.copy.resize(static_cast<size_t>(e->n()));
        v.meta = m;
      }
      v.copy[static_cast<size_t>(p)] = m;
      ++v.count;
    }
  }
  std::map<int, PartVotes> out;
  for (auto& [id, v] : votes) {
    if (v.count < e->k()) continue;
    auto it = out.find(id.first);
    if (it == out.end() || v.meta.mod_time_ns() > it->second.meta.mod_time_ns()) {
      out[id.first] = std::move(v);
    }
  }
  co_return out;
}

io::Task<absl::StatusOr<std::string>> Engine::CreateUpload(std::string bucket, std::string key,
                                                           PutOptions options) {
  OL_CO_RETURN_IF_ERROR(ValidateBucketName(bucket));
  OL_CO_RETURN_IF_ERROR(ValidateObjectKey(key));
  const Placement pl = PlaceObject(bucket, key);
  const int set = static_cast<int>(pl.set);
  const bool exists = co_await BucketExistsOnSet(set, bucket);
  if (!exists) {
    co_return Error(ErrorKind::kNoSuchBucket, StrCat("bucket \"", bucket, "\" does not exist"));
  }
  pb::UploadMeta m;
  m.set_bucket(bucket);
  m.set_key(key);
  m.set_upload_id(Hex(NewVersionId()));
  m.set_initiated_ns(NowNs());
  m.set_content_type(options.content_type);
  for (const auto& [name, value] : options.user_meta) (*m.mutable_user_meta())[name] = value;
  const auto [k, parity] = LayoutFor(options.reduced_redundancy);
  m.set_data_shards(k);
  m.set_parity_shards(parity);
  m.set_block_size(opts_.block_size);
  m.set_rotation(pl.rotation);
  const std::string dir = UploadDir(bucket, m.upload_id());
  const std::string record = EncodeRecord(RecordType::kUploadMeta, m);
  int ok = 0;
  for (int p = 0; p < n_; ++p) {
    DriveApi* f = api(set, p);
    if (f == nullptr) continue;
    std::string from(kMultipartDir);
    absl::Status s = co_await f->MakeDirs(dir, from);
    if (s.ok()) {
      std::string path = StrCat(dir, "/upload.meta");
      s = co_await f->WriteFile(path, record, true);
    }
    if (s.ok()) ++ok;
    else OL_LOG(kWarning) << "store: creating upload on " << f->name() << ": " << s;
  }
  if (ok < write_quorum_) {
    DiscardStaging(set, dir);
    co_return Error(ErrorKind::kInsufficientDrives,
                    StrCat("upload reached ", ok, " drives; ", write_quorum_, " needed"));
  }
  co_return m.upload_id();
}

io::Task<absl::StatusOr<std::unique_ptr<ObjectWriter>>> Engine::UploadPart(
    std::string bucket, std::string key, std::string upload_id, int part_number, int64_t size) {
  OL_CO_RETURN_IF_ERROR(ValidateBucketName(bucket));
  OL_CO_RETURN_IF_ERROR(ValidateObjectKey(key));
  if (part_number < 1 || part_number > kMaxPartNumber) {
    co_return absl::InvalidArgumentError(
        StrCat("part number ", part_number, " is outside 1..", kMaxPartNumber));
  }
  const Placement pl = PlaceObject(bucket, key);
  WriteTarget t;
  t.set = static_cast<int>(pl.set);
  OL_CO_ASSIGN_OR_RETURN(pb::UploadMeta up, co_await ReadUpload(this, t.set, bucket, key, upload_id));
  t.rotation = up.rotation();
  t.k = up.data_shards();
  t.m = up.parity_shards();
  t.bucket = std::move(bucket);
  t.key = std::move(key);
  t.upload_id = std::move(upload_id);
  t.part_number = part_number;
  co_return NewWriter(std::move(t), size);
}

io::Task<absl::StatusOr<ObjectInfo>> Engine::CommitPart(const WriteTarget& t, WriteResult w) {
  std::string upload_name = StrCat("u:", t.upload_id);
  absl::StatusOr<NsLock> upload_lock = co_await Lock(upload_name, false);
  std::string part_name = StrCat("p:", t.upload_id, "/", t.part_number);
  absl::StatusOr<NsLock> part_lock = co_await Lock(part_name, true);
  if (!upload_lock.ok() || !part_lock.ok()) {
    DiscardStaging(t.set, w.staged_dir);
    if (!upload_lock.ok()) co_return upload_lock.status();
    co_return part_lock.status();
  }
  absl::StatusOr<pb::UploadMeta> up = co_await ReadUpload(this, t.set, t.bucket, t.key, t.upload_id);
  if (!up.ok()) {
    DiscardStaging(t.set, w.staged_dir);
    co_return up.status();
  }
  const std::string dir = UploadDir(t.bucket, t.upload_id);
  const std::string vhex = Hex(w.version_id);
  const std::string file = StrCat("part.", t.part_number, ".", vhex);
  const std::string meta_name = StrCat("part.", t.part_number, ".meta");
  // Every drive at once: each one's steps wait on its own syncs only.
  std::vector<io::Task<absl::Status>> commits;
  std::vector<DriveApi*> who;
  for (int p = 0; p < n_; ++p) {
    if (!w.wrote[static_cast<size_t>(p)]) continue;
    DriveApi* f = api(t.set, p);
    if (f == nullptr) continue;
    pb::PartMeta m;
    m.set_number(static_cast<uint32_t>(t.part_number));
    m.set_size(w.size);
    m.set_etag(Hex(w.md5));
    m.set_mod_time_ns(w.mod_time_ns);
    m.set_part_version(w.version_id);
    m.set_shard_index(ShardAt(t.rotation, static_cast<uint32_t>(p), static_cast<uint32_t>(n_)));
    for (uint64_t c : w.crcs[static_cast<size_t>(p)]) m.add_block_crc(c);
    m.set_file(file);
    m.set_block_size(opts_.block_size);
    for (const auto& [name, value] : t.options.user_meta) (*m.mutable_meta())[name] = value;
    std::string from = w.size > 0 ? StrCat(w.staged_dir, "/", w.file_name) : std::string();
    commits.push_back(CommitPartOn(f, dir, std::move(from), file, meta_name,
                                   EncodeRecord(RecordType::kPartMeta, m), t.part_number));
    who.push_back(f);
  }
  std::vector<absl::Status> done = co_await io::WhenAll(std::move(commits));
  int ok = 0;
  for (size_t i = 0; i < done.size(); ++i) {
    if (done[i].ok()) {
      ++ok;
    } else {
      OL_LOG(kWarning) << "store: part " << t.part_number << " on " << who[i]->name() << ": "
                       << done[i];
    }
  }
  DiscardStaging(t.set, w.staged_dir);
  const int quorum = QuorumOf(t.k, t.m);
  if (ok < quorum) {
    co_return Error(ErrorKind::kInsufficientDrives,
                    StrCat("part ", t.part_number, " reached ", ok, " drives; ", quorum,
                           " needed"));
  }
  ObjectInfo info;
  info.bucket = t.bucket;
  info.key = t.key;
  info.size = w.size;
  info.etag = Hex(w.md5);
  info.mod_time = FromNs(w.mod_time_ns);
  info.version_id = vhex;
  co_return info;
}

io::Task<absl::StatusOr<ListPartsResult>> Engine::ListParts(std::string bucket, std::string key,
                                                            std::string upload_id,
                                                            int part_marker, int max_parts) {
  OL_CO_RETURN_IF_ERROR(ValidateBucketName(bucket));
  OL_CO_RETURN_IF_ERROR(ValidateObjectKey(key));
  const int set = static_cast<int>(PlaceObject(bucket, key).set);
  absl::StatusOr<pb::UploadMeta> up = co_await ReadUpload(this, set, bucket, key, upload_id);
  OL_CO_RETURN_IF_ERROR(up.status());
  std::map<int, PartVotes> parts = co_await ReadParts(this, set, bucket, upload_id);
  ListPartsResult out;
  for (const auto& [name, value] : up->user_meta()) out.upload_meta[name] = value;
  if (max_parts <= 0) max_parts = 1000;
  for (const auto& [number, v] : parts) {
    if (number <= part_marker) continue;
    if (static_cast<int>(out.parts.size()) == max_parts) {
      out.truncated = true;
      break;
    }
    PartInfo info{number, v.meta.etag(), v.meta.size(), FromNs(v.meta.mod_time_ns()), {}};
    for (const auto& [name, value] : v.meta.meta()) info.meta[name] = value;
    out.parts.push_back(std::move(info));
  }
  if (out.truncated) out.next_marker = out.parts.back().number;
  co_return out;
}

io::Task<absl::StatusOr<ListUploadsResult>> Engine::ListUploads(std::string bucket,
                                                                ListUploadsOptions o) {
  OL_CO_RETURN_IF_ERROR((co_await StatBucket(bucket)).status());
  std::vector<UploadInfo> all;
  for (int s = 0; s < sets_; ++s) {
    std::map<std::string, int> ids;
    for (int p = 0; p < n_; ++p) {
      DriveApi* f = api(s, p);
      if (f == nullptr) continue;
      std::string dir = StrCat(kMultipartDir, "/", bucket);
      absl::StatusOr<std::vector<DirEntry>> entries = co_await f->ReadDir(dir);
      if (!entries.ok()) continue;
      for (const DirEntry& e : *entries) {
        if (e.is_dir && ValidUploadId(e.name)) ++ids[e.name];
      }
    }
    for (const auto& [id, count] : ids) {
      if (count < k_) continue;
      for (int p = 0; p < n_; ++p) {
        DriveApi* f = api(s, p);
        if (f == nullptr) continue;
        std::string path = StrCat(UploadDir(bucket, id), "/upload.meta");
        absl::StatusOr<std::string> bytes = co_await f->ReadFile(path);
        pb::UploadMeta m;
        if (!bytes.ok() || !DecodeRecord(RecordType::kUploadMeta, *bytes, &m).ok()) continue;
        all.push_back({m.bucket(), m.key(), m.upload_id(), FromNs(m.initiated_ns())});
        break;
      }
    }
  }
  std::sort(all.begin(), all.end(), [](const UploadInfo& a, const UploadInfo& b) {
    if (a.key != b.key) return a.key < b.key;
    if (a.initiated != b.initiated) return a.initiated < b.initiated;
    return a.upload_id < b.upload_id;
  });
  ListUploadsResult out;
  const int max = o.max_uploads <= 0 ? 1000 : std::min(o.max_uploads, 1000);
  bool past_id_marker = o.upload_id_marker.empty();
  int emitted = 0;
  for (const UploadInfo& u : all) {
    if (u.key.substr(0, o.prefix.size()) != o.prefix) continue;
    if (!o.key_marker.empty()) {
      if (u.key < o.key_marker) continue;
      if (u.key == o.key_marker) {
        if (past_id_marker) continue;  // no id marker: uploads of the marker key are done
        if (u.upload_id == o.upload_id_marker) past_id_marker = true;
        continue;
      }
    }
    std::string cp;
    if (!o.delimiter.empty()) {
      const size_t i = u.key.find(o.delimiter, o.prefix.size());
      if (i != std::string::npos) cp = u.key.substr(0, i + o.delimiter.size());
    }
    if (!cp.empty() && !out.common_prefixes.empty() && out.common_prefixes.back() == cp) continue;
    if (emitted == max) {
      out.truncated = true;
      break;
    }
    ++emitted;
    if (!cp.empty()) {
      out.common_prefixes.push_back(cp);
      out.next_key_marker = cp;
      out.next_upload_id_marker.clear();
    } else {
      out.uploads.push_back(u);
      out.next_key_marker = u.key;
      out.next_upload_id_marker = u.upload_id;
    }
  }
  if (!out.truncated) {
    out.next_key_marker.clear();
    out.next_upload_id_marker.clear();
  }
  co_return out;
}

io::Task<absl::Status> Engine::AbortUpload(std::string bucket, std::string key,
                                           std::string upload_id) {
  OL_CO_RETURN_IF_ERROR(ValidateBucketName(bucket));
  OL_CO_RETURN_IF_ERROR(ValidateObjectKey(key));
  const int set = static_cast<int>(PlaceObject(bucket, key).set);
  std::string lock_name = StrCat("u:", upload_id);
  OL_CO_ASSIGN_OR_RETURN(NsLock lock, co_await Lock(lock_name, true));
  OL_CO_RETURN_IF_ERROR((co_await ReadUpload(this, set, bucket, key, upload_id)).status());
  int ok = 0;
  for (int p = 0; p < n_; ++p) {
    DriveApi* f = api(set, p);
    if (f == nullptr) continue;
    std::string dir = UploadDir(bucket, upload_id);
    const absl::Status s = co_await f->Trash(dir);
    if (s.ok()) ++ok;
  }
  if (ok < write_quorum_) {
    co_return Error(ErrorKind::kInsufficientDrives,
                    StrCat("abort reached ", ok, " drives; ", write_quorum_, " needed"));
  }
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<ObjectInfo>> Engine::CompleteUpload(std::string bucket, std::string key,
                                                            std::string upload_id,
                                                            std::vector<CompletePart> parts,
                                                            CompleteOptions options) {
  const WriteConditions& when = options.when;
  OL_CO_RETURN_IF_ERROR(ValidateBucketName(bucket));
  OL_CO_RETURN_IF_ERROR(ValidateObjectKey(key));
  if (parts.empty()) {
    co_return Error(ErrorKind::kInvalidPart, "a multipart upload needs at least one part");
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i].number <= parts[i - 1].number) {
      co_return Error(ErrorKind::kInvalidPartOrder,
                      StrCat("part ", parts[i].number, " follows part ", parts[i - 1].number,
                             ": the list must be in ascending order"));
    }
  }
  const int set = static_cast<int>(PlaceObject(bucket, key).set);
  std::string object_name = StrCat("o:", bucket, "/", key);
  OL_CO_ASSIGN_OR_RETURN(NsLock object_lock, co_await Lock(object_name, true));
  inline_cache_.Invalidate(StrCat(bucket, "/", key));
  std::string upload_name = StrCat("u:", upload_id);
  OL_CO_ASSIGN_OR_RETURN(NsLock upload_lock, co_await Lock(upload_name, true));
  absl::StatusOr<pb::UploadMeta> read_up = co_await ReadUpload(this, set, bucket, key, upload_id);
  if (!read_up.ok()) {
    if (ErrorKindOf(read_up.status()) == ErrorKind::kNoSuchUpload) {
      // A retry after success: the version it made (still current, or kept by versioning).
      Resolved cur = co_await ReadAndResolve(set, bucket, key);
      for (const pb::ObjectVersion* v : cur.versions) {
        if (CompletedBy(*v, upload_id, parts)) co_return ToObjectInfo(bucket, key, *v);
      }
    }
    co_return read_up.status();
  }
  const pb::UploadMeta& up = *read_up;
  if (Conditional(when)) {
    Resolved cur = co_await ReadAndResolve(set, bucket, key);
    const absl::Status held = CheckWriteConditions(cur, when);
    if (!held.ok()) co_return held;  // the upload stays: Complete may be retried without them
  }
  std::map<int, PartVotes> have = co_await ReadParts(this, set, bucket, upload_id);

  std::vector<const PartVotes*> chosen;
  std::string md5s;
  uint64_t total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    auto it = have.find(parts[i].number);
    if (it == have.end()) {
      co_return Error(ErrorKind::kInvalidPart,
                      StrCat("part ", parts[i].number, " was not uploaded"));
    }
    if (UnquoteEtag(parts[i].etag) != it->second.meta.etag()) {
      co_return Error(ErrorKind::kInvalidPart,
                      StrCat("part ", parts[i].number, ": ETag \"", UnquoteEtag(parts[i].etag),
                             "\" does not match the uploaded part's \"", it->second.meta.etag(),
                             "\""));
    }
    if (i + 1 < parts.size() && it->second.meta.size() < opts_.min_part_size) {
      co_return Error(ErrorKind::kEntityTooSmall,
                      StrCat("part ", parts[i].number, " is ", it->second.meta.size(),
                             " bytes; every part but the last needs at least ",
                             opts_.min_part_size));
    }
    chosen.push_back(&it->second);
    md5s += UnHex(it->second.meta.etag());
    total += it->second.meta.size();
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int dlen = 0;
  EVP_Digest(md5s.data(), md5s.size(), digest, &dlen, EVP_md5(), nullptr);

  pb::ObjectVersion base;
  base.set_version_id(NewVersionId());
  base.set_mod_time_ns(NowNs());
  base.set_size(total);
  base.set_etag(StrCat(Hex(std::string_view(reinterpret_cast<char*>(digest), dlen)), "-",
                       parts.size()));
  base.set_content_type(up.content_type());
  *base.mutable_user_meta() = up.user_meta();
  for (const auto& [name, value] : options.meta) (*base.mutable_user_meta())[name] = value;
  base.set_data_shards(up.data_shards());
  base.set_parity_shards(up.parity_shards());
  base.set_block_size(up.block_size());
  base.set_rotation(up.rotation());
  base.set_multipart_count(static_cast<uint32_t>(parts.size()));
  base.set_upload_id(upload_id);
  base.set_versioned(options.versioning == Versioning::kEnabled);
  for (const PartVotes* v : chosen) {
    pb::Part* p = base.add_parts();
    p->set_number(v->meta.number());
    p->set_size(v->meta.size());
    p->set_etag(v->meta.etag());
    p->set_mod_time_ns(v->meta.mod_time_ns());
    p->set_file(StrCat("part.", v->meta.number()));
    *p->mutable_meta() = v->meta.meta();
  }
  if (CodecFor(up.data_shards(), up.parity_shards()) == nullptr) {
    co_return absl::FailedPreconditionError("the upload was started with another erasure layout");
  }

  // Each drive that holds every chosen part links them into a staged data folder.
  const std::string vhex = Hex(base.version_id());
  const std::string staged = StrCat(kTmpDir, "/", vhex);
  const std::string dir = UploadDir(bucket, upload_id);
  std::vector<DriveCommit> commits(static_cast<size_t>(n_));
  for (int p = 0; p < n_; ++p) {
    DriveApi* f = api(set, p);
    if (f == nullptr) continue;
    bool all = true;
    for (const PartVotes* v : chosen) all = all && v->copy[static_cast<size_t>(p)].has_value();
    if (!all) continue;
    DriveCommit& dc = commits[static_cast<size_t>(p)];
    dc.version = base;
    dc.version.set_shard_index(chosen[0]->copy[static_cast<size_t>(p)]->shard_index());
    std::vector<LinkPair> links;
    for (size_t i = 0; i < chosen.size(); ++i) {
      const pb::PartMeta& mine = *chosen[i]->copy[static_cast<size_t>(p)];
      for (uint64_t c : mine.block_crc()) dc.version.mutable_parts(static_cast<int>(i))->add_block_crc(c);
      if (mine.size() > 0) {
        links.push_back({StrCat(dir, "/", mine.file()), StrCat(staged, "/part.", mine.number())});
      }
    }
    const absl::Status s = co_await f->LinkInto(staged, std::move(links));
    if (!s.ok()) {
      OL_LOG(kWarning) << "store: completing upload on " << f->name() << ": " << s;
      (void)co_await f->Trash(staged);
      continue;
    }
    dc.use = true;
    dc.staged_dir = staged;
  }
  int64_t mod_time = 0;
  const int quorum = QuorumOf(up.data_shards(), up.parity_shards());
  absl::Status s = StillHeld(object_lock, key);
  if (s.ok()) s = co_await CommitVersion(set, bucket, key, std::move(commits), quorum, &mod_time);
  base.set_mod_time_ns(mod_time);
  if (!s.ok()) {
    DiscardStaging(set, staged);  // the upload itself is untouched: Complete can be retried
    co_return s;
  }
  co_await TrashOnSet(set, dir);
  co_return ToObjectInfo(bucket, key, base);
}

}  // namespace openlake::store

// Reading an object's metadata on every drive of its set and choosing the version they agree
// on (docs/object-store.md, "Read quorum").
#include <algorithm>
#include <map>

#include "store/engine.h"
#include "store/errors.h"
#include "store/names.h"

#include "openlake/log.h"
#include "openlake/strings.h"

namespace openlake::store {

namespace {

// Drives that must agree on a record for it to be read: its data shards (a tombstone's and a
// delete marker's are the set's).
int NeededFor(const pb::ObjectVersion& v) { return static_cast<int>(std::max(v.data_shards(), 1u)); }

}  // namespace

bool Newer(const pb::ObjectVersion* a, const pb::ObjectVersion* b) {
  if (a->mod_time_ns() != b->mod_time_ns()) return a->mod_time_ns() > b->mod_time_ns();
  return a->version_id() > b->version_id();
}

io::Task<MetaRead> Engine::ReadMetaOn(int set, int pos, std::string bucket, std::string key) {
  MetaRead out;
  DriveApi* f = api(set, pos);
  if (f == nullptr) {
    out.error = Error(ErrorKind::kInsufficientDrives, "drive offline");
    co_return out;
  }
  std::string path = MetaPath(bucket, key);
  absl::StatusOr<std::string> bytes = co_await f->ReadFile(path);
  if (!bytes.ok()) {
    if (absl::IsNotFound(bytes.status())) {
      out.kind = MetaRead::kNotFound;
    } else {
      CountDriveError(set, pos);
      out.error = bytes.status();
    }
    co_return out;
  }
  absl::Status s = DecodeRecord(RecordType::kObjectMeta, *bytes, &out.meta);
  if (s.ok() && (out.meta.bucket() != bucket || out.meta.key() != key)) {
    s = absl::DataLossError("metadata names another object");
  }
  for (int i = 0; s.ok() && i < out.meta.versions_size(); ++i) {
    s = CheckVersion(out.meta.versions(i), n_);
  }
  if (!s.ok()) {
    CountDriveError(set, pos);
    OL_LOG_EVERY_N_SEC(kWarning, 10) << "store: " << f->name() << "/" << path
                                     << ": " << s;
    out.error = s;
    out.meta.Clear();
    co_return out;
  }
  out.kind = MetaRead::kOk;
  co_return out;
}

Resolved Engine::ResolveReads(std::vector<MetaRead> reads,
                              const std::optional<std::string>& want) const {
  Resolved r;
  r.reads = std::move(reads);
  const int n = static_cast<int>(r.reads.size());
  r.copy.assign(static_cast<size_t>(n), nullptr);
  struct Candidate {
    const pb::ObjectVersion* v = nullptr;
    int count = 0;
  };
  std::map<std::string, Candidate> by_id;
  int not_found = 0;
  int unknown = 0;
  for (const MetaRead& m : r.reads) {
    if (m.kind == MetaRead::kNotFound) ++not_found;
    if (m.kind == MetaRead::kError) ++unknown;
    if (m.kind != MetaRead::kOk) continue;
    for (const pb::ObjectVersion& v : m.meta.versions()) {
      Candidate& c = by_id[v.version_id()];
      if (c.v == nullptr) {
        c.v = &v;
      } else if (!SameVersion(*c.v, v)) {
        continue;  // same id, different contents: not a vote for it
      }
      ++c.count;
    }
  }
  // The records enough drives hold to be read, newest first.
  std::vector<const pb::ObjectVersion*> readable;
  // Each record needs its own layout's k (a reduced-redundancy one has more data shards).
  for (const auto& [id, c] : by_id) {
    if (c.count >= NeededFor(*c.v)) readable.push_back(c.v);
  }
  std::sort(readable.begin(), readable.end(), Newer);
  if (readable.empty()) {
    bool maybe_hidden = unknown >= write_quorum_;
    for (const auto& [id, c] : by_id) {
      if (c.count + unknown >= NeededFor(*c.v) && !c.v->deleted()) maybe_hidden = true;
    }
    if (not_found > n_ - write_quorum_ || !maybe_hidden) {
      r.status = Error(ErrorKind::kNoSuchKey, "no such key");
    } else {
      r.status = Error(ErrorKind::kInsufficientDrives,
                       StrCat("too few drives answered to read the object (", n - unknown,
                              " of ", n, " answered, ", k_, " must agree)"));
    }
    r.clean = not_found == n;
    return r;
  }
  // The key's versions: the newest record of each identity. A tombstone on top is a delete in
  // progress: the key has none.
  std::vector<const pb::ObjectVersion*> kept;
  if (readable.front()->deleted()) {
    kept.push_back(readable.front());
  } else {
    for (const pb::ObjectVersion* v : readable) {
      if (v->deleted()) continue;
      bool superseded = false;
      for (const pb::ObjectVersion* newer : r.versions) {
        superseded = superseded || IdentityOf(*newer) == IdentityOf(*v);
      }
      if (!superseded) r.versions.push_back(v);
    }
    kept = r.versions;
  }
  const pb::ObjectVersion* win = kept.front();
  if (want) {
    win = nullptr;
    for (const pb::ObjectVersion* v : r.versions) {
      if (IdentityOf(*v) == *want) win = v;
    }
  }
  for (int p = 0; p < n; ++p) {
    const MetaRead& m = r.reads[static_cast<size_t>(p)];
    if (m.kind != MetaRead::kOk) {
      r.clean = false;
      continue;
    }
    int matched = 0;
    for (const pb::ObjectVersion& v : m.meta.versions()) {
      for (const pb::ObjectVersion* good : kept) {
        if (v.version_id() == good->version_id() && SameVersion(v, *good)) ++matched;
      }
      if (win != nullptr && v.version_id() == win->version_id() && SameVersion(v, *win)) {
        r.copy[static_cast<size_t>(p)] = &v;
        ++r.holders;
      }
    }
    if (matched != static_cast<int>(kept.size()) ||
        m.meta.versions_size() != static_cast<int>(kept.size())) {
      r.clean = false;
    }
  }
  if (win == nullptr) {
    r.status = Error(ErrorKind::kNoSuchVersion, "The specified version does not exist.");
    return r;
  }
  r.version = *win;
  if (r.version.deleted()) {
    r.status = Error(ErrorKind::kNoSuchKey, "no such key");
  } else if (r.version.delete_marker()) {
    r.status = DeleteMarkerError(S3VersionIdOf(r.version), "the version is a delete marker");
  }
  return r;
}

std::vector<pb::ObjectVersion> GoodRecords(const MetaRead& m,
                                           const std::vector<const pb::ObjectVersion*>& versions) {
  std::vector<pb::ObjectVersion> out;
  if (m.kind != MetaRead::kOk) return out;
  for (const pb::ObjectVersion& v : m.meta.versions()) {
    for (const pb::ObjectVersion* good : versions) {
      if (v.version_id() == good->version_id() && SameVersion(v, *good)) out.push_back(v);
    }
  }
  return out;
}

io::Task<Resolved> Engine::ReadAndResolve(int set, std::string bucket, std::string key,
                                          std::optional<std::string> want) {
  std::vector<io::Task<MetaRead>> reads;
  reads.reserve(static_cast<size_t>(n_));
  for (int p = 0; p < n_; ++p) reads.push_back(ReadMetaOn(set, p, bucket, key));
  std::vector<MetaRead> got = co_await io::WhenAll(std::move(reads));
  co_return ResolveReads(std::move(got), want);
}

io::Task<Resolved> Engine::ResolveForRead(int set, std::string bucket, std::string key,
                                          std::optional<std::string> want) {
  Resolved r = co_await ReadAndResolve(set, bucket, key, want);
  if (!r.clean) QueueHeal(bucket, key);
  if (ErrorKindOf(r.status) == ErrorKind::kNoSuchKey) {
    r.status = co_await NotFoundError(set, bucket, key);
  }
  co_return r;
}

io::Task<bool> Engine::BucketExistsOnSet(int set, std::string bucket) {
  for (int p = 0; p < n_; ++p) {
    DriveApi* f = api(set, p);
    if (f == nullptr) continue;
    absl::StatusOr<bool> e = co_await f->Exists(bucket);
    if (e.ok() && *e) co_return true;
  }
  co_return false;
}

io::Task<absl::Status> Engine::NotFoundError(int set, std::string bucket, std::string key) {
  const bool exists = co_await BucketExistsOnSet(set, bucket);
  if (!exists) {
    co_return Error(ErrorKind::kNoSuchBucket, StrCat("bucket \"", bucket, "\" does not exist"));
  }
  co_return Error(ErrorKind::kNoSuchKey,
                  StrCat("no object \"", key, "\" in bucket \"", bucket, "\""));
}

}  // namespace openlake::store

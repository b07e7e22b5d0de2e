// Reading an object's metadata on every drive of its set and choosing the version they agree
// on (docs/object-store.md, "Read quorum").
#include <map>

#include "store/engine.h"
#include "store/errors.h"
#include "store/names.h"

#include "openlake/log.h"
#include "openlake/strings.h"

namespace openlake::store {

io::Task<MetaRead> Engine::ReadMetaOn(int set, int pos, std::string bucket, std::string key) {
  MetaRead out;
  FileBackend* f = fs(set, pos);
  if (f == nullptr) {
    out.error = Error(ErrorKind::kInsufficientDrives, "drive offline");
    co_return out;
  }
  absl::StatusOr<std::string> bytes = co_await ReadWholeFile(*f, MetaPath(bucket, key));
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
    OL_LOG_EVERY_N_SEC(kWarning, 10) << "store: " << f->root() << "/" << MetaPath(bucket, key)
                                     << ": " << s;
    out.error = s;
    out.meta.Clear();
    co_return out;
  }
  out.kind = MetaRead::kOk;
  co_return out;
}

Resolved Engine::ResolveReads(std::vector<MetaRead> reads) const {
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
  // The newest version enough drives hold to be read.
  const Candidate* win = nullptr;
  for (const auto& [id, c] : by_id) {
    if (c.count < k_) continue;
    if (win == nullptr || c.v->mod_time_ns() > win->v->mod_time_ns() ||
        (c.v->mod_time_ns() == win->v->mod_time_ns() && id > win->v->version_id())) {
      win = &c;
    }
  }
  if (win == nullptr) {
    bool maybe_hidden = unknown >= write_quorum_;
    for (const auto& [id, c] : by_id) {
      if (c.count + unknown >= k_ && !c.v->deleted()) maybe_hidden = true;
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
  r.version = *win->v;
  r.holders = win->count;
  for (int p = 0; p < n; ++p) {
    const MetaRead& m = r.reads[static_cast<size_t>(p)];
    if (m.kind != MetaRead::kOk) {
      r.clean = false;
      continue;
    }
    for (const pb::ObjectVersion& v : m.meta.versions()) {
      if (v.version_id() == win->v->version_id() && SameVersion(v, *win->v)) {
        r.copy[static_cast<size_t>(p)] = &v;
      }
    }
    if (m.meta.versions_size() != 1 || r.copy[static_cast<size_t>(p)] == nullptr) r.clean = false;
  }
  if (r.version.deleted()) r.status = Error(ErrorKind::kNoSuchKey, "no such key");
  return r;
}

io::Task<Resolved> Engine::ReadAndResolve(int set, std::string bucket, std::string key) {
  std::vector<io::Task<MetaRead>> reads;
  reads.reserve(static_cast<size_t>(n_));
  for (int p = 0; p < n_; ++p) reads.push_back(ReadMetaOn(set, p, bucket, key));
  std::vector<MetaRead> got = co_await io::WhenAll(std::move(reads));
  co_return ResolveReads(std::move(got));
}

io::Task<Resolved> Engine::ResolveForRead(int set, std::string bucket, std::string key) {
  Resolved r = co_await ReadAndResolve(set, bucket, key);
  if (!r.clean) QueueHeal(bucket, key);
  if (ErrorKindOf(r.status) == ErrorKind::kNoSuchKey) r.status = NotFoundError(set, bucket, key);
  co_return r;
}

bool Engine::BucketExistsOnSet(int set, std::string_view bucket) {
  for (int p = 0; p < n_; ++p) {
    FileBackend* f = fs(set, p);
    if (f == nullptr) continue;
    auto e = f->Exists(bucket);
    if (e.ok() && *e) return true;
  }
  return false;
}

absl::Status Engine::NotFoundError(int set, std::string_view bucket, std::string_view key) {
  if (!BucketExistsOnSet(set, bucket)) {
    return Error(ErrorKind::kNoSuchBucket, StrCat("bucket \"", bucket, "\" does not exist"));
  }
  return Error(ErrorKind::kNoSuchKey, StrCat("no object \"", key, "\" in bucket \"", bucket, "\""));
}

}  // namespace openlake::store

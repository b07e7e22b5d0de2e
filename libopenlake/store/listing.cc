// Listing (docs/object-store.md, "Listing"). Keys are folders, so a listing is a walk of the
// bucket's folder tree on every online drive of a set, merged: a folder's children are read on
// each drive, their names unescaped, and visited in key order. Key order is not folder order:
// the object "a" comes before "a-b", which comes before everything under "a/" ('-' < '/'), so
// each child yields two candidates, the object key "D<seg>" and the subtree "D<seg>/", and the
// candidates are sorted as strings. A subtree entirely before the marker is skipped unread; with
// a delimiter, a subtree that rolls up into one common prefix is not descended beyond finding
// one object in it. Sets are walked separately and merged by key.
//
// An object is listed when its metadata file is on at least k drives of its set (a failed
// write that reached fewer is not an object); its size and ETag come from the read quorum.
#include <algorithm>
#include <map>

#include "store/engine.h"
#include "store/errors.h"
#include "store/names.h"

#include "openlake/strings.h"

namespace openlake::store {
namespace {

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

struct Probe {
  int metas = 0;         // drives holding <dir>/%meta
  bool has_sub = false;  // any drive holds a key folder below
};

class Walker {
 public:
  Walker(std::vector<FileBackend*> drives, std::string bucket, std::string prefix,
         std::string delimiter, std::string marker, size_t limit, int min_count)
      : drives_(std::move(drives)),
        bucket_(std::move(bucket)),
        prefix_(std::move(prefix)),
        delim_(std::move(delimiter)),
        marker_(std::move(marker)),
        limit_(limit),
        min_count_(min_count) {}

  std::vector<Engine::WalkItem> Run() {
    const size_t slash = prefix_.rfind('/');
    const std::string start = slash == std::string::npos ? "" : prefix_.substr(0, slash + 1);
    Walk(start);
    return std::move(out_);
  }

  // True when the subtree of key prefix `dir` (ending in '/') holds an object.
  bool HasObject(const std::string& dir) {
    for (const std::string& seg : Children(dir)) {
      const Probe p = ProbeDir(dir + seg);
      if (p.metas >= min_count_) return true;
      if (p.has_sub && HasObject(dir + seg + "/")) return true;
    }
    return false;
  }

 private:
  bool Done() const { return out_.size() >= limit_; }

  // The key segments below key prefix `dir` ("" or ending in '/'), on any drive, sorted.
  std::vector<std::string> Children(const std::string& dir) {
    std::vector<std::string> segs;
    const std::string path = PrefixDir(bucket_, dir);
    for (FileBackend* f : drives_) Segments(*f, path, "", 0, &segs);
    std::sort(segs.begin(), segs.end());
    segs.erase(std::unique(segs.begin(), segs.end()), segs.end());
    return segs;
  }

  // The segments named in folder `path` of one drive, each after the escaped text `pieces`
  // (the pieces of a long segment read so far, `depth` folders down).
  static void Segments(FileBackend& f, const std::string& path, const std::string& pieces,
                       int depth, std::vector<std::string>* segs) {
    auto entries = f.ReadDir(path);
    if (!entries.ok()) return;
    for (const DirEntry& e : *entries) {
      if (!e.is_dir) continue;
      if (IsContinuation(e.name)) {
        // A key is at most 1024 bytes, 3072 escaped: 16 pieces; deeper is not ours.
        if (depth < 16) {
          Segments(f, StrCat(path, "/", e.name), pieces + e.name.substr(kContinuation.size()),
                   depth + 1, segs);
        }
        continue;
      }
      std::string seg;
      if (UnescapeSegment(pieces + e.name, &seg)) segs->push_back(std::move(seg));
    }
  }

  // What the folder of key `key` holds, over all drives.
  Probe ProbeDir(const std::string& key) {
    Probe p;
    const std::string path = ObjectDir(bucket_, key);
    for (FileBackend* f : drives_) {
      auto entries = f->ReadDir(path);
      if (!entries.ok()) continue;
      for (const DirEntry& e : *entries) {
        if (e.name == kMetaName) {
          ++p.metas;
        } else if (e.is_dir && !p.has_sub) {
          std::string seg;
          if (UnescapeSegment(e.name, &seg) || IsContinuation(e.name)) p.has_sub = true;
        }
      }
    }
    return p;
  }

  void Emit(std::string key, bool is_prefix) {
    if (is_prefix) {
      if (key == last_prefix_) return;
      last_prefix_ = key;
    }
    out_.push_back({std::move(key), is_prefix});
  }

  // The common prefix `key` rolls up into, or "" when it does not.
  std::string RollUp(const std::string& key) const {
    if (delim_.empty() || !StartsWith(key, prefix_)) return "";
    const size_t i = key.find(delim_, prefix_.size());
    if (i == std::string::npos) return "";
    return key.substr(0, i + delim_.size());
  }

  void Walk(const std::string& dir) {
    struct Candidate {
      std::string key;
      bool subtree;
      size_t seg;
    };
    const std::vector<std::string> segs = Children(dir);
    std::vector<Candidate> cands;
    cands.reserve(segs.size() * 2);
    for (size_t i = 0; i < segs.size(); ++i) {
      std::string key = dir + segs[i];
      if (StartsWith(key, prefix_)) cands.push_back({key, false, i});
      std::string sub = key + "/";
      if (StartsWith(sub, prefix_) || StartsWith(prefix_, sub)) {
        cands.push_back({std::move(sub), true, i});
      }
    }
    std::sort(cands.begin(), cands.end(),
              [](const Candidate& a, const Candidate& b) { return a.key < b.key; });
    std::map<size_t, Probe> probes;
    auto probe = [&](size_t i) -> const Probe& {
      auto it = probes.find(i);
      if (it == probes.end()) it = probes.emplace(i, ProbeDir(dir + segs[i])).first;
      return it->second;
    };
    for (const Candidate& c : cands) {
      if (Done()) return;
      if (!c.subtree) {
        if (c.key <= marker_) continue;
        const std::string cp = RollUp(c.key);
        if (!cp.empty() && (cp <= marker_ || cp == last_prefix_)) continue;
        if (probe(c.seg).metas < min_count_) continue;
        if (!cp.empty()) Emit(cp, true);
        else Emit(c.key, false);
        continue;
      }
      // Everything below sorts after c.key; all of it is at or before the marker when the
      // marker is past c.key and not inside it.
      if (marker_ >= c.key && !StartsWith(marker_, c.key)) continue;
      if (!probe(c.seg).has_sub) continue;
      if (StartsWith(c.key, prefix_)) {
        const std::string cp = RollUp(c.key);
        if (!cp.empty()) {
          // The whole subtree is one common prefix.
          if (cp <= marker_ || cp == last_prefix_) continue;
          if (HasObject(c.key)) Emit(cp, true);
          continue;
        }
      }
      Walk(c.key);
    }
  }

  std::vector<FileBackend*> drives_;
  std::string bucket_, prefix_, delim_, marker_;
  size_t limit_;
  int min_count_;
  std::vector<Engine::WalkItem> out_;
  std::string last_prefix_;
};

}  // namespace

absl::StatusOr<std::vector<Engine::WalkItem>> Engine::WalkSet(int set, const std::string& bucket,
                                                              const std::string& prefix,
                                                              const std::string& delimiter,
                                                              const std::string& marker,
                                                              size_t limit, int min_count) {
  std::vector<FileBackend*> drives;
  for (int p = 0; p < n_; ++p) {
    if (FileBackend* f = fs(set, p)) drives.push_back(f);
  }
  if (static_cast<int>(drives.size()) < min_count) {
    return Error(ErrorKind::kInsufficientDrives,
                 StrCat("set ", set, " has ", drives.size(), " online drives; listing needs ",
                        min_count));
  }
  Walker w(std::move(drives), bucket, prefix, delimiter, marker, limit, min_count);
  return w.Run();
}

absl::StatusOr<std::vector<Engine::WalkItem>> Engine::WalkAll(const std::string& bucket,
                                                              const std::string& prefix,
                                                              const std::string& delimiter,
                                                              const std::string& marker,
                                                              size_t limit) {
  std::vector<WalkItem> all;
  for (int s = 0; s < sets_; ++s) {
    OL_ASSIGN_OR_RETURN(std::vector<WalkItem> items,
                        WalkSet(s, bucket, prefix, delimiter, marker, limit, k_));
    for (WalkItem& it : items) all.push_back(std::move(it));
  }
  std::sort(all.begin(), all.end(),
            [](const WalkItem& a, const WalkItem& b) { return a.key < b.key; });
  // The same common prefix can come from several sets.
  all.erase(std::unique(all.begin(), all.end(),
                        [](const WalkItem& a, const WalkItem& b) { return a.key == b.key; }),
            all.end());
  if (all.size() > limit) all.resize(limit);
  return all;
}

io::Task<absl::StatusOr<ListResult>> Engine::ListObjects(std::string bucket, ListOptions o) {
  OL_CO_RETURN_IF_ERROR((co_await StatBucket(bucket)).status());
  ListResult result;
  if (o.max_keys <= 0) co_return result;
  const size_t max_keys = static_cast<size_t>(std::min(o.max_keys, 1000));
  // A prefix no key can have (".." segments, "//") lists nothing.
  if (!ValidatePrefix(o.prefix).ok()) co_return result;

  OL_CO_ASSIGN_OR_RETURN(std::vector<WalkItem> all,
                         WalkAll(bucket, o.prefix, o.delimiter, o.marker, max_keys + 1));
  if (all.size() > max_keys) {
    result.truncated = true;
    all.resize(max_keys);
    result.next_marker = all.back().key;
  }
  std::vector<io::Task<Resolved>> reads;
  std::vector<std::string> keys;
  for (const WalkItem& it : all) {
    if (it.is_prefix) {
      result.common_prefixes.push_back(it.key);
      continue;
    }
    keys.push_back(it.key);
    reads.push_back(ReadAndResolve(static_cast<int>(PlaceObject(bucket, it.key).set), bucket,
                                   it.key));
  }
  std::vector<Resolved> resolved = co_await io::WhenAll(std::move(reads));
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!resolved[i].status.ok()) continue;  // deleted meanwhile, or unreadable
    result.objects.push_back(ToObjectInfo(bucket, keys[i], resolved[i].version));
  }
  co_return result;
}

io::Task<absl::StatusOr<ListVersionsResult>> Engine::ListObjectVersions(
    std::string bucket, ListVersionsOptions o) {
  OL_CO_RETURN_IF_ERROR((co_await StatBucket(bucket)).status());
  ListVersionsResult result;
  if (o.max_keys <= 0) co_return result;
  const size_t max_keys = static_cast<size_t>(std::min(o.max_keys, 1000));
  if (!ValidatePrefix(o.prefix).ok()) co_return result;
  size_t count = 0;
  bool more = false;  // something is left after what the page holds
  // Adds a key's versions from `from` on; false once the page is full.
  auto add = [&](const std::string& key, const Resolved& r, size_t from) {
    for (size_t i = from; i < r.versions.size(); ++i) {
      if (count == max_keys) {
        more = true;
        return false;
      }
      ObjectInfo info = ToObjectInfo(bucket, key, *r.versions[i]);
      info.is_latest = i == 0;
      result.versions.push_back(std::move(info));
      ++count;
    }
    return true;
  };

  // The rest of the marker key's versions: those older than the marker version.
  if (!o.key_marker.empty() && !o.version_id_marker.empty()) {
    OL_CO_ASSIGN_OR_RETURN(std::optional<std::string> after, ParseVersionId(o.version_id_marker));
    const int set = static_cast<int>(PlaceObject(bucket, o.key_marker).set);
    Resolved r = co_await ReadAndResolve(set, bucket, o.key_marker);
    for (size_t i = 0; i < r.versions.size(); ++i) {
      if (after && IdentityOf(*r.versions[i]) == *after) {
        (void)add(o.key_marker, r, i + 1);
        break;
      }
    }
  }
  std::string marker = o.key_marker;
  while (!more) {
    const size_t want = max_keys - std::min(count, max_keys) + 1;
    OL_CO_ASSIGN_OR_RETURN(std::vector<WalkItem> items,
                           WalkAll(bucket, o.prefix, o.delimiter, marker, want));
    std::vector<io::Task<Resolved>> reads;
    for (const WalkItem& it : items) {
      if (it.is_prefix) continue;
      reads.push_back(ReadAndResolve(static_cast<int>(PlaceObject(bucket, it.key).set), bucket,
                                     it.key));
    }
    std::vector<Resolved> resolved = co_await io::WhenAll(std::move(reads));
    size_t next = 0;
    for (const WalkItem& it : items) {
      if (it.is_prefix) {
        if (count == max_keys) {
          more = true;
          break;
        }
        result.common_prefixes.push_back(it.key);
        result.next_key_marker = it.key;
        result.next_version_id_marker.clear();
        ++count;
        continue;
      }
      const Resolved& r = resolved[next++];
      if (!add(it.key, r, 0)) break;
    }
    if (items.size() < want) break;
    marker = items.back().key;
  }
  if (more) {
    result.truncated = true;
    // Where the page ended: its last version, or its last common prefix.
    if (!result.versions.empty() &&
        (result.next_key_marker.empty() || result.versions.back().key > result.next_key_marker)) {
      result.next_key_marker = result.versions.back().key;
      result.next_version_id_marker = result.versions.back().version_id;
    }
  } else {
    result.next_key_marker.clear();
    result.next_version_id_marker.clear();
  }
  co_return result;
}

}  // namespace openlake::store

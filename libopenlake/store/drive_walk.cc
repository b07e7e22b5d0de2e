// The walk of one drive's folders for a listing (docs/object-store.md, "Listing"). Keys are
// folders, so a listing is a walk of the bucket's folder tree: a folder's children are read, their
// names unescaped, and visited in key order. Key order is not folder order: the object "a" comes
// before "a-b", which comes before everything under "a/" ('-' < '/'), so each child yields two
// candidates, the object key "D<seg>" and the subtree "D<seg>/", and the candidates are sorted as
// strings. A subtree entirely before the marker is skipped unread; with a delimiter, a subtree
// that rolls up into one common prefix is not descended beyond finding one object in it. The
// engine merges the drives' pages (listing.cc).
#include <algorithm>
#include <map>

#include "store/local_drive.h"
#include "store/names.h"

#include "openlake/strings.h"

namespace openlake::store {
namespace {

struct Probe {
  bool meta = false;     // <dir>/%meta is there
  bool has_sub = false;  // a key folder is below
};

class Walker {
 public:
  Walker(FileBackend& drive, const WalkRequest& r)
      : drive_(drive), request_(r) {}

  std::vector<WalkItem> Run() {
    const std::string& prefix = request_.prefix;
    const size_t slash = prefix.rfind('/');
    const std::string start = slash == std::string::npos ? "" : prefix.substr(0, slash + 1);
    Walk(start);
    return std::move(out_);
  }

  // True when the subtree of key prefix `dir` (ending in '/') holds an object.
  bool HasObject(const std::string& dir) {
    for (const std::string& seg : Children(dir)) {
      const Probe p = ProbeDir(dir + seg);
      if (p.meta) return true;
      if (p.has_sub && HasObject(dir + seg + "/")) return true;
    }
    return false;
  }

 private:
  bool Done() const { return out_.size() >= request_.limit; }

  // The key segments below key prefix `dir` ("" or ending in '/'), sorted.
  std::vector<std::string> Children(const std::string& dir) {
    std::vector<std::string> segs;
    Segments(drive_, PrefixDir(request_.bucket, dir), "", 0, &segs);
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

  // What the folder of key `key` holds.
  Probe ProbeDir(const std::string& key) {
    Probe p;
    auto entries = drive_.ReadDir(ObjectDir(request_.bucket, key));
    if (!entries.ok()) return p;
    for (const DirEntry& e : *entries) {
      if (e.name == kMetaName) {
        p.meta = true;
      } else if (e.is_dir && !p.has_sub) {
        std::string seg;
        if (UnescapeSegment(e.name, &seg) || IsContinuation(e.name)) p.has_sub = true;
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
      if (key.starts_with(request_.prefix)) cands.push_back({key, false, i});
      std::string sub = key + "/";
      if (sub.starts_with(request_.prefix) || request_.prefix.starts_with(sub)) {
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
        if (c.key <= request_.marker) continue;
        const std::string cp = RollUp(c.key, request_);
        if (!cp.empty() && (cp <= request_.marker || cp == last_prefix_)) continue;
        if (!probe(c.seg).meta) continue;
        if (!cp.empty()) Emit(cp, true);
        else Emit(c.key, false);
        continue;
      }
      // Everything below sorts after c.key; all of it is at or before the marker when the
      // marker is past c.key and not inside it.
      if (request_.marker >= c.key && !request_.marker.starts_with(c.key)) continue;
      if (!probe(c.seg).has_sub) continue;
      if (c.key.starts_with(request_.prefix)) {
        const std::string cp = RollUp(c.key, request_);
        if (!cp.empty()) {
          // The whole subtree is one common prefix.
          if (cp <= request_.marker || cp == last_prefix_) continue;
          if (HasObject(c.key)) Emit(cp, true);
          continue;
        }
      }
      Walk(c.key);
    }
  }

  FileBackend& drive_;
  const WalkRequest& request_;  // outlives the walker (WalkDrive's argument)
  std::vector<WalkItem> out_;
  std::string last_prefix_;
};

}  // namespace

std::string RollUp(std::string_view key, const WalkRequest& request) {
  if (request.delimiter.empty() || !key.starts_with(request.prefix)) return "";
  const size_t i = key.find(request.delimiter, request.prefix.size());
  if (i == std::string_view::npos) return "";
  return std::string(key.substr(0, i + request.delimiter.size()));
}

std::vector<WalkItem> WalkDrive(FileBackend& fs, const WalkRequest& request) {
  if (request.limit == 0) return {};
  Walker w(fs, request);
  return w.Run();
}

}  // namespace openlake::store

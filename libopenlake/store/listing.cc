// Listing (docs/object-store.md, "Listing"). Each online drive of a set walks its own folders
// (DriveApi::Walk; drive_walk.cc) and answers a page of keys in order; the set merges the pages,
// keeping an object when its metadata file is on at least k drives of the set (a failed write
// that reached fewer is not an object), and the sets are merged by key. Sizes and ETags come
// from the read quorum.
#include <algorithm>
#include <map>

#include "store/engine.h"
#include "store/errors.h"
#include "store/names.h"

#include "openlake/strings.h"

namespace openlake::store {

io::Task<absl::StatusOr<std::vector<WalkItem>>> Engine::WalkSet(int set, WalkRequest request,
                                                                int min_count) {
  std::vector<DriveApi*> drives;
  for (int p = 0; p < n_; ++p) {
    if (DriveApi* f = api(set, p)) drives.push_back(f);
  }
  std::vector<WalkItem> out;
  const size_t limit = request.limit;
  while (out.size() < limit) {
    std::vector<io::Task<absl::StatusOr<std::vector<WalkItem>>>> walks;
    for (DriveApi* f : drives) walks.push_back(f->Walk(request));
    std::vector<absl::StatusOr<std::vector<WalkItem>>> pages =
        co_await io::WhenAll(std::move(walks));
    // Items up to `bound` are complete: every drive whose page was full went at least that far.
    std::optional<std::string> bound;
    std::map<std::string, std::pair<bool, int>> count;  // key → (is_prefix, drives)
    int answered = 0;
    for (const absl::StatusOr<std::vector<WalkItem>>& page : pages) {
      if (!page.ok()) continue;
      ++answered;
      if (page->size() >= limit && !page->empty()) {
        if (!bound || page->back().key < *bound) bound = page->back().key;
      }
      for (const WalkItem& it : *page) {
        auto& c = count[it.key];
        c.first = it.is_prefix;
        ++c.second;
      }
    }
    if (answered < min_count) {
      co_return Error(ErrorKind::kInsufficientDrives,
                      StrCat("set ", set, " has ", answered, " drives that answered a listing; ",
                             min_count, " needed"));
    }
    for (const auto& [key, c] : count) {
      if (bound && key > *bound) break;
      if (out.size() >= limit) break;
      if (c.second >= min_count) out.push_back({key, c.first});
    }
    if (!bound) break;
    request.marker = *bound;
  }
  co_return out;
}

io::Task<absl::StatusOr<std::vector<WalkItem>>> Engine::WalkAll(WalkRequest request) {
  std::vector<io::Task<absl::StatusOr<std::vector<WalkItem>>>> walks;
  for (int s = 0; s < sets_; ++s) walks.push_back(WalkSet(s, request, k_));
  std::vector<absl::StatusOr<std::vector<WalkItem>>> sets =
      co_await io::WhenAll(std::move(walks));
  std::vector<WalkItem> all;
  for (absl::StatusOr<std::vector<WalkItem>>& items : sets) {
    if (!items.ok()) co_return items.status();
    for (WalkItem& it : *items) all.push_back(std::move(it));
  }
  std::sort(all.begin(), all.end(),
            [](const WalkItem& a, const WalkItem& b) { return a.key < b.key; });
  // The same common prefix can come from several sets.
  all.erase(std::unique(all.begin(), all.end(),
                        [](const WalkItem& a, const WalkItem& b) { return a.key == b.key; }),
            all.end());
  if (all.size() > request.limit) all.resize(request.limit);
  co_return all;
}

io::Task<absl::StatusOr<ListResult>> Engine::ListObjects(std::string bucket, ListOptions o) {
  OL_CO_RETURN_IF_ERROR((co_await StatBucket(bucket)).status());
  ListResult result;
  if (o.max_keys <= 0) co_return result;
  const size_t max_keys = static_cast<size_t>(std::min(o.max_keys, 1000));
  // A prefix no key can have (".." segments, "//") lists nothing.
  if (!ValidatePrefix(o.prefix).ok()) co_return result;

  WalkRequest req;
  req.bucket = bucket;
  req.prefix = o.prefix;
  req.delimiter = o.delimiter;
  req.marker = o.marker;
  req.limit = static_cast<uint32_t>(max_keys + 1);
  OL_CO_ASSIGN_OR_RETURN(std::vector<WalkItem> all, co_await WalkAll(std::move(req)));
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
    WalkRequest req;
    req.bucket = bucket;
    req.prefix = o.prefix;
    req.delimiter = o.delimiter;
    req.marker = marker;
    req.limit = static_cast<uint32_t>(want);
    OL_CO_ASSIGN_OR_RETURN(std::vector<WalkItem> items, co_await WalkAll(std::move(req)));
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

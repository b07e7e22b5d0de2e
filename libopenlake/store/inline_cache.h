// Small objects read recently, kept whole in memory (docs/object-store.md, "Inline cache").
//
// Objects up to StoreOptions::inline_threshold live inside their metadata files, so reading one
// costs an open, a read and a close on every drive of its set, and a decode: far more than the
// bytes. The cache keeps, per "bucket/key", the object's info and its bytes as a verified read
// produced them, and serves later reads without touching a drive.
//
// Coherence rides on the namespace locks: every change to an object's metadata (a commit, a
// delete, a heal, a completed upload) holds the object's lock exclusively and drops the entry
// right after taking it (Invalidate), while entries are added only by readers holding the same
// lock shared (Insert). An entry therefore never outlives the version it was read from.
// Damage on the drives is not seen through a cached entry (its bytes were checked when read);
// the healer and reads after eviction still find it.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "openlake/store/store.h"

namespace openlake::store {

class InlineCache {
 public:
  struct Entry {
    ObjectInfo info;
    std::string data;  // the whole object
  };

  // At most `max_bytes` of object bytes and metadata; 0 turns the cache off.
  explicit InlineCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  std::shared_ptr<const Entry> Find(std::string_view name) const;
  // Only with the object's lock held shared (see above).
  void Insert(std::string name, std::shared_ptr<const Entry> entry);
  // With the object's lock held exclusively, before its metadata changes.
  void Invalidate(std::string_view name);

 private:
  static size_t Cost(const Entry& e);

  const size_t max_bytes_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const Entry>> map_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> order_ ABSL_GUARDED_BY(mu_);  // insertion order, for eviction
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace openlake::store

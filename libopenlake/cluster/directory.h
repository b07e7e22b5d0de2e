// The KV pool's discovery directory: which nodes hold a chain, found without asking every node.
//
// A chain (a prompt's blocks, in prefix order) is named in the directory by its head: the
// 64-bit DirectoryKey of its namespace (name and layout fingerprint digest, the same on every
// daemon, unlike namespace ids) and its first block's key. Each head has `homes` nodes: the top
// ones by rendezvous hashing of the head over the live members (highest random weight), so a
// node joining or leaving moves only the heads it wins or held, about 1/N of them.
//
// Owners announce the heads they hold to those homes (Announcer: batched, one message per home
// per flush) and refresh them well within `ttl`; a home keeps each entry as soft state until it
// expires (Directory), so a dead owner's entries leave on their own and a new home learns the
// heads at the owners' next refresh, which a change of the live set brings forward.
//
// A node whose lookup misses locally asks the head's first live home (one message, none when it
// is a home itself), then the owner it names for the longest prefix (one more). A wrong or stale
// entry (the owner evicted the chain, or died) costs that owner's answer of "no blocks": a miss,
// never wrong bytes, since the owner answers from its own index and the puller checks each
// block's CRC-64.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/time/time.h"

#include "openlake/cluster/membership.h"

namespace openlake::cluster {

// The directory's name of a chain: CRC-64 over the namespace's name, its fingerprint digest and
// the chain's first key. Equal on every daemon for the same namespace and prompt.
uint64_t DirectoryKey(std::string_view ns_name, uint64_t fingerprint_digest,
                      std::string_view head_key);

// Rendezvous weight of `node` for `head` (a mix of both; uniform, stable across builds).
uint64_t RendezvousWeight(uint64_t head, uint32_t node);

// The `count` live members with the highest weight for `head`, best first (fewer when fewer
// are live).
absl::InlinedVector<uint32_t, 4> Homes(uint64_t head, const LiveSet& live, size_t count);

struct DirectoryOptions {
  absl::Duration ttl = absl::Seconds(30);
  // Owners kept per head (the freshest); a hot prefix copied to many nodes needs only a few.
  size_t owners_per_head = 4;
  // Heads kept in all; past it, entries nearest to expiry go first.
  size_t max_heads = 4u << 20;
};

// The soft state a home keeps: head → owners with their expiry. Single-threaded (the owning
// reactor's).
class Directory {
 public:
  explicit Directory(DirectoryOptions options) : options_(options) {}

  // `owner` holds these heads as of `now`: each entry lives until now + ttl.
  void Announce(uint32_t owner, const std::vector<uint64_t>& heads, absl::Time now);
  // `owner` no longer holds these (evicted, reset).
  void Withdraw(uint32_t owner, const std::vector<uint64_t>& heads);
  // Every entry of `owner` (it restarted with an empty pool, or left).
  void DropOwner(uint32_t owner);

  // Owners of `head` whose entries are unexpired and for whom `usable` says yes (say, live and
  // not the asker), freshest first, at most `max`.
  absl::InlinedVector<uint32_t, 4> Find(uint64_t head, absl::Time now,
                                        absl::FunctionRef<bool(uint32_t)> usable, size_t max) const;

  // Drops expired entries; returns how many. Run it every few seconds.
  size_t Expire(absl::Time now);

  size_t heads() const { return map_.size(); }

 private:
  struct Owner {
    uint32_t node;
    absl::Time expires;
  };
  using Owners = absl::InlinedVector<Owner, 2>;
  void Trim(absl::Time now);

  DirectoryOptions options_;
  absl::flat_hash_map<uint64_t, Owners> map_;
};

// One message an owner sends to one home.
struct Announcement {
  uint32_t home = 0;
  std::vector<uint64_t> announce;
  std::vector<uint64_t> withdraw;
};

// The owner's side: the heads it holds, and what each home must be told. Single-threaded.
class Announcer {
 public:
  struct Options {
    size_t homes = 2;                            // per head
    absl::Duration refresh = absl::Seconds(10);  // well under the directory's ttl
    // After the live set changes, the full refresh to the new homes waits this long, so that a
    // burst of changes (a rack going down is noticed by each node over a second or so) costs
    // one refresh, not one per change.
    absl::Duration settle = absl::Seconds(1);
  };
  Announcer(uint32_t self_id, Options options) : self_(self_id), options_(options) {}

  // A head committed here / gone from here (evicted from every tier, reset).
  void Add(uint64_t head);
  void Remove(uint64_t head);
  bool Holds(uint64_t head) const { return held_.contains(head); }
  size_t held() const { return held_.size(); }

  // The messages due at `now` over `live`: the heads added and removed since the last flush,
  // grouped by home; every held head when a refresh is due, or `settle` after the live set
  // changed. Heads whose home is this node are handed to `local` instead (no message).
  std::vector<Announcement> Flush(const LiveSet& live, absl::Time now,
                                  absl::FunctionRef<void(const Announcement&)> local);

 private:
  void Route(uint64_t head, bool announce, const LiveSet& live,
             absl::flat_hash_map<uint32_t, Announcement>* out) const;

  uint32_t self_;
  Options options_;
  absl::flat_hash_set<uint64_t> held_;
  std::vector<uint64_t> added_;
  std::vector<uint64_t> removed_;
  uint64_t flushed_epoch_ = 0;
  absl::Time next_refresh_ = absl::InfinitePast();
  absl::Time settled_refresh_ = absl::InfiniteFuture();  // due after a change of the live set
};

}  // namespace openlake::cluster

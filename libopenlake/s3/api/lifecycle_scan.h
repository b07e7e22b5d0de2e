// The lifecycle scanner (docs/s3.md, "Lifecycle"): walks the buckets that have lifecycle rules,
// key by key through every version, and applies what the rules say (lifecycle.h): expires
// current versions (a delete marker in a versioned bucket), removes noncurrent versions and
// lone delete markers, aborts old uploads. Bounded: a round looks at no more than a budget of
// keys and paces its listing pages, then remembers where it stopped; the next round goes on
// from there, and a pass over everything starts again once one ends.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/time/time.h"

#include "s3/api/lifecycle.h"

#include "openlake/io/task.h"
#include "openlake/store/store.h"

namespace openlake::s3 {

struct LifecycleLimits {
  uint64_t keys_per_round = 10000;  // keys looked at per round, at most
  uint64_t keys_per_second = 2000;   // listing pace (0: unpaced)
};

// What scanning has done since the scanner was made (read from other threads for metrics).
struct LifecycleTotals {
  std::atomic<uint64_t> rounds{0};
  std::atomic<uint64_t> passes{0};            // complete passes over every bucket
  std::atomic<uint64_t> keys_scanned{0};
  std::atomic<uint64_t> expired{0};           // current versions deleted (or marked)
  std::atomic<uint64_t> versions_removed{0};  // noncurrent versions and lone delete markers
  std::atomic<uint64_t> uploads_aborted{0};
  std::atomic<uint64_t> errors{0};            // actions or listings that failed
};

class LifecycleScanner {
 public:
  LifecycleScanner(store::Store& store, LifecycleLimits limits);

  // One bounded round at `now`, on a reactor; one round at a time. True when it finished a
  // pass (or could not list the buckets), false when its budget ran out first.
  io::Task<bool> RunRound(absl::Time now);
  const LifecycleTotals& totals() const { return totals_; }

 private:
  // Scans `bucket` under its rules `config` from `cursor_key_` until done (true) or out of
  // budget (false).
  io::Task<bool> ScanBucket(store::BucketInfo bucket, LifecycleConfig config, absl::Time now,
                            uint64_t* budget);
  io::Task<void> AbortUploads(store::BucketInfo bucket, LifecycleConfig config, absl::Time now);

  store::Store& store_;
  LifecycleLimits limits_;
  LifecycleTotals totals_;
  std::string cursor_bucket_;  // where the last round stopped ("": at the start of a pass)
  std::string cursor_key_;     // the last key done in cursor_bucket_
};

}  // namespace openlake::s3

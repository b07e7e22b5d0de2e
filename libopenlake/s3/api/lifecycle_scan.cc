// The lifecycle scanner (see lifecycle_scan.h).
#include "s3/api/lifecycle_scan.h"

#include <algorithm>
#include <vector>

#include "s3/api/lifecycle.h"

#include "openlake/log.h"

namespace openlake::s3 {
namespace {

constexpr int kPage = 1000;

// Removes one version of `key`; true when it went (or was gone already).
io::Task<bool> RemoveVersion(store::Store& st, std::string bucket, std::string key,
                             store::Versioning versioning, std::string version_id) {
  store::DeleteOptions o;
  o.versioning = versioning;
  o.version_id = std::move(version_id);
  absl::StatusOr<store::DeleteResult> r = co_await st.DeleteObject(bucket, key, std::move(o));
  if (!r.ok()) {
    OL_LOG_EVERY_N_SEC(kWarning, 10) << "s3: lifecycle: removing a version of " << bucket << "/"
                                     << key << ": " << r.status();
  }
  co_return r.ok();
}

// Deletes the current version of `key` if it is still the one listed (`listed`): a write
// since then is left alone.
io::Task<bool> ExpireCurrent(store::Store& st, std::string bucket, store::ObjectInfo listed,
                             store::Versioning versioning) {
  store::Conditions now;
  absl::StatusOr<store::ObjectInfo> cur = co_await st.StatObject(bucket, listed.key, std::move(now));
  if (!cur.ok() || cur->version_id != listed.version_id || cur->mod_time != listed.mod_time) {
    co_return true;  // gone or replaced meanwhile: nothing to expire
  }
  store::DeleteOptions o;
  o.versioning = versioning;
  absl::StatusOr<store::DeleteResult> r = co_await st.DeleteObject(bucket, listed.key, std::move(o));
  if (!r.ok() && store::ErrorKindOf(r.status()) != store::ErrorKind::kNoSuchKey) {
    OL_LOG_EVERY_N_SEC(kWarning, 10) << "s3: lifecycle: expiring " << bucket << "/" << listed.key
                                     << ": " << r.status();
    co_return false;
  }
  co_return true;
}

bool HasAbortRule(const LifecycleConfig& c) {
  return std::any_of(c.rules.begin(), c.rules.end(),
                     [](const LifecycleRule& r) { return r.enabled && r.abort_upload_days; });
}

}  // namespace

LifecycleScanner::LifecycleScanner(store::Store& store, LifecycleLimits limits)
    : store_(store), limits_(limits) {}

io::Task<bool> LifecycleScanner::RunRound(absl::Time now) {
  totals_.rounds.fetch_add(1, std::memory_order_relaxed);
  absl::StatusOr<std::vector<store::BucketInfo>> buckets = co_await store_.ListBuckets();
  if (!buckets.ok()) {
    totals_.errors.fetch_add(1, std::memory_order_relaxed);
    co_return true;
  }
  std::sort(buckets->begin(), buckets->end(),
            [](const store::BucketInfo& a, const store::BucketInfo& b) { return a.name < b.name; });
  uint64_t budget = limits_.keys_per_round;
  for (store::BucketInfo& b : *buckets) {
    if (b.name < cursor_bucket_) continue;
    if (b.name != cursor_bucket_) cursor_key_.clear();
    cursor_bucket_ = b.name;
    if (b.lifecycle.empty()) continue;
    absl::StatusOr<LifecycleConfig> config = ParseKeptLifecycle(b.lifecycle);
    if (!config.ok()) {
      totals_.errors.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    const bool done = co_await ScanBucket(b, *config, now, &budget);
    if (!done) co_return false;  // out of budget: the next round goes on from the cursor
    co_await AbortUploads(b, *config, now);
  }
  cursor_bucket_.clear();
  cursor_key_.clear();
  totals_.passes.fetch_add(1, std::memory_order_relaxed);
  co_return true;
}

io::Task<bool> LifecycleScanner::ScanBucket(store::BucketInfo bucket, LifecycleConfig config,
                                            absl::Time now, uint64_t* budget) {
  store::ListVersionsOptions o;
  o.key_marker = cursor_key_;
  o.max_keys = kPage;
  std::vector<store::ObjectInfo> pending;  // the versions of one key, as they come
  bool listed_all = false;
  while (true) {
    absl::StatusOr<store::ListVersionsResult> page =
        co_await store_.ListObjectVersions(bucket.name, o);
    if (!page.ok()) {
      totals_.errors.fetch_add(1, std::memory_order_relaxed);
      co_return true;  // tried again on the next pass
    }
    listed_all = !page->truncated;
    size_t next = 0;
    while (next <= page->versions.size()) {
      // A key is whole once the next key's first version (or the listing's end) shows.
      const bool at_end = next == page->versions.size();
      if (at_end && !listed_all) break;
      if (!pending.empty() && (at_end || page->versions[next].key != pending.front().key)) {
        if (*budget == 0) co_return false;
        --*budget;
        totals_.keys_scanned.fetch_add(1, std::memory_order_relaxed);
        const KeyActions actions = Evaluate(config, pending, now);
        const std::string key = pending.front().key;
        for (const std::string& id : actions.remove_versions) {
          const bool removed =
              co_await RemoveVersion(store_, bucket.name, key, bucket.versioning, id);
          (removed ? totals_.versions_removed : totals_.errors)
              .fetch_add(1, std::memory_order_relaxed);
        }
        if (actions.expire_current) {
          const bool expired =
              co_await ExpireCurrent(store_, bucket.name, pending.front(), bucket.versioning);
          (expired ? totals_.expired : totals_.errors).fetch_add(1, std::memory_order_relaxed);
        }
        cursor_key_ = key;
        pending.clear();
      }
      if (at_end) break;
      pending.push_back(std::move(page->versions[next]));
      ++next;
    }
    if (listed_all) co_return true;
    o.key_marker = page->next_key_marker;
    o.version_id_marker = page->next_version_id_marker;
    if (limits_.keys_per_second > 0) {
      const absl::Duration pause =
          absl::Seconds(static_cast<double>(page->versions.size()) /
                        static_cast<double>(limits_.keys_per_second));
      io::Sleep nap{pause};
      co_await nap;
    }
  }
}

io::Task<void> LifecycleScanner::AbortUploads(store::BucketInfo bucket, LifecycleConfig config,
                                              absl::Time now) {
  if (!HasAbortRule(config)) co_return;
  store::ListUploadsOptions o;
  o.max_uploads = kPage;
  while (true) {
    absl::StatusOr<store::ListUploadsResult> page = co_await store_.ListUploads(bucket.name, o);
    if (!page.ok()) {
      totals_.errors.fetch_add(1, std::memory_order_relaxed);
      co_return;
    }
    for (const store::UploadInfo& u : page->uploads) {
      if (!AbortsUpload(config, u.key, u.initiated, now)) continue;
      const absl::Status st = co_await store_.AbortUpload(bucket.name, u.key, u.upload_id);
      const bool gone = st.ok() || store::ErrorKindOf(st) == store::ErrorKind::kNoSuchUpload;
      (gone ? totals_.uploads_aborted : totals_.errors).fetch_add(1, std::memory_order_relaxed);
    }
    if (!page->truncated) co_return;
    o.key_marker = page->next_key_marker;
    o.upload_id_marker = page->next_upload_id_marker;
  }
}

}  // namespace openlake::s3

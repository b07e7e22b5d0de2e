// S3 bucket lifecycle rules (docs/s3.md, "Lifecycle"): the configuration a bucket keeps, the
// checks PutBucketLifecycleConfiguration applies, and the decisions the lifecycle scanner
// (lifecycle_scan.h) takes for a key's versions and for an upload.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "s3/api/errors.h"
#include "s3/api/xml.h"

#include "openlake/store/store.h"

namespace openlake::s3 {

struct LifecycleRule {
  std::string id;
  bool enabled = true;
  // The filter: every condition given must hold.
  std::string prefix;
  TagSet tags;
  std::optional<uint64_t> size_greater;
  std::optional<uint64_t> size_less;
  // Actions.
  std::optional<int> expiration_days;       // the current version, days after it was written
  std::optional<absl::Time> expiration_date;  // the current version, from this day on
  bool expired_object_delete_marker = false;  // a delete marker left alone, removed
  std::optional<int> noncurrent_days;       // noncurrent versions, days after they became so
  std::optional<int> newer_noncurrent_versions;  // ... keeping this many newer ones
  std::optional<int> abort_upload_days;     // uploads, days after they were started
};

struct LifecycleConfig {
  std::vector<LifecycleRule> rules;
};

// The checked configuration of a parsed document; false with S3's error (InvalidArgument,
// InvalidRequest, MalformedXML, NotImplemented for transitions).
bool LifecycleFromDocument(const LifecycleDocument& doc, LifecycleConfig* out, S3Error* error);
// The configuration as S3 returns it (GetBucketLifecycleConfiguration), which is also the form
// the bucket keeps.
std::string LifecycleXml(const LifecycleConfig& config);
// A kept configuration (LifecycleXml's form) read back.
absl::StatusOr<LifecycleConfig> ParseKeptLifecycle(std::string_view xml);

// When something `days` days after `from` expires, as S3 counts: `from` plus the days, rounded
// up to the next midnight UTC.
absl::Time ExpiryAfter(absl::Time from, int days);

// What the rules do to one key, given its versions newest first (ListObjectVersions' entries
// for it) at `now`.
struct KeyActions {
  bool expire_current = false;              // delete the key (a delete marker when versioned)
  std::vector<std::string> remove_versions;  // versions (and a lone delete marker) to remove
};
KeyActions Evaluate(const LifecycleConfig& config, const std::vector<store::ObjectInfo>& versions,
                    absl::Time now);
// Whether an upload of `key` started at `initiated` is to be aborted at `now`.
bool AbortsUpload(const LifecycleConfig& config, std::string_view key, absl::Time initiated,
                  absl::Time now);

}  // namespace openlake::s3

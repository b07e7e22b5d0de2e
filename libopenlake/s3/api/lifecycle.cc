// S3 bucket lifecycle rules (see lifecycle.h).
#include "s3/api/lifecycle.h"

#include <charconv>
#include <set>

#include "s3/api/fields.h"
#include "s3/api/ops.h"

#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

constexpr size_t kMaxRules = 1000;
constexpr size_t kMaxIdLength = 255;
constexpr int64_t kDaySeconds = 86400;

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' ||
                        s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' ||
                        s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::optional<uint64_t> Number(std::string_view text) {
  text = TrimSpace(text);
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// A positive count of days (at most a hundred years' worth); false with S3's error.
bool Days(std::string_view text, std::string_view what, std::optional<int>* out, S3Error* error) {
  if (text.empty()) return true;
  std::optional<uint64_t> v = Number(text);
  if (!v || *v == 0 || *v > 36500) {
    *error = {"InvalidArgument", 400, StrCat("'", what, "' must be a positive integer")};
    return false;
  }
  *out = static_cast<int>(*v);
  return true;
}

bool RuleFromDocument(const LifecycleRuleDocument& d, LifecycleRule* r, S3Error* error) {
  auto malformed = [error](std::string why) {
    *error = {"MalformedXML", 400,
              "The XML you provided was not well-formed or did not validate against our "
              "published schema (" + why + ")"};
    return false;
  };
  if (d.transition) {
    *error = {"NotImplemented", 501,
              "A header you provided implies functionality that is not implemented: lifecycle "
              "transitions (this store has no other storage tiers)."};
    return false;
  }
  if (d.id.size() > kMaxIdLength) {
    *error = {"InvalidArgument", 400, "ID length should not exceed allowed limit of 255"};
    return false;
  }
  r->id = d.id;
  if (d.status != "Enabled" && d.status != "Disabled") {
    return malformed("a Rule's Status is Enabled or Disabled");
  }
  r->enabled = d.status == "Enabled";
  r->prefix = d.prefix;
  r->tags = d.tags;
  if (!r->tags.empty() && !ValidateTags(r->tags, error)) return false;
  if (!d.size_greater.empty()) {
    r->size_greater = Number(d.size_greater);
    if (!r->size_greater) return malformed("ObjectSizeGreaterThan is a number of bytes");
  }
  if (!d.size_less.empty()) {
    r->size_less = Number(d.size_less);
    if (!r->size_less || *r->size_less == 0) {
      return malformed("ObjectSizeLessThan is a positive number of bytes");
    }
  }
  if (r->size_greater && r->size_less && *r->size_greater >= *r->size_less) {
    *error = {"InvalidArgument", 400,
              "ObjectSizeGreaterThan must be less than ObjectSizeLessThan"};
    return false;
  }
  if (d.expiration) {
    if (!Days(d.days, "Days", &r->expiration_days, error)) return false;
    if (!d.date.empty()) {
      r->expiration_date = ParseIsoDate(TrimSpace(d.date));
      if (!r->expiration_date) return malformed("Date is an ISO 8601 date");
      if (absl::ToUnixSeconds(*r->expiration_date) % kDaySeconds != 0) {
        *error = {"InvalidArgument", 400, "'Date' must be at midnight GMT"};
        return false;
      }
    }
    if (!d.expired_object_delete_marker.empty()) {
      if (d.expired_object_delete_marker != "true" && d.expired_object_delete_marker != "false") {
        return malformed("ExpiredObjectDeleteMarker is true or false");
      }
      if (!r->tags.empty()) {
        *error = {"InvalidArgument", 400,
                  "ExpiredObjectDeleteMarker cannot be specified with tags"};
        return false;
      }
      r->expired_object_delete_marker = d.expired_object_delete_marker == "true";
    }
  }
  if (d.noncurrent) {
    if (d.noncurrent_days.empty()) return malformed("NoncurrentVersionExpiration needs NoncurrentDays");
    if (!Days(d.noncurrent_days, "NoncurrentDays", &r->noncurrent_days, error)) return false;
    if (!d.newer_noncurrent_versions.empty()) {
      std::optional<uint64_t> n = Number(d.newer_noncurrent_versions);
      if (!n || *n == 0 || *n > 100) {
        *error = {"InvalidArgument", 400,
                  "'NewerNoncurrentVersions' must be an integer from 1 to 100"};
        return false;
      }
      r->newer_noncurrent_versions = static_cast<int>(*n);
    }
  }
  if (d.abort_upload) {
    if (d.abort_days.empty()) {
      return malformed("AbortIncompleteMultipartUpload needs DaysAfterInitiation");
    }
    if (!Days(d.abort_days, "DaysAfterInitiation", &r->abort_upload_days, error)) return false;
    if (!r->tags.empty() || r->size_greater || r->size_less) {
      *error = {"InvalidRequest", 400,
                "AbortIncompleteMultipartUpload cannot be specified with Tags or object size"};
      return false;
    }
  }
  if (!r->expiration_days && !r->expiration_date && !r->expired_object_delete_marker &&
      !r->noncurrent_days && !r->abort_upload_days) {
    *error = {"InvalidRequest", 400, "At least one action needs to be specified in a rule"};
    return false;
  }
  return true;
}

// Whether a version of `key` with `size` bytes and `meta` (its tags) is one the rule covers.
bool Matches(const LifecycleRule& r, std::string_view key, uint64_t size,
             const std::map<std::string, std::string>& meta) {
  if (!r.enabled || key.substr(0, r.prefix.size()) != r.prefix) return false;
  if (r.size_greater && size <= *r.size_greater) return false;
  if (r.size_less && size >= *r.size_less) return false;
  if (r.tags.empty()) return true;
  const TagSet have = TagsOf(meta);
  for (const auto& want : r.tags) {
    bool found = false;
    for (const auto& t : have) found = found || t == want;
    if (!found) return false;
  }
  return true;
}

}  // namespace

bool LifecycleFromDocument(const LifecycleDocument& doc, LifecycleConfig* out, S3Error* error) {
  if (doc.rules.size() > kMaxRules) {
    *error = {"InvalidRequest", 400, "A lifecycle configuration holds at most 1000 rules"};
    return false;
  }
  std::set<std::string> ids;
  out->rules.clear();
  for (const LifecycleRuleDocument& d : doc.rules) {
    LifecycleRule r;
    if (!RuleFromDocument(d, &r, error)) return false;
    if (!r.id.empty() && !ids.insert(r.id).second) {
      *error = {"InvalidArgument", 400, "Rule ID must be unique. Found same ID for more than one rule"};
      return false;
    }
    out->rules.push_back(std::move(r));
  }
  return true;
}

std::string LifecycleXml(const LifecycleConfig& config) {
  XmlWriter w("LifecycleConfiguration");
  for (const LifecycleRule& r : config.rules) {
    w.Open("Rule");
    if (!r.id.empty()) w.Element("ID", r.id);
    w.Open("Filter");
    const int conditions = !r.prefix.empty() + static_cast<int>(r.tags.size()) +
                           r.size_greater.has_value() + r.size_less.has_value();
    if (conditions > 1) w.Open("And");
    if (!r.prefix.empty() || conditions == 0) w.Element("Prefix", r.prefix);
    for (const auto& [key, value] : r.tags) {
      w.Open("Tag");
      w.Element("Key", key);
      w.Element("Value", value);
      w.Close();
    }
    if (r.size_greater) w.Element("ObjectSizeGreaterThan", std::to_string(*r.size_greater));
    if (r.size_less) w.Element("ObjectSizeLessThan", std::to_string(*r.size_less));
    if (conditions > 1) w.Close();
    w.Close();
    w.Element("Status", r.enabled ? "Enabled" : "Disabled");
    if (r.expiration_days || r.expiration_date || r.expired_object_delete_marker) {
      w.Open("Expiration");
      if (r.expiration_days) w.Element("Days", std::to_string(*r.expiration_days));
      if (r.expiration_date) w.Element("Date", FormatIsoTime(*r.expiration_date));
      if (r.expired_object_delete_marker) w.Element("ExpiredObjectDeleteMarker", "true");
      w.Close();
    }
    if (r.noncurrent_days) {
      w.Open("NoncurrentVersionExpiration");
      w.Element("NoncurrentDays", std::to_string(*r.noncurrent_days));
      if (r.newer_noncurrent_versions) {
        w.Element("NewerNoncurrentVersions", std::to_string(*r.newer_noncurrent_versions));
      }
      w.Close();
    }
    if (r.abort_upload_days) {
      w.Open("AbortIncompleteMultipartUpload");
      w.Element("DaysAfterInitiation", std::to_string(*r.abort_upload_days));
      w.Close();
    }
    w.Close();
  }
  return w.Finish();
}

absl::StatusOr<LifecycleConfig> ParseKeptLifecycle(std::string_view xml) {
  absl::StatusOr<LifecycleDocument> doc = ParseLifecycleConfiguration(xml);
  if (!doc.ok()) return doc.status();
  LifecycleConfig config;
  S3Error error;
  if (!LifecycleFromDocument(*doc, &config, &error)) {
    return absl::DataLossError(StrCat("a kept lifecycle configuration: ", error.message));
  }
  return config;
}

absl::Time ExpiryAfter(absl::Time from, int days) {
  const int64_t t = absl::ToUnixSeconds(from) + int64_t{days} * kDaySeconds;
  // Up to the next midnight; one exactly at midnight stays.
  const int64_t midnight = (t + kDaySeconds - 1) / kDaySeconds * kDaySeconds;
  return absl::FromUnixSeconds(midnight);
}

KeyActions Evaluate(const LifecycleConfig& config, const std::vector<store::ObjectInfo>& versions,
                    absl::Time now) {
  KeyActions out;
  if (versions.empty()) return out;
  const store::ObjectInfo& current = versions.front();
  for (const LifecycleRule& r : config.rules) {
    if (!Matches(r, current.key, current.size, current.user_meta)) continue;
    if (current.delete_marker) {
      // A marker with nothing left behind it is removed when a rule asks for that.
      if (versions.size() == 1 && r.expired_object_delete_marker &&
          out.remove_versions.empty()) {
        out.remove_versions.push_back(current.version_id);
      }
      continue;
    }
    if ((r.expiration_days && now >= ExpiryAfter(current.mod_time, *r.expiration_days)) ||
        (r.expiration_date && now >= *r.expiration_date)) {
      out.expire_current = true;
    }
  }
  // Noncurrent versions: each became so when the next newer one was written.
  for (size_t i = 1; i < versions.size(); ++i) {
    const store::ObjectInfo& v = versions[i];
    const absl::Time since = versions[i - 1].mod_time;
    const int newer_noncurrent = static_cast<int>(i) - 1;
    for (const LifecycleRule& r : config.rules) {
      if (!r.noncurrent_days || !Matches(r, v.key, v.size, v.user_meta)) continue;
      if (r.newer_noncurrent_versions && newer_noncurrent < *r.newer_noncurrent_versions) continue;
      if (now >= ExpiryAfter(since, *r.noncurrent_days)) {
        out.remove_versions.push_back(v.version_id);
        break;
      }
    }
  }
  return out;
}

bool AbortsUpload(const LifecycleConfig& config, std::string_view key, absl::Time initiated,
                  absl::Time now) {
  for (const LifecycleRule& r : config.rules) {
    if (!r.enabled || !r.abort_upload_days || key.substr(0, r.prefix.size()) != r.prefix) {
      continue;
    }
    if (now >= ExpiryAfter(initiated, *r.abort_upload_days)) return true;
  }
  return false;
}

}  // namespace openlake::s3

// S3 bucket policies (docs/s3.md, "Bucket policies"): the JSON grammar S3 takes for a bucket
// (Version, Statement of Effect, Principal, Action or NotAction, Resource or NotResource,
// Condition), checked once when a policy is put and evaluated on every request to the bucket.
// An explicit Deny wins over any Allow; nothing matching is no decision (the owner alone may).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace openlake::s3 {

// A request as a policy sees it.
struct PolicyRequest {
  std::string action;       // "s3:GetObject"
  std::string resource;     // "arn:aws:s3:::bucket" or "arn:aws:s3:::bucket/key"
  bool anonymous = true;
  std::string owner_id;     // the caller's canonical id, when not anonymous
  // Condition keys (lowercase: "aws:sourceip", "s3:prefix") and their values; a key the
  // request does not have is absent.
  std::map<std::string, std::string> keys;
};

enum class PolicyDecision { kNone, kAllow, kDeny };

class BucketPolicy {
 public:
  // The policy of `bucket` from its JSON document; InvalidArgument naming what S3 would refuse
  // (MalformedPolicy): not JSON, an unknown element, an Effect, Action, Resource (another
  // bucket's) or condition operator it does not take, more than 20 KiB.
  static absl::StatusOr<BucketPolicy> Parse(std::string_view json, std::string_view bucket);

  PolicyDecision Evaluate(const PolicyRequest& r) const;

  struct Condition {
    std::string op;          // "StringEquals", ... without IfExists or a set qualifier
    bool if_exists = false;
    std::string key;         // lowercase
    std::vector<std::string> values;
  };
  struct Statement {
    bool allow = false;
    bool any_principal = false;
    std::vector<std::string> aws;        // AWS principals (ids, ARNs)
    std::vector<std::string> canonical;  // CanonicalUser ids
    std::vector<std::string> actions;    // lowercase patterns
    bool not_action = false;
    std::vector<std::string> resources;
    bool not_resource = false;
    std::vector<Condition> conditions;
  };

 private:
  std::vector<Statement> statements_;
};

inline constexpr size_t kMaxPolicyBytes = 20 << 10;

// IAM's wildcard match: '*' any run of characters, '?' any one.
bool WildcardMatch(std::string_view pattern, std::string_view text);
// Whether IP address `ip` is in `cidr` ("192.0.2.0/24", "2001:db8::/32", or one address).
bool IpInCidr(std::string_view ip, std::string_view cidr);

}  // namespace openlake::s3

// S3 bucket policies (see policy.h).
#include "s3/api/policy.h"

#include <arpa/inet.h>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <optional>

#include "absl/time/time.h"

#include "s3/api/fields.h"

#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

namespace pb = google::protobuf;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

absl::Status Malformed(std::string_view why) {
  return absl::InvalidArgumentError(std::string(why));
}

// A string or a list of strings (a scalar of another type is taken as its JSON text: numbers
// and booleans in conditions); false when it is neither.
bool Strings(const pb::Value& v, std::vector<std::string>* out) {
  auto scalar = [&](const pb::Value& x) {
    if (x.has_string_value()) {
      out->push_back(x.string_value());
    } else if (x.kind_case() == pb::Value::kBoolValue) {
      out->push_back(x.bool_value() ? "true" : "false");
    } else if (x.kind_case() == pb::Value::kNumberValue) {
      std::string text;
      (void)pb::util::MessageToJsonString(x, &text);
      out->push_back(text);
    } else {
      return false;
    }
    return true;
  };
  if (v.has_list_value()) {
    for (const pb::Value& x : v.list_value().values()) {
      if (!scalar(x)) return false;
    }
    return !out->empty();
  }
  return scalar(v);
}

// The operators of a Condition block S3 takes (without IfExists and set qualifiers).
constexpr std::string_view kOperators[] = {
    "StringEquals", "StringNotEquals", "StringEqualsIgnoreCase", "StringNotEqualsIgnoreCase",
    "StringLike", "StringNotLike", "NumericEquals", "NumericNotEquals", "NumericLessThan",
    "NumericLessThanEquals", "NumericGreaterThan", "NumericGreaterThanEquals", "DateEquals",
    "DateNotEquals", "DateLessThan", "DateLessThanEquals", "DateGreaterThan",
    "DateGreaterThanEquals", "Bool", "IpAddress", "NotIpAddress", "Null"};

bool Negated(std::string_view op) {
  return op == "StringNotEquals" || op == "StringNotEqualsIgnoreCase" || op == "StringNotLike" ||
         op == "NumericNotEquals" || op == "DateNotEquals" || op == "NotIpAddress";
}

// A policy date: ISO 8601 (a day, or a time with a zone) or seconds since the epoch.
std::optional<absl::Time> ParsePolicyDate(std::string_view s) {
  int64_t secs = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), secs);
  if (!s.empty() && ec == std::errc() && end == s.data() + s.size()) {
    return absl::FromUnixSeconds(secs);
  }
  return ParseIsoDate(s);
}

absl::Status ParsePrincipal(const pb::Value& v, BucketPolicy::Statement* st) {
  if (v.has_string_value()) {
    if (v.string_value() != "*") return Malformed("Invalid principal in policy");
    st->any_principal = true;
    return absl::OkStatus();
  }
  if (!v.has_struct_value()) return Malformed("Invalid principal in policy");
  for (const auto& [kind, value] : v.struct_value().fields()) {
    std::vector<std::string> ids;
    if (!Strings(value, &ids)) return Malformed("Invalid principal in policy");
    if (kind == "AWS") {
      for (std::string& id : ids) {
        if (id == "*") st->any_principal = true;
        st->aws.push_back(std::move(id));
      }
    } else if (kind == "CanonicalUser") {
      for (std::string& id : ids) st->canonical.push_back(std::move(id));
    } else if (kind != "Service" && kind != "Federated") {
      return Malformed("Invalid principal in policy");
    }
    // Service and Federated principals are valid and never this server's callers.
  }
  return absl::OkStatus();
}

absl::Status ParseActions(const pb::Value& v, BucketPolicy::Statement* st) {
  std::vector<std::string> actions;
  if (!Strings(v, &actions)) return Malformed("Policy has invalid action");
  for (const std::string& a : actions) {
    const std::string lower = Lower(a);
    if (lower != "*" && lower.compare(0, 3, "s3:") != 0) {
      return Malformed("Policy has invalid action");
    }
    st->actions.push_back(lower);
  }
  return absl::OkStatus();
}

absl::Status ParseResources(const pb::Value& v, std::string_view bucket,
                            BucketPolicy::Statement* st) {
  std::vector<std::string> resources;
  if (!Strings(v, &resources)) return Malformed("Policy has invalid resource");
  constexpr std::string_view kArn = "arn:aws:s3:::";
  for (const std::string& r : resources) {
    if (r != "*") {
      // A bucket's policy speaks of that bucket (and its objects) only.
      if (r.compare(0, kArn.size(), kArn) != 0) return Malformed("Policy has invalid resource");
      const std::string_view rest = std::string_view(r).substr(kArn.size());
      const std::string_view name = rest.substr(0, rest.find('/'));
      if (!WildcardMatch(name, bucket)) {
        return Malformed("Action does not apply to any resource(s) in statement");
      }
    }
    st->resources.push_back(r);
  }
  return absl::OkStatus();
}

absl::Status ParseConditions(const pb::Value& v, BucketPolicy::Statement* st) {
  if (!v.has_struct_value()) return Malformed("Invalid Condition block");
  for (const auto& [name, block] : v.struct_value().fields()) {
    std::string_view op = name;
    const size_t colon = op.find(':');
    if (colon != std::string_view::npos) {
      const std::string_view set = op.substr(0, colon);
      if (set != "ForAnyValue" && set != "ForAllValues") {
        return Malformed(StrCat("Unknown condition operator ", name));
      }
      op = op.substr(colon + 1);  // this server's keys are single-valued
    }
    bool if_exists = false;
    if (op.size() > 8 && op.substr(op.size() - 8) == "IfExists") {
      if_exists = true;
      op.remove_suffix(8);
    }
    if (std::find(std::begin(kOperators), std::end(kOperators), op) == std::end(kOperators)) {
      return Malformed(StrCat("Unknown condition operator ", name));
    }
    if (!block.has_struct_value()) return Malformed("Invalid Condition block");
    for (const auto& [key, values] : block.struct_value().fields()) {
      BucketPolicy::Condition c;
      c.op = std::string(op);
      c.if_exists = if_exists;
      c.key = Lower(key);
      if (!Strings(values, &c.values)) return Malformed("Invalid Condition value");
      for (const std::string& value : c.values) {
        if (c.op.rfind("Date", 0) == 0 && !ParsePolicyDate(value)) {
          return Malformed(StrCat("Invalid Date value ", value, " for ", name));
        }
      }
      st->conditions.push_back(std::move(c));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseStatement(const pb::Value& v, std::string_view bucket,
                            BucketPolicy::Statement* st) {
  if (!v.has_struct_value()) return Malformed("Statement must be an object");
  const auto& f = v.struct_value().fields();
  for (const auto& [name, value] : f) {
    if (name == "Sid") {
      if (!value.has_string_value()) return Malformed("Sid must be a string");
    } else if (name == "Effect") {
      if (!value.has_string_value() ||
          (value.string_value() != "Allow" && value.string_value() != "Deny")) {
        return Malformed("Invalid effect");
      }
      st->allow = value.string_value() == "Allow";
    } else if (name == "Principal") {
      OL_RETURN_IF_ERROR(ParsePrincipal(value, st));
    } else if (name == "Action" || name == "NotAction") {
      st->not_action = name == "NotAction";
      OL_RETURN_IF_ERROR(ParseActions(value, st));
    } else if (name == "Resource" || name == "NotResource") {
      st->not_resource = name == "NotResource";
      OL_RETURN_IF_ERROR(ParseResources(value, bucket, st));
    } else if (name == "Condition") {
      OL_RETURN_IF_ERROR(ParseConditions(value, st));
    } else if (name == "NotPrincipal") {
      return Malformed("NotPrincipal is not supported");
    } else {
      return Malformed(StrCat("Unknown field ", name));
    }
  }
  if (f.count("Effect") == 0) return Malformed("Missing required field Effect");
  if (f.count("Principal") == 0) return Malformed("Missing required field Principal");
  if ((f.count("Action") != 0) == (f.count("NotAction") != 0)) {
    return Malformed("A statement needs one of Action and NotAction");
  }
  if ((f.count("Resource") != 0) == (f.count("NotResource") != 0)) {
    return Malformed("A statement needs one of Resource and NotResource");
  }
  return absl::OkStatus();
}

bool PrincipalMatches(const BucketPolicy::Statement& st, const PolicyRequest& r) {
  if (st.any_principal) return true;
  if (r.anonymous) return false;
  for (const std::string& id : st.canonical) {
    if (id == r.owner_id) return true;
  }
  for (const std::string& id : st.aws) {
    if (id == r.owner_id) return true;
    // arn:aws:iam::<account>:root, :user/<name>: the account is the caller's id.
    constexpr std::string_view kIam = "arn:aws:iam::";
    if (id.compare(0, kIam.size(), kIam) == 0) {
      const std::string_view rest = std::string_view(id).substr(kIam.size());
      if (rest.substr(0, rest.find(':')) == r.owner_id) return true;
    }
  }
  return false;
}

bool AnyMatches(const std::vector<std::string>& patterns, std::string_view text) {
  for (const std::string& p : patterns) {
    if (WildcardMatch(p, text)) return true;
  }
  return false;
}

bool ParseNumber(std::string_view s, double* out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

// One value against one condition value (the operator's positive form).
bool ValueMatches(std::string_view op, std::string_view have, std::string_view want) {
  if (op == "StringEquals" || op == "StringNotEquals") return have == want;
  if (op == "StringEqualsIgnoreCase" || op == "StringNotEqualsIgnoreCase") {
    return Lower(have) == Lower(want);
  }
  if (op == "StringLike" || op == "StringNotLike") return WildcardMatch(want, have);
  if (op == "Bool") return Lower(have) == Lower(want);
  if (op == "IpAddress" || op == "NotIpAddress") return IpInCidr(have, want);
  if (op.substr(0, 4) == "Date") {
    const std::optional<absl::Time> t = ParsePolicyDate(have), w = ParsePolicyDate(want);
    if (!t || !w) return false;
    if (op == "DateEquals" || op == "DateNotEquals") return *t == *w;
    if (op == "DateLessThan") return *t < *w;
    if (op == "DateLessThanEquals") return *t <= *w;
    if (op == "DateGreaterThan") return *t > *w;
    return *t >= *w;  // DateGreaterThanEquals
  }
  double a = 0, b = 0;
  if (!ParseNumber(have, &a) || !ParseNumber(want, &b)) return false;
  if (op == "NumericEquals" || op == "NumericNotEquals") return a == b;
  if (op == "NumericLessThan") return a < b;
  if (op == "NumericLessThanEquals") return a <= b;
  if (op == "NumericGreaterThan") return a > b;
  return a >= b;  // NumericGreaterThanEquals
}

bool ConditionHolds(const BucketPolicy::Condition& c, const PolicyRequest& r) {
  auto it = r.keys.find(c.key);
  if (c.op == "Null") {
    // "true": the key must be absent; "false": present.
    const bool absent = it == r.keys.end();
    return Lower(c.values.front()) == "true" ? absent : !absent;
  }
  if (it == r.keys.end()) return c.if_exists || Negated(c.op);
  bool any = false;
  for (const std::string& want : c.values) any = any || ValueMatches(c.op, it->second, want);
  return Negated(c.op) ? !any : any;
}

// `action`: r.action lowercase (IAM's action names are not case-sensitive).
bool StatementMatches(const BucketPolicy::Statement& st, const PolicyRequest& r,
                      std::string_view action) {
  if (!PrincipalMatches(st, r)) return false;
  if (AnyMatches(st.actions, action) == st.not_action) return false;
  if (AnyMatches(st.resources, r.resource) == st.not_resource) return false;
  for (const BucketPolicy::Condition& c : st.conditions) {
    if (!ConditionHolds(c, r)) return false;
  }
  return true;
}

}  // namespace

bool WildcardMatch(std::string_view pattern, std::string_view text) {
  // Iterative glob: remember the last '*' and where the text stood then.
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool IpInCidr(std::string_view ip, std::string_view cidr) {
  const size_t slash = cidr.find('/');
  const std::string net(cidr.substr(0, slash));
  const std::string addr(ip);
  unsigned char a[16], b[16];
  int bytes = 0;
  if (inet_pton(AF_INET, addr.c_str(), a) == 1 && inet_pton(AF_INET, net.c_str(), b) == 1) {
    bytes = 4;
  } else if (inet_pton(AF_INET6, addr.c_str(), a) == 1 &&
             inet_pton(AF_INET6, net.c_str(), b) == 1) {
    bytes = 16;
  } else {
    return false;
  }
  int bits = bytes * 8;
  if (slash != std::string_view::npos) {
    const std::string_view len = cidr.substr(slash + 1);
    auto [end, ec] = std::from_chars(len.data(), len.data() + len.size(), bits);
    if (ec != std::errc() || end != len.data() + len.size() || bits < 0 || bits > bytes * 8) {
      return false;
    }
  }
  for (int i = 0; i < bytes && bits > 0; ++i, bits -= 8) {
    const int mask = bits >= 8 ? 0xFF : (0xFF << (8 - bits)) & 0xFF;
    if ((a[i] & mask) != (b[i] & mask)) return false;
  }
  return true;
}

absl::StatusOr<BucketPolicy> BucketPolicy::Parse(std::string_view json, std::string_view bucket) {
  if (json.size() > kMaxPolicyBytes) {
    return Malformed("Policy exceeds the maximum allowed document size.");
  }
  pb::Struct doc;
  if (!pb::util::JsonStringToMessage(std::string(json), &doc).ok()) {
    return Malformed("Policies must be valid JSON and the first byte must be '{'");
  }
  BucketPolicy policy;
  bool have_statements = false;
  for (const auto& [name, value] : doc.fields()) {
    if (name == "Version") {
      if (!value.has_string_value() ||
          (value.string_value() != "2012-10-17" && value.string_value() != "2008-10-17")) {
        return Malformed("The policy must contain a valid version string");
      }
    } else if (name == "Id") {
      if (!value.has_string_value()) return Malformed("Id must be a string");
    } else if (name == "Statement") {
      have_statements = true;
      if (value.has_list_value()) {
        for (const pb::Value& s : value.list_value().values()) {
          Statement st;
          OL_RETURN_IF_ERROR(ParseStatement(s, bucket, &st));
          policy.statements_.push_back(std::move(st));
        }
      } else {
        Statement st;
        OL_RETURN_IF_ERROR(ParseStatement(value, bucket, &st));
        policy.statements_.push_back(std::move(st));
      }
    } else {
      return Malformed(StrCat("Unknown field ", name));
    }
  }
  if (!have_statements || policy.statements_.empty()) {
    return Malformed("Missing required field Statement");
  }
  return policy;
}

PolicyDecision BucketPolicy::Evaluate(const PolicyRequest& r) const {
  const std::string action = Lower(r.action);
  bool allowed = false;
  for (const Statement& st : statements_) {
    if (!StatementMatches(st, r, action)) continue;
    if (!st.allow) return PolicyDecision::kDeny;
    allowed = true;
  }
  return allowed ? PolicyDecision::kAllow : PolicyDecision::kNone;
}

}  // namespace openlake::s3

// S3 access control lists (docs/s3.md, "ACLs"): the grants of a bucket or an object, from a
// canned ACL (x-amz-acl), x-amz-grant-* headers or an AccessControlPolicy document, kept with
// the bucket's record or in the object's metadata, and consulted when neither ownership nor the
// bucket policy decided a request.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "http/framing.h"
#include "s3/api/errors.h"

namespace openlake::s3 {

enum class Permission { kRead, kWrite, kReadAcp, kWriteAcp, kFullControl };

inline constexpr std::string_view kAllUsers = "http://acs.amazonaws.com/groups/global/AllUsers";
inline constexpr std::string_view kAuthenticatedUsers =
    "http://acs.amazonaws.com/groups/global/AuthenticatedUsers";
inline constexpr std::string_view kLogDelivery = "http://acs.amazonaws.com/groups/s3/LogDelivery";

struct Grant {
  bool group = false;  // `id` is a group URI, else a canonical user id
  std::string id;
  Permission permission = Permission::kRead;
  bool operator==(const Grant&) const = default;
};

using Acl = std::vector<Grant>;

std::string_view PermissionName(Permission p);
std::optional<Permission> PermissionOf(std::string_view name);

// Whether a canonical id is a user's (grants may name only users).
using IsUser = std::function<bool(std::string_view id)>;

enum class GranteeKind { kId, kGroup, kEmail };

// A grant of `permission` to `grantee` (an id, a group URI or an e-mail address); false with
// the S3 error: an id no user has or a group S3 does not have (InvalidArgument), any e-mail
// address (UnresolvableGrantByEmailAddress).
bool MakeGrant(GranteeKind kind, std::string_view grantee, Permission permission,
               const IsUser& is_user, Grant* out, S3Error* error);

// Whether the request carries x-amz-acl or an x-amz-grant-* header.
bool HasAclHeaders(const http::Request& req);

// The grants of canned ACL `name` for a resource owned by `owner` (the owner's FULL_CONTROL
// first); nullopt when S3 has no such canned ACL for buckets (`bucket`) or objects.
std::optional<Acl> CannedAcl(std::string_view name, bool bucket, std::string_view owner);

// The ACL a request's headers set: x-amz-acl or x-amz-grant-* (nullopt when it has neither);
// false with the S3 error when they are malformed, both are given, a grantee is an e-mail
// address or an id that is no user's (MakeGrant).
bool AclFromHeaders(const http::Request& req, bool bucket, std::string_view owner,
                    const IsUser& is_user, std::optional<Acl>* out, S3Error* error);

// Whether `acl` gives `permission` (FULL_CONTROL gives all) to the caller: anonymous, or the
// user `caller` (AuthenticatedUsers and AllUsers groups included).
bool AclAllows(const Acl& acl, Permission permission, bool anonymous, std::string_view caller);

// The stored form ("READ g <uri>\nFULL_CONTROL u <id>\n...") and back (unreadable lines are
// dropped).
std::string EncodeAcl(const Acl& acl);
Acl DecodeAcl(std::string_view text);

}  // namespace openlake::s3

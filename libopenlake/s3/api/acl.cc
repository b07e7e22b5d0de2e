// S3 access control lists (see acl.h).
#include "s3/api/acl.h"

#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

constexpr std::pair<std::string_view, Permission> kGrantHeaders[] = {
    {"x-amz-grant-read", Permission::kRead},
    {"x-amz-grant-write", Permission::kWrite},
    {"x-amz-grant-read-acp", Permission::kReadAcp},
    {"x-amz-grant-write-acp", Permission::kWriteAcp},
    {"x-amz-grant-full-control", Permission::kFullControl}};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// One x-amz-grant-* header's grantees: `id="..."`, `uri="..."`, `emailAddress="..."`, comma
// separated, quotes optional.
bool ParseGrantees(std::string_view value, Permission p, const IsUser& is_user, Acl* out,
                   S3Error* error) {
  size_t pos = 0;
  while (pos <= value.size()) {
    size_t comma = value.find(',', pos);
    if (comma == std::string_view::npos) comma = value.size();
    const std::string_view item = Trim(value.substr(pos, comma - pos));
    pos = comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      *error = S3Error{"InvalidArgument", 400, "Invalid grant header: expected type=\"value\""};
      return false;
    }
    const std::string_view type = Trim(item.substr(0, eq));
    std::string_view id = Trim(item.substr(eq + 1));
    if (id.size() >= 2 && id.front() == '"' && id.back() == '"') id = id.substr(1, id.size() - 2);
    GranteeKind kind = GranteeKind::kId;
    if (type == "id") {
      kind = GranteeKind::kId;
    } else if (type == "uri") {
      kind = GranteeKind::kGroup;
    } else if (type == "emailAddress") {
      kind = GranteeKind::kEmail;
    } else {
      *error = S3Error{"InvalidArgument", 400, "Invalid grant header: unknown grantee type"};
      return false;
    }
    Grant g;
    if (!MakeGrant(kind, id, p, is_user, &g, error)) return false;
    out->push_back(std::move(g));
  }
  return true;
}

}  // namespace

bool MakeGrant(GranteeKind kind, std::string_view grantee, Permission permission,
               const IsUser& is_user, Grant* out, S3Error* error) {
  switch (kind) {
    case GranteeKind::kId:
      if (!is_user(grantee)) {
        *error = S3Error{"InvalidArgument", 400, "Invalid id"};
        return false;
      }
      break;
    case GranteeKind::kGroup:
      if (grantee != kAllUsers && grantee != kAuthenticatedUsers && grantee != kLogDelivery) {
        *error = S3Error{"InvalidArgument", 400, "Invalid group uri"};
        return false;
      }
      break;
    case GranteeKind::kEmail:
      *error = S3Error{"UnresolvableGrantByEmailAddress", 400,
                       "The e-mail address you provided does not match any account on record."};
      return false;
  }
  *out = Grant{kind == GranteeKind::kGroup, std::string(grantee), permission};
  return true;
}

bool HasAclHeaders(const http::Request& req) {
  if (req.Find("x-amz-acl") != nullptr) return true;
  for (const auto& [header, permission] : kGrantHeaders) {
    if (req.Find(header) != nullptr) return true;
  }
  return false;
}

std::string_view PermissionName(Permission p) {
  switch (p) {
    case Permission::kRead: return "READ";
    case Permission::kWrite: return "WRITE";
    case Permission::kReadAcp: return "READ_ACP";
    case Permission::kWriteAcp: return "WRITE_ACP";
    case Permission::kFullControl: return "FULL_CONTROL";
  }
  return "READ";
}

std::optional<Permission> PermissionOf(std::string_view name) {
  for (Permission p : {Permission::kRead, Permission::kWrite, Permission::kReadAcp,
                       Permission::kWriteAcp, Permission::kFullControl}) {
    if (PermissionName(p) == name) return p;
  }
  return std::nullopt;
}

std::optional<Acl> CannedAcl(std::string_view name, bool bucket, std::string_view owner) {
  Acl acl{Grant{false, std::string(owner), Permission::kFullControl}};
  auto group = [&](std::string_view uri, Permission p) {
    acl.push_back(Grant{true, std::string(uri), p});
  };
  if (name == "private" || name == "bucket-owner-read" || name == "bucket-owner-full-control" ||
      name == "aws-exec-read") {
    // The bucket owner is every object's owner here: these grant nobody else anything.
    if (bucket && (name == "bucket-owner-read" || name == "bucket-owner-full-control")) {
      return std::nullopt;
    }
  } else if (name == "public-read") {
    group(kAllUsers, Permission::kRead);
  } else if (name == "public-read-write") {
    group(kAllUsers, Permission::kRead);
    group(kAllUsers, Permission::kWrite);
  } else if (name == "authenticated-read") {
    group(kAuthenticatedUsers, Permission::kRead);
  } else if (name == "log-delivery-write" && bucket) {
    group(kLogDelivery, Permission::kWrite);
    group(kLogDelivery, Permission::kReadAcp);
  } else {
    return std::nullopt;
  }
  return acl;
}

bool AclFromHeaders(const http::Request& req, bool bucket, std::string_view owner,
                    const IsUser& is_user, std::optional<Acl>* out, S3Error* error) {
  out->reset();
  Acl grants;
  bool any_grant = false;
  for (const auto& [header, permission] : kGrantHeaders) {
    const http::Header* h = req.Find(header);
    if (h == nullptr) continue;
    any_grant = true;
    if (!ParseGrantees(h->value, permission, is_user, &grants, error)) return false;
  }
  const http::Header* canned = req.Find("x-amz-acl");
  if (canned != nullptr && any_grant) {
    *error = S3Error{"InvalidRequest", 400,
                     "Specifying both Canned ACLs and Header Grants is not allowed"};
    return false;
  }
  if (canned != nullptr) {
    std::optional<Acl> acl = CannedAcl(canned->value, bucket, owner);
    if (!acl) {
      *error = S3Error{"InvalidArgument", 400, StrCat("Invalid canned ACL: ", canned->value)};
      return false;
    }
    *out = std::move(acl);
  } else if (any_grant) {
    *out = std::move(grants);
  }
  return true;
}

bool AclAllows(const Acl& acl, Permission permission, bool anonymous, std::string_view caller) {
  for (const Grant& g : acl) {
    if (g.permission != permission && g.permission != Permission::kFullControl) continue;
    if (g.group) {
      if (g.id == kAllUsers || (g.id == kAuthenticatedUsers && !anonymous)) return true;
    } else if (!anonymous && g.id == caller) {
      return true;
    }
  }
  return false;
}

std::string EncodeAcl(const Acl& acl) {
  std::string out;
  for (const Grant& g : acl) {
    out += StrCat(PermissionName(g.permission), g.group ? " g " : " u ", g.id, "\n");
  }
  return out;
}

Acl DecodeAcl(std::string_view text) {
  Acl acl;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    const size_t a = line.find(' ');
    if (a == std::string_view::npos || a + 3 > line.size() || line[a + 2] != ' ') continue;
    std::optional<Permission> p = PermissionOf(line.substr(0, a));
    const char kind = line[a + 1];
    if (!p || (kind != 'g' && kind != 'u')) continue;
    acl.push_back(Grant{kind == 'g', std::string(line.substr(a + 3)), *p});
  }
  return acl;
}

}  // namespace openlake::s3

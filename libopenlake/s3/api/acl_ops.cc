// Get/PutBucketAcl, Get/PutObjectAcl and the ACL headers of writes (docs/s3.md, "ACLs"). A
// bucket's ACL is kept in its record (Store::SetBucketAcl) and cached with its owner and
// policy; an object's in its metadata (kAclMeta), changed without rewriting its data
// (Store::UpdateObjectMeta). Every object's owner is its bucket's owner.
#include <optional>
#include <utility>

#include "s3/api/acl.h"
#include "s3/api/ops.h"
#include "s3/api/owners.h"
#include "s3/api/xml.h"

#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

constexpr std::string_view kXsi = "http://www.w3.org/2001/XMLSchema-instance";

// The grants of an AccessControlPolicy document; false with the S3 error.
bool AclFromDocument(const AclDocument& doc, const IsUser& is_user, Acl* out, S3Error* error) {
  const S3Error malformed{"MalformedACLError", 400,
                          "The XML you provided was not well-formed or did not validate against "
                          "our published schema"};
  for (const AclDocumentGrant& g : doc.grants) {
    std::optional<Permission> p = PermissionOf(g.permission);
    GranteeKind kind = GranteeKind::kId;
    if (g.type == "CanonicalUser") {
      kind = GranteeKind::kId;
    } else if (g.type == "Group") {
      kind = GranteeKind::kGroup;
    } else if (g.type == "AmazonCustomerByEmail") {
      kind = GranteeKind::kEmail;
    } else {
      p.reset();
    }
    if (!p) {
      *error = malformed;
      return false;
    }
    Grant grant;
    if (!MakeGrant(kind, g.grantee, *p, is_user, &grant, error)) return false;
    out->push_back(std::move(grant));
  }
  return true;
}

// The ACL a PutBucketAcl or PutObjectAcl sets: from its headers or its document (one of the
// two); nullopt after answering the S3 error.
io::Task<std::optional<Acl>> RequestedAcl(Call& c, bool bucket, const std::string& owner) {
  std::optional<Acl> acl;
  S3Error err;
  const IsUser is_user = UserIds(c);
  if (!AclFromHeaders(c.req, bucket, owner, is_user, &acl, &err)) {
    co_await c.Error(std::move(err));
    co_return std::nullopt;
  }
  std::string doc;
  const bool have_doc = co_await ReadDocument(c, c.opts.max_xml_bytes, &doc);
  if (!have_doc) co_return std::nullopt;
  if (acl && !doc.empty()) {
    co_await c.Error("UnexpectedContent", 400,
                     "This request does not support content when ACL headers are given");
    co_return std::nullopt;
  }
  if (acl) co_return acl;
  absl::StatusOr<AclDocument> parsed = ParseAccessControlPolicy(doc);
  if (!parsed.ok()) {
    co_await FailMalformedDocument(c, parsed.status(), "MalformedACLError");
    co_return std::nullopt;
  }
  Acl grants;
  if (!AclFromDocument(*parsed, is_user, &grants, &err)) {
    co_await c.Error(std::move(err));
    co_return std::nullopt;
  }
  co_return grants;
}

// <AccessControlPolicy> of a resource owned by `owner` with `acl` (null or empty: private).
std::string AclXml(const Call& c, const std::string& owner, const Acl* acl) {
  const Acl private_acl{Grant{false, owner, Permission::kFullControl}};
  const Acl& grants = acl == nullptr || acl->empty() ? private_acl : *acl;
  XmlWriter w("AccessControlPolicy");
  OwnerElement(w, c, owner);
  w.Open("AccessControlList");
  for (const Grant& g : grants) {
    w.Open("Grant");
    const std::string attrs = StrCat(" xmlns:xsi=\"", kXsi, "\" xsi:type=\"",
                                     g.group ? "Group" : "CanonicalUser", "\"");
    w.Open("Grantee", attrs);
    if (g.group) {
      w.Element("URI", g.id);
    } else {
      w.Element("ID", g.id);
      w.Element("DisplayName", DisplayNameOf(c, g.id));
    }
    w.Close();
    w.Element("Permission", PermissionName(g.permission));
    w.Close();
  }
  w.Close();
  return w.Finish();
}

}  // namespace

io::Task<bool> ObjectAclFromHeaders(Call& c, std::map<std::string, std::string>* meta) {
  std::optional<Acl> acl;
  S3Error err;
  if (!AclFromHeaders(c.req, false, RoutedOwner(c), UserIds(c), &acl, &err)) {
    co_await c.Error(std::move(err));
    co_return false;
  }
  if (acl) (*meta)[std::string(kAclMeta)] = EncodeAcl(*acl);
  co_return true;
}

io::Task<void> GetBucketAcl(Call& c) {
  std::optional<BucketEntry> entry = co_await BucketEntryOf(c, c.route.bucket);
  if (!entry) {
    const bool exists = co_await BucketExists(c);  // answers NoSuchBucket (or the failure)
    if (exists) co_await c.Error("InternalError", 500, "The bucket could not be read.");
    co_return;
  }
  std::string body = AclXml(c, entry->owner, entry->acl.get());
  co_await c.Xml(200, std::move(body));
}

io::Task<void> PutBucketAcl(Call& c) {
  std::optional<BucketEntry> entry = co_await BucketEntryOf(c, c.route.bucket);
  if (!entry) {
    const bool exists = co_await BucketExists(c);
    if (exists) co_await c.Error("InternalError", 500, "The bucket could not be read.");
    co_return;
  }
  std::optional<Acl> acl = co_await RequestedAcl(c, true, entry->owner);
  if (!acl) co_return;
  std::string encoded = EncodeAcl(*acl);
  const absl::Status st = co_await c.store.SetBucketAcl(c.route.bucket, std::move(encoded));
  if (c.owners != nullptr) c.owners->Forget(c.route.bucket);  // read again with the new ACL
  if (!st.ok()) {
    co_await c.Fail(st);
    co_return;
  }
  co_await c.Empty(200);
}

io::Task<void> GetObjectAcl(Call& c) {
  std::optional<store::ObjectInfo> info = co_await StatRouted(c);
  if (!info) co_return;
  auto it = info->user_meta.find(std::string(kAclMeta));
  const Acl acl = it == info->user_meta.end() ? Acl() : DecodeAcl(it->second);
  std::string body = AclXml(c, RoutedOwner(c), &acl);
  co_await c.Xml(200, std::move(body));
}

io::Task<void> PutObjectAcl(Call& c) {
  std::optional<Acl> acl = co_await RequestedAcl(c, false, RoutedOwner(c));
  if (!acl) co_return;
  store::MetaUpdate update;
  update.set[std::string(kAclMeta)] = EncodeAcl(*acl);
  update.version_id = VersionIdParam(c.route);
  absl::StatusOr<store::ObjectInfo> info =
      co_await c.store.UpdateObjectMeta(c.route.bucket, c.route.key, std::move(update));
  if (!info.ok()) {
    co_await c.Fail(info.status());
    co_return;
  }
  co_await c.Empty(200);
}

}  // namespace openlake::s3

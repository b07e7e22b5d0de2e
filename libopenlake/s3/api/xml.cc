// S3's XML (see xml.h).
#include "s3/api/xml.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <pugixml.hpp>

#include "http/framing.h"

namespace openlake::s3 {
namespace {

constexpr std::string_view kNamespace = "http://s3.amazonaws.com/doc/2006-03-01/";

absl::Status Malformed(std::string_view why) {
  return absl::InvalidArgumentError(
      "MalformedXML: The XML you provided was not well-formed or did not validate against our "
      "published schema (" + std::string(why) + ")");
}

// The text of a child element, trimmed of surrounding whitespace.
std::string ChildText(const pugi::xml_node& n, const char* name) {
  std::string s = n.child(name).text().as_string();
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

// Loads a whole document; the root element must be `root`.
absl::Status Load(std::string_view body, const char* root, pugi::xml_document* doc,
                  pugi::xml_node* out) {
  if (body.empty()) return Malformed("empty body");
  const pugi::xml_parse_result r =
      doc->load_buffer(body.data(), body.size(), pugi::parse_default, pugi::encoding_utf8);
  if (!r) return Malformed(r.description());
  *out = doc->child(root);
  if (!*out) return Malformed(std::string("the root element must be ") + root);
  return absl::OkStatus();
}

}  // namespace

std::string XmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters as references; a carriage return too, which a parser would
        // otherwise turn into a line feed.
        if (c < 0x20 && c != '\t' && c != '\n') {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "&#x%X;", c);
          out += buf;
        } else {
          out.push_back(ch);
        }
    }
  }
  return out;
}

XmlWriter::XmlWriter(std::string_view root, bool s3_namespace) {
  out_ = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<";
  out_.append(root);
  if (s3_namespace) out_.append(" xmlns=\"").append(kNamespace).append("\"");
  out_.append(">");
  open_.emplace_back(root);
}

void XmlWriter::Open(std::string_view name) {
  out_.append("<").append(name).append(">");
  open_.emplace_back(name);
}

void XmlWriter::Open(std::string_view name, std::string_view attributes) {
  out_.append("<").append(name).append(attributes).append(">");
  open_.emplace_back(name);
}

void XmlWriter::Close() {
  if (open_.empty()) return;
  out_.append("</").append(open_.back()).append(">");
  open_.pop_back();
}

void XmlWriter::Element(std::string_view name, std::string_view text) {
  out_.append("<").append(name).append(">").append(XmlEscape(text));
  out_.append("</").append(name).append(">");
}

void XmlWriter::Text(std::string_view text) { out_.append(XmlEscape(text)); }

std::string XmlWriter::Finish() {
  while (!open_.empty()) Close();
  return std::move(out_);
}

std::string ErrorXml(std::string_view code, std::string_view message, std::string_view resource,
                     std::string_view request_id) {
  XmlWriter w("Error", /*s3_namespace=*/false);
  w.Element("Code", code);
  w.Element("Message", message);
  if (!resource.empty()) w.Element("Resource", resource);
  w.Element("RequestId", request_id);
  return w.Finish();
}

absl::StatusOr<std::vector<CompletedPart>> ParseCompleteMultipartUpload(std::string_view body) {
  pugi::xml_document doc;
  pugi::xml_node root;
  if (absl::Status s = Load(body, "CompleteMultipartUpload", &doc, &root); !s.ok()) return s;
  std::vector<CompletedPart> parts;
  for (pugi::xml_node p : root.children()) {
    if (p.type() != pugi::node_element) continue;
    if (std::strcmp(p.name(), "Part") != 0) {
      return Malformed("unexpected element " + std::string(p.name()));
    }
    const std::string num = ChildText(p, "PartNumber");
    char* end = nullptr;
    const long n = num.empty() ? 0 : std::strtol(num.c_str(), &end, 10);
    if (num.empty() || *end != '\0' || n < 1 || n > 10000) {
      return Malformed("a Part needs a PartNumber from 1 to 10000");
    }
    std::string etag = ChildText(p, "ETag");
    if (etag.empty()) return Malformed("a Part needs an ETag");
    CompletedPart part{static_cast<int>(n), std::move(etag), {}};
    for (pugi::xml_node c : p.children()) {
      const std::string_view name = c.name();
      if (c.type() == pugi::node_element && name.substr(0, 8) == "Checksum" && name.size() > 8) {
        part.checksums[http::AsciiLower(name.substr(8))] = c.text().as_string();
      }
    }
    parts.push_back(std::move(part));
  }
  if (parts.empty()) return Malformed("no Part");
  return parts;
}

absl::StatusOr<DeleteRequest> ParseDelete(std::string_view body, size_t max_keys) {
  pugi::xml_document doc;
  pugi::xml_node root;
  if (absl::Status s = Load(body, "Delete", &doc, &root); !s.ok()) return s;
  DeleteRequest req;
  for (pugi::xml_node n : root.children()) {
    if (n.type() != pugi::node_element) continue;
    if (std::strcmp(n.name(), "Quiet") == 0) {
      const std::string q = n.text().as_string();
      if (q != "true" && q != "false") return Malformed("Quiet must be true or false");
      req.quiet = q == "true";
    } else if (std::strcmp(n.name(), "Object") == 0) {
      if (!n.child("Key")) return Malformed("an Object needs a Key");
      // Keys are taken as they are: whitespace may be part of a key.
      req.keys.emplace_back(n.child("Key").text().as_string());
      req.version_ids.emplace_back(n.child("VersionId").text().as_string());
      if (req.keys.back().empty()) return Malformed("an empty Key");
      if (req.keys.size() > max_keys) return Malformed("more than 1000 objects");
    } else {
      return Malformed("unexpected element " + std::string(n.name()));
    }
  }
  if (req.keys.empty()) return Malformed("no Object");
  return req;
}

absl::StatusOr<VersioningDocument> ParseVersioningConfiguration(std::string_view body) {
  pugi::xml_document doc;
  pugi::xml_node root;
  if (absl::Status s = Load(body, "VersioningConfiguration", &doc, &root); !s.ok()) return s;
  VersioningDocument out;
  for (pugi::xml_node n : root.children()) {
    if (n.type() != pugi::node_element) continue;
    if (std::strcmp(n.name(), "Status") == 0) {
      out.status = n.text().as_string();
    } else if (std::strcmp(n.name(), "MfaDelete") == 0) {
      out.mfa_delete = n.text().as_string();
    } else {
      return Malformed("unexpected element " + std::string(n.name()));
    }
  }
  return out;
}

absl::StatusOr<std::string> ParseLocationConstraint(std::string_view body) {
  pugi::xml_document doc;
  pugi::xml_node root;
  if (absl::Status s = Load(body, "CreateBucketConfiguration", &doc, &root); !s.ok()) return s;
  for (pugi::xml_node n : root.children()) {
    if (n.type() != pugi::node_element) continue;
    if (std::strcmp(n.name(), "LocationConstraint") != 0) {
      return Malformed("unexpected element " + std::string(n.name()));
    }
    return std::string(n.text().as_string());
  }
  return std::string();
}

absl::StatusOr<TagSet> ParseTagging(std::string_view body) {
  pugi::xml_document doc;
  pugi::xml_node root;
  if (absl::Status s = Load(body, "Tagging", &doc, &root); !s.ok()) return s;
  pugi::xml_node set;
  for (pugi::xml_node n : root.children()) {
    if (n.type() != pugi::node_element) continue;
    if (std::strcmp(n.name(), "TagSet") != 0 || set) {
      return Malformed("unexpected element " + std::string(n.name()));
    }
    set = n;
  }
  if (!set) return Malformed("no TagSet");
  TagSet tags;
  for (pugi::xml_node n : set.children()) {
    if (n.type() != pugi::node_element) continue;
    if (std::strcmp(n.name(), "Tag") != 0) {
      return Malformed("unexpected element " + std::string(n.name()));
    }
    if (!n.child("Key") || !n.child("Value")) return Malformed("a Tag needs a Key and a Value");
    tags.emplace_back(n.child("Key").text().as_string(), n.child("Value").text().as_string());
  }
  return tags;
}

namespace {

bool Named(const pugi::xml_node& n, const char* name) { return std::strcmp(n.name(), name) == 0; }

absl::Status ParseLifecycleTag(const pugi::xml_node& n, TagSet* tags) {
  if (!n.child("Key") || !n.child("Value")) return Malformed("a Tag needs a Key and a Value");
  tags->emplace_back(n.child("Key").text().as_string(), n.child("Value").text().as_string());
  return absl::OkStatus();
}

// One condition of a Filter or its And into `r`; false when `n` is none.
absl::StatusOr<bool> ParseLifecycleCondition(const pugi::xml_node& n, LifecycleRuleDocument* r) {
  if (Named(n, "Prefix")) {
    r->prefix = n.text().as_string();
  } else if (Named(n, "Tag")) {
    if (absl::Status s = ParseLifecycleTag(n, &r->tags); !s.ok()) return s;
  } else if (Named(n, "ObjectSizeGreaterThan")) {
    r->size_greater = n.text().as_string();
  } else if (Named(n, "ObjectSizeLessThan")) {
    r->size_less = n.text().as_string();
  } else {
    return false;
  }
  return true;
}

absl::Status ParseLifecycleFilter(const pugi::xml_node& filter, LifecycleRuleDocument* r) {
  r->filter = true;
  int conditions = 0;
  for (pugi::xml_node n : filter.children()) {
    if (n.type() != pugi::node_element) continue;
    if (++conditions > 1) return Malformed("a Filter names one condition; more go in an And");
    if (Named(n, "And")) {
      for (pugi::xml_node a : n.children()) {
        if (a.type() != pugi::node_element) continue;
        absl::StatusOr<bool> known = ParseLifecycleCondition(a, r);
        if (!known.ok()) return known.status();
        if (!*known) return Malformed("unexpected element " + std::string(a.name()));
      }
      continue;
    }
    absl::StatusOr<bool> known = ParseLifecycleCondition(n, r);
    if (!known.ok()) return known.status();
    if (!*known) return Malformed("unexpected element " + std::string(n.name()));
  }
  return absl::OkStatus();
}

absl::Status ParseLifecycleRule(const pugi::xml_node& rule, LifecycleRuleDocument* r) {
  bool legacy_prefix = false;
  for (pugi::xml_node n : rule.children()) {
    if (n.type() != pugi::node_element) continue;
    if (Named(n, "ID")) {
      r->id = n.text().as_string();
    } else if (Named(n, "Status")) {
      r->status = ChildText(rule, "Status");
    } else if (Named(n, "Prefix")) {
      legacy_prefix = true;
      r->prefix = n.text().as_string();
    } else if (Named(n, "Filter")) {
      if (absl::Status s = ParseLifecycleFilter(n, r); !s.ok()) return s;
    } else if (Named(n, "Expiration")) {
      r->expiration = true;
      r->days = ChildText(n, "Days");
      r->date = ChildText(n, "Date");
      r->expired_object_delete_marker = ChildText(n, "ExpiredObjectDeleteMarker");
      const int given = !r->days.empty() + !r->date.empty() +
                        !r->expired_object_delete_marker.empty();
      if (given != 1) {
        return Malformed("an Expiration has one of Days, Date and ExpiredObjectDeleteMarker");
      }
    } else if (Named(n, "NoncurrentVersionExpiration")) {
      r->noncurrent = true;
      r->noncurrent_days = ChildText(n, "NoncurrentDays");
      r->newer_noncurrent_versions = ChildText(n, "NewerNoncurrentVersions");
    } else if (Named(n, "AbortIncompleteMultipartUpload")) {
      r->abort_upload = true;
      r->abort_days = ChildText(n, "DaysAfterInitiation");
    } else if (Named(n, "Transition") || Named(n, "NoncurrentVersionTransition")) {
      r->transition = true;
    } else {
      return Malformed("unexpected element " + std::string(n.name()));
    }
  }
  if (legacy_prefix && r->filter) return Malformed("a Rule has a Filter or a Prefix, not both");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LifecycleDocument> ParseLifecycleConfiguration(std::string_view body) {
  pugi::xml_document doc;
  pugi::xml_node root;
  if (absl::Status s = Load(body, "LifecycleConfiguration", &doc, &root); !s.ok()) return s;
  LifecycleDocument out;
  for (pugi::xml_node n : root.children()) {
    if (n.type() != pugi::node_element) continue;
    if (!Named(n, "Rule")) return Malformed("unexpected element " + std::string(n.name()));
    LifecycleRuleDocument& r = out.rules.emplace_back();
    if (absl::Status s = ParseLifecycleRule(n, &r); !s.ok()) return s;
  }
  if (out.rules.empty()) return Malformed("no Rule");
  return out;
}

absl::StatusOr<AclDocument> ParseAccessControlPolicy(std::string_view body) {
  pugi::xml_document doc;
  pugi::xml_node root;
  if (absl::Status s = Load(body, "AccessControlPolicy", &doc, &root); !s.ok()) return s;
  AclDocument out;
  out.owner = ChildText(root.child("Owner"), "ID");
  pugi::xml_node list = root.child("AccessControlList");
  if (!list) return Malformed("no AccessControlList");
  for (pugi::xml_node g : list.children()) {
    if (g.type() != pugi::node_element) continue;
    if (std::strcmp(g.name(), "Grant") != 0) {
      return Malformed("unexpected element " + std::string(g.name()));
    }
    pugi::xml_node grantee = g.child("Grantee");
    if (!grantee || !g.child("Permission")) {
      return Malformed("a Grant needs a Grantee and a Permission");
    }
    AclDocumentGrant out_grant;
    // xsi:type, under whatever prefix the client bound the schema-instance namespace to.
    for (pugi::xml_attribute a : grantee.attributes()) {
      const std::string_view name = a.name();
      if (name == "type" || (name.size() > 5 && name.substr(name.size() - 5) == ":type")) {
        out_grant.type = a.value();
      }
    }
    if (out_grant.type.empty()) return Malformed("a Grantee needs its xsi:type");
    for (const char* child : {"ID", "URI", "EmailAddress"}) {
      if (grantee.child(child)) out_grant.grantee = grantee.child(child).text().as_string();
    }
    out_grant.permission = g.child("Permission").text().as_string();
    out.grants.push_back(std::move(out_grant));
  }
  return out;
}

absl::StatusOr<S3Error> ParseErrorXml(std::string_view body) {
  pugi::xml_document doc;
  pugi::xml_node root;
  if (absl::Status s = Load(body, "Error", &doc, &root); !s.ok()) return s;
  S3Error e;
  e.code = ChildText(root, "Code");
  e.message = ChildText(root, "Message");
  if (e.code.empty()) return Malformed("an Error document without a Code");
  return e;
}

}  // namespace openlake::s3

#include "s3/client/results.h"

#include <pugixml.hpp>

#include "absl/strings/numbers.h"

#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

absl::Status Malformed(std::string_view what, std::string_view why) {
  return absl::InternalError(StrCat("malformed ", what, " from the server: ", why));
}

absl::StatusOr<pugi::xml_node> Root(std::string_view body, const char* root,
                                    pugi::xml_document* doc) {
  const pugi::xml_parse_result r =
      doc->load_buffer(body.data(), body.size(), pugi::parse_default, pugi::encoding_utf8);
  if (!r) return Malformed(root, r.description());
  pugi::xml_node n = doc->child(root);
  if (!n) return Malformed(root, "not that document");
  return n;
}

std::string Text(const pugi::xml_node& n, const char* name) {
  return n.child(name).text().as_string();
}

}  // namespace

std::string_view Unquoted(std::string_view etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return etag;
}

absl::StatusOr<std::string> ParseInitiateResult(std::string_view body) {
  pugi::xml_document doc;
  OL_ASSIGN_OR_RETURN(pugi::xml_node n, Root(body, "InitiateMultipartUploadResult", &doc));
  std::string id = Text(n, "UploadId");
  if (id.empty()) return Malformed("InitiateMultipartUploadResult", "no UploadId");
  return id;
}

absl::StatusOr<std::string> ParseCompleteResult(std::string_view body) {
  pugi::xml_document doc;
  OL_ASSIGN_OR_RETURN(pugi::xml_node n, Root(body, "CompleteMultipartUploadResult", &doc));
  return std::string(Unquoted(Text(n, "ETag")));
}

absl::StatusOr<ListPage> ParseListResult(std::string_view body) {
  pugi::xml_document doc;
  OL_ASSIGN_OR_RETURN(pugi::xml_node n, Root(body, "ListBucketResult", &doc));
  ListPage page;
  for (pugi::xml_node c = n.child("Contents"); c; c = c.next_sibling("Contents")) {
    ListedObject o;
    o.key = Text(c, "Key");
    if (!absl::SimpleAtoi(AV(Text(c, "Size")), &o.size)) {
      return Malformed("ListBucketResult", StrCat("the size of \"", o.key, "\""));
    }
    o.etag = std::string(Unquoted(Text(c, "ETag")));
    page.objects.push_back(std::move(o));
  }
  for (pugi::xml_node c = n.child("CommonPrefixes"); c; c = c.next_sibling("CommonPrefixes")) {
    page.common_prefixes.push_back(Text(c, "Prefix"));
  }
  page.truncated = Text(n, "IsTruncated") == "true";
  page.next_continuation_token = Text(n, "NextContinuationToken");
  if (page.truncated && page.next_continuation_token.empty()) {
    return Malformed("ListBucketResult", "truncated without a NextContinuationToken");
  }
  return page;
}

}  // namespace openlake::s3

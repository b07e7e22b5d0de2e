// S3's XML (docs/s3.md, "XML"): writing responses and error bodies, and reading the request
// documents S3 clients send (CompleteMultipartUpload, Delete). Reading goes through pugixml,
// which expands no external entities; anything that is not the expected document is
// MalformedXML, as S3 answers.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

#include "s3/api/errors.h"

namespace openlake::s3 {

using TagSet = std::vector<std::pair<std::string, std::string>>;

// Escapes text for element content and attribute values. Characters XML 1.0 cannot carry even
// as references (controls other than tab, LF and CR) are written as "&#xN;", as S3 does.
std::string XmlEscape(std::string_view text);

// Builds a document: <?xml ...?> then nested elements.
//
//   XmlWriter w("ListAllMyBucketsResult");   // with S3's namespace
//   w.Open("Buckets"); w.Open("Bucket"); w.Element("Name", "b"); w.Close(); w.Close();
//   std::string body = w.Finish();
class XmlWriter {
 public:
  explicit XmlWriter(std::string_view root, bool s3_namespace = true);
  void Open(std::string_view name);
  // An element with attributes: `attributes` is written as given (` a="v"`, escaped already).
  void Open(std::string_view name, std::string_view attributes);
  void Close();
  void Element(std::string_view name, std::string_view text);
  // Text inside the element open now.
  void Text(std::string_view text);
  // Closes whatever is open and returns the document.
  std::string Finish();

 private:
  std::string out_;
  std::vector<std::string> open_;
};

// An S3 error body: <Error><Code/><Message/><Resource/><RequestId/></Error>.
std::string ErrorXml(std::string_view code, std::string_view message, std::string_view resource,
                     std::string_view request_id);

struct CompletedPart {
  int number = 0;
  std::string etag;
  // The part's checksums the client names (<ChecksumCRC32> ...): "crc32" → base64.
  std::map<std::string, std::string> checksums;
};

// <CompleteMultipartUpload><Part><PartNumber/><ETag/>[<ChecksumCRC32/>...]</Part>...
// </CompleteMultipartUpload>.
// The parts in document order (their order is checked by the engine: InvalidPartOrder).
absl::StatusOr<std::vector<CompletedPart>> ParseCompleteMultipartUpload(std::string_view body);

struct DeleteRequest {
  bool quiet = false;
  std::vector<std::string> keys;         // in document order
  std::vector<std::string> version_ids;  // per key: its VersionId, "" when it names none
};

// <Delete><Quiet/>?<Object><Key/><VersionId/>?</Object>...</Delete>; at most `max_keys`
// objects (S3: 1000).
absl::StatusOr<DeleteRequest> ParseDelete(std::string_view body, size_t max_keys = 1000);

// <VersioningConfiguration><Status/>?<MfaDelete/>?</VersioningConfiguration>: the Status
// ("Enabled", "Suspended"; "" when absent) and MfaDelete ("" when absent), unchecked.
struct VersioningDocument {
  std::string status;
  std::string mfa_delete;
};
absl::StatusOr<VersioningDocument> ParseVersioningConfiguration(std::string_view body);

// <LifecycleConfiguration><Rule>...</Rule>...</LifecycleConfiguration>, as S3's grammar has
// it: each rule's texts as written ("" when absent; s3/api/lifecycle.h checks and converts
// them). MalformedXML for an unknown element, a rule's Filter beside its legacy Prefix, a
// Filter naming more than one condition outside an And, or an Expiration with more than one
// of Days, Date and ExpiredObjectDeleteMarker.
struct LifecycleRuleDocument {
  std::string id;
  std::string status;
  bool filter = false;         // a Filter element (else the legacy Prefix, or nothing)
  std::string prefix;          // Filter's (or And's) Prefix, or the rule's legacy Prefix
  TagSet tags;                 // Filter's Tag, or And's Tags
  std::string size_greater;    // ObjectSizeGreaterThan
  std::string size_less;       // ObjectSizeLessThan
  bool expiration = false;
  std::string days;
  std::string date;
  std::string expired_object_delete_marker;
  bool noncurrent = false;
  std::string noncurrent_days;
  std::string newer_noncurrent_versions;
  bool abort_upload = false;
  std::string abort_days;      // DaysAfterInitiation
  bool transition = false;     // Transition or NoncurrentVersionTransition
};
struct LifecycleDocument {
  std::vector<LifecycleRuleDocument> rules;
};
absl::StatusOr<LifecycleDocument> ParseLifecycleConfiguration(std::string_view body);

// <CreateBucketConfiguration><LocationConstraint/></CreateBucketConfiguration>: the region
// asked for ("" when the document names none).
absl::StatusOr<std::string> ParseLocationConstraint(std::string_view body);

// <Tagging><TagSet><Tag><Key/><Value/></Tag>...</TagSet></Tagging> (PutObjectTagging): the
// tags in document order, unchecked (ValidateTags in ops.h judges them).
absl::StatusOr<TagSet> ParseTagging(std::string_view body);

// <AccessControlPolicy><Owner><ID/></Owner><AccessControlList><Grant><Grantee xsi:type="...">
// <ID/>|<URI/>|<EmailAddress/></Grantee><Permission/></Grant>...</AccessControlList>
// </AccessControlPolicy> (PutBucketAcl, PutObjectAcl), unchecked beyond its shape.
struct AclDocumentGrant {
  std::string type;        // CanonicalUser, Group, AmazonCustomerByEmail
  std::string grantee;     // the ID, URI or EmailAddress
  std::string permission;  // READ, WRITE, READ_ACP, WRITE_ACP, FULL_CONTROL (unchecked)
};
struct AclDocument {
  std::string owner;  // Owner/ID ("" when absent)
  std::vector<AclDocumentGrant> grants;
};
absl::StatusOr<AclDocument> ParseAccessControlPolicy(std::string_view body);

// An S3 error body (<Error><Code/><Message/>...</Error>, as ErrorXml writes it), read by the
// client: its code and message. InvalidArgument when the body is not such a document.
absl::StatusOr<S3Error> ParseErrorXml(std::string_view body);

}  // namespace openlake::s3

// The S3 operations (docs/s3.md, "Operations"), one coroutine each, called by S3Service with a
// routed and authenticated Call: buckets (bucket_ops.cc), listings (list_ops.cc), objects
// (object_ops.cc) and multipart uploads (multipart_ops.cc).
#pragma once

#include <optional>
#include <string>

#include "s3/api/payload.h"
#include "s3/api/service.h"
#include "s3/api/xml.h"

#include "openlake/io/task.h"
#include "openlake/store/store.h"

namespace openlake::s3 {

io::Task<void> ListBuckets(Call& c);
io::Task<void> CreateBucket(Call& c);
io::Task<void> DeleteBucket(Call& c);
io::Task<void> HeadBucket(Call& c);
io::Task<void> GetBucketLocation(Call& c);
io::Task<void> GetBucketVersioning(Call& c);   // versioning_ops.cc
io::Task<void> PutBucketVersioning(Call& c);
io::Task<void> GetBucketLifecycle(Call& c);     // lifecycle_ops.cc
io::Task<void> PutBucketLifecycle(Call& c);
io::Task<void> DeleteBucketLifecycle(Call& c);
io::Task<void> GetBucketPolicy(Call& c);     // bucket_policy_ops.cc
io::Task<void> PutBucketPolicy(Call& c);
io::Task<void> DeleteBucketPolicy(Call& c);
io::Task<void> GetBucketAcl(Call& c);        // acl_ops.cc
io::Task<void> PutBucketAcl(Call& c);
io::Task<void> GetObjectAcl(Call& c);
io::Task<void> PutObjectAcl(Call& c);

io::Task<void> ListObjects(Call& c, bool v2);
io::Task<void> ListMultipartUploads(Call& c);
io::Task<void> ListParts(Call& c);
io::Task<void> ListObjectVersions(Call& c);

io::Task<void> PutObject(Call& c);
io::Task<void> GetObject(Call& c, bool head);
io::Task<void> GetObjectAttributes(Call& c);  // object_attributes.cc
io::Task<void> GetObjectTagging(Call& c);     // object_tagging.cc
io::Task<void> PutObjectTagging(Call& c);
io::Task<void> DeleteObjectTagging(Call& c);
// A browser form upload, authenticated by its signed policy (post_object.cc).
io::Task<void> PostObject(Call& c);
io::Task<void> CopyObject(Call& c);
io::Task<void> DeleteObject(Call& c);
io::Task<void> DeleteObjects(Call& c);

io::Task<void> CreateMultipartUpload(Call& c);
io::Task<void> UploadPart(Call& c);
io::Task<void> UploadPartCopy(Call& c);
io::Task<void> CompleteMultipartUpload(Call& c);
io::Task<void> AbortMultipartUpload(Call& c);

// Shared by the operations (op_streams.cc): each answers the S3 error itself when it fails.

// The request document (XML) whole, verified, into `doc`; false after answering an error.
// `header_checksums`: whether x-amz-checksum-* headers describe this document (see
// PayloadReader::Init).
io::Task<bool> ReadDocument(Call& c, size_t limit, std::string* doc,
                            bool header_checksums = true);
// Streams a verified body into `w` and commits it; nullopt after answering an error (nothing
// became visible).
io::Task<std::optional<store::ObjectInfo>> WriteBody(Call& c, PayloadReader& body,
                                                      store::ObjectWriter& w);
// WriteBody into a new object's or part's writer, then the answer: 200 with the ETag and the
// checksum the client sent (or the error).
io::Task<void> StoreBody(Call& c, PayloadReader& body,
                         absl::StatusOr<std::unique_ptr<store::ObjectWriter>> w);
// The same from an engine reader (copies).
io::Task<std::optional<store::ObjectInfo>> CopyInto(Call& c, store::ObjectReader& r,
                                                     store::ObjectWriter& w);
// True when the route's bucket exists; false after answering NoSuchBucket (or another error).
io::Task<bool> BucketExists(Call& c);
// Answers 400 `code` (MalformedXML, MalformedACLError) for a request document the parser
// refused with `parsed`.
io::Task<void> FailMalformedDocument(Call& c, const absl::Status& parsed,
                                     std::string_view code = "MalformedXML");
// <Owner> (or `element`) naming owner id `id` and its display name.
void OwnerElement(XmlWriter& w, const Call& c, std::string_view id,
                  std::string_view element = "Owner");
// The routed object's metadata (no condition); nullopt after answering the error.
io::Task<std::optional<store::ObjectInfo>> StatRouted(Call& c);
// False after answering NotImplemented for a write header this server does not honour;
// `conditional`: the operation takes conditional writes (PutObject, CompleteMultipartUpload).
io::Task<bool> WriteHeadersSupported(Call& c, bool conditional = false);
// WriteHeadersSupported, then the object's metadata from the request (PutOptionsFrom) and, when
// `conditional`, its write conditions; false after answering an error.
io::Task<bool> WriteOptions(Call& c, store::PutOptions* po, bool conditional = false);
// The write conditions of the request (If-None-Match: *, If-Match); false after answering an
// error (an If-None-Match other than "*", which S3 does not take on writes).
io::Task<bool> WriteConditionsOf(Call& c, store::WriteConditions* when);

// partNumber of the query, 1..10000; 0 when missing or out of range (op_streams.cc).
int PartNumber(const Route& r);
// Answers 400 InvalidArgument for a partNumber PartNumber refused.
io::Task<void> FailBadPartNumber(Call& c);
// uploadId of the query ("" when missing).
std::string UploadId(const Route& r);

// Stored checksums (object_checksums.cc): kept in user metadata under "cks:" names.

// True for those names (never answered as x-amz-meta-*).
bool IsChecksumMeta(std::string_view name);
// Whether an object's or part's metadata holds a checksum.
bool HasStoredChecksum(const std::map<std::string, std::string>& meta);
// The checksum the client sent and `body` matched, into the writer's metadata (before Commit).
void KeepBodyChecksum(const PayloadReader& body, store::ObjectWriter& w);
// CreateMultipartUpload's x-amz-checksum-algorithm and x-amz-checksum-type into the upload's
// metadata; false with the S3 error (an unknown algorithm, a type it does not have).
bool UploadChecksumFrom(const http::Request& req, store::PutOptions* po, S3Error* error);
// The headers naming an upload's algorithm and type (CreateMultipartUpload's answer).
void AddUploadChecksumHeaders(Call& c, const std::map<std::string, std::string>& meta);
// With x-amz-checksum-mode: ENABLED, the object's stored checksum (or part `part`'s, > 0).
void AddChecksumHeaders(Call& c, const store::ObjectInfo& info, int part);
// <ChecksumCRC32>... (and <ChecksumType> when `with_type`) of an object's or part's metadata.
void ChecksumElements(XmlWriter& w, const std::map<std::string, std::string>& meta,
                      bool with_type);
// <ChecksumAlgorithm> and <ChecksumType> of an upload's metadata (ListParts).
void UploadChecksumElements(XmlWriter& w, const std::map<std::string, std::string>& meta);
// The object's checksum a Complete derives from the parts' (when the upload was created with
// an algorithm), into options->meta; false after answering an error (a part without its
// checksum, a checksum that does not match the one listed or sent).
io::Task<bool> CompleteChecksum(Call& c, const std::vector<CompletedPart>& listed,
                                store::CompleteOptions* options);

// Object metadata (object_meta.cc).

// The storage class a write asked for other than STANDARD, kept in user metadata under this
// name (REDUCED_REDUNDANCY is the one other class taken).
inline constexpr std::string_view kStorageClassMeta = "sc:class";
// The object's storage class ("STANDARD" unless another was asked for).
std::string StorageClassOf(const store::ObjectInfo& info);
// x-amz-storage-class of the request into `po`'s user metadata (STANDARD removes another
// class), and the class `po` then has into its layout (REDUCED_REDUNDANCY: the set's reduced
// parity, StoreOptions::reduced_parity).
void SetStorageClass(const http::Request& req, store::PutOptions* po);

// Object ACLs (acl_ops.cc): kept in user metadata under this name (EncodeAcl's form); an
// object without one is private.
inline constexpr std::string_view kAclMeta = "acl:grants";
// The ACL x-amz-acl or x-amz-grant-* of a write set on a new object (PutObject, copies,
// CreateMultipartUpload), into `meta` (absent: the object is private); false after answering
// the S3 error.
io::Task<bool> ObjectAclFromHeaders(Call& c, std::map<std::string, std::string>* meta);

// versioning_ops.cc: the routed bucket's versioning state (cached with its owner;
// kUnversioned when it cannot be read: the operation finds out itself).
io::Task<store::Versioning> VersioningOf(Call& c);
// The request's versionId ("" when absent).
std::string VersionIdParam(const Route& r);
// x-amz-version-id of `info`: a version's own id, "null" only when the request named a version.
void AddVersionHeader(Call& c, const store::ObjectInfo& info);

// Object tags (object_tagging.cc): kept in user metadata under this name, as the query string
// x-amz-tagging takes ("k1=v1&k2=v2", percent-encoded).
inline constexpr std::string_view kTagsMeta = "tag:set";
// The tags of an object's metadata, in the order they were given.
TagSet TagsOf(const std::map<std::string, std::string>& meta);
// `tags` into `meta` (none removes the entry).
void SetTags(const TagSet& tags, std::map<std::string, std::string>* meta);
// S3's limits: at most `max_tags` tags (an object's 10, a bucket's 50), keys of 1 to 128
// characters, values of at most 256, keys unique and not starting with "aws:", letters,
// digits, spaces and + - = . _ : / @ only; false with the S3 error (InvalidTag, BadRequest).
inline constexpr size_t kMaxTags = 10;
inline constexpr size_t kMaxBucketTags = 50;
bool ValidateTags(const TagSet& tags, S3Error* error, size_t max_tags = kMaxTags);
// The <Tagging> document of `tags` (GetObjectTagging, GetBucketTagging).
std::string TaggingXml(const TagSet& tags);
// The request's <Tagging> document, parsed and checked; nullopt after answering the error.
io::Task<std::optional<TagSet>> ReadTagging(Call& c, size_t max_tags);
// Bucket tagging (bucket_tagging_ops.cc).
io::Task<void> GetBucketTagging(Call& c);
io::Task<void> PutBucketTagging(Call& c);
io::Task<void> DeleteBucketTagging(Call& c);
// x-amz-tagging of the request into `meta` (absent: nothing changes); false with the S3 error.
bool TagsFromHeader(const http::Request& req, std::map<std::string, std::string>* meta,
                    S3Error* error);

// A request header this server does not honour on writes (ACL grants, SSE, object lock,
// tagging, other storage classes; conditional writes unless `conditional`), named; "" when
// there is none.
std::string UnsupportedWriteHeader(const http::Request& req, bool conditional);
// Content-Type, x-amz-meta-* and the standard headers (Content-Encoding, Content-Disposition,
// Content-Language, Cache-Control, Expires) of a write, as the engine keeps them; false with
// the S3 error when the metadata is too large.
bool PutOptionsFrom(const http::Request& req, store::PutOptions* out, S3Error* error);
// The response headers of an object: Content-Type, ETag, Last-Modified, metadata, with the
// response-* overrides of the query applied.
void AddObjectHeaders(Call& c, const store::ObjectInfo& info);
// "/bucket/key" (or "bucket/key") of x-amz-copy-source, decoded; false with the S3 error.
bool ParseCopySource(const http::Request& req, std::string* bucket, std::string* key,
                     std::string* version_id, S3Error* error);

}  // namespace openlake::s3

// Which S3 operation a request is (docs/s3.md, "Routing"): the bucket and key from the path
// (path style, "/bucket/key") or from the Host header (virtual-host style,
// "bucket.s3.example.com"), the query parameters decoded, and the operation from the method,
// the sub-resource parameters and the copy-source header. Anything S3 has that this server does
// not implement routes to kNotImplemented (answered 501 NotImplemented), never to a neighbour.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/framing.h"

namespace openlake::s3 {

enum class Op {
  kListBuckets,
  kCreateBucket,
  kDeleteBucket,
  kHeadBucket,
  kGetBucketLocation,
  kGetBucketVersioning,
  kPutBucketVersioning,
  kListObjectVersions,
  kGetBucketLifecycle,
  kPutBucketLifecycle,
  kDeleteBucketLifecycle,
  kGetBucketTagging,
  kPutBucketTagging,
  kDeleteBucketTagging,
  kGetBucketPolicy,
  kPutBucketPolicy,
  kDeleteBucketPolicy,
  kGetBucketAcl,
  kPutBucketAcl,
  kGetObjectAcl,
  kPutObjectAcl,
  kListObjects,
  kListObjectsV2,
  kListMultipartUploads,
  kDeleteObjects,
  kPutObject,
  kCopyObject,
  kGetObject,
  kHeadObject,
  kDeleteObject,
  kCreateMultipartUpload,
  kUploadPart,
  kUploadPartCopy,
  kCompleteMultipartUpload,
  kAbortMultipartUpload,
  kListParts,
  kGetObjectAttributes,
  kGetObjectTagging,
  kPutObjectTagging,
  kDeleteObjectTagging,
  kPostObject,  // a browser form upload (POST /bucket, multipart/form-data)
  kNotImplemented,
};

std::string_view OpName(Op op);

struct RouteOptions {
  // Domains under which a Host of "<bucket>.<domain>" names the bucket (virtual-host style);
  // any other Host is path style.
  std::vector<std::string> domains;
};

struct Route {
  Op op = Op::kNotImplemented;
  std::string bucket;  // "" for the service
  std::string key;     // decoded; "" for bucket and service operations
  bool virtual_host = false;  // the bucket came from the Host header
  std::vector<std::pair<std::string, std::string>> query;  // decoded, in order
  std::string what;    // with kNotImplemented: the feature asked for
  // An error found while routing ("" when none): S3 code, HTTP status, message.
  std::string error_code;
  int error_status = 0;
  std::string error_message;

  // The first value of a query parameter, or nullptr.
  const std::string* Param(std::string_view name) const;
  bool Has(std::string_view name) const { return Param(name) != nullptr; }
};

Route RouteRequest(const http::Request& req, const RouteOptions& options = RouteOptions());

}  // namespace openlake::s3

// Routing S3 requests to operations (see route.h).
#include "s3/api/route.h"

#include <algorithm>

namespace openlake::s3 {
namespace {

// Sub-resources S3 has and this server does not implement, per target.
constexpr std::string_view kBucketUnsupported[] = {
    "accelerate", "analytics", "cors", "encryption", "intelligent-tiering", "inventory",
    "logging", "metrics", "notification", "object-lock", "ownershipControls",
    "policyStatus", "publicAccessBlock", "replication", "requestPayment", "website",
    "session"};
constexpr std::string_view kObjectUnsupported[] = {
    "legal-hold", "restore", "retention", "select", "torrent"};

Route Fail(Route r, std::string code, int status, std::string message) {
  r.error_code = std::move(code);
  r.error_status = status;
  r.error_message = std::move(message);
  return r;
}

Route MethodNotAllowed(Route r) {
  return Fail(std::move(r), "MethodNotAllowed", 405,
              "The specified method is not allowed against this resource.");
}

// A sub-resource with a GET, a PUT and a DELETE operation (policy, tagging, lifecycle);
// another method is MethodNotAllowed.
Route GetPutDelete(Route r, std::string_view method, Op get, Op put, Op del) {
  if (method == "GET") {
    r.op = get;
  } else if (method == "PUT") {
    r.op = put;
  } else if (method == "DELETE") {
    r.op = del;
  } else {
    return MethodNotAllowed(std::move(r));
  }
  return r;
}

Route NotImplemented(Route r, std::string what) {
  r.op = Op::kNotImplemented;
  r.what = std::move(what);
  return r;
}

// The bucket named by a virtual-host-style Host, or "" (path style).
std::string BucketFromHost(std::string_view host, const RouteOptions& o) {
  // Drop the port ("[v6]:port" never names a bucket).
  if (!host.empty() && host.front() == '[') return "";
  const size_t colon = host.rfind(':');
  if (colon != std::string_view::npos) host = host.substr(0, colon);
  for (const std::string& d : o.domains) {
    if (host.size() > d.size() + 1 && host[host.size() - d.size() - 1] == '.' &&
        http::EqualsLower(host.substr(host.size() - d.size()), http::AsciiLower(d))) {
      return http::AsciiLower(host.substr(0, host.size() - d.size() - 1));
    }
  }
  return "";
}

}  // namespace

std::string_view OpName(Op op) {
  switch (op) {
    case Op::kListBuckets: return "ListBuckets";
    case Op::kCreateBucket: return "CreateBucket";
    case Op::kDeleteBucket: return "DeleteBucket";
    case Op::kHeadBucket: return "HeadBucket";
    case Op::kGetBucketLocation: return "GetBucketLocation";
    case Op::kGetBucketVersioning: return "GetBucketVersioning";
    case Op::kPutBucketVersioning: return "PutBucketVersioning";
    case Op::kListObjectVersions: return "ListObjectVersions";
    case Op::kGetBucketLifecycle: return "GetBucketLifecycleConfiguration";
    case Op::kPutBucketLifecycle: return "PutBucketLifecycleConfiguration";
    case Op::kDeleteBucketLifecycle: return "DeleteBucketLifecycle";
    case Op::kGetBucketTagging: return "GetBucketTagging";
    case Op::kPutBucketTagging: return "PutBucketTagging";
    case Op::kDeleteBucketTagging: return "DeleteBucketTagging";
    case Op::kListObjects: return "ListObjects";
    case Op::kListObjectsV2: return "ListObjectsV2";
    case Op::kListMultipartUploads: return "ListMultipartUploads";
    case Op::kDeleteObjects: return "DeleteObjects";
    case Op::kPutObject: return "PutObject";
    case Op::kCopyObject: return "CopyObject";
    case Op::kGetObject: return "GetObject";
    case Op::kHeadObject: return "HeadObject";
    case Op::kDeleteObject: return "DeleteObject";
    case Op::kCreateMultipartUpload: return "CreateMultipartUpload";
    case Op::kUploadPart: return "UploadPart";
    case Op::kUploadPartCopy: return "UploadPartCopy";
    case Op::kCompleteMultipartUpload: return "CompleteMultipartUpload";
    case Op::kAbortMultipartUpload: return "AbortMultipartUpload";
    case Op::kListParts: return "ListParts";
    case Op::kGetObjectAttributes: return "GetObjectAttributes";
    case Op::kGetBucketPolicy: return "GetBucketPolicy";
    case Op::kPutBucketPolicy: return "PutBucketPolicy";
    case Op::kDeleteBucketPolicy: return "DeleteBucketPolicy";
    case Op::kGetBucketAcl: return "GetBucketAcl";
    case Op::kPutBucketAcl: return "PutBucketAcl";
    case Op::kGetObjectAcl: return "GetObjectAcl";
    case Op::kPutObjectAcl: return "PutObjectAcl";
    case Op::kGetObjectTagging: return "GetObjectTagging";
    case Op::kPutObjectTagging: return "PutObjectTagging";
    case Op::kDeleteObjectTagging: return "DeleteObjectTagging";
    case Op::kPostObject: return "PostObject";
    case Op::kNotImplemented: return "NotImplemented";
  }
  return "NotImplemented";
}

const std::string* Route::Param(std::string_view name) const {
  return http::FindParam(query, name);
}

Route RouteRequest(const http::Request& req, const RouteOptions& options) {
  Route r;
  std::string_view raw_path, raw_query;
  http::SplitTarget(req.target, &raw_path, &raw_query);
  if (raw_path.empty() || raw_path.front() != '/') {
    return Fail(std::move(r), "InvalidURI", 400, "the request target is not a path");
  }
  if (!http::ParseQueryString(raw_query, &r.query)) {
    return Fail(std::move(r), "InvalidURI", 400, "malformed percent-escape in the query string");
  }
  std::string path;
  if (!http::PercentDecode(raw_path, &path)) {
    return Fail(std::move(r), "InvalidURI", 400, "malformed percent-escape in the path");
  }
  r.bucket = BucketFromHost(req.Value("host"), options);
  if (!r.bucket.empty()) {
    r.virtual_host = true;
    r.key = path.substr(1);
  } else {
    const size_t slash = path.find('/', 1);
    r.bucket = path.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
    if (slash != std::string::npos) r.key = path.substr(slash + 1);
  }
  const std::string_view m = req.method;
  const bool copy = req.Find("x-amz-copy-source") != nullptr;

  if (r.bucket.empty()) {  // the service
    if (m == "GET") {
      r.op = Op::kListBuckets;
      return r;
    }
    return Fail(std::move(r), "MethodNotAllowed", 405,
                "The specified method is not allowed against this resource.");
  }

  if (r.key.empty()) {  // a bucket
    for (std::string_view sub : kBucketUnsupported) {
      if (r.Has(sub)) return NotImplemented(std::move(r), "bucket " + std::string(sub));
    }
    // Sub-resources with operations of their own: never the plain bucket operation.
    if (r.Has("acl")) {
      if (m != "GET" && m != "PUT") return MethodNotAllowed(std::move(r));
      r.op = m == "GET" ? Op::kGetBucketAcl : Op::kPutBucketAcl;
      return r;
    }
    if (r.Has("versioning")) {
      if (m != "GET" && m != "PUT") return MethodNotAllowed(std::move(r));
      r.op = m == "GET" ? Op::kGetBucketVersioning : Op::kPutBucketVersioning;
      return r;
    }
    if (r.Has("tagging")) {
      return GetPutDelete(std::move(r), m, Op::kGetBucketTagging, Op::kPutBucketTagging,
                          Op::kDeleteBucketTagging);
    }
    if (r.Has("lifecycle")) {
      return GetPutDelete(std::move(r), m, Op::kGetBucketLifecycle, Op::kPutBucketLifecycle,
                          Op::kDeleteBucketLifecycle);
    }
    if (r.Has("versions")) {
      if (m != "GET") return MethodNotAllowed(std::move(r));
      r.op = Op::kListObjectVersions;
      return r;
    }
    if (r.Has("policy")) {
      return GetPutDelete(std::move(r), m, Op::kGetBucketPolicy, Op::kPutBucketPolicy,
                          Op::kDeleteBucketPolicy);
    }
    if (m == "GET") {
      if (r.Has("location")) {
        r.op = Op::kGetBucketLocation;
      } else if (r.Has("uploads")) {
        r.op = Op::kListMultipartUploads;
      } else if (const std::string* v = r.Param("list-type"); v != nullptr) {
        if (*v != "2") return Fail(std::move(r), "InvalidArgument", 400, "list-type must be 2");
        r.op = Op::kListObjectsV2;
      } else {
        r.op = Op::kListObjects;
      }
    } else if (m == "HEAD") {
      r.op = Op::kHeadBucket;
    } else if (m == "PUT") {
      r.op = Op::kCreateBucket;
    } else if (m == "DELETE") {
      r.op = Op::kDeleteBucket;
    } else if (m == "POST" && r.Has("delete")) {
      r.op = Op::kDeleteObjects;
    } else if (m == "POST") {
      r.op = Op::kPostObject;
    } else {
      return Fail(std::move(r), "MethodNotAllowed", 405,
                  "The specified method is not allowed against this resource.");
    }
    return r;
  }

  // An object.
  for (std::string_view sub : kObjectUnsupported) {
    if (r.Has(sub)) return NotImplemented(std::move(r), "object " + std::string(sub));
  }
  const bool upload = r.Has("uploadId");
  if (m == "GET" && r.Has("attributes")) {
    r.op = Op::kGetObjectAttributes;
  } else if (r.Has("acl")) {
    if (m != "GET" && m != "PUT") return MethodNotAllowed(std::move(r));
    r.op = m == "GET" ? Op::kGetObjectAcl : Op::kPutObjectAcl;
  } else if (r.Has("tagging")) {
    return GetPutDelete(std::move(r), m, Op::kGetObjectTagging, Op::kPutObjectTagging,
                        Op::kDeleteObjectTagging);
  } else if (m == "GET") {
    r.op = upload ? Op::kListParts : Op::kGetObject;
  } else if (m == "HEAD") {
    r.op = Op::kHeadObject;
  } else if (m == "PUT") {
    if (r.Has("partNumber") || upload) {
      if (!(r.Has("partNumber") && upload)) {
        return Fail(std::move(r), "InvalidArgument", 400,
                    "an upload part needs both partNumber and uploadId");
      }
      r.op = copy ? Op::kUploadPartCopy : Op::kUploadPart;
    } else {
      r.op = copy ? Op::kCopyObject : Op::kPutObject;
    }
  } else if (m == "DELETE") {
    r.op = upload ? Op::kAbortMultipartUpload : Op::kDeleteObject;
  } else if (m == "POST" && r.Has("uploads")) {
    r.op = Op::kCreateMultipartUpload;
  } else if (m == "POST" && upload) {
    r.op = Op::kCompleteMultipartUpload;
  } else {
    return Fail(std::move(r), "MethodNotAllowed", 405,
                "The specified method is not allowed against this resource.");
  }
  return r;
}

}  // namespace openlake::s3

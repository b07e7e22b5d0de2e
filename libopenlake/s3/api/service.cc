// The S3 service: request ids, routing, authentication and dispatch (see service.h).
#include "s3/api/service.h"

#include "absl/time/clock.h"

#include "s3/api/ops.h"
#include "s3/api/xml.h"
#include "s3/auth/sigv2.h"

#include "openlake/log.h"
#include "openlake/strings.h"

namespace openlake::s3 {

io::Task<void> Call::Error(S3Error e) {
  ex.SetStatus(e.status);
  if (e.status == 304) {  // Not Modified has no body
    (void)co_await ex.Respond("");
    co_return;
  }
  ex.AddHeader("Content-Type", "application/xml");
  (void)co_await ex.Respond(ErrorXml(e.code, e.message, resource, request_id));
}

io::Task<void> Call::Error(std::string code, int status, std::string message) {
  S3Error e{std::move(code), status, std::move(message)};
  co_await Error(std::move(e));
}

io::Task<void> Call::Fail(const absl::Status& st) {
  S3Error e = ErrorFromStatus(st);
  if (store::ErrorKindOf(st) == store::ErrorKind::kDeleteMarker) {
    // The key's current version (404), or the version asked for (405), is a delete marker.
    ex.AddHeader("x-amz-delete-marker", "true");
    ex.AddHeader("x-amz-version-id", store::VersionIdOf(st));
    if (route.Has("versionId")) {
      e = {"MethodNotAllowed", 405, "The specified method is not allowed against this resource."};
    }
  }
  if (e.status >= 500) {
    OL_LOG(kWarning) << "s3: " << OpName(route.op) << " " << resource << ": " << st.ToString();
  }
  co_await Error(std::move(e));
}

io::Task<void> Call::Xml(int status, std::string body) {
  ex.SetStatus(status);
  ex.AddHeader("Content-Type", "application/xml");
  (void)co_await ex.Respond(body);
}

io::Task<void> Call::Empty(int status) {
  ex.SetStatus(status);
  (void)co_await ex.Respond("");
}

std::string Call::OwnerId() const {
  return owner_id.empty() ? OwnerIdOf(auth.access_key) : owner_id;
}

namespace {

// A request that carries no signature of any kind (header, query or SigV2).
bool IsAnonymous(const http::Request& req, const Route& route) {
  if (req.Find("authorization") != nullptr) return false;
  for (std::string_view p : {"X-Amz-Signature", "X-Amz-Credential", "X-Amz-Algorithm",
                             "Signature", "AWSAccessKeyId"}) {
    if (route.Has(p)) return false;
  }
  return true;
}

}  // namespace

S3Service::S3Service(store::Store& store, ServiceOptions options)
    : store_(store),
      opts_(std::move(options)),
      metrics_(opts_.reactors),
      owners_(opts_.bucket_cache_ttl) {}

std::string S3Service::ErrorBody(int status, std::string_view why, std::string* content_type,
                                 std::string* headers) const {
  *content_type = "application/xml";
  const std::string id = NewRequestId();
  *headers = StrCat("x-amz-request-id: ", id, "\r\nx-amz-id-2: ", id, "\r\nServer: OpenLake\r\n");
  std::string code = "BadRequest";
  if (status == 408) code = "RequestTimeout";
  if (status == 414) code = "KeyTooLongError";  // S3's answer to over-long request lines
  if (status == 431) code = "RequestHeaderSectionTooLarge";
  if (status == 501) code = "NotImplemented";
  if (status == 503) code = "SlowDown";  // the SDKs back off and retry
  if (status == 505) code = "HttpVersionNotSupported";
  if (status == 417) code = "ExpectationFailed";
  return ErrorXml(code, why, "", id);
}

io::Task<void> S3Service::Handle(http::Exchange& ex) {
  const absl::Time start = absl::Now();
  Call c{ex, ex.request(), store_, opts_, {}, {}, NewRequestId(), {}, &owners_, {}};
  ex.AddHeader("x-amz-request-id", c.request_id);
  ex.AddHeader("x-amz-id-2", c.request_id);
  ex.AddHeader("Server", "OpenLake");
  co_await Process(c);
  const io::Reactor* r = io::Reactor::Current();
  metrics_.Record(r != nullptr ? r->id() : 0, c.route.op, ex.status(), ex.bytes_in(),
                  ex.bytes_out(),
                  static_cast<uint64_t>(absl::ToInt64Microseconds(absl::Now() - start)));
}

io::Task<void> S3Service::Process(Call& c) {
  std::string_view path, query;
  http::SplitTarget(c.req.target, &path, &query);
  c.resource = std::string(path);

  c.route = RouteRequest(c.req, opts_.route);
  if (!c.route.error_code.empty()) {
    co_await c.Error(c.route.error_code, c.route.error_status, c.route.error_message);
    co_return;
  }
  if (c.route.op == Op::kPostObject) {
    co_await PostObject(c);  // the form carries its own signature
    co_return;
  }
  if (IsAnonymous(c.req, c.route)) {
    // Unsigned: what the bucket's policy allows anyone, nothing outside a bucket.
    if (PolicyAction(c.route.op).empty() && c.route.op != Op::kNotImplemented) {
      co_await c.Error("AccessDenied", 403, "Access Denied");
      co_return;
    }
    c.anonymous = true;
    co_await Authorized(c);
    co_return;
  }
  const CredentialSet& creds = opts_.credentials;
  const SigV4Request signed_req{c.req.method, path, query, &c.req.headers};
  const SecretLookup secrets = [&creds](std::string_view key) { return creds.SecretOf(key); };
  const int64_t now = absl::ToUnixSeconds(absl::Now());
  c.auth = IsSigV2(signed_req)
               ? VerifySigV2(signed_req, c.route.virtual_host ? c.route.bucket : "", secrets, now,
                             opts_.region, opts_.sigv4)
               : VerifySigV4(signed_req, secrets, now, opts_.sigv4);
  if (!c.auth.ok()) {
    co_await c.Error(c.auth.code, c.auth.http_status, c.auth.message);
    co_return;
  }
  if (c.auth.region != opts_.region) {
    // Named first: g++ 12 miscompiles a ?: inside a co_await statement (co_await_check.py).
    const char* code =
        c.auth.presigned ? "AuthorizationQueryParametersError" : "AuthorizationHeaderMalformed";
    const char* where = c.auth.presigned ? "query" : "header";
    std::string message = StrCat("The authorization ", where, " is malformed; the region '",
                                 c.auth.region, "' is wrong; expecting '", opts_.region, "'");
    co_await c.Error(code, 400, std::move(message));
    co_return;
  }
  c.owner_id = OwnerIdOf(c.auth.access_key);
  co_await Authorized(c);
}

io::Task<void> S3Service::Authorized(Call& c) {
  // A bucket's operations are its owner's, and what its policy allows others (ListBuckets and
  // CreateBucket look at owners themselves; DeleteObjects asks for each key).
  if (c.route.op == Op::kDeleteObjects) {
    const bool may = co_await MayAskPerKey(c);
    if (!may) co_return;
  } else if (!PolicyAction(c.route.op).empty()) {
    const bool may = co_await MayUseBucket(c);
    if (!may) co_return;
  }
  if (c.route.op == Op::kNotImplemented) {
    co_await c.Error("NotImplemented", 501,
                     StrCat("A header or parameter you provided implies functionality that is "
                            "not implemented: ", c.route.what, "."));
    co_return;
  }
  co_await Dispatch(c);
}

io::Task<void> S3Service::Dispatch(Call& c) {
  switch (c.route.op) {
    case Op::kListBuckets: co_await ListBuckets(c); break;
    case Op::kCreateBucket: co_await CreateBucket(c); break;
    case Op::kDeleteBucket: co_await DeleteBucket(c); break;
    case Op::kHeadBucket: co_await HeadBucket(c); break;
    case Op::kGetBucketLocation: co_await GetBucketLocation(c); break;
    case Op::kGetBucketVersioning: co_await GetBucketVersioning(c); break;
    case Op::kPutBucketVersioning: co_await PutBucketVersioning(c); break;
    case Op::kListObjectVersions: co_await ListObjectVersions(c); break;
    case Op::kGetBucketLifecycle: co_await GetBucketLifecycle(c); break;
    case Op::kPutBucketLifecycle: co_await PutBucketLifecycle(c); break;
    case Op::kDeleteBucketLifecycle: co_await DeleteBucketLifecycle(c); break;
    case Op::kGetBucketTagging: co_await GetBucketTagging(c); break;
    case Op::kPutBucketTagging: co_await PutBucketTagging(c); break;
    case Op::kDeleteBucketTagging: co_await DeleteBucketTagging(c); break;
    case Op::kGetBucketPolicy: co_await GetBucketPolicy(c); break;
    case Op::kPutBucketPolicy: co_await PutBucketPolicy(c); break;
    case Op::kDeleteBucketPolicy: co_await DeleteBucketPolicy(c); break;
    case Op::kGetBucketAcl: co_await GetBucketAcl(c); break;
    case Op::kPutBucketAcl: co_await PutBucketAcl(c); break;
    case Op::kGetObjectAcl: co_await GetObjectAcl(c); break;
    case Op::kPutObjectAcl: co_await PutObjectAcl(c); break;
    case Op::kListObjects: co_await ListObjects(c, false); break;
    case Op::kListObjectsV2: co_await ListObjects(c, true); break;
    case Op::kListMultipartUploads: co_await ListMultipartUploads(c); break;
    case Op::kDeleteObjects: co_await DeleteObjects(c); break;
    case Op::kPutObject: co_await PutObject(c); break;
    case Op::kCopyObject: co_await CopyObject(c); break;
    case Op::kGetObject: co_await GetObject(c, false); break;
    case Op::kHeadObject: co_await GetObject(c, true); break;
    case Op::kGetObjectAttributes: co_await GetObjectAttributes(c); break;
    case Op::kGetObjectTagging: co_await GetObjectTagging(c); break;
    case Op::kPutObjectTagging: co_await PutObjectTagging(c); break;
    case Op::kDeleteObjectTagging: co_await DeleteObjectTagging(c); break;
    case Op::kPostObject: co_await PostObject(c); break;
    case Op::kDeleteObject: co_await DeleteObject(c); break;
    case Op::kCreateMultipartUpload: co_await CreateMultipartUpload(c); break;
    case Op::kUploadPart: co_await UploadPart(c); break;
    case Op::kUploadPartCopy: co_await UploadPartCopy(c); break;
    case Op::kCompleteMultipartUpload: co_await CompleteMultipartUpload(c); break;
    case Op::kAbortMultipartUpload: co_await AbortMultipartUpload(c); break;
    case Op::kListParts: co_await ListParts(c); break;
    case Op::kNotImplemented:
      co_await c.Error("NotImplemented", 501, "Not implemented.");
      break;
  }
}

}  // namespace openlake::s3

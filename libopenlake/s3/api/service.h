// The S3 service (docs/s3.md): what answers each HTTP exchange the server hands it. It gives
// the request an id, routes it, verifies its signature, and runs the operation against the
// object engine; every answer, success or S3 error, carries x-amz-request-id.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "http/server.h"
#include "s3/api/errors.h"
#include "s3/api/metrics.h"
#include "s3/api/owners.h"
#include "s3/api/route.h"
#include "s3/auth/credentials.h"
#include "s3/auth/sigv4.h"

#include "openlake/io/task.h"
#include "openlake/store/store.h"

namespace openlake::s3 {

struct ServiceOptions {
  std::string region = "us-east-1";
  CredentialSet credentials;
  RouteOptions route;
  SigV4Options sigv4;
  size_t max_xml_bytes = 4 << 20;  // request documents (CompleteMultipartUpload, Delete)
  unsigned reactors = 1;           // of the runtime serving it (metrics are kept per reactor)
  absl::Duration bucket_cache_ttl = absl::InfiniteDuration();  // S3ServerOptions'
};

// One request being served: what every operation needs, and its ways to answer.
struct Call {
  http::Exchange& ex;
  const http::Request& req;
  store::Store& store;
  const ServiceOptions& opts;
  Route route;
  SigV4Result auth;
  std::string request_id;
  std::string resource;  // the path, for error bodies
  BucketOwners* owners = nullptr;  // the service's cache of bucket owners
  std::string owner_id;            // the caller's, once authenticated
  bool anonymous = false;          // an unsigned request (a bucket policy may allow it)
  std::string bucket_owner;        // the routed bucket's owner id, once authorized

  // An S3 error: status, XML body (none for HEAD).
  io::Task<void> Error(S3Error e);
  io::Task<void> Error(std::string code, int status, std::string message);
  // The S3 error for an engine or HTTP failure.
  io::Task<void> Fail(const absl::Status& st);
  io::Task<void> Xml(int status, std::string body);
  io::Task<void> Empty(int status);
  // The caller's owner id (OwnerIdOf its access key); the key is its display name.
  std::string OwnerId() const;
};

class S3Service {
 public:
  S3Service(store::Store& store, ServiceOptions options);

  io::Task<void> Handle(http::Exchange& ex);
  // The body of errors the HTTP server answers itself (framing, timeouts): S3 XML, and the
  // x-amz-request-id header every answer carries.
  std::string ErrorBody(int status, std::string_view why, std::string* content_type,
                        std::string* headers) const;

  const ServiceOptions& options() const { return opts_; }
  const S3Metrics& metrics() const { return metrics_; }

 private:
  io::Task<void> Process(Call& call);  // route, authenticate, dispatch
  io::Task<void> Authorized(Call& call);  // check access, dispatch
  io::Task<void> Dispatch(Call& call);

  store::Store& store_;
  ServiceOptions opts_;
  S3Metrics metrics_;
  BucketOwners owners_;
};

}  // namespace openlake::s3

// File: openlake/s3/client.h
//
// A small blocking S3 client: one keep-alive HTTP/1.1 connection over TCP (plain http), every
// request signed with AWS Signature Version 4 (docs/s3.md, "Authentication"). It speaks to
// `openlaked`'s S3 server or any S3 endpoint that takes path-style requests, and covers what
// tools, benchmarks and the parallel transfers (openlake/s3/transfer.h) need: CreateBucket,
// HeadBucket, PutObject, GetObject (whole or a range), HeadObject, DeleteObject, the multipart
// upload's four calls and ListObjectsV2.
//
//   s3::ClientOptions o;
//   o.endpoint = "127.0.0.1:9000";
//   o.credential = {"AKIA...", "secret"};
//   OL_ASSIGN_OR_RETURN(auto s3, s3::Client::Connect(o));
//   OL_RETURN_IF_ERROR(s3->CreateBucket("photos"));
//   OL_ASSIGN_OR_RETURN(std::string etag, s3->PutObject("photos", "a/b.jpg", bytes));
//   OL_ASSIGN_OR_RETURN(size_t n, s3->GetObject("photos", "a/b.jpg", absl::MakeSpan(buf)));
//
// Errors: a request S3 refused comes back as a Status whose message is "<Code>: <Message>" of
// the error document (e.g. "SignatureDoesNotMatch: The request signature we calculated ...")
// and whose canonical code follows the HTTP status (400 InvalidArgument, 403 PermissionDenied,
// 404 NotFound, 409 AlreadyExists or FailedPrecondition, 412 FailedPrecondition, 416
// OutOfRange, 503 Unavailable, other 5xx Internal); ErrorCodeOf() gives the S3 code alone.
// Transport failures are Unavailable (connect, reset) or DeadlineExceeded (io_timeout).
//
// Not thread-safe: one Client per thread (each has its own connection). A connection the
// server closed while idle is reopened once, transparently, on the next request.
//
// SignV4Headers() signs a request for callers that send it themselves (a load generator that
// repeats one pre-signed request, say).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

#include "openlake/export.h"
#include "openlake/s3/credential.h"

namespace openlake::s3 {

// HeadObject's answer.
struct ObjectHead {
  uint64_t size = 0;
  std::string etag;  // without quotes
  std::string content_type;
  std::string last_modified;  // as the server wrote it (an HTTP date)
};

// One part of a multipart upload, as CompleteMultipartUpload lists it.
struct PartEtag {
  int number = 0;
  std::string etag;  // UploadPart's answer
};

struct ListOptions {
  std::string prefix;
  std::string delimiter;           // "" for a flat listing
  std::string continuation_token;  // the previous page's next_continuation_token
  int max_keys = 1000;
};

struct ListedObject {
  std::string key;
  uint64_t size = 0;
  std::string etag;  // without quotes
};

struct ListPage {
  std::vector<ListedObject> objects;
  std::vector<std::string> common_prefixes;
  bool truncated = false;
  std::string next_continuation_token;  // for the next page when truncated
};

struct ClientOptions {
  std::string endpoint = "127.0.0.1:9000";  // host:port (plain http)
  Credential credential;
  std::string region = "us-east-1";
  absl::Duration connect_timeout = absl::Seconds(5);
  // Longest wait for the socket to take or give bytes during a request.
  absl::Duration io_timeout = absl::Seconds(30);
  // Sign the payload's SHA-256 (x-amz-content-sha256 = its hash) instead of UNSIGNED-PAYLOAD.
  // Costs one SHA-256 pass over every body sent.
  bool sign_payload = false;
};

class OL_EXPORT Client {
 public:
  // Connects (the connection is kept for every later request). Unavailable when the endpoint
  // cannot be reached; InvalidArgument when it is not a host:port.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(ClientOptions options);
  ~Client();

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // OK when it exists already and the server's region is us-east-1 (as S3 answers there);
  // AlreadyExists (BucketAlreadyOwnedByYou) when it exists in another region.
  absl::Status CreateBucket(std::string_view bucket);
  // OK when the bucket exists and these credentials may use it; NotFound when it does not.
  absl::Status HeadBucket(std::string_view bucket);
  // Stores `data` under `key`; returns the ETag (without quotes).
  absl::StatusOr<std::string> PutObject(std::string_view bucket, std::string_view key,
                                        std::string_view data);
  // Reads the object into `out`; returns its size. OutOfRange when it is larger than `out`
  // (nothing useful is left in `out` then).
  absl::StatusOr<size_t> GetObject(std::string_view bucket, std::string_view key,
                                   absl::Span<char> out);
  absl::StatusOr<std::string> GetObject(std::string_view bucket, std::string_view key);
  // Bytes [offset, offset + out.size()) of the object into `out` (a Range request); returns
  // how many came, fewer when the object ends first. OutOfRange (InvalidRange) when `offset`
  // is at or past the end of a non-empty object. An empty `out` asks nothing and returns 0.
  absl::StatusOr<size_t> GetObjectRange(std::string_view bucket, std::string_view key,
                                        uint64_t offset, absl::Span<char> out);
  // NotFound (no body, so ErrorCodeOf says "NotFound") when there is no such object.
  absl::StatusOr<ObjectHead> HeadObject(std::string_view bucket, std::string_view key);
  // OK also when there was no such object (as S3 answers).
  absl::Status DeleteObject(std::string_view bucket, std::string_view key);

  // Multipart upload: the upload id; then each part's ETag (parts 1..10000, each but the last
  // at least 5 MiB on S3); then the object's ETag. An upload neither completed nor aborted
  // keeps its parts on the server until a lifecycle rule or an abort removes them.
  absl::StatusOr<std::string> CreateMultipartUpload(std::string_view bucket, std::string_view key);
  absl::StatusOr<std::string> UploadPart(std::string_view bucket, std::string_view key,
                                         std::string_view upload_id, int part_number,
                                         std::string_view data);
  // `parts` in ascending part order. A failure S3 reports inside a 200 answer (as it may once
  // the response has started) is returned as that error.
  absl::StatusOr<std::string> CompleteMultipartUpload(std::string_view bucket,
                                                      std::string_view key,
                                                      std::string_view upload_id,
                                                      const std::vector<PartEtag>& parts);
  absl::Status AbortMultipartUpload(std::string_view bucket, std::string_view key,
                                    std::string_view upload_id);

  // One page of the bucket's keys in order.
  absl::StatusOr<ListPage> ListObjectsV2(std::string_view bucket, const ListOptions& options);

  const ClientOptions& options() const;

 private:
  class Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The S3 error code ("NoSuchKey", "SignatureDoesNotMatch", ...) of a status this client
// returned, or "" when it did not come from an S3 error document.
OL_EXPORT std::string ErrorCodeOf(const absl::Status& status);

// A request to sign. `path` and `query` are percent-encoded as they will be sent (path-style:
// "/bucket/key"; keys with characters beyond [A-Za-z0-9-._~/] must be %XX-encoded).
struct RequestToSign {
  std::string method = "GET";
  std::string host;  // the Host header's value, e.g. "127.0.0.1:9000"
  std::string path = "/";
  std::string query;
  // The body's SHA-256 in lower-case hex, or "UNSIGNED-PAYLOAD".
  std::string payload_sha256 = "UNSIGNED-PAYLOAD";
};

struct HttpHeader {
  std::string name;
  std::string value;
};

// The headers that sign `r` at time `now`, valid for the server's allowed clock skew (15
// minutes on openlaked): x-amz-date, x-amz-content-sha256 and Authorization, with Host among
// the signed headers (send `r.host` as Host).
OL_EXPORT std::vector<HttpHeader> SignV4Headers(const RequestToSign& r,
                                                const Credential& credential,
                                                std::string_view region, absl::Time now);

}  // namespace openlake::s3

// S3 errors and request ids (see errors.h).
#include "s3/api/errors.h"

#include <atomic>
#include <cstdio>
#include <random>

#include "openlake/store/store.h"

namespace openlake::s3 {

S3Error ErrorFromStatus(const absl::Status& status) {
  using store::ErrorKind;
  const std::string msg(status.message());
  switch (store::ErrorKindOf(status)) {
    case ErrorKind::kNoSuchBucket:
      return {"NoSuchBucket", 404, "The specified bucket does not exist"};
    case ErrorKind::kNoSuchKey:
    case ErrorKind::kDeleteMarker:  // the current version is one (the read adds its headers)
      return {"NoSuchKey", 404, "The specified key does not exist."};
    case ErrorKind::kNoSuchVersion:
      return {"NoSuchVersion", 404,
              "The specified version does not exist."};
    case ErrorKind::kInvalidVersionId:
      return {"InvalidArgument", 400, "Invalid version id specified"};
    case ErrorKind::kNoSuchUpload:
      return {"NoSuchUpload", 404,
              "The specified upload does not exist. The upload ID may be invalid, or the upload "
              "may have been aborted or completed."};
    case ErrorKind::kBucketExists:
      return {"BucketAlreadyOwnedByYou", 409,
              "Your previous request to create the named bucket succeeded and you already own "
              "it."};
    case ErrorKind::kBucketNotEmpty:
      return {"BucketNotEmpty", 409, "The bucket you tried to delete is not empty"};
    case ErrorKind::kInvalidBucketName:
      return {"InvalidBucketName", 400, "The specified bucket is not valid. " + msg};
    case ErrorKind::kInvalidObjectName:
      return {msg.find("longer than") != std::string::npos ? "KeyTooLongError" : "InvalidArgument",
              400, "Invalid object name: " + msg};
    case ErrorKind::kInvalidPart:
      return {"InvalidPart", 400,
              "One or more of the specified parts could not be found. The part might not have "
              "been uploaded, or the specified entity tag might not have matched the part's "
              "entity tag."};
    case ErrorKind::kInvalidPartOrder:
      return {"InvalidPartOrder", 400,
              "The list of parts was not in ascending order. The parts list must be specified in "
              "order by part number."};
    case ErrorKind::kEntityTooSmall:
      return {"EntityTooSmall", 400,
              "Your proposed upload is smaller than the minimum allowed object size."};
    case ErrorKind::kEntityTooLarge:
      return {"EntityTooLarge", 400,
              "Your proposed upload exceeds the maximum allowed object size."};
    case ErrorKind::kInvalidRange:
      return {"InvalidRange", 416, "The requested range is not satisfiable"};
    case ErrorKind::kPreconditionFailed:
      return {"PreconditionFailed", 412,
              "At least one of the pre-conditions you specified did not hold"};
    case ErrorKind::kNotModified:
      return {"NotModified", 304, "Not Modified"};
    case ErrorKind::kConditionalConflict:
      return {"ConditionalRequestConflict", 409,
              "A conflicting operation occurred. If using PutObject you can retry the request. "
              "If using multipart upload you should initiate another CreateMultipartUpload "
              "request and re-upload each part."};
    case ErrorKind::kInsufficientDrives:
      return {"ServiceUnavailable", 503,
              "Too few drives are available to serve the request; please retry. " + msg};
    case ErrorKind::kStorageFull:
      // MinIO's answer; no drive paths (they stay in the daemon's log).
      return {"XMinioStorageFull", 507,
              "Storage backend has reached its minimum free drive threshold. Please delete a few "
              "objects to proceed."};
    case ErrorKind::kCorrupt:
      return {"InternalError", 500,
              "We encountered an internal error: too few intact copies of the data. " + msg};
    case ErrorKind::kNone:
      break;
  }
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      return {"InvalidArgument", 400, msg};
    case absl::StatusCode::kDataLoss:
      return {"IncompleteBody", 400,
              "You did not provide the number of bytes specified by the Content-Length HTTP "
              "header."};
    case absl::StatusCode::kDeadlineExceeded:
      return {"RequestTimeout", 400,
              "Your socket connection to the server was not read from or written to within the "
              "timeout period."};
    case absl::StatusCode::kResourceExhausted:
      return {"SlowDown", 503, "Please reduce your request rate."};
    case absl::StatusCode::kUnavailable:
      return {"ServiceUnavailable", 503, msg};
    case absl::StatusCode::kUnimplemented:
      return {"NotImplemented", 501, "A header or parameter you provided implies functionality "
                                     "that is not implemented: " + msg};
    default:
      return {"InternalError", 500, "We encountered an internal error. Please try again."};
  }
}

std::string NewRequestId() {
  static const uint64_t base = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  static std::atomic<uint64_t> counter{0};
  // The counter spread over all bits (a bijection), so consecutive ids do not look alike.
  uint64_t x = base + counter.fetch_add(1, std::memory_order_relaxed) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llX", static_cast<unsigned long long>(x));
  return buf;
}

}  // namespace openlake::s3

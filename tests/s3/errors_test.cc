// S3 errors for every engine error kind and HTTP-layer failure, and request ids.
#include "s3/api/errors.h"

#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "store/errors.h"

namespace openlake::s3 {
namespace {

TEST_CASE("errors: each engine error has its S3 code and status", "[s3][errors]") {
  using store::ErrorKind;
  struct Case {
    ErrorKind kind;
    const char* code;
    int status;
  };
  for (const Case& c : std::initializer_list<Case>{
           {ErrorKind::kNoSuchBucket, "NoSuchBucket", 404},
           {ErrorKind::kNoSuchKey, "NoSuchKey", 404},
           {ErrorKind::kNoSuchUpload, "NoSuchUpload", 404},
           {ErrorKind::kBucketExists, "BucketAlreadyOwnedByYou", 409},
           {ErrorKind::kBucketNotEmpty, "BucketNotEmpty", 409},
           {ErrorKind::kInvalidBucketName, "InvalidBucketName", 400},
           {ErrorKind::kInvalidObjectName, "InvalidArgument", 400},
           {ErrorKind::kInvalidPart, "InvalidPart", 400},
           {ErrorKind::kInvalidPartOrder, "InvalidPartOrder", 400},
           {ErrorKind::kEntityTooSmall, "EntityTooSmall", 400},
           {ErrorKind::kEntityTooLarge, "EntityTooLarge", 400},
           {ErrorKind::kInvalidRange, "InvalidRange", 416},
           {ErrorKind::kPreconditionFailed, "PreconditionFailed", 412},
           {ErrorKind::kNotModified, "NotModified", 304},
           {ErrorKind::kInsufficientDrives, "ServiceUnavailable", 503},
           {ErrorKind::kCorrupt, "InternalError", 500}}) {
    const S3Error e = ErrorFromStatus(store::Error(c.kind, "detail"));
    INFO(store::ErrorKindName(c.kind));
    CHECK(e.code == c.code);
    CHECK(e.status == c.status);
    CHECK(!e.message.empty());
  }
  const absl::Status too_long =
      store::Error(ErrorKind::kInvalidObjectName, "longer than 1024 bytes");
  CHECK(ErrorFromStatus(too_long).code == "KeyTooLongError");
}

TEST_CASE("errors: failures of the HTTP layer", "[s3][errors]") {
  CHECK(ErrorFromStatus(absl::DataLossError("closed")).code == "IncompleteBody");
  CHECK(ErrorFromStatus(absl::DeadlineExceededError("slow")).code == "RequestTimeout");
  CHECK(ErrorFromStatus(absl::InvalidArgumentError("bad")).status == 400);
  CHECK(ErrorFromStatus(absl::UnimplementedError("x")).status == 501);
  CHECK(ErrorFromStatus(absl::ResourceExhaustedError("x")).code == "SlowDown");
  CHECK(ErrorFromStatus(absl::InternalError("x")).code == "InternalError");
}

TEST_CASE("errors: request ids are unique and well-formed", "[s3][errors]") {
  std::set<std::string> ids;
  for (int i = 0; i < 100000; ++i) {
    const std::string id = NewRequestId();
    REQUIRE(id.size() == 16);
    REQUIRE(id.find_first_not_of("0123456789ABCDEF") == std::string::npos);
    ids.insert(id);
  }
  CHECK(ids.size() == 100000);
}

}  // namespace
}  // namespace openlake::s3

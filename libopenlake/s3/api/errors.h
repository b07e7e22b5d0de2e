// S3 errors (docs/s3.md, "Errors"): the code, HTTP status and message an S3 client expects for
// each way a request can fail in the engine or the server, and the request ids every response
// carries.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace openlake::s3 {

struct S3Error {
  std::string code;  // "NoSuchKey", ...
  int status = 500;
  std::string message;
};

// The S3 error for a status from the object engine (its ErrorKind decides) or from the HTTP
// layer (the absl code decides: a body cut short is IncompleteBody, a stalled one
// RequestTimeout, ...). Never called with an OK status.
S3Error ErrorFromStatus(const absl::Status& status);

// A fresh x-amz-request-id: 16 upper-case hex digits, unique within the process and random
// across processes.
std::string NewRequestId();

}  // namespace openlake::s3

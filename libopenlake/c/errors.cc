#include "c/errors.h"

#include <string>

namespace openlake::capi {
namespace {

thread_local std::string last_error;

int CodeOf(const absl::Status& st) {
  switch (st.code()) {
    case absl::StatusCode::kOk:
      return OPENLAKE_OK;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return OPENLAKE_ERR_INVALID_ARGUMENT;
    case absl::StatusCode::kNotFound:
      return OPENLAKE_ERR_NOT_FOUND;
    case absl::StatusCode::kAlreadyExists:
      return OPENLAKE_ERR_ALREADY_EXISTS;
    case absl::StatusCode::kFailedPrecondition:
      return OPENLAKE_ERR_MISMATCH;
    case absl::StatusCode::kResourceExhausted:
      // The guard's allocation failure says so; a full pool is the daemon's answer.
      return st.message() == "out of memory" ? OPENLAKE_ERR_NO_MEMORY : OPENLAKE_ERR_POOL_FULL;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:
      return OPENLAKE_ERR_UNAVAILABLE;
    case absl::StatusCode::kDeadlineExceeded:
      return OPENLAKE_ERR_TIMEOUT;
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return OPENLAKE_ERR_PERMISSION;
    case absl::StatusCode::kDataLoss:
      return OPENLAKE_ERR_DATA_LOSS;
    case absl::StatusCode::kUnimplemented:
      return OPENLAKE_ERR_UNSUPPORTED;
    default:
      return OPENLAKE_ERR_INTERNAL;
  }
}

}  // namespace

int Fail(const absl::Status& st) {
  if (st.ok()) return OPENLAKE_OK;
  last_error.assign(st.message().data(), st.message().size());
  return CodeOf(st);
}

int BadArgument(std::string_view message) {
  return Fail(absl::InvalidArgumentError(absl::string_view(message.data(), message.size())));
}

}  // namespace openlake::capi

extern "C" {

const char* openlake_strerror(int code) {
  switch (code) {
    case OPENLAKE_OK:
      return "success";
    case OPENLAKE_ERR_INVALID_ARGUMENT:
      return "invalid argument";
    case OPENLAKE_ERR_NOT_FOUND:
      return "not found";
    case OPENLAKE_ERR_ALREADY_EXISTS:
      return "already exists";
    case OPENLAKE_ERR_MISMATCH:
      return "layout or state mismatch";
    case OPENLAKE_ERR_POOL_FULL:
      return "pool full";
    case OPENLAKE_ERR_UNAVAILABLE:
      return "daemon unavailable";
    case OPENLAKE_ERR_TIMEOUT:
      return "timed out";
    case OPENLAKE_ERR_PERMISSION:
      return "permission denied";
    case OPENLAKE_ERR_DATA_LOSS:
      return "checksum mismatch";
    case OPENLAKE_ERR_UNSUPPORTED:
      return "not supported";
    case OPENLAKE_ERR_NO_MEMORY:
      return "out of memory";
    case OPENLAKE_ERR_INTERNAL:
      return "internal error";
    default:
      return "unknown error";
  }
}

const char* openlake_last_error(void) { return openlake::capi::last_error.c_str(); }

}  // extern "C"

// The C API's error reporting: absl::Status to an openlake_error code plus the thread's last
// message, and the guard every exported function runs its body in.
#pragma once

#include <new>
#include <string_view>

#include "absl/status/status.h"

#include "openlake/c/openlake.h"

namespace openlake::capi {

// Records `st`'s message as this thread's last error and returns its code (OPENLAKE_OK for OK).
int Fail(const absl::Status& st);
// InvalidArgument with `message`.
int BadArgument(std::string_view message);
// Runs `body` (returning an int code); an exception escaping it (an allocation failure in the
// C++ client: nothing else throws) becomes a code, never an unwinding through C frames.
template <typename Body>
int Guard(Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(absl::ResourceExhaustedError("out of memory"));
  } catch (...) {
    return Fail(absl::InternalError("unexpected exception in libopenlake"));
  }
}

}  // namespace openlake::capi

#include "openlake/status.h"

#include <cstring>

#include "openlake/strings.h"

namespace openlake {

absl::Status ErrnoStatus(int err, std::string_view what) {
  if (err < 0) err = -err;
  char buf[128];
  // GNU strerror_r returns a pointer that may or may not be `buf`.
  const char* text = strerror_r(err, buf, sizeof(buf));
  return absl::Status(absl::ErrnoToStatusCode(err), StrCat(what, ": ", text));
}

}  // namespace openlake

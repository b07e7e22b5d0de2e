// Random bytes (see random.h).
#include "common/random.h"

#include <sys/random.h>

#include <cerrno>

#include "openlake/log.h"

namespace openlake {

void RandomBytes(void* out, size_t n) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      OL_CHECK(errno == EINTR) << "getrandom failed: errno " << errno;
      continue;
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
}

}  // namespace openlake

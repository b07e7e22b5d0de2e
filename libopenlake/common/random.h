// Cryptographically random bytes from the kernel (getrandom): the RPC handshake's nonces, the
// slab's instance id, generated S3 credentials.
#pragma once

#include <cstddef>

namespace openlake {

// Fills `out` with `n` random bytes; never fails short (it retries interrupted calls and aborts
// if the kernel refuses, which a Linux of this century does not).
void RandomBytes(void* out, size_t n);

}  // namespace openlake

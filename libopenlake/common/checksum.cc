#include "openlake/checksum.h"

#include <cstring>

#include <isa-l/crc64.h>

#include "openlake/strings.h"

namespace openlake {

uint64_t Crc64(const void* data, size_t len, uint64_t crc) {
  return crc64_ecma_refl(crc, static_cast<const uint8_t*>(data), len);
}

uint64_t CopyWithCrc64(void* dst, const void* src, size_t len, uint64_t crc) {
  // 32 KiB chunks: the copy pulls a chunk of the source into L1/L2, and the CRC then reads it
  // from cache instead of DRAM.
  constexpr size_t kChunk = 32 << 10;
  auto* d = static_cast<uint8_t*>(dst);
  auto* s = static_cast<const uint8_t*>(src);
  while (len > 0) {
    const size_t n = len < kChunk ? len : kChunk;
    std::memcpy(d, s, n);
    crc = crc64_ecma_refl(crc, s, n);
    d += n;
    s += n;
    len -= n;
  }
  return crc;
}

}  // namespace openlake

// CRC-64/XZ of a byte range by slicing-by-8, written once for the host and for CUDA devices.
//
// The GPU checksum (cuda/crc64_rows.cu) splits each row into chunks, one per thread, and each
// thread runs Crc64Slice8 over its chunk with the tables in shared memory; the host reference
// (common/crc64_combine.h, Crc64Chunked) runs the same code with the same tables, which is how
// a CPU-only test proves what the kernel computes.
//
//   uint64_t tables[kCrc64SliceTables][256];
//   Crc64SliceTablesInit(tables);                                  // common/crc64_combine.h
//   uint64_t c = Crc64Slice8(&tables[0][0], data, len);  // == openlake::Crc64(data, len)
//
// Chunk layout of a row (Crc64ChunkOf): chunks are counted from the END of the row, so every
// chunk but the first is exactly `chunk` bytes and the number of bytes after chunk k depends
// only on how many chunks follow it, not on the row's size. Then one table of shift constants,
// x^(8·chunk·j) mod P for j chunks after, serves every row size.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define OL_HOST_DEVICE __host__ __device__
#else
#define OL_HOST_DEVICE
#endif

namespace openlake {

// CRC-64/XZ: the ECMA-182 polynomial 0x42F0E1EBA9EA3693, reflected; init and xorout ~0.
inline constexpr uint64_t kCrc64Poly = 0xC96C5795D7870F42ull;
// Slicing-by-8: table t maps a byte to its CRC contribution t bytes ahead of the end of a word.
inline constexpr int kCrc64SliceTables = 8;

// a·b mod P, polynomials in the reflected representation (bit 63 is x^0): zlib's multmodp.
OL_HOST_DEVICE inline uint64_t Crc64MultModP(uint64_t a, uint64_t b) {
  // Walks a's terms from x^0 (bit 63) up, b multiplied by x at each step.
  uint64_t m = 1ull << 63;
  uint64_t p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    m >>= 1;
    b = (b & 1) ? (b >> 1) ^ kCrc64Poly : b >> 1;
  }
  return p;
}

// One step over the 8 bytes of `word` (little-endian), after they were XORed into `crc`.
// `t` is kCrc64SliceTables tables of 256 entries, back to back.
OL_HOST_DEVICE inline uint64_t Crc64Word(const uint64_t* t, uint64_t crc) {
  return t[7 * 256 + (crc & 0xff)] ^ t[6 * 256 + ((crc >> 8) & 0xff)] ^
         t[5 * 256 + ((crc >> 16) & 0xff)] ^ t[4 * 256 + ((crc >> 24) & 0xff)] ^
         t[3 * 256 + ((crc >> 32) & 0xff)] ^ t[2 * 256 + ((crc >> 40) & 0xff)] ^
         t[1 * 256 + ((crc >> 48) & 0xff)] ^ t[(crc >> 56) & 0xff];
}

// The complete CRC-64/XZ of [p, p+len): bytes up to an 8-byte boundary, then aligned 8-byte
// words, then the remaining bytes.
OL_HOST_DEVICE inline uint64_t Crc64Slice8(const uint64_t* t, const uint8_t* p, size_t len) {
  uint64_t crc = ~0ull;
  while (len > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    crc = t[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    --len;
  }
  const uint64_t* w = reinterpret_cast<const uint64_t*>(p);
  for (; len >= 8; len -= 8) crc = Crc64Word(t, crc ^ *w++);
  p = reinterpret_cast<const uint8_t*>(w);
  while (len-- > 0) crc = t[(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

// How a row of `row_bytes` (> 0) splits into chunks of `chunk` bytes, counted from its end.
struct Crc64Chunking {
  uint64_t chunks;      // ceil(row_bytes / chunk)
  uint64_t head_bytes;  // size of chunk 0, in [1, chunk]; every other chunk is `chunk` bytes
};

OL_HOST_DEVICE inline Crc64Chunking Crc64ChunkingOf(uint64_t row_bytes, uint64_t chunk) {
  const uint64_t chunks = (row_bytes + chunk - 1) / chunk;
  return {chunks, row_bytes - (chunks - 1) * chunk};
}

// Byte range [*begin, *begin + *len) of chunk k; the chunks after it number chunks - 1 - k.
OL_HOST_DEVICE inline void Crc64ChunkOf(const Crc64Chunking& c, uint64_t chunk, uint64_t k,
                                        uint64_t* begin, uint64_t* len) {
  *begin = k == 0 ? 0 : c.head_bytes + (k - 1) * chunk;
  *len = k == 0 ? c.head_bytes : chunk;
}

}  // namespace openlake

// CRC-64/XZ arithmetic for checksumming a row in pieces and combining the pieces' CRCs: zlib's
// crc32_combine math carried over to the 64-bit reflected polynomial. Host code, shared by the
// GPU checksum's host side (cuda/crc64_rows.cu builds its tables here) and the CPU tests.
//
//   // crc(A·B) from crc(A), crc(B) and |B|:
//   uint64_t ab = Crc64Combine(crc_a, crc_b, len_b);
//   // equals openlake::Crc64(row, len), computed as the GPU does (chunks, then shifts):
//   uint64_t same = Crc64Chunked(row, len, 4096);
//
// Polynomials are in the reflected representation: bit 63 is x^0, bit 0 is x^63.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/crc64_chunks.h"

namespace openlake {

// Crc64MultModP(a, b), a·b mod P, is in common/crc64_chunks.h (the kernel uses it too).

// x^(8·n) mod P: multiplying a CRC by it appends n zero bytes' worth of shift (the CRC
// register's contents as they stand n bytes further on, before any of those bytes is XORed in).
uint64_t Crc64X8N(uint64_t n);

// The CRC-64/XZ of A followed by B, from crc_a = CRC(A), crc_b = CRC(B) and len_b = |B|. Holds
// with the pre- and post-inversion of CRC-64/XZ, as crc32_combine does for zlib's CRC-32.
uint64_t Crc64Combine(uint64_t crc_a, uint64_t crc_b, uint64_t len_b);

// Fills the slicing-by-8 tables used by Crc64Slice8 (common/crc64_chunks.h).
void Crc64SliceTablesInit(uint64_t (*tables)[256]);

// shifts[j] = x^(8·chunk·j) mod P for j in [0, count): the constant that moves the CRC of a
// chunk followed by j whole chunks to its place in the row's CRC.
std::vector<uint64_t> Crc64ChunkShifts(uint64_t chunk, size_t count);

// The CRC-64/XZ of [data, data+len) the way the GPU kernel computes it: each chunk's own CRC
// (Crc64Slice8), shifted by the chunks after it, XORed together. The reference twin of
// cuda/crc64_rows.cu; equals Crc64(data, len).
uint64_t Crc64Chunked(const void* data, size_t len, uint64_t chunk);

}  // namespace openlake

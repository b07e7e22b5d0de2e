// File: openlake/checksum.h
//
// The block checksum of the KV pool (and, later, of object shards): CRC-64/XZ (the ECMA-182
// polynomial, reflected) computed by ISA-L with carry-less multiplication, ~30 GB/s per core.
//
//   uint64_t c = openlake::Crc64(block, len);
//   uint64_t same = openlake::Crc64(tail, tail_len, openlake::Crc64(head, head_len));
//
// CopyWithCrc64 copies and checksums in one pass over cache-sized chunks, so the source is read
// from DRAM once.
#pragma once

#include <cstddef>
#include <cstdint>

#include "openlake/export.h"

namespace openlake {

// CRC-64/XZ of [data, data+len), continuing from `crc` (0 to start).
OL_EXPORT uint64_t Crc64(const void* data, size_t len, uint64_t crc = 0);

// memcpy(dst, src, len) and returns Crc64(src, len, crc).
OL_EXPORT uint64_t CopyWithCrc64(void* dst, const void* src, size_t len, uint64_t crc = 0);

}  // namespace openlake

// File: cuda/crc64_rows.h: the interface of the GPU checksum archive (built only with
// -Dcuda=enabled), which openlake_cuda_dep gives its users (the Python module) with
// OL_HAVE_CUDA=1; it is not part of libopenlake's public API.
//
// CRC-64/XZ of rows in GPU memory, on the GPU: what openlake::Crc64 (ISA-L's
// crc64_ecma_refl(0, row, row_bytes)) computes for each row, without the rows crossing to the
// host. The KV pool's torch mover checksums the blocks of a save in its staging buffer with it.
//
//   uint64_t* out;  // device memory, `rows` entries
//   int err = openlake::cuda::Crc64RowsDevice(staging, 2 << 20, 512, out, stream);
//   if (err != 0) report(openlake::cuda::Crc64RowsErrorString(err));
//
// Each row splits into 4 KiB chunks (common/crc64_chunks.h); one thread checksums a chunk with
// slicing-by-8 tables in shared memory and shifts its CRC to its place in the row
// (common/crc64_combine.h); a warp XORs its threads' parts and adds them to out[row] with one
// atomicXor. Everything is queued on `stream`: out is valid once the stream reaches that point.
#pragma once

#include <cstdint>

namespace openlake::cuda {

// The longest row: chunks (4 KiB) per row are limited by the table of shift constants.
inline constexpr uint64_t kCrc64RowsMaxRowBytes = uint64_t{64} << 20;

// Queues, on `stream` (a cudaStream_t; null is the default stream), out[i] = CRC-64/XZ of the
// row_bytes bytes at data + i·row_bytes, for i in [0, rows). Returns 0 or a cudaError_t (a
// launch error, or cudaErrorInvalidValue for a row longer than kCrc64RowsMaxRowBytes or more
// than 2^31 - 1 rows). The first call on a device also uploads 144 KiB of tables to it
// (synchronously, once per device and process).
// REQUIRES: data and out are addressable by the current device; out does not overlap data.
int Crc64RowsDevice(const void* data, uint64_t row_bytes, uint64_t rows, uint64_t* out,
                    void* stream);

// The CUDA runtime's name and description of an error returned above.
const char* Crc64RowsErrorString(int err);

}  // namespace openlake::cuda

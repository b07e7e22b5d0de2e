// The CRC-64/XZ of rows in GPU memory; see crc64_rows.h. The per-chunk code and the tables are
// the host reference's (common/crc64_chunks.h, common/crc64_combine.h), which the CPU tests
// check against ISA-L.
#include "cuda/crc64_rows.h"

#include <cuda_runtime.h>

#include <mutex>
#include <set>
#include <vector>

#include "common/crc64_chunks.h"
#include "common/crc64_combine.h"

namespace openlake::cuda {
namespace {

constexpr uint64_t kChunk = 4096;  // bytes per thread: 1 MiB rows fill a 256-thread block
constexpr unsigned kThreads = 256;
constexpr uint64_t kMaxChunks = kCrc64RowsMaxRowBytes / kChunk;
constexpr int kTableWords = kCrc64SliceTables * 256;

// Uploaded once per device (EnsureTables): the slicing-by-8 tables, and shifts[j] =
// x^(8·kChunk·j) mod P, the constant that places a chunk followed by j chunks in its row's CRC.
__device__ uint64_t g_tables[kTableWords];
__device__ uint64_t g_shifts[kMaxChunks];

// Grid: x = row, y = group of kThreads chunks of that row (so a warp never spans two rows).
__global__ void __launch_bounds__(kThreads)
    Crc64RowsKernel(const uint8_t* __restrict__ data, uint64_t row_bytes, Crc64Chunking c,
                    unsigned long long* __restrict__ out) {
  // 16 KiB per block: the tables' lookups are data-dependent, shared memory serves them.
  __shared__ uint64_t tables[kTableWords];
  for (int i = threadIdx.x; i < kTableWords; i += kThreads) tables[i] = g_tables[i];
  __syncthreads();
  const uint64_t row = blockIdx.x;
  const uint64_t k = uint64_t{blockIdx.y} * kThreads + threadIdx.x;
  uint64_t crc = 0;
  if (k < c.chunks) {
    uint64_t begin = 0, len = 0;
    Crc64ChunkOf(c, kChunk, k, &begin, &len);
    const uint64_t own = Crc64Slice8(tables, data + row * row_bytes + begin, len);
    crc = Crc64MultModP(g_shifts[c.chunks - 1 - k], own);
  }
  // The row's CRC is the XOR of its chunks' shifted CRCs: reduce the warp, then one atomic.
  for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1) {
    crc ^= __shfl_xor_sync(0xffffffffu, crc, lane_mask);
  }
  if ((threadIdx.x & 31) == 0 && crc != 0) atomicXor(&out[row], crc);
}

std::mutex g_mu;
std::set<int>* g_ready = new std::set<int>;  // devices holding the tables; never destroyed

int EnsureTables() {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_ready->count(device) != 0) return cudaSuccess;
  std::vector<uint64_t> tables(kTableWords);
  Crc64SliceTablesInit(reinterpret_cast<uint64_t(*)[256]>(tables.data()));
  const std::vector<uint64_t> shifts = Crc64ChunkShifts(kChunk, kMaxChunks);
  err = cudaMemcpyToSymbol(g_tables, tables.data(), tables.size() * sizeof(uint64_t));
  if (err == cudaSuccess) {
    err = cudaMemcpyToSymbol(g_shifts, shifts.data(), shifts.size() * sizeof(uint64_t));
  }
  if (err == cudaSuccess) g_ready->insert(device);
  return err;
}

}  // namespace

int Crc64RowsDevice(const void* data, uint64_t row_bytes, uint64_t rows, uint64_t* out,
                    void* stream) {
  if (row_bytes > kCrc64RowsMaxRowBytes || rows > 0x7fffffffu) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (int err = EnsureTables(); err != cudaSuccess) return err;
  auto s = static_cast<cudaStream_t>(stream);
  // The CRC-64/XZ of an empty row is 0, and the kernel XORs into zeroed results.
  cudaError_t err = cudaMemsetAsync(out, 0, rows * sizeof(uint64_t), s);
  if (err != cudaSuccess || row_bytes == 0) return err;
  const Crc64Chunking c = Crc64ChunkingOf(row_bytes, kChunk);
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>((c.chunks + kThreads - 1) / kThreads));
  Crc64RowsKernel<<<grid, kThreads, 0, s>>>(static_cast<const uint8_t*>(data), row_bytes, c,
                                            reinterpret_cast<unsigned long long*>(out));
  return cudaGetLastError();
}

const char* Crc64RowsErrorString(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}

}  // namespace openlake::cuda

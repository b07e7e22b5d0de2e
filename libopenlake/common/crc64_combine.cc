#include "common/crc64_combine.h"

namespace openlake {

namespace {

// x^(2^k) mod P for k in [0, 64): repeated squaring of x.
struct PowersOfTwo {
  uint64_t x2k[64];
  PowersOfTwo() {
    uint64_t p = 1ull << 62;  // x^1
    for (auto& e : x2k) {
      e = p;
      p = Crc64MultModP(p, p);
    }
  }
};

}  // namespace

uint64_t Crc64X8N(uint64_t n) {
  static const PowersOfTwo table;
  // x^(8n) = x^(n·2^3): square-and-multiply over n's bits, starting at x^(2^3).
  uint64_t p = 1ull << 63;  // x^0
  for (int k = 3; n != 0; n >>= 1, ++k) {
    if (n & 1) p = Crc64MultModP(table.x2k[k & 63], p);
  }
  return p;
}

uint64_t Crc64Combine(uint64_t crc_a, uint64_t crc_b, uint64_t len_b) {
  return Crc64MultModP(Crc64X8N(len_b), crc_a) ^ crc_b;
}

void Crc64SliceTablesInit(uint64_t (*tables)[256]) {
  for (uint64_t i = 0; i < 256; ++i) {
    uint64_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? (c >> 1) ^ kCrc64Poly : c >> 1;
    tables[0][i] = c;
  }
  for (int t = 1; t < kCrc64SliceTables; ++t) {
    for (int i = 0; i < 256; ++i) {
      const uint64_t prev = tables[t - 1][i];
      tables[t][i] = tables[0][prev & 0xff] ^ (prev >> 8);
    }
  }
}

std::vector<uint64_t> Crc64ChunkShifts(uint64_t chunk, size_t count) {
  std::vector<uint64_t> shifts(count);
  const uint64_t step = Crc64X8N(chunk);
  uint64_t p = 1ull << 63;  // x^0
  for (auto& s : shifts) {
    s = p;
    p = Crc64MultModP(step, p);
  }
  return shifts;
}

uint64_t Crc64Chunked(const void* data, size_t len, uint64_t chunk) {
  static const auto* tables = [] {
    auto* t = new uint64_t[kCrc64SliceTables][256];
    Crc64SliceTablesInit(t);
    return t;
  }();
  if (len == 0) return 0;  // CRC-64/XZ of nothing
  const Crc64Chunking c = Crc64ChunkingOf(len, chunk);
  const std::vector<uint64_t> shifts = Crc64ChunkShifts(chunk, c.chunks);
  const auto* row = static_cast<const uint8_t*>(data);
  uint64_t crc = 0;
  for (uint64_t k = 0; k < c.chunks; ++k) {
    uint64_t begin = 0, n = 0;
    Crc64ChunkOf(c, chunk, k, &begin, &n);
    const uint64_t own = Crc64Slice8(&tables[0][0], row + begin, n);
    crc ^= Crc64MultModP(shifts[c.chunks - 1 - k], own);
  }
  return crc;
}

}  // namespace openlake

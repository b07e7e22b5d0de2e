// The GPU checksum's math on the CPU: chunks checksummed on their own (slicing-by-8) and
// combined by shifts must give exactly ISA-L's CRC-64/XZ. Runs without a GPU; the kernel
// (libopenlake/cuda/crc64_rows.cu) runs the same per-chunk code with the same tables.
#include "common/crc64_combine.h"

#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "openlake/checksum.h"

namespace {

std::vector<uint8_t> RandomBytes(size_t len, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(len);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

}  // namespace

TEST_CASE("Slicing-by-8 gives the CRC-64/XZ check value", "[crc64]") {
  uint64_t tables[openlake::kCrc64SliceTables][256];
  openlake::Crc64SliceTablesInit(tables);
  const auto* s = reinterpret_cast<const uint8_t*>("123456789");
  CHECK(openlake::Crc64Slice8(&tables[0][0], s, 9) == 0x995DC9BBDF1939FAull);
  CHECK(openlake::Crc64Chunked(s, 9, 4) == 0x995DC9BBDF1939FAull);
  CHECK(openlake::Crc64Chunked(s, 9, 1) == 0x995DC9BBDF1939FAull);
}

TEST_CASE("Crc64Combine joins two pieces' CRCs", "[crc64]") {
  const auto v = RandomBytes(10000, 1);
  for (size_t cut : {size_t{0}, size_t{1}, size_t{7}, size_t{4096}, size_t{9999}, size_t{10000}}) {
    const uint64_t a = openlake::Crc64(v.data(), cut);
    const uint64_t b = openlake::Crc64(v.data() + cut, v.size() - cut);
    CHECK(openlake::Crc64Combine(a, b, v.size() - cut) == openlake::Crc64(v.data(), v.size()));
  }
}

TEST_CASE("x^(8n) mod P: products of powers add exponents", "[crc64]") {
  CHECK(openlake::Crc64X8N(0) == 1ull << 63);
  for (uint64_t a : {1ull, 5ull, 4096ull, 123457ull}) {
    for (uint64_t b : {0ull, 3ull, 2097152ull}) {
      CHECK(openlake::Crc64MultModP(openlake::Crc64X8N(a), openlake::Crc64X8N(b)) ==
            openlake::Crc64X8N(a + b));
    }
  }
  const auto shifts = openlake::Crc64ChunkShifts(4096, 5);
  for (size_t j = 0; j < shifts.size(); ++j) CHECK(shifts[j] == openlake::Crc64X8N(4096 * j));
}

TEST_CASE("Chunked and combined CRC equals ISA-L's for rows of many sizes", "[crc64]") {
  uint64_t seed = 11;
  for (size_t len : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{4095}, size_t{4096},
                     size_t{4097}, size_t{12289}, size_t{65536 + 13}, size_t{1000003},
                     size_t{2} << 20, (size_t{2} << 20) + 3}) {
    const auto v = RandomBytes(len, ++seed);
    const uint64_t want = openlake::Crc64(v.data(), len);
    INFO("len " << len);
    CHECK(openlake::Crc64Chunked(v.data(), len, 4096) == want);
    CHECK(openlake::Crc64Chunked(v.data(), len, 1000) == want);
    // A row that does not start on an 8-byte boundary (the kernel's byte loop).
    if (len > 3) CHECK(openlake::Crc64Chunked(v.data() + 3, len - 3, 4096) ==
                       openlake::Crc64(v.data() + 3, len - 3));
  }
  CHECK(openlake::Crc64Chunked(nullptr, 0, 4096) == openlake::Crc64(nullptr, 0));
}

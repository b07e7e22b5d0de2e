#include "openlake/checksum.h"

#include <random>
#include <vector>

#include <catch2/catch.hpp>

TEST_CASE("CRC-64/XZ check value", "[checksum]") {
  const char* s = "123456789";
  CHECK(openlake::Crc64(s, 9) == 0x995DC9BBDF1939FAull);  // the catalogue's check value
}

TEST_CASE("CRC chains over pieces and CopyWithCrc64 copies exactly", "[checksum]") {
  std::mt19937_64 rng(7);
  for (size_t len :
       {size_t{0}, size_t{1}, size_t{4095}, size_t{32768}, size_t{100001}, size_t{2} << 20}) {
    std::vector<uint8_t> src(len), dst(len, 0);
    for (auto& b : src) b = static_cast<uint8_t>(rng());
    const uint64_t whole = openlake::Crc64(src.data(), len);
    const size_t cut = len / 3;
    CHECK(openlake::Crc64(src.data() + cut, len - cut, openlake::Crc64(src.data(), cut)) == whole);
    CHECK(openlake::CopyWithCrc64(dst.data(), src.data(), len) == whole);
    CHECK(dst == src);
  }
}

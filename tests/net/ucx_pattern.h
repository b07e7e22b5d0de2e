// The bytes ucx_peer serves: byte i of its region, so a test can check any range it read.
#pragma once

#include <cstddef>
#include <cstdint>

namespace openlake::test {

inline unsigned char UcxPattern(size_t i) {
  return static_cast<unsigned char>((i * 131) ^ (i >> 9) ^ (i >> 17));
}

}  // namespace openlake::test

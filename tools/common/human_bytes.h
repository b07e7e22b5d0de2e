// Byte counts for people, shared by the tools (openlaked's start-up lines, the openlake CLI).
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/str_format.h"

namespace openlake::tools {

// "512 B", "1.5 GiB" (binary units, one decimal).
inline std::string HumanBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrFormat("%d B", bytes) : absl::StrFormat("%.1f %s", v, units[u]);
}

}  // namespace openlake::tools

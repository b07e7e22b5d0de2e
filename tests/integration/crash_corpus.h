// What the crash child (store_crash_child) writes: every body is a pure function of the
// operation and a seed, so the checker can tell a whole object from a partial or mixed one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/store_test_util.h"

namespace openlake::testing {

// kSmall overwrites one of a few keys with a body under the inline threshold: its record is
// packed (docs/object-store.md, "Packed records").
enum class CrashOp : int { kPut = 0, kOverwrite = 1, kMultipart = 2, kDelete = 3, kSmall = 4 };

// The parts of a multipart object (2 or 3; all but the last at least 64 KiB).
inline std::vector<std::string> CrashParts(uint32_t seed) {
  std::vector<std::string> parts;
  const int n = 2 + static_cast<int>(seed % 2);
  for (int i = 0; i < n; ++i) {
    const size_t size = i + 1 < n ? (64u << 10) + (seed * 7919u + i * 104729u) % 65536u
                                  : 1 + (seed * 31u) % 70000u;
    parts.push_back(RandomBytes(size, seed * 16 + static_cast<uint32_t>(i)));
  }
  return parts;
}

// The whole body an operation stores.
inline std::string CrashBody(CrashOp op, uint32_t seed) {
  switch (op) {
    case CrashOp::kPut:
      return RandomBytes((seed * 2654435761u) % 600001u, seed);
    case CrashOp::kOverwrite:
      return RandomBytes((seed * 40503u) % 300001u, seed);
    case CrashOp::kSmall:
      return RandomBytes((seed * 7919u) % 12001u, seed);
    case CrashOp::kMultipart: {
      std::string all;
      for (const auto& p : CrashParts(seed)) all += p;
      return all;
    }
    case CrashOp::kDelete:
      break;
  }
  return {};
}

// The store's layout in the crash test: one set of four drives, RS(2+2), small blocks so that
// objects span many of them.
inline store::StoreOptions CrashStoreOptions(const std::vector<std::string>& drives) {
  store::StoreOptions o;
  o.drives = drives;
  o.set_drive_count = 4;
  o.parity = 2;
  o.block_size = 64 << 10;
  o.inline_threshold = 16 << 10;
  o.min_part_size = 64 << 10;
  return o;
}

}  // namespace openlake::testing

// File: openlake/version.h
//
// The library's version, for `openlake version`, the RPC hello and the Python module.
#pragma once

#include <string_view>
#include <vector>

#include "openlake/export.h"

namespace openlake {

// "MAJOR.MINOR.PATCH", the version the library was built as.
OL_EXPORT std::string_view Version();

// One optional part of the library and whether this build has it.
struct BuildFeature {
  std::string_view name;         // "rdma", "ucx"
  std::string_view description;  // "RDMA transport (ibverbs)"
  bool enabled = false;
};

// The optional parts of this build, in a fixed order (for `openlake version`).
OL_EXPORT std::vector<BuildFeature> BuildFeatures();

}  // namespace openlake

// File: openlake/version.h
//
// The library's version, for `openlake version`, the RPC hello and the Python module.
#pragma once

#include <string_view>

#include "openlake/export.h"

namespace openlake {

// "MAJOR.MINOR.PATCH", the version the library was built as.
OL_EXPORT std::string_view Version();

}  // namespace openlake

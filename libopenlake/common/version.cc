#include "openlake/version.h"

#include "common/strings.h"
#include "config.h"

namespace openlake {

std::string_view Version() { return OL_VERSION_STRING; }

}  // namespace openlake

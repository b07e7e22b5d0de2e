#include "common/strings.h"
#include "openlake/version.h"

#include "config.h"

namespace openlake {

std::string_view Version() { return OL_VERSION_STRING; }

}  // namespace openlake

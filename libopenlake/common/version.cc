#include "openlake/version.h"

#include "config.h"

#include "openlake/strings.h"

namespace openlake {

std::string_view Version() { return OL_VERSION_STRING; }

std::vector<BuildFeature> BuildFeatures() {
  return {
      {"rdma", "RDMA transport (ibverbs)", OL_HAVE_RDMA != 0},
      {"ucx", "UCX transport", OL_HAVE_UCX != 0},
  };
}

}  // namespace openlake

// Making engine errors: a canonical code chosen from the kind, the kind attached as a payload.
#pragma once

#include <string>

#include "absl/status/status.h"

#include "openlake/store/store.h"

namespace openlake::store {

absl::Status Error(ErrorKind kind, std::string message);
// kDeleteMarker, naming the marker's S3 version id (VersionIdOf).
absl::Status DeleteMarkerError(std::string_view version_id, std::string message);

// The same status with `context: ` in front of its message (kind kept).
absl::Status Annotate(const absl::Status& s, std::string_view context);

}  // namespace openlake::store

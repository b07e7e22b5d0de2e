// What a drive folder holds, as the store reads it at start (engine_open.cc) and as
// InspectDrive reports it: whether the folder exists, its identity (format.json, protobuf JSON
// of pb::DriveFormat) when it has a valid one, else whether it is empty enough to format. Reads
// only; logs nothing (the caller says what it makes of the result).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "store/store.pb.h"

#include "openlake/store/file_backend.h"
#include "openlake/store/store.h"

namespace openlake::store {

struct DriveProbe {
  std::string path;
  std::unique_ptr<FileBackend> fs;  // null when the folder is missing
  // kOk with a valid `format`, kUnformattedEmpty, kUnformattedNonempty, kCorruptFormat,
  // kMissing or kError.
  DriveState state = DriveState::kMissing;
  std::string detail;
  pb::DriveFormat format;
};

// Probes `path` through a backend from `factory` (the store's fault seam; InspectDrive uses the
// local one).
DriveProbe ProbeDrive(const std::string& path, const FileBackendFactory& factory);

// Reads format.json's bytes into `out`: false unless they are an OpenLake drive identity
// (protobuf JSON, format "openlake", version 1, a deployment id). Unknown fields are ignored.
bool ParseDriveFormat(std::string_view json, pb::DriveFormat* out);

// A drive's identity as format.json holds it (always every field, protobuf JSON names).
std::string FormatJson(const pb::DriveFormat& f);

}  // namespace openlake::store

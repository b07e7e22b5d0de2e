// Probing a drive folder (see drive_probe.h) and InspectDrive (openlake/store/store.h).
#include "store/drive_probe.h"

#include <fcntl.h>
#include <google/protobuf/util/json_util.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "store/names.h"

#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::store {
namespace {

// True when the folder holds nothing but what a fresh file system or an earlier, interrupted
// format may have left.
bool LooksEmpty(FileBackend& fs) {
  auto entries = fs.ReadDir("");
  if (!entries.ok()) return false;
  for (const DirEntry& e : *entries) {
    if (e.name == "lost+found") continue;
    if (e.name == kSysDir) {
      auto exists = fs.Exists(kFormatFile);
      if (exists.ok() && !*exists) continue;  // a half-made system folder
    }
    return false;
  }
  return true;
}

// The bytes of format.json; NotFound when there is none. A plain blocking read: this runs
// before any reactor serves the drive (or beside a daemon, from the CLI).
absl::StatusOr<std::string> ReadFormatFile(FileBackend& fs, const std::string& root) {
  OL_ASSIGN_OR_RETURN(bool exists, fs.Exists(kFormatFile));
  if (!exists) return absl::NotFoundError("no format");
  const std::string path = StrCat(root, "/", kFormatFile);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, StrCat("open ", path));
  std::string s(65536, '\0');
  const ssize_t n = pread(fd, s.data(), s.size(), 0);
  close(fd);
  if (n < 0) return ErrnoStatus(errno, StrCat("read ", path));
  s.resize(static_cast<size_t>(n));
  return s;
}

}  // namespace

std::string FormatJson(const pb::DriveFormat& f) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.preserve_proto_field_names = true;
  o.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(f, &out, o);
  return out;
}

bool ParseDriveFormat(std::string_view json, pb::DriveFormat* out) {
  google::protobuf::util::JsonParseOptions jo;
  jo.ignore_unknown_fields = true;
  out->Clear();
  return google::protobuf::util::JsonStringToMessage(json, out, jo).ok() &&
         out->format() == "openlake" && out->version() == 1 && !out->deployment_id().empty();
}

DriveProbe ProbeDrive(const std::string& path, const FileBackendFactory& factory) {
  DriveProbe p;
  p.path = path;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    p.state = DriveState::kMissing;
    p.detail = std::strerror(errno);
    return p;
  }
  if (!S_ISDIR(st.st_mode)) {
    p.state = DriveState::kMissing;
    p.detail = "not a folder";
    return p;
  }
  p.fs = factory ? factory(path) : NewLocalFileBackend(path);
  absl::StatusOr<std::string> bytes = ReadFormatFile(*p.fs, path);
  if (bytes.ok()) {
    if (ParseDriveFormat(*bytes, &p.format)) {
      p.state = DriveState::kOk;
    } else {
      p.state = DriveState::kCorruptFormat;
      p.detail = StrCat(path, "/", kFormatFile, " is not a valid OpenLake drive identity");
    }
  } else if (absl::IsNotFound(bytes.status())) {
    if (LooksEmpty(*p.fs)) {
      p.state = DriveState::kUnformattedEmpty;
    } else {
      p.state = DriveState::kUnformattedNonempty;
      p.detail = "holds files but no OpenLake identity; the object store will not format it";
    }
  } else {
    p.state = DriveState::kError;
    p.detail = std::string(bytes.status().message());
  }
  return p;
}

std::string_view DriveStateName(DriveState state) {
  switch (state) {
    case DriveState::kOk:
      return "ok";
    case DriveState::kReplaced:
      return "replaced";
    case DriveState::kMissing:
      return "missing";
    case DriveState::kUnformattedEmpty:
      return "unformatted-empty";
    case DriveState::kUnformattedNonempty:
      return "unformatted-nonempty";
    case DriveState::kCorruptFormat:
      return "corrupt-format";
    case DriveState::kForeign:
      return "foreign";
    case DriveState::kDuplicate:
      return "duplicate";
    case DriveState::kSpare:
      return "spare";
    case DriveState::kError:
      return "error";
  }
  return "error";
}

DriveInspection InspectDrive(const std::string& path) {
  DriveProbe p = ProbeDrive(path, nullptr);
  DriveInspection r;
  r.path = path;
  r.exists = p.fs != nullptr;
  r.state = p.state;
  r.detail = p.detail;
  if (p.state == DriveState::kOk) {
    DriveIdentity id;
    id.deployment_id = p.format.deployment_id();
    id.drive_id = p.format.drive_id();
    id.set_count = p.format.set_count();
    id.set_drive_count = p.format.set_drive_count();
    id.set_index = p.format.set_index();
    id.position = p.format.position();
    id.node_id = p.format.node_id();
    id.layout = p.format.layout();
    r.identity = std::move(id);
  }
  struct statvfs vfs;
  if (r.exists && statvfs(path.c_str(), &vfs) == 0) {
    r.capacity_bytes = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
    r.free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  }
  return r;
}

}  // namespace openlake::store

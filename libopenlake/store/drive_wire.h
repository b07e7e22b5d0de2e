// The drive RPC's methods and its raw encodings (docs/object-store.md, "Remote drives"). Shared
// by the service (drive_service.cc) and the client (remote_drive.cc).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace openlake::store {

// Method numbers (the KV pool has 1..13, the node status 256).
enum DriveMethod : uint16_t {
  kDriveHello = 512,
  kDriveReadFile = 513,
  kDriveWriteFile = 514,
  kDriveMakeDirs = 515,
  kDriveReadDir = 516,
  kDriveExists = 517,
  kDriveRename = 518,
  kDriveLinkInto = 519,
  kDriveUnlink = 520,
  kDriveRemoveDir = 521,
  kDriveTrash = 522,
  kDriveSyncDir = 523,
  kDriveUsage = 524,
  kDriveCommit = 525,
  kDriveRemoveObject = 526,
  kDriveWalk = 527,
  kDriveVerify = 528,
  kDriveOpen = 529,
  kDriveFileRead = 530,   // raw: handle u64, offset u64, length u32 → the bytes
  kDriveFileWrite = 531,  // raw: handle u64, offset u64, then the bytes → written u32
  kDriveFileSync = 532,   // raw: handle u64
  kDriveFileClose = 533,  // raw: handle u64
  kDriveProbe = 534,      // DrivePath → DriveProbed
  kDriveFormat = 535,     // DriveFormatRequest
};

inline void PutU64(std::string* out, uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);  // little-endian hosts only (the frame header assumes it too)
  out->append(b, 8);
}
inline void PutU32(std::string* out, uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);
  out->append(b, 4);
}
inline bool GetU64(std::string_view* in, uint64_t* v) {
  if (in->size() < 8) return false;
  std::memcpy(v, in->data(), 8);
  in->remove_prefix(8);
  return true;
}
inline bool GetU32(std::string_view* in, uint32_t* v) {
  if (in->size() < 4) return false;
  std::memcpy(v, in->data(), 4);
  in->remove_prefix(4);
  return true;
}

// An engine error's kind crosses the wire in front of its message ("[kind N] ..."), so that a
// remote drive's NoSuchBucket is the engine's NoSuchBucket again.
std::string EncodeDriveError(const absl::Status& s);
absl::Status DecodeDriveError(const absl::Status& s);

}  // namespace openlake::store

#include "store/errors.h"

#include "absl/strings/cord.h"

#include "openlake/strings.h"

namespace openlake::store {
namespace {

constexpr char kPayloadUrl[] = "openlake.store/kind";
constexpr char kVersionUrl[] = "openlake.store/version";

absl::StatusCode CodeOf(ErrorKind k) {
  switch (k) {
    case ErrorKind::kNone: return absl::StatusCode::kUnknown;
    case ErrorKind::kNoSuchBucket:
    case ErrorKind::kNoSuchKey:
    case ErrorKind::kNoSuchUpload:
    case ErrorKind::kNoSuchVersion:
    case ErrorKind::kDeleteMarker: return absl::StatusCode::kNotFound;
    case ErrorKind::kInvalidVersionId: return absl::StatusCode::kInvalidArgument;
    case ErrorKind::kBucketExists: return absl::StatusCode::kAlreadyExists;
    case ErrorKind::kBucketNotEmpty:
    case ErrorKind::kPreconditionFailed:
    case ErrorKind::kNotModified: return absl::StatusCode::kFailedPrecondition;
    case ErrorKind::kInvalidBucketName:
    case ErrorKind::kInvalidObjectName:
    case ErrorKind::kInvalidPart:
    case ErrorKind::kInvalidPartOrder:
    case ErrorKind::kEntityTooSmall:
    case ErrorKind::kEntityTooLarge: return absl::StatusCode::kInvalidArgument;
    case ErrorKind::kInvalidRange: return absl::StatusCode::kOutOfRange;
    case ErrorKind::kConditionalConflict: return absl::StatusCode::kAborted;
    case ErrorKind::kInsufficientDrives: return absl::StatusCode::kUnavailable;
    case ErrorKind::kCorrupt: return absl::StatusCode::kDataLoss;
    case ErrorKind::kStorageFull:
      return absl::StatusCode::kResourceExhausted;
  }
  return absl::StatusCode::kUnknown;
}

}  // namespace

absl::Status Error(ErrorKind kind, std::string message) {
  absl::Status s(CodeOf(kind), AV(message));
  s.SetPayload(kPayloadUrl, absl::Cord(std::to_string(static_cast<int>(kind))));
  return s;
}

absl::Status Annotate(const absl::Status& s, std::string_view context) {
  if (s.ok()) return s;
  absl::Status out(s.code(), AV(StrCat(context, ": ", s.message())));
  s.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    out.SetPayload(url, payload);
  });
  return out;
}

ErrorKind ErrorKindOf(const absl::Status& s) {
  if (s.ok()) return ErrorKind::kNone;
  auto p = s.GetPayload(kPayloadUrl);
  if (!p) return ErrorKind::kNone;
  const int v = std::atoi(std::string(*p).c_str());
  if (v < 0 || v > static_cast<int>(ErrorKind::kInvalidVersionId)) return ErrorKind::kNone;
  return static_cast<ErrorKind>(v);
}

std::string_view ErrorKindName(ErrorKind k) {
  switch (k) {
    case ErrorKind::kNone: return "None";
    case ErrorKind::kNoSuchBucket: return "NoSuchBucket";
    case ErrorKind::kNoSuchKey: return "NoSuchKey";
    case ErrorKind::kNoSuchUpload: return "NoSuchUpload";
    case ErrorKind::kBucketExists: return "BucketAlreadyExists";
    case ErrorKind::kBucketNotEmpty: return "BucketNotEmpty";
    case ErrorKind::kInvalidBucketName: return "InvalidBucketName";
    case ErrorKind::kInvalidObjectName: return "InvalidObjectName";
    case ErrorKind::kInvalidPart: return "InvalidPart";
    case ErrorKind::kInvalidPartOrder: return "InvalidPartOrder";
    case ErrorKind::kEntityTooSmall: return "EntityTooSmall";
    case ErrorKind::kEntityTooLarge: return "EntityTooLarge";
    case ErrorKind::kInvalidRange: return "InvalidRange";
    case ErrorKind::kPreconditionFailed: return "PreconditionFailed";
    case ErrorKind::kNotModified: return "NotModified";
    case ErrorKind::kConditionalConflict: return "ConditionalConflict";
    case ErrorKind::kInsufficientDrives: return "InsufficientDrives";
    case ErrorKind::kCorrupt: return "Corrupt";
    case ErrorKind::kStorageFull: return "StorageFull";
    case ErrorKind::kNoSuchVersion: return "NoSuchVersion";
    case ErrorKind::kDeleteMarker: return "DeleteMarker";
    case ErrorKind::kInvalidVersionId:
      return "InvalidVersionId";
  }
  return "Unknown";
}

absl::Status DeleteMarkerError(std::string_view version_id, std::string message) {
  absl::Status s = Error(ErrorKind::kDeleteMarker, std::move(message));
  s.SetPayload(kVersionUrl, absl::Cord(AV(version_id)));
  return s;
}

std::string VersionIdOf(const absl::Status& s) {
  auto p = s.GetPayload(kVersionUrl);
  return p ? std::string(*p) : std::string();
}

}  // namespace openlake::store

// Bucket names, object keys and where they live on a drive.
//
// Object keys become folder paths: key "a/b/c" is the folder <bucket>/a/b/c holding the
// metadata file "%meta" (and, for a large object, its data folder "%data.<version>"). Each key
// segment is escaped so it can neither name the engine's own entries nor leave the bucket's
// folder: '%' is written "%25", NUL "%00", an empty segment ("a/", "a//b", "/a") "%", and the
// segments "." and ".." "%2E" and "%2E%2E". A segment whose escape is longer than a file name
// (255 bytes; S3 has no such limit) is cut into pieces of at most 200 bytes, never inside an
// escape, each but the last a folder named "%+<piece>" holding the next: the segment is the
// pieces joined. Every other on-disk name that starts with '%' and is not an escape is the
// engine's, and a listing walk can tell keys from metadata without a table. Any S3 key maps
// this way.
//
// Validation refuses only what S3 refuses: an empty or over-long key (1024 bytes), and invalid
// UTF-8.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace openlake::store {

inline constexpr std::string_view kSysDir = ".openlake.sys";
inline constexpr std::string_view kFormatFile = ".openlake.sys/format.json";
inline constexpr std::string_view kTmpDir = ".openlake.sys/tmp";
inline constexpr std::string_view kTrashDir = ".openlake.sys/trash";
inline constexpr std::string_view kBucketMetaDir = ".openlake.sys/buckets";
inline constexpr std::string_view kMultipartDir = ".openlake.sys/multipart";
inline constexpr std::string_view kJournalDir = ".openlake.sys/journal";
inline constexpr std::string_view kMetaName = "%meta";
inline constexpr std::string_view kDataPrefix = "%data.";
inline constexpr size_t kMaxKeyBytes = 1024;
inline constexpr size_t kMaxSegmentBytes = 255;      // of one on-disk name
inline constexpr size_t kPieceBytes = 200;           // of a long segment's piece (see above)
inline constexpr std::string_view kContinuation = "%+";

// S3 bucket rules: 3–63 of [a-z0-9.-], starting and ending with a letter or digit, no "..",
// ".-" or "-.", not an IPv4 address; "openlake" is reserved (admin routes).
absl::Status ValidateBucketName(std::string_view bucket);
absl::Status ValidateObjectKey(std::string_view key);
// A key prefix (listing): may be empty; otherwise as a key, except that it may end anywhere.
absl::Status ValidatePrefix(std::string_view prefix);

std::string EscapeSegment(std::string_view segment);
// True for the folder of a long segment's piece ("%+<piece>"): the segment goes on inside it.
bool IsContinuation(std::string_view name);
// The segment an on-disk name stands for; false for the engine's own names ("%meta", ...).
bool UnescapeSegment(std::string_view name, std::string* segment);

// "<bucket>/<escaped segments>" — the object's folder. REQUIRES: validated names.
std::string ObjectDir(std::string_view bucket, std::string_view key);
// The folder holding keys that start with `dir_prefix`, which ends in '/' or is empty.
std::string PrefixDir(std::string_view bucket, std::string_view dir_prefix);
std::string MetaPath(std::string_view bucket, std::string_view key);
std::string DataDirName(std::string_view version_hex);

std::string BucketMetaPath(std::string_view bucket);
std::string UploadDir(std::string_view bucket, std::string_view upload_id);

// True for a valid upload id (hex of 16 bytes): it becomes a folder name.
bool ValidUploadId(std::string_view id);

}  // namespace openlake::store

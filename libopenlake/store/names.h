// Bucket names, object keys and where they live on a drive.
//
// Object keys become folder paths: key "a/b/c" is the folder <bucket>/a/b/c holding the
// metadata file "%meta" (and, for a large object, its data folder "%data.<version>"). Each key
// segment is escaped so it can never name the engine's own entries: '%' is written "%25" and
// the empty segment of a key that ends in '/' is written "%". Every on-disk name that starts
// with '%' and is not an escape is therefore the engine's, and a listing walk can tell keys
// from metadata without a table.
//
// Validation refuses whatever could leave the bucket's folder or cannot be stored: an empty or
// over-long key (1024 bytes), NUL, invalid UTF-8, a leading '/', empty segments inside the
// key ("a//b"), "." and ".." segments, and a segment longer than a file name once escaped.
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
inline constexpr std::string_view kMetaName = "%meta";
inline constexpr std::string_view kDataPrefix = "%data.";
inline constexpr size_t kMaxKeyBytes = 1024;
inline constexpr size_t kMaxSegmentBytes = 255;

// S3 bucket rules: 3–63 of [a-z0-9.-], starting and ending with a letter or digit, no "..",
// ".-" or "-.", not an IPv4 address; "openlake" is reserved (admin routes).
absl::Status ValidateBucketName(std::string_view bucket);
absl::Status ValidateObjectKey(std::string_view key);
// A key prefix (listing): may be empty; otherwise as a key, except that it may end anywhere.
absl::Status ValidatePrefix(std::string_view prefix);

std::string EscapeSegment(std::string_view segment);
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

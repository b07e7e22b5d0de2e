// The envelope every engine record is written in, and helpers around object metadata.
//
// Envelope (little-endian): "OLMD" | u16 format version (1) | u16 record type | u32 body
// length | u64 CRC-64 of the 12 bytes before it and the body | protobuf body. Decode refuses a
// wrong magic, an unknown version, a different record type, a length that does not match the
// file, and a checksum mismatch (DataLoss): a torn write or a flipped bit in metadata is found
// before any field is believed. Inline shards live inside the body, so they are covered too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "store/store.pb.h"

#include "openlake/store/store.h"

namespace openlake::store {

enum class RecordType : uint16_t {
  kObjectMeta = 1,
  kBucketMeta = 2,
  kUploadMeta = 3,
  kPartMeta = 4,
  kJournalEntry = 5,
  kJournalHeader = 6,
  kPackEntry = 7,
};

inline constexpr uint16_t kMetaFormatVersion = 1;
inline constexpr size_t kEnvelopeHeader = 20;

std::string EncodeRecord(RecordType type, const google::protobuf::MessageLite& msg);
absl::Status DecodeRecord(RecordType type, std::string_view bytes,
                          google::protobuf::MessageLite* msg);
// The whole size of the record that starts `bytes` (envelope and body), from its header;
// 0 when `bytes` does not start with one. For records written back to back (the journal).
size_t RecordSizeAt(std::string_view bytes);

// Checks that a version read from a drive is whole and consistent before the engine believes
// it (a record's checksum proves only that it was written whole, not that the writer was
// ours): k + m equals the set's `set_drives`, shard index and rotation lie in the set, and a
// version kept in shard files has parts whose sizes add up to the object's, one checksum per
// shard block and a plain file name (no path). DataLoss names the first field that is wrong.
absl::Status CheckVersion(const pb::ObjectVersion& v, int set_drives);

// 16 random bytes.
std::string NewVersionId();

int64_t NowNs();
inline absl::Time FromNs(int64_t ns) { return absl::FromUnixNanos(ns); }

// The public view of a version.
ObjectInfo ToObjectInfo(std::string_view bucket, std::string_view key,
                        const pb::ObjectVersion& v);

// The S3 identity of a version: "" for the null version, else the 16 bytes of its S3 version
// id. Of the records a drive holds with one identity, only the newest is that version (a null
// write, and UpdateObjectMeta, replace the record of their identity).
std::string IdentityOf(const pb::ObjectVersion& v);
// The S3 version id clients see: "null", or the identity in hex.
std::string S3VersionIdOf(const pb::ObjectVersion& v);
// The identity an S3 version id names: nullopt for "" (the current version), "" for "null",
// else 16 bytes; InvalidVersionId for anything else.
absl::StatusOr<std::optional<std::string>> ParseVersionId(std::string_view id);

// True when a and b describe the same write (same id and the fields every drive shares).
bool SameVersion(const pb::ObjectVersion& a, const pb::ObjectVersion& b);
// The id of the version whose data folder holds `v`'s shards: its own, or the one it shares
// them with (ObjectVersion.data_id).
const std::string& DataIdOf(const pb::ObjectVersion& v);
// The name of that data folder ("%data.<hex>").
std::string DataDirOf(const pb::ObjectVersion& v);

}  // namespace openlake::store

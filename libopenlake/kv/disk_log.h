// The disk tier's index log: the records that say which block lives where in a path's data
// file. Specified in prose in docs/kv-pool.md ("Disk tier format"); change the two together and
// bump kDiskLogVersion.
//
// The log is a sequence of frames, appended, never rewritten in place:
//
//   u32 magic (kFrameMagic) | u16 type | u16 payload bytes | payload | u64 CRC-64 of all before
//
// little-endian throughout. The first frame of a log is a Header (version and the data file's
// geometry). A Namespace frame binds a small number, valid within this log, to a namespace's
// name, layout fingerprint, block size and owner. A Put says that the block of (namespace, key)
// occupies the slot at `offset` of the data file, with the CRC-64 its writer committed; it is
// appended only after the block's bytes are durable, so a valid Put implies a complete block (and
// every read from disk checks the CRC-64 again). A Free releases the slot at `offset`; a Reset
// drops every block of a namespace written before it.
//
// Recovery (ParseLog) reads frames from the start and stops at the first that does not verify
// (short, bad magic, bad length, bad CRC): that frame and everything after it are a torn tail,
// cut off. Parsing is pure (bytes in, records out) so tests can cut a log at every offset.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "openlake/kv/types.h"

namespace openlake::kv::disklog {

inline constexpr uint32_t kFrameMagic = 0x4c4b4c4fU;  // "OLKL"
inline constexpr uint32_t kDiskLogVersion = 1;
inline constexpr size_t kFrameOverhead = 4 + 2 + 2 + 8;

enum class Type : uint16_t { kHeader = 1, kNamespace = 2, kPut = 3, kFree = 4, kReset = 5 };

struct Header {
  uint32_t version = kDiskLogVersion;
  uint64_t data_bytes = 0;     // size of the data file
  uint64_t segment_bytes = 0;  // the data file is cut into segments of this size
  uint64_t tier_id = 0;        // random per data file: a log never applies to another file
};

struct NamespaceRec {
  uint32_t id = 0;  // valid within this log only
  uint32_t block_bytes = 0;
  uint32_t owner = 0;
  std::string name;
  std::string fingerprint;  // wire::Fingerprint, serialised
};

struct PutRec {
  uint32_t ns = 0;
  uint32_t depth = 0;
  uint64_t offset = 0;
  uint64_t checksum = 0;
  BlockKey key;
};

struct Record {
  Type type = Type::kHeader;
  Header header;
  NamespaceRec ns;
  PutRec put;
  uint64_t offset = 0;  // kFree: the slot released
  uint32_t reset_ns = 0;
};

// Appends one frame to `out`.
void AppendHeader(const Header& h, std::string* out);
void AppendNamespace(const NamespaceRec& n, std::string* out);
void AppendPut(const PutRec& p, std::string* out);
void AppendFree(uint64_t offset, std::string* out);
void AppendReset(uint32_t ns, std::string* out);

struct Parsed {
  std::vector<Record> records;
  size_t valid_bytes = 0;  // the log's length up to the end of its last valid frame
  bool torn = false;       // bytes after valid_bytes were cut off
};

// Every valid frame from the start of `log`, up to the first that does not verify.
Parsed ParseLog(std::string_view log);

}  // namespace openlake::kv::disklog

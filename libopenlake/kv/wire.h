// KV RPC method numbers and the conversions shared by the service and the client.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "kv/kv.pb.h"

#include "openlake/kv/types.h"

namespace openlake::kv::wire {

enum Method : uint16_t {
  kAttach = 1,
  kOpenNamespace = 2,
  kReserve = 3,
  kCommit = 4,
  kLookup = 5,
  kRelease = 6,
  kExists = 7,
  kReset = 8,
  kStats = 9,
  kFindNamespace = 10,
  kRemove = 11,
  // Between the daemons of a cluster (admin connections only).
  kPeerAttach = 12,
  kPeerLookup = 13,
  kAnnounce = 14,
  kFindOwners = 15,
};

// At most this many keys in one request (and so slots in one answer).
inline constexpr uint32_t kMaxBatch = 1u << 16;

void ToWire(const LayoutFingerprint& fp, Fingerprint* out);
LayoutFingerprint FromWire(const Fingerprint& fp);
void ToWire(const PoolStats& s, StatsResponse* out);
PoolStats FromWire(const StatsResponse& s);

// Packs keys into `out`. Keys of one length are concatenated (key_len = that length); keys of
// mixed lengths each get a one-byte length prefix (key_len = 0). InvalidArgument for an empty
// key.
absl::Status PackKeys(const BlockKey* keys, size_t n, std::string* out, uint32_t* key_len);
// Splits a packed key field; InvalidArgument when it is malformed, a key is out of 1..32
// bytes, or the batch exceeds kMaxBatch.
absl::StatusOr<std::vector<BlockKey>> UnpackKeys(const std::string& packed, uint32_t key_len);

// Parses `payload` into `msg`; InvalidArgument naming the message on failure.
absl::Status Parse(std::string_view payload, google::protobuf::MessageLite* msg);

}  // namespace openlake::kv::wire

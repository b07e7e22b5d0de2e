// File: openlake/kv/client.h
//
// The KV pool's client. Connect to a local `openlaked`, map its slab, and move blocks with one
// memcpy each: Put = Reserve → copy (checksummed on the way) → Commit; Get = Lookup (pins the
// hits) → copy (checksum verified) → Release. Each phase is one RPC for the whole batch.
//
//   OL_ASSIGN_OR_RETURN(auto client, kv::Client::Connect("127.0.0.1:9400"));
//   OL_ASSIGN_OR_RETURN(kv::Namespace ns,
//                       client->OpenNamespace("llama-8b/tp0", fingerprint, block_bytes));
//   OL_ASSIGN_OR_RETURN(kv::PutResult p, client->Put(ns, keys, blocks));   // p.stored
//   OL_ASSIGN_OR_RETURN(kv::GetResult g, client->Get(ns, keys, buffers));  // g.loaded
//
// Addresses: "host:port" connects over TCP; when the daemon says it has a Unix socket and that
// socket can be reached (same host and user), the client moves there and maps the slab.
// "unix:/path" connects to the socket directly. A client without the slab (a remote host)
// can do everything but move bytes: Put/Get answer FailedPrecondition.
//
// Thread-safe: RPCs from several threads are serialised on the one connection, copies run in
// parallel. Not for reactor threads (every call blocks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

#include "openlake/export.h"
#include "openlake/kv/types.h"

namespace openlake::kv {

struct ClientOptions {
  // The shared secret, when the daemon listens beyond loopback.
  std::string secret;
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration call_timeout = absl::Seconds(10);
  // Map the slab when the daemon is local (false: control only).
  bool map_slab = true;
  // How long a call polls for its answer before sleeping (see net::RpcClientOptions::spin).
  absl::Duration spin = absl::Microseconds(50);
  // In a cluster, a Lookup or Exists that misses this daemon may be served from the other nodes'
  // pools (the daemon pulls the blocks into its own slab first). False: this daemon's own tiers
  // only.
  bool cluster = true;
};

// A piece of a block: blocks are the concatenation of their pieces, in order.
struct ConstPiece {
  const void* data;
  size_t len;
};
struct Piece {
  void* data;
  size_t len;
};

struct PutOptions {
  // Depth of keys[0] in its chain (the block index within the prompt); keys[i] gets
  // first_depth + i. Eviction removes deeper blocks first.
  uint32_t first_depth = 0;
};

struct GetOptions {
  // The first key of the chain the keys belong to, when keys[0] is not it (a load that starts
  // after blocks the engine holds already). In a cluster, a chain's owners are found by its
  // head; empty: keys[0] is the head.
  BlockKey chain_head;
};

struct PutResult {
  // The first `stored` keys were stored; the rest found no room (every other slot pinned or
  // reserved). 0 is reported as a ResourceExhausted status instead.
  size_t stored = 0;
};

enum class BlockState : uint8_t {
  kLoaded = 0,   // copied and its checksum verified
  kMissing = 1,  // not in the pool (or after the first missing key)
  kCorrupt = 2,  // found, but its bytes failed the checksum or were replaced while copying
};

struct GetResult {
  // Leading keys loaded (every state before index `loaded` is kLoaded).
  size_t loaded = 0;
  std::vector<BlockState> state;  // one per key
};



class OL_EXPORT Client {
 public:
  static absl::StatusOr<std::unique_ptr<Client>> Connect(std::string_view address,
                                                         ClientOptions options = {});
  ~Client();

  // The mapped slab (nullptr when not mapped).
  std::byte* slab_base() const;
  uint64_t slab_bytes() const;
  // Where segments start in the slab and how large each is (0 without a slab): an engine that
  // pins slab memory for DMA can do it a segment at a time, as blocks land there.
  uint64_t slab_segments_offset() const;
  uint64_t slab_segment_bytes() const;
  bool has_slab() const { return slab_base() != nullptr; }
  const std::string& server_version() const;
  // Lease of reservations and pins, as the daemon runs it.
  absl::Duration lease() const { return lease_; }

  absl::StatusOr<Namespace> OpenNamespace(std::string_view name, const LayoutFingerprint& fp,
                                          uint32_t block_bytes);

  // The namespace called `name` as it exists in the pool (NotFound when none), for callers that
  // only ask what exists (Exists, Stats) and cannot compute its full fingerprint. Reading or
  // writing bytes needs OpenNamespace, which checks the fingerprint.
  absl::StatusOr<Namespace> FindNamespace(std::string_view name);

  // Stores blocks[i] under keys[i]. Each block's pieces must add up to ns.block_bytes. Stores a
  // prefix when the pool has room for only part. A batch larger than this client's share of
  // the pool (the server's cap on what one client holds reserved) goes in several rounds.
  absl::StatusOr<PutResult> Put(const Namespace& ns, absl::Span<const BlockKey> keys,
                                absl::Span<const std::vector<ConstPiece>> blocks,
                                const PutOptions& options = {});
  // Contiguous blocks of ns.block_bytes each.
  absl::StatusOr<PutResult> Put(const Namespace& ns, absl::Span<const BlockKey> keys,
                                absl::Span<const void* const> blocks,
                                const PutOptions& options = {});

  // Loads the longest run of leading keys present into blocks[i]. Each loaded block's checksum
  // is verified; a failure marks it kCorrupt and ends the loaded prefix there.
  absl::StatusOr<GetResult> Get(const Namespace& ns, absl::Span<const BlockKey> keys,
                                absl::Span<const std::vector<Piece>> blocks,
                                const GetOptions& options = {});
  absl::StatusOr<GetResult> Get(const Namespace& ns, absl::Span<const BlockKey> keys,
                                absl::Span<void* const> blocks, const GetOptions& options = {});

  // Presence, without pinning (for schedulers).
  absl::StatusOr<ExistsResult> Exists(const Namespace& ns, absl::Span<const BlockKey> keys,
                                      const GetOptions& options = {});
  // Drops every block of `ns`; other namespaces are untouched.
  absl::Status Reset(const Namespace& ns);
  // Drops the blocks of these keys; returns how many were present.
  absl::StatusOr<uint32_t> Remove(const Namespace& ns, absl::Span<const BlockKey> keys);
  absl::StatusOr<PoolStats> Stats();

  // ---- Low level. Offsets are from slab_base().
  absl::StatusOr<std::vector<SlotGrant>> Reserve(const Namespace& ns, uint32_t count,
                                                 bool allow_partial);
  absl::Status Commit(const Namespace& ns, absl::Span<const CommitEntry> entries);
  // Pins and returns the leading hits, as one pin batch.
  absl::StatusOr<Pins> Lookup(const Namespace& ns, absl::Span<const BlockKey> keys,
                              const GetOptions& options = {});
  // Releases pin batches (Pins::batch) and unused reservations (SlotGrant::slot). With `wait`
  // false the request is sent and its answer read by a later call.
  absl::Status Release(absl::Span<const uint64_t> pin_batches, absl::Span<const uint64_t> reserved,
                       bool wait = true);
  // True while `hit`'s slot has not been handed to another writer since Lookup: check it
  // after copying out.
  bool StillValid(const SlotHit& hit) const;

 private:
  class Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  // One round of Put: copies blocks into `grants`' slots, then commits (or releases them).
  absl::Status PutRound(const Namespace& ns, absl::Span<const BlockKey> keys,
                        absl::Span<const std::vector<ConstPiece>> blocks,
                        absl::Span<const SlotGrant> grants, uint32_t first_depth);
  std::unique_ptr<Impl> impl_;
  absl::Duration lease_;
};

}  // namespace openlake::kv

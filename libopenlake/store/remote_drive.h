// A drive of another node: the per-drive API (drive_api.h), each step one RPC to the node that
// owns it (drive_service.h; docs/object-store.md, "Remote drives"). Shard files opened here are
// handles on the owner, read and written a block per request.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"

#include "store/drive_api.h"
#include "store/drive_wire.h"

#include "net/rpc_channel.h"
#include "openlake/io/reactor.h"
#include "openlake/io/socket.h"

namespace openlake::store {

// This node's connections to one peer: a channel per reactor, made on first use by that
// reactor (a reactor only ever uses its own). Shared by the peer's drives and lock requests.
//
// A peer that stops answering (a refused or broken connection, a request past its deadline) is
// taken as down: calls fail at once with Unavailable instead of each waiting out a timeout.
// Once a second, while calls keep coming, one of them starts a probe in the background and
// still fails at once (no request waits on a peer that may be cut off): the probe request goes
// out on a new connection (the old one may be stuck) to the address resolved again (a pod
// that came back elsewhere), and any answer, even an error, brings the peer back.
// What a PeerLink's probe asks. Default: a drive hello with no digest (the drive service
// answers it with an error, which shows the peer is there just as well).
struct ProbeRequest {
  uint16_t method = kDriveHello;
  std::string payload;
};

class PeerLink {
 public:
  // `address`: host:port, resolved when a connection is made.
  PeerLink(uint32_t node_id, std::string address, net::RpcChannelOptions options,
           ProbeRequest probe = {});
  // Not from a reactor: each channel is closed on its own reactor while the runtime runs. Calls
  // still in flight finish (Cancelled) without touching the link.
  ~PeerLink();
  PeerLink(const PeerLink&) = delete;
  PeerLink& operator=(const PeerLink&) = delete;

  // On a reactor, from a coroutine. `timeout` zero: the options' call_timeout.
  io::Task<absl::StatusOr<std::string>> Call(uint16_t method, std::string payload,
                                             absl::Duration timeout = absl::ZeroDuration());
  // Sends the probe request now, up or down (on a new connection when down), and takes the
  // peer as up or down by the outcome; true when it answered. On a reactor, from a coroutine.
  io::Task<bool> Probe();

  uint32_t node_id() const { return node_id_; }
  const std::string& address() const { return address_; }
  // Whether the last call reached the peer (false while it is taken as down).
  bool up() const;
  // Calls made, for the lock round trips a benchmark counts.
  uint64_t calls() const;

  // What a call in flight keeps of the link: the link may go while it waits.
  struct Health;

 private:
  static constexpr size_t kMaxReactors = 256;
  struct Slot {
    std::shared_ptr<net::RpcChannel> channel;  // a call in flight holds it too
    uint64_t generation = 0;                   // of the address it connects to
    uint64_t epoch = 0;                        // Health::epoch when it was made
  };
  // This reactor's channel to the current address (resolving it first when there is none).
  absl::StatusOr<std::shared_ptr<net::RpcChannel>> ChannelHere(bool resolve);
  static io::Task<bool> ProbeOn(std::shared_ptr<Health> health,
                                std::shared_ptr<net::RpcChannel> channel, uint16_t method,
                                std::string payload);
  static io::Task<void> ProbeInBackground(std::shared_ptr<Health> health,
                                          std::shared_ptr<net::RpcChannel> channel,
                                          uint16_t method, std::string payload);

  const uint32_t node_id_;
  const std::string address_;
  const net::RpcChannelOptions options_;
  const ProbeRequest probe_;
  std::shared_ptr<Health> health_;
  absl::Mutex mu_;
  io::Runtime* runtime_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::optional<io::SocketAddress> resolved_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::array<Slot, kMaxReactors> slots_;  // each slot belongs to its reactor's thread
};

class RemoteDrive final : public DriveApi {
 public:
  // Drive `index` of the node behind `link` (which must outlive it); `name` for messages.
  RemoteDrive(PeerLink* link, uint32_t index, std::string name)
      : link_(link), index_(index), name_(std::move(name)) {}

  const std::string& name() const override { return name_; }
  bool is_local() const override { return false; }
  PeerLink& link() { return *link_; }
  uint32_t index() const { return index_; }

  io::Task<absl::StatusOr<std::string>> ReadFile(std::string path) override;
  io::Task<absl::Status> WriteFile(std::string path, std::string data, bool sync_dir) override;
  io::Task<absl::StatusOr<std::unique_ptr<FileHandle>>> OpenFile(std::string path,
                                                                 OpenMode mode) override;
  io::Task<absl::Status> MakeDirs(std::string path, std::string parents_from) override;
  io::Task<absl::StatusOr<std::vector<DirEntry>>> ReadDir(std::string path) override;
  io::Task<absl::StatusOr<bool>> Exists(std::string path) override;
  io::Task<absl::Status> Rename(std::string from, std::string to) override;
  io::Task<absl::Status> LinkInto(std::string dir, std::vector<LinkPair> links) override;
  io::Task<absl::Status> Unlink(std::string path) override;
  io::Task<absl::Status> RemoveDir(std::string path) override;
  io::Task<absl::Status> Trash(std::string path) override;
  io::Task<absl::Status> SyncDir(std::string path) override;
  io::Task<absl::StatusOr<DriveUsage>> Usage() override;
  io::Task<absl::Status> CommitObject(CommitStep step) override;
  io::Task<absl::Status> RemoveObject(std::string bucket, std::string key) override;
  io::Task<absl::StatusOr<std::vector<WalkItem>>> Walk(WalkRequest request) override;
  io::Task<absl::StatusOr<bool>> VerifyFile(VerifyRequest request) override;

 private:
  // One request whose answer is only a status.
  io::Task<absl::Status> Simple(uint16_t method, std::string payload);
  io::Task<absl::Status> PathStep(uint16_t method, std::string path);

  PeerLink* link_;
  uint32_t index_;
  std::string name_;
};

}  // namespace openlake::store

#include "store/remote_drive.h"

#include <cerrno>
#include <cstring>

#include "store/drive_rpc.pb.h"
#include "store/drive_wire.h"

#include "openlake/log.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::store {

// ---- PeerLink.

struct PeerLink::Health {
  Health(uint32_t node, std::string addr) : node_id(node), address(std::move(addr)) {}
  const uint32_t node_id;
  const std::string address;
  std::atomic<int64_t> down_until_ns{0};  // 0: up; else wall-clock ns of the next probe
  // Raised each time the peer is taken as down: a reactor whose channel is older drops it and
  // connects anew. A connection whose requests went unanswered may be stuck (its segments in
  // TCP's retransmission backoff long after the network mends), so the probe never uses it.
  std::atomic<uint64_t> epoch{0};
  std::atomic<bool> probing{false};
  std::atomic<uint64_t> calls{0};
  absl::Mutex mu;
  std::string last_error ABSL_GUARDED_BY(mu);

  void MarkDown(const absl::Status& why);
  void MarkUp();
};

namespace {

constexpr absl::Duration kProbeEvery = absl::Seconds(1);
constexpr absl::Duration kProbeTimeout = absl::Seconds(2);

// Whether a failed call says the peer cannot be reached (not what it answered). Cancelled is
// this side closing the channel, which says nothing of the peer.
bool Unreachable(const absl::Status& s, bool connected) {
  if (absl::IsDeadlineExceeded(s)) return true;
  return absl::IsUnavailable(s) && !connected;
}

}  // namespace

// The probe request on `channel`; only its arguments are used, so the link may go meanwhile.
io::Task<bool> PeerLink::ProbeOn(std::shared_ptr<Health> health,
                                 std::shared_ptr<net::RpcChannel> channel, uint16_t method,
                                 std::string payload) {
  absl::StatusOr<std::string> r = co_await channel->Call(method, std::move(payload), kProbeTimeout);
  if (r.ok()) {
    health->MarkUp();
    co_return true;
  }
  if (absl::IsCancelled(r.status())) co_return false;  // this side closed it: nothing learnt
  const bool connected = channel->connected();
  if (Unreachable(r.status(), connected)) {
    health->MarkDown(r.status());
    co_return false;
  }
  health->MarkUp();  // an error answer: the peer is there
  co_return true;
}

io::Task<void> PeerLink::ProbeInBackground(std::shared_ptr<Health> health,
                                           std::shared_ptr<net::RpcChannel> channel,
                                           uint16_t method, std::string payload) {
  io::Task<bool> probe = ProbeOn(health, std::move(channel), method, std::move(payload));
  (void)co_await std::move(probe);
  health->probing.store(false);
}

io::Task<bool> PeerLink::Probe() {
  std::shared_ptr<Health> health = health_;
  absl::StatusOr<std::shared_ptr<net::RpcChannel>> ch = ChannelHere(/*resolve=*/!up());
  if (!ch.ok()) {
    health->MarkDown(ch.status());
    co_return false;
  }
  io::Task<bool> probe = ProbeOn(health, *std::move(ch), probe_.method, probe_.payload);
  const bool answered = co_await std::move(probe);
  co_return answered;
}

void PeerLink::Health::MarkDown(const absl::Status& why) {
  const int64_t next = absl::GetCurrentTimeNanos() + absl::ToInt64Nanoseconds(kProbeEvery);
  const bool was_up = down_until_ns.exchange(next) == 0;
  epoch.fetch_add(1, std::memory_order_relaxed);
  absl::MutexLock l(&mu);
  last_error = std::string(SV(why.message()));
  if (was_up) {
    OL_LOG(kWarning) << "store: node " << node_id << " (" << address << ") is unreachable: "
                     << why << "; its drives count as offline until it answers again";
  }
}

void PeerLink::Health::MarkUp() {
  if (down_until_ns.exchange(0) != 0) {
    OL_LOG(kInfo) << "store: node " << node_id << " (" << address << ") answers again";
  }
}

PeerLink::PeerLink(uint32_t node_id, std::string address, net::RpcChannelOptions options,
                   ProbeRequest probe)
    : node_id_(node_id),
      address_(std::move(address)),
      options_(std::move(options)),
      probe_(std::move(probe)),
      health_(std::make_shared<Health>(node_id_, address_)) {}

PeerLink::~PeerLink() {
  io::Runtime* rt = nullptr;
  {
    absl::MutexLock l(&mu_);
    rt = runtime_;
  }
  for (size_t i = 0; i < slots_.size(); ++i) {
    std::shared_ptr<net::RpcChannel>& ch = slots_[i].channel;
    if (ch == nullptr) continue;
    if (rt != nullptr && rt->running() && i < rt->size() &&
        rt->RunOn(static_cast<unsigned>(i), [&ch] { ch.reset(); }).ok()) {
      continue;
    }
    ch.reset();  // the runtime has stopped: nothing runs on the reactor any more
  }
}

bool PeerLink::up() const { return health_->down_until_ns.load(std::memory_order_relaxed) == 0; }
uint64_t PeerLink::calls() const { return health_->calls.load(std::memory_order_relaxed); }

absl::StatusOr<std::shared_ptr<net::RpcChannel>> PeerLink::ChannelHere(bool resolve) {
  io::Reactor& r = *io::Reactor::Current();
  Slot& slot = slots_[r.id() % kMaxReactors];
  std::optional<io::SocketAddress> addr;
  uint64_t generation = 0;
  const uint64_t epoch = health_->epoch.load(std::memory_order_relaxed);
  {
    absl::MutexLock l(&mu_);
    if (runtime_ == nullptr) runtime_ = &r.runtime();
    addr = resolved_;
    generation = generation_;
  }
  if (!addr || resolve) {
    // Blocking name resolution, only when connecting anew (a numeric address costs nothing).
    absl::StatusOr<io::SocketAddress> parsed = io::SocketAddress::Parse(address_);
    if (!parsed.ok()) {
      return absl::UnavailableError(
          StrCat("node ", node_id_, " (", address_, "): ", parsed.status().message()));
    }
    absl::MutexLock l(&mu_);
    if (!resolved_ || resolved_->ToString() != parsed->ToString()) {
      resolved_ = *parsed;
      ++generation_;
    }
    addr = resolved_;
    generation = generation_;
  }
  if (slot.channel == nullptr || slot.generation != generation || slot.epoch != epoch) {
    slot.channel = std::make_shared<net::RpcChannel>(r, *addr, options_);
    slot.generation = generation;
    slot.epoch = epoch;
  }
  return slot.channel;
}

io::Task<absl::StatusOr<std::string>> PeerLink::Call(uint16_t method, std::string payload,
                                                     absl::Duration timeout) {
  // After the co_await below only these locals are used: the link may be gone by then.
  std::shared_ptr<Health> health = health_;
  health->calls.fetch_add(1, std::memory_order_relaxed);
  const int64_t down_until = health->down_until_ns.load(std::memory_order_relaxed);
  if (down_until != 0) {
    const bool due = absl::GetCurrentTimeNanos() >= down_until;
    if (due && !health->probing.exchange(true)) {
      absl::StatusOr<std::shared_ptr<net::RpcChannel>> ch = ChannelHere(/*resolve=*/true);
      if (ch.ok()) {
        io::Spawn(ProbeInBackground(health, *std::move(ch), probe_.method, probe_.payload));
      } else {
        health->MarkDown(ch.status());
        health->probing.store(false);
      }
    }
    std::string why;
    {
      absl::MutexLock l(&health->mu);
      why = health->last_error;
    }
    co_return absl::UnavailableError(
        StrCat("node ", health->node_id, " (", health->address, ") is down: ", why));
  }
  absl::StatusOr<std::shared_ptr<net::RpcChannel>> ch = ChannelHere(/*resolve=*/false);
  if (!ch.ok()) {
    health->MarkDown(ch.status());
    co_return ch.status();
  }
  std::shared_ptr<net::RpcChannel> channel = *std::move(ch);
  absl::StatusOr<std::string> r = co_await channel->Call(method, std::move(payload), timeout);
  if (!r.ok()) {
    const bool connected = channel->connected();
    if (Unreachable(r.status(), connected)) {
      health->MarkDown(r.status());
    } else if (!absl::IsCancelled(r.status())) {
      health->MarkUp();
    }
    co_return DecodeDriveError(r.status());
  }
  health->MarkUp();
  co_return r;
}

// ---- A shard file on the owner.

namespace {

// -errno for a failed block request (what a local file would have said).
int32_t ErrnoOf(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kNotFound: return -ENOENT;
    case absl::StatusCode::kResourceExhausted: return -ENOSPC;
    case absl::StatusCode::kPermissionDenied: return -EACCES;
    case absl::StatusCode::kDeadlineExceeded: return -ETIMEDOUT;
    case absl::StatusCode::kInvalidArgument: return -EINVAL;
    default: return -EIO;
  }
}

// The block requests run as detached coroutines that complete the caller's Completion. They
// first let the caller's submit return (a completion must never run inside it), and they hold
// only the link and the handle id, so a file closed meanwhile is never touched.
io::Task<void> ReadDetached(PeerLink* link, uint64_t handle, void* buf, uint32_t len,
                            uint64_t offset, io::Completion* c) {
  co_await io::Yield();
  std::string req;
  PutU64(&req, handle);
  PutU64(&req, offset);
  PutU32(&req, len);
  absl::StatusOr<std::string> r = co_await link->Call(kDriveFileRead, std::move(req));
  if (!r.ok()) {
    OL_LOG_EVERY_N_SEC(kWarning, 5) << "store: shard read on node " << link->node_id() << " ("
                                    << link->address() << "): " << r.status();
    c->Complete(ErrnoOf(r.status()), 0);
    co_return;
  }
  const size_t n = std::min<size_t>(r->size(), len);
  std::memcpy(buf, r->data(), n);
  c->Complete(static_cast<int32_t>(n), 0);
}

io::Task<void> WriteDetached(PeerLink* link, uint64_t handle, const void* buf, uint32_t len,
                             uint64_t offset, io::Completion* c) {
  // The bytes are copied into the request before the caller's submit returns: its buffer is
  // only promised until the completion, and the copy is the one the frame needs anyway.
  std::string req;
  req.reserve(16 + len);
  PutU64(&req, handle);
  PutU64(&req, offset);
  req.append(static_cast<const char*>(buf), len);
  co_await io::Yield();
  absl::StatusOr<std::string> r = co_await link->Call(kDriveFileWrite, std::move(req));
  if (!r.ok()) {
    OL_LOG_EVERY_N_SEC(kWarning, 5) << "store: shard write on node " << link->node_id() << " ("
                                    << link->address() << "): " << r.status();
    c->Complete(ErrnoOf(r.status()), 0);
    co_return;
  }
  std::string_view in = *r;
  uint32_t written = 0;
  if (!GetU32(&in, &written)) {
    c->Complete(-EIO, 0);
    co_return;
  }
  c->Complete(static_cast<int32_t>(written), 0);
}

io::Task<void> SyncDetached(PeerLink* link, uint64_t handle, io::Completion* c) {
  co_await io::Yield();
  std::string req;
  PutU64(&req, handle);
  absl::StatusOr<std::string> r = co_await link->Call(kDriveFileSync, std::move(req));
  c->Complete(r.ok() ? 0 : ErrnoOf(r.status()), 0);
}

io::Task<void> CloseDetached(PeerLink* link, uint64_t handle) {
  std::string req;
  PutU64(&req, handle);
  // A close that does not arrive costs the owner a descriptor until the lease runs out.
  (void)co_await link->Call(kDriveFileClose, std::move(req));
}

class RemoteFile final : public FileHandle {
 public:
  RemoteFile(PeerLink* link, uint64_t handle, uint64_t size)
      : link_(link), handle_(handle), size_(size) {}
  ~RemoteFile() override {
    if (io::Reactor::Current() != nullptr) io::Spawn(CloseDetached(link_, handle_));
  }
  void Read(io::Reactor&, void* buf, uint32_t len, uint64_t offset, io::Completion* c) override {
    io::Spawn(ReadDetached(link_, handle_, buf, len, offset, c));
  }
  void Write(io::Reactor&, const void* buf, uint32_t len, uint64_t offset,
             io::Completion* c) override {
    io::Spawn(WriteDetached(link_, handle_, buf, len, offset, c));
  }
  void Sync(io::Reactor&, io::Completion* c) override {
    io::Spawn(SyncDetached(link_, handle_, c));
  }
  absl::StatusOr<uint64_t> Size() override { return size_; }

 private:
  PeerLink* link_;
  uint64_t handle_;
  uint64_t size_;
};

}  // namespace

// ---- RemoteDrive.

io::Task<absl::Status> RemoteDrive::Simple(uint16_t method, std::string payload) {
  absl::StatusOr<std::string> r = co_await link_->Call(method, std::move(payload));
  co_return r.status();
}

io::Task<absl::Status> RemoteDrive::PathStep(uint16_t method, std::string path) {
  pb::DrivePath m;
  m.set_drive(index_);
  m.set_path(std::move(path));
  std::string payload = m.SerializeAsString();
  const absl::Status s = co_await Simple(method, std::move(payload));
  co_return s;
}

io::Task<absl::StatusOr<std::string>> RemoteDrive::ReadFile(std::string path) {
  pb::DrivePath m;
  m.set_drive(index_);
  m.set_path(std::move(path));
  std::string payload = m.SerializeAsString();
  absl::StatusOr<std::string> r = co_await link_->Call(kDriveReadFile, std::move(payload));
  co_return r;
}

io::Task<absl::Status> RemoteDrive::WriteFile(std::string path, std::string data,
                                              bool sync_dir) {
  pb::DriveWriteFile m;
  m.set_drive(index_);
  m.set_path(std::move(path));
  m.set_data(std::move(data));
  m.set_sync_dir(sync_dir);
  std::string payload = m.SerializeAsString();
  const absl::Status s = co_await Simple(kDriveWriteFile, std::move(payload));
  co_return s;
}

io::Task<absl::StatusOr<std::unique_ptr<FileHandle>>> RemoteDrive::OpenFile(std::string path,
                                                                            OpenMode mode) {
  if (mode != OpenMode::kRead && mode != OpenMode::kCreate) {
    co_return absl::InvalidArgumentError("remote drives open shard files to read or create");
  }
  pb::DriveOpen m;
  m.set_drive(index_);
  m.set_path(std::move(path));
  m.set_mode(mode == OpenMode::kRead ? 0 : 1);
  std::string payload = m.SerializeAsString();
  absl::StatusOr<std::string> r = co_await link_->Call(kDriveOpen, std::move(payload));
  if (!r.ok()) co_return r.status();
  pb::DriveOpened opened;
  if (!opened.ParseFromString(*r)) co_return absl::DataLossError("malformed drive answer");
  co_return std::unique_ptr<FileHandle>(new RemoteFile(link_, opened.handle(), opened.size()));
}

io::Task<absl::Status> RemoteDrive::MakeDirs(std::string path, std::string parents_from) {
  pb::DriveMakeDirs m;
  m.set_drive(index_);
  m.set_path(std::move(path));
  m.set_parents_from(std::move(parents_from));
  std::string payload = m.SerializeAsString();
  const absl::Status s = co_await Simple(kDriveMakeDirs, std::move(payload));
  co_return s;
}

io::Task<absl::StatusOr<std::vector<DirEntry>>> RemoteDrive::ReadDir(std::string path) {
  pb::DrivePath m;
  m.set_drive(index_);
  m.set_path(std::move(path));
  std::string payload = m.SerializeAsString();
  absl::StatusOr<std::string> r = co_await link_->Call(kDriveReadDir, std::move(payload));
  if (!r.ok()) co_return r.status();
  pb::DriveDirEntries got;
  if (!got.ParseFromString(*r) || got.names_size() != got.is_dir_size()) {
    co_return absl::DataLossError("malformed drive answer");
  }
  std::vector<DirEntry> out;
  out.reserve(static_cast<size_t>(got.names_size()));
  for (int i = 0; i < got.names_size(); ++i) out.push_back({got.names(i), got.is_dir(i)});
  co_return out;
}

io::Task<absl::StatusOr<bool>> RemoteDrive::Exists(std::string path) {
  pb::DrivePath m;
  m.set_drive(index_);
  m.set_path(std::move(path));
  std::string payload = m.SerializeAsString();
  absl::StatusOr<std::string> r = co_await link_->Call(kDriveExists, std::move(payload));
  if (!r.ok()) co_return r.status();
  pb::DriveAnswer a;
  if (!a.ParseFromString(*r)) co_return absl::DataLossError("malformed drive answer");
  co_return a.value();
}

io::Task<absl::Status> RemoteDrive::Rename(std::string from, std::string to) {
  pb::DriveRename m;
  m.set_drive(index_);
  m.set_from(std::move(from));
  m.set_to(std::move(to));
  std::string payload = m.SerializeAsString();
  const absl::Status s = co_await Simple(kDriveRename, std::move(payload));
  co_return s;
}

io::Task<absl::Status> RemoteDrive::LinkInto(std::string dir, std::vector<LinkPair> links) {
  pb::DriveLinkInto m;
  m.set_drive(index_);
  m.set_dir(std::move(dir));
  for (LinkPair& l : links) {
    m.add_from(std::move(l.from));
    m.add_to(std::move(l.to));
  }
  std::string payload = m.SerializeAsString();
  const absl::Status s = co_await Simple(kDriveLinkInto, std::move(payload));
  co_return s;
}

io::Task<absl::Status> RemoteDrive::Unlink(std::string path) {
  const absl::Status s = co_await PathStep(kDriveUnlink, std::move(path));
  co_return s;
}

io::Task<absl::Status> RemoteDrive::RemoveDir(std::string path) {
  const absl::Status s = co_await PathStep(kDriveRemoveDir, std::move(path));
  co_return s;
}

io::Task<absl::Status> RemoteDrive::Trash(std::string path) {
  const absl::Status s = co_await PathStep(kDriveTrash, std::move(path));
  co_return s;
}

io::Task<absl::Status> RemoteDrive::SyncDir(std::string path) {
  const absl::Status s = co_await PathStep(kDriveSyncDir, std::move(path));
  co_return s;
}

io::Task<absl::StatusOr<DriveUsage>> RemoteDrive::Usage() {
  pb::DrivePath m;
  m.set_drive(index_);
  std::string payload = m.SerializeAsString();
  absl::StatusOr<std::string> r = co_await link_->Call(kDriveUsage, std::move(payload));
  if (!r.ok()) co_return r.status();
  pb::DriveAnswer a;
  if (!a.ParseFromString(*r)) co_return absl::DataLossError("malformed drive answer");
  DriveUsage u;
  u.free_bytes = a.free_bytes();
  co_return u;
}

io::Task<absl::Status> RemoteDrive::CommitObject(CommitStep step) {
  pb::DriveCommit m;
  m.set_drive(index_);
  m.set_bucket(std::move(step.bucket));
  m.set_key(std::move(step.key));
  m.set_staged_dir(std::move(step.staged_dir));
  m.set_data_dir(std::move(step.data_dir));
  m.set_meta(std::move(step.meta));
  for (std::string& d : step.keep_data_dirs) m.add_keep_data_dirs(std::move(d));
  m.set_sync_dir(step.sync_dir);
  std::string payload = m.SerializeAsString();
  const absl::Status s = co_await Simple(kDriveCommit, std::move(payload));
  co_return s;
}

io::Task<absl::Status> RemoteDrive::RemoveObject(std::string bucket, std::string key) {
  pb::DriveRemoveObject m;
  m.set_drive(index_);
  m.set_bucket(std::move(bucket));
  m.set_key(std::move(key));
  std::string payload = m.SerializeAsString();
  const absl::Status s = co_await Simple(kDriveRemoveObject, std::move(payload));
  co_return s;
}

io::Task<absl::StatusOr<std::vector<WalkItem>>> RemoteDrive::Walk(WalkRequest request) {
  pb::DriveWalk m;
  m.set_drive(index_);
  m.set_bucket(std::move(request.bucket));
  m.set_prefix(std::move(request.prefix));
  m.set_delimiter(std::move(request.delimiter));
  m.set_marker(std::move(request.marker));
  m.set_limit(request.limit);
  std::string payload = m.SerializeAsString();
  absl::StatusOr<std::string> r = co_await link_->Call(kDriveWalk, std::move(payload));
  if (!r.ok()) co_return r.status();
  pb::DriveWalkPage page;
  if (!page.ParseFromString(*r) || page.keys_size() != page.is_prefix_size()) {
    co_return absl::DataLossError("malformed drive answer");
  }
  std::vector<WalkItem> out;
  out.reserve(static_cast<size_t>(page.keys_size()));
  for (int i = 0; i < page.keys_size(); ++i) out.push_back({page.keys(i), page.is_prefix(i)});
  co_return out;
}

io::Task<absl::StatusOr<bool>> RemoteDrive::VerifyFile(VerifyRequest request) {
  pb::DriveVerify m;
  m.set_drive(index_);
  m.set_path(std::move(request.path));
  m.set_part_size(request.part_size);
  m.set_data_shards(request.data_shards);
  m.set_block_size(request.block_size);
  for (uint64_t c : request.block_crcs) m.add_block_crcs(c);
  std::string payload = m.SerializeAsString();
  // Reads the whole shard file on the owner: more time than one block's request.
  absl::StatusOr<std::string> r =
      co_await link_->Call(kDriveVerify, std::move(payload), absl::Minutes(10));
  if (!r.ok()) co_return r.status();
  pb::DriveAnswer a;
  if (!a.ParseFromString(*r)) co_return absl::DataLossError("malformed drive answer");
  co_return a.value();
}

}  // namespace openlake::store

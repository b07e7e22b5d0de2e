// Opening the engine: options, drive identities (format.json), positions, replacements.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "absl/time/clock.h"

#include "store/drive_probe.h"
#include "store/engine.h"
#include "store/errors.h"
#include "store/local_drive.h"
#include "store/names.h"
#include "store/remote_drive.h"

#include "openlake/io/buffer.h"
#include "openlake/io/file.h"
#include "openlake/log.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::store {
std::string NewUuid() {
  std::string b = NewVersionId();
  b[6] = static_cast<char>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<char>((b[8] & 0x3f) | 0x80);
  const std::string h = Hex(b);
  return StrCat(h.substr(0, 8), "-", h.substr(8, 4), "-", h.substr(12, 4), "-", h.substr(16, 4),
                "-", h.substr(20));
}

bool UuidBytes(std::string_view uuid, SipKey* out) {
  std::string hex;
  for (char c : uuid) {
    if (c != '-') hex += c;
  }
  if (hex.size() != 32) return false;
  for (size_t i = 0; i < 16; ++i) {
    unsigned v = 0;
    for (int j = 0; j < 2; ++j) {
      const char c = hex[2 * i + j];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<unsigned>(c - 'A' + 10);
      else return false;
    }
    (*out)[i] = static_cast<uint8_t>(v);
  }
  return true;
}

// In a cluster another node may change an object behind this one's cache: no cache there.
Engine::Engine(StoreOptions options)
    : opts_(std::move(options)), inline_cache_(opts_.cluster ? 0 : opts_.inline_cache_bytes) {}

Engine::~Engine() {
  // Background coroutines run on the reactors and point at this engine: wait for them (they
  // end once their I/O completes). Not possible from a reactor thread, which they may need.
  if (io::Reactor::Current() == nullptr) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (background_.load(std::memory_order_acquire) > 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
  }
  if (background_.load(std::memory_order_acquire) > 0) {
    OL_LOG(kError) << "store: closing with " << background_.load()
                   << " background operations still running";
  }
  {
    absl::MutexLock l(&purge_mu_);
    purge_stop_ = true;
  }
  purge_cv_.SignalAll();
  if (purger_.joinable()) purger_.join();
  for (auto& d : drives_) {
    if (d->lock_fd >= 0) close(d->lock_fd);
  }
  // Lock releases still on their way to the other nodes use the links: let them land.
  if (dist_locks_ != nullptr && io::Reactor::Current() == nullptr) {
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (dist_locks_->counters().background > 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
  }
  drives_.clear();  // remote drives before the links they use
  dist_locks_.reset();
  self_link_.reset();
  links_.clear();
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(StoreOptions options) {
  auto e = std::make_unique<Engine>(std::move(options));
  OL_RETURN_IF_ERROR(e->Init());
  return std::unique_ptr<Store>(std::move(e));
}

const ec::Codec* Engine::CodecFor(uint32_t k, uint32_t m) {
  if (k + m != static_cast<uint32_t>(n_) || k == 0) return nullptr;
  if (m == static_cast<uint32_t>(m_)) return codec_.get();
  absl::MutexLock l(&codecs_mu_);
  if (codecs_.size() < static_cast<size_t>(n_)) codecs_.resize(static_cast<size_t>(n_));
  std::unique_ptr<ec::Codec>& c = codecs_[m];
  if (c == nullptr) {
    absl::StatusOr<std::unique_ptr<ec::Codec>> made =
        ec::Codec::Create(static_cast<int>(k), static_cast<int>(m));
    if (!made.ok()) return nullptr;
    c = *std::move(made);
  }
  return c.get();  // never removed: callers keep it while the engine lives
}

int Engine::QuorumOf(uint32_t k, uint32_t m) const {
  if (m == static_cast<uint32_t>(m_)) return write_quorum_;
  // A reduced layout takes MinIO's rule: k, plus one when k == m (two halves can never both
  // commit). With one drive down it still takes writes, which then survive no further loss
  // until healed: what reduced redundancy means.
  return static_cast<int>(k == m ? k + 1 : k);
}

std::pair<uint32_t, uint32_t> Engine::LayoutFor(bool reduced_redundancy) const {
  const int m = reduced_redundancy ? reduced_m_ : m_;
  return {static_cast<uint32_t>(n_ - m), static_cast<uint32_t>(m)};
}

absl::Status Engine::Init() {
  int total = static_cast<int>(opts_.drives.size());
  if (opts_.cluster) {
    total = 0;
    for (const ClusterNodeSpec& node : opts_.cluster->nodes) {
      total += static_cast<int>(node.disk_count);
    }
  }
  if (total == 0) return absl::InvalidArgumentError("store: no drives configured");
  n_ = opts_.set_drive_count == 0 ? total : opts_.set_drive_count;
  if (n_ < 1 || n_ > 255 || total % n_ != 0) {
    return absl::InvalidArgumentError(StrCat("store: ", total, " drives do not divide into sets of ",
                                             n_, " (set_drive_count)"));
  }
  sets_ = total / n_;
  m_ = opts_.parity;
  if (m_ < 0) m_ = n_ >= 4 ? n_ / 2 : (n_ >= 2 ? 1 : 0);
  if (m_ > n_ / 2) {
    return absl::InvalidArgumentError(StrCat("store: parity ", m_, " is more than half of the ",
                                             n_, " drives of a set"));
  }
  k_ = n_ - m_;
  // One node: k + 1 whenever there is parity, so an acknowledged write survives the loss of any
  // one drive that took it. A cluster takes MinIO's rule, k (plus one when k == m, so that two
  // disjoint halves can never both commit): a node's loss takes several drives of a set at once
  // (RS(4+2) over three nodes loses two), and the cluster must go on taking writes then.
  if (opts_.cluster) {
    write_quorum_ = k_ == m_ ? k_ + 1 : k_;
  } else {
    write_quorum_ = m_ == 0 ? k_ : k_ + 1;
  }
  if (opts_.block_size == 0 || opts_.block_size % io::kDirectAlignment != 0) {
    return absl::InvalidArgumentError(StrCat("store: block_size ", opts_.block_size,
                                             " is not a positive multiple of 4096"));
  }
  if (opts_.window_depth < 1) opts_.window_depth = 1;
  OL_ASSIGN_OR_RETURN(codec_, ec::Codec::Create(k_, m_));
  reduced_m_ = opts_.reduced_parity < 0 ? std::min(1, m_) : opts_.reduced_parity;
  if (reduced_m_ > m_) {
    return absl::InvalidArgumentError(StrCat("store: reduced parity ", reduced_m_,
                                             " is more than the parity ", m_));
  }
  if (reduced_m_ != m_) {
    // Made now, so that a bad reduced parity stops the start.
    if (CodecFor(static_cast<uint32_t>(n_ - reduced_m_), static_cast<uint32_t>(reduced_m_)) ==
        nullptr) {
      return absl::InvalidArgumentError(
          StrCat("store: no codec for the reduced layout RS(", n_ - reduced_m_, "+", reduced_m_,
                 ")"));
    }
  }
  if (opts_.cluster) {
    OL_RETURN_IF_ERROR(LoadClusterDrives());
  } else {
    OL_RETURN_IF_ERROR(LoadDrives());
  }
  for (int s = 0; s < sets_; ++s) {
    int online = 0;
    for (int p = 0; p < n_; ++p) online += drive(s, p).online.load() ? 1 : 0;
    if (online < k_) {
      return Error(ErrorKind::kInsufficientDrives,
                   StrCat("store: set ", s, " has ", online, " usable drives of ", n_,
                          "; reading needs ", k_));
    }
    if (online < write_quorum_) {
      OL_LOG(kWarning) << "store: set " << s << " has " << online << " usable drives of " << n_
                       << ": reads work, writes (quorum " << write_quorum_ << ") will fail";
    }
  }
  if (opts_.purge_trash) StartPurger();
  OL_LOG(kInfo) << "store: " << total << " drives in " << sets_ << " set(s) of " << n_
                << ", RS(" << k_ << "+" << m_ << "), write quorum " << write_quorum_
                << ", deployment " << deployment_id_;
  return absl::OkStatus();
}

absl::Status Engine::LoadDrives() {
  const int total = static_cast<int>(opts_.drives.size());
  FileBackendFactory factory = opts_.backend_factory;
  if (!factory) factory = [](const std::string& root) { return NewLocalFileBackend(root); };

  std::vector<DriveProbe> probes;
  probes.reserve(static_cast<size_t>(total));
  for (int i = 0; i < total; ++i) {
    DriveProbe p = ProbeDrive(opts_.drives[static_cast<size_t>(i)], factory);
    switch (p.state) {
      case DriveState::kMissing:
        OL_LOG(kWarning) << "store: drive " << p.path << " is missing (" << p.detail << ")";
        break;
      case DriveState::kCorruptFormat:
        OL_LOG(kError) << "store: drive " << p.path << ": format.json is damaged; left offline";
        break;
      case DriveState::kUnformattedNonempty:
        OL_LOG(kError) << "store: drive " << p.path
                       << " holds files but no OpenLake identity; refusing to format it";
        break;
      case DriveState::kError:
        OL_LOG(kError) << "store: drive " << p.path << ": " << p.detail;
        break;
      default:
        break;
    }
    probes.push_back(std::move(p));
  }

  // The deployment: the id most formatted drives carry, or a new one.
  std::map<std::string, int> votes;
  for (const DriveProbe& p : probes) {
    if (p.state == DriveState::kOk) ++votes[p.format.deployment_id()];
  }
  bool fresh = votes.empty();
  if (fresh) {
    deployment_id_ = NewUuid();
  } else {
    int best = 0;
    for (const auto& [id, n] : votes) {
      if (n > best) {
        best = n;
        deployment_id_ = id;
      }
    }
  }
  if (!UuidBytes(deployment_id_, &sip_key_)) {
    return absl::DataLossError(StrCat("store: deployment id \"", deployment_id_,
                                      "\" is not a UUID"));
  }

  drives_.clear();
  for (int i = 0; i < total; ++i) drives_.push_back(std::make_unique<Drive>());
  std::vector<bool> taken(static_cast<size_t>(total), false);
  for (int i = 0; i < total; ++i) {
    DriveProbe& p = probes[static_cast<size_t>(i)];
    if (p.state != DriveState::kOk) continue;
    const pb::DriveFormat& f = p.format;
    if (f.deployment_id() != deployment_id_) {
      p.state = DriveState::kForeign;
      OL_LOG(kError) << "store: drive " << p.path << " belongs to deployment "
                     << f.deployment_id() << ", not " << deployment_id_ << "; left offline";
      continue;
    }
    if (static_cast<int>(f.set_count()) != sets_ ||
        static_cast<int>(f.set_drive_count()) != n_) {
      return absl::FailedPreconditionError(
          StrCat("store: drive ", p.path, " was formatted for ", f.set_count(), " set(s) of ",
                 f.set_drive_count(), " drives, but the configuration makes ", sets_, " of ",
                 n_, "; placement would change, refusing to open"));
    }
    const int slot = static_cast<int>(f.set_index()) * n_ + static_cast<int>(f.position());
    if (slot >= total || taken[static_cast<size_t>(slot)]) {
      p.state = DriveState::kDuplicate;
      OL_LOG(kError) << "store: drive " << p.path << " claims set " << f.set_index()
                     << " position " << f.position() << ", which another drive holds";
      continue;
    }
    if (slot != i) {
      OL_LOG(kWarning) << "store: drive " << p.path << " was formatted as set " << f.set_index()
                       << " position " << f.position() << "; using it there (listed as #" << i
                       << ")";
    }
    taken[static_cast<size_t>(slot)] = true;
    Drive& d = *drives_[static_cast<size_t>(slot)];
    d.path = p.path;
    d.fs = std::move(p.fs);
    d.format = f;
    d.set = static_cast<int>(f.set_index());
    d.position = static_cast<int>(f.position());
    d.state = DriveState::kOk;
    d.online = true;
  }
  // Empty folders take free slots: their own index when free, else the first free one.
  for (int i = 0; i < total; ++i) {
    DriveProbe& p = probes[static_cast<size_t>(i)];
    if (p.state != DriveState::kUnformattedEmpty) continue;
    int slot = taken[static_cast<size_t>(i)] ? -1 : i;
    for (int j = 0; slot < 0 && j < total; ++j) {
      if (!taken[static_cast<size_t>(j)]) slot = j;
    }
    if (slot < 0) {
      p.state = DriveState::kSpare;
      continue;
    }
    const pb::DriveFormat f = NewFormat(slot / n_, slot % n_, 0, "");
    const absl::Status s = WriteFormat(*p.fs, p.path, f);
    if (!s.ok()) {
      p.state = DriveState::kError;
      OL_LOG(kError) << "store: formatting " << p.path << ": " << s;
      continue;
    }
    taken[static_cast<size_t>(slot)] = true;
    Drive& d = *drives_[static_cast<size_t>(slot)];
    d.path = p.path;
    d.fs = std::move(p.fs);
    d.format = f;
    d.set = slot / n_;
    d.position = slot % n_;
    d.state = fresh ? DriveState::kOk : DriveState::kReplaced;
    d.online = true;
    if (!fresh) {
      OL_LOG(kWarning) << "store: " << p.path << " is empty: formatted as the replacement of set "
                       << d.set << " position " << d.position << "; run a heal to rebuild it";
    }
  }
  // Slots nobody took stay offline with the reason of the folder listed there.
  for (int i = 0; i < total; ++i) {
    Drive& d = *drives_[static_cast<size_t>(i)];
    if (d.online) continue;
    d.set = i / n_;
    d.position = i % n_;
    d.path = probes[static_cast<size_t>(i)].path;
    // A folder whose identity or emptiness put it in another place leaves this one missing.
    const DriveState probed = probes[static_cast<size_t>(i)].state;
    d.state = probed == DriveState::kOk || probed == DriveState::kUnformattedEmpty
                  ? DriveState::kMissing
                  : probed;
  }
  return PrepareLocalDrives();
}

pb::DriveFormat Engine::NewFormat(int set, int pos, uint32_t node,
                                  const std::string& layout) const {
  pb::DriveFormat f;
  f.set_version(1);
  f.set_format("openlake");
  f.set_deployment_id(deployment_id_);
  f.set_drive_id(NewUuid());
  f.set_set_count(static_cast<uint32_t>(sets_));
  f.set_set_drive_count(static_cast<uint32_t>(n_));
  f.set_set_index(static_cast<uint32_t>(set));
  f.set_position(static_cast<uint32_t>(pos));
  f.set_node_id(node);
  f.set_layout(layout);
  return f;
}

absl::Status Engine::WriteFormat(FileBackend& fs, const std::string& path,
                                 const pb::DriveFormat& f) {
  OL_RETURN_IF_ERROR(fs.MakeDirs(kSysDir, ""));
  return io::AtomicWriteFileSync(StrCat(path, "/", kFormatFile), FormatJson(f), 0600);
}

absl::Status Engine::PrepareLocalDrives() {
  // One process per drive; a clean staging area.
  for (auto& dp : drives_) {
    Drive& d = *dp;
    if (d.link != nullptr) continue;
    if (d.fs != nullptr) {
      auto local = std::make_unique<LocalDrive>(d.fs.get(), [this] { WakePurger(); });
      d.local = local.get();
      d.api = std::move(local);
    }
    if (!d.online) continue;
    const std::string fmt = d.path + "/" + std::string(kFormatFile);
    d.lock_fd = open(fmt.c_str(), O_RDONLY | O_CLOEXEC);
    if (d.lock_fd < 0 || flock(d.lock_fd, LOCK_EX | LOCK_NB) != 0) {
      return absl::FailedPreconditionError(StrCat("store: drive ", d.path,
                                                  " is in use by another process"));
    }
    absl::Status s;
    for (std::string_view dir : {kTmpDir, kTrashDir, kBucketMetaDir, kMultipartDir}) {
      if (s.ok()) s = d.fs->MakeDirs(dir, "");
    }
    if (s.ok()) s = d.local->TrashNow(std::string(kTmpDir));
    if (s.ok()) s = d.fs->MakeDirs(kTmpDir, "");
    // Before anything reads the drive: what the journal holds is brought into its files.
    if (s.ok()) s = d.local->OpenJournal(opts_.commit_journal);
    if (!s.ok()) {
      d.online = false;
      d.state = DriveState::kError;
      OL_LOG(kError) << "store: drive " << d.path << ": " << s;
    }
  }
  return absl::OkStatus();
}

bool Engine::ProbeReturn(Drive& d) {
  // Only a drive taken offline while running (MarkOffline) comes back by itself: one left
  // offline at start (a foreign or damaged identity) needs a person.
  if (d.online.load() || d.fs == nullptr ||
      d.state.load(std::memory_order_acquire) != DriveState::kError) {
    return false;
  }
  absl::StatusOr<bool> has = d.fs->Exists(kFormatFile);
  if (!has.ok() || !*has) return false;
  // It must take a write again: a folder made and removed in its staging area.
  const std::string probe = StrCat(kTmpDir, "/probe-", Hex(NewVersionId()));
  if (!d.fs->MakeDirs(probe, kTmpDir).ok()) return false;
  if (!d.fs->RemoveDir(probe).ok()) return false;
  d.state.store(DriveState::kOk, std::memory_order_release);
  d.online.store(true);
  OL_LOG(kWarning) << "store: drive " << d.path << " works again: back online; a heal "
                   << "rebuilds what it missed";
  return true;
}

absl::StatusOr<int> Engine::RestoreDrives() {
  // Other nodes first: one that answers again counts as restored, so that a full heal rebuilds
  // what it missed while away.
  int restored = links_.empty() ? 0 : ProbeLinks();
  for (auto& dp : drives_) {
    Drive& d = *dp;
    if (ProbeReturn(d) || ProbeRemote(d)) {
      ++restored;
      continue;
    }
    if (!d.online.load() || d.fs == nullptr) continue;
    absl::StatusOr<bool> has = d.fs->Exists(kFormatFile);
    if (has.ok() && *has) continue;
    // The folder (or its identity) is gone: recreate both, with the same drive id and place.
    std::error_code ec;
    std::filesystem::create_directories(d.path, ec);
    if (ec) return absl::InternalError(StrCat("store: recreating ", d.path, ": ", ec.message()));
    OL_RETURN_IF_ERROR(d.fs->MakeDirs(kSysDir, ""));
    for (std::string_view dir :
         {kTmpDir, kTrashDir, kBucketMetaDir, kMultipartDir, kJournalDir}) {
      OL_RETURN_IF_ERROR(d.fs->MakeDirs(dir, ""));
    }
    const std::string fmt = d.path + "/" + std::string(kFormatFile);
    OL_RETURN_IF_ERROR(io::AtomicWriteFileSync(fmt, FormatJson(d.format), 0600));
    // The lock followed the old file into oblivion: take it again on the new one.
    if (d.lock_fd >= 0) close(d.lock_fd);
    d.lock_fd = open(fmt.c_str(), O_RDONLY | O_CLOEXEC);
    if (d.lock_fd >= 0) (void)flock(d.lock_fd, LOCK_EX | LOCK_NB);
    // What the drive's pack held went with the folder.
    if (d.local != nullptr) d.local->ResetPack();
    OL_LOG(kWarning) << "store: drive " << d.path << " lost its folder or identity while "
                     << "running: restored in place; a heal rebuilds its contents";
    ++restored;
  }
  return restored;
}

std::vector<DriveInfo> Engine::Drives() const {
  std::vector<DriveInfo> out;
  for (const auto& d : drives_) {
    // A drive of a node taken as down is offline for now, whatever it was.
    const bool reachable = d->link == nullptr || d->link->up();
    DriveInfo info{d->path,
                   d->set,
                   d->position,
                   d->online.load() && reachable,
                   std::string(DriveStateName(d->state.load(std::memory_order_acquire))),
                   d->format.drive_id(),
                   d->errors.load(std::memory_order_relaxed)};
    info.node = d->node;
    info.local = d->link == nullptr;
    out.push_back(std::move(info));
  }
  return out;
}

DriveApi* Engine::api(int set, int pos) {
  Drive& d = drive(set, pos);
  return d.online.load(std::memory_order_relaxed) ? d.api.get() : nullptr;
}

void Engine::SetDriveApi(int set, int pos, std::unique_ptr<DriveApi> api) {
  Drive& d = drive(set, pos);
  d.local = nullptr;
  d.api = std::move(api);
}

void Engine::MarkOffline(int set, int pos, const absl::Status& why) {
  Drive& d = drive(set, pos);
  if (d.online.exchange(false)) {
    d.state.store(DriveState::kError, std::memory_order_release);
    OL_LOG(kError) << "store: drive " << d.path << " taken offline: " << why;
  }
}

Placement Engine::PlaceObject(std::string_view bucket, std::string_view key) const {
  return Place(sip_key_, static_cast<uint32_t>(sets_), static_cast<uint32_t>(n_), bucket, key);
}

void Engine::WakePurger() {
  {
    absl::MutexLock l(&purge_mu_);  // a flag's worth: the purger never holds it while it works
    purge_wanted_ = true;
  }
  purge_cv_.Signal();
}

void Engine::StartPurger() {
  purger_ = std::thread([this] { PurgeLoop(); });
}

// Empties every drive's trash: at start, when something is trashed, and every 30 s.
void Engine::PurgeLoop() {
  purge_mu_.Lock();
  while (!purge_stop_) {
    purge_wanted_ = false;
    purge_mu_.Unlock();
    for (auto& d : drives_) {
      if (!d->online.load() || !d->fs) continue;
      auto entries = d->fs->ReadDir(kTrashDir);
      if (!entries.ok()) continue;
      for (const DirEntry& e : *entries) {
        absl::Status s = d->fs->RemoveAll(StrCat(kTrashDir, "/", e.name));
        if (!s.ok()) {
          OL_LOG_EVERY_N_SEC(kWarning, 60) << "store: purging trash: " << s;
        }
      }
    }
    purge_mu_.Lock();
    if (!purge_stop_ && !purge_wanted_) purge_cv_.WaitWithTimeout(&purge_mu_, absl::Seconds(30));
  }
  purge_mu_.Unlock();
}

}  // namespace openlake::store

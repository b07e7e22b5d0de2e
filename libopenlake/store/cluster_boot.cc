// A cluster's drives at start (docs/object-store.md, "Clusters"). Every node opens the drives of
// every node: its own through LocalDrive, the others' through the drive RPC. Each first checks
// that every peer it reaches runs the same layout (a node with another refuses to join), then
// reads every drive's identity:
//   - a blank cluster (every drive reachable and empty) is formatted by the node with the lowest
//     id, with one new deployment id; the others wait for it;
//   - later, the deployment the most drives carry wins once a majority of all drives carry it
//     (a formatting node's peers wait until it has written most identities); a blank drive of
//     this node in a formatted cluster becomes the replacement of the one it stands for;
// and waits, retrying every second, up to ClusterSpec::boot_timeout for enough of the cluster
// (or until ClusterSpec::cancelled says to stop).
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "absl/time/clock.h"

#include "store/drive_probe.h"
#include "store/drive_rpc.pb.h"
#include "store/drive_wire.h"
#include "store/engine.h"
#include "store/errors.h"
#include "store/local_drive.h"
#include "store/names.h"
#include "store/remote_drive.h"

#include "openlake/io/file.h"
#include "openlake/log.h"
#include "openlake/status.h"
#include "openlake/store/cluster.h"
#include "openlake/strings.h"

namespace openlake::store {
namespace {

// What one drive of the deployment looked like at the last look.
struct Seen {
  bool answered = false;  // its node answered (always, for this node's)
  DriveState state = DriveState::kMissing;
  std::string detail;
  std::string path;
  pb::DriveFormat format;  // with kOk
};

io::Task<absl::StatusOr<std::string>> CallOnce(PeerLink* link, uint16_t method,
                                               std::string payload) {
  absl::StatusOr<std::string> r = co_await link->Call(method, std::move(payload));
  co_return r;
}

using Answers = std::vector<absl::StatusOr<std::string>>;

// The calls at once (io::BlockOn wants a status-like result: the outer one is the runtime's).
io::Task<absl::StatusOr<Answers>> CallAll(std::vector<PeerLink*> links, uint16_t method,
                                          std::vector<std::string> payloads) {
  std::vector<io::Task<absl::StatusOr<std::string>>> calls;
  for (size_t i = 0; i < links.size(); ++i) {
    calls.push_back(CallOnce(links[i], method, std::move(payloads[i])));
  }
  Answers out = co_await io::WhenAll(std::move(calls));
  co_return out;
}

// Probes the links at once (io::BlockOn wants a status-like result).
io::Task<absl::StatusOr<int>> ProbeAll(std::vector<PeerLink*> links) {
  std::vector<io::Task<bool>> probes;
  for (PeerLink* l : links) probes.push_back(l->Probe());
  std::vector<bool> answered = co_await io::WhenAll(std::move(probes));
  co_return static_cast<int>(std::count(answered.begin(), answered.end(), true));
}

// Blocking, from the thread opening the store.
absl::StatusOr<Answers> CallAllNow(io::Runtime& rt, std::vector<PeerLink*> links,
                                   uint16_t method, std::vector<std::string> payloads) {
  return io::BlockOn(rt, 0, [&] { return CallAll(links, method, std::move(payloads)); });
}

}  // namespace

absl::Status Engine::LoadClusterDrives() {
  const ClusterSpec& c = *opts_.cluster;
  if (c.runtime == nullptr) return absl::InvalidArgumentError("store: a cluster needs a runtime");
  OL_ASSIGN_OR_RETURN(std::vector<DriveSlot> slots, ClusterLayout(c.nodes, n_));
  const ClusterNodeSpec* self = nullptr;
  uint32_t lowest = UINT32_MAX;
  for (const ClusterNodeSpec& node : c.nodes) {
    if (node.id == c.self_id) self = &node;
    lowest = std::min(lowest, node.id);
  }
  if (self == nullptr) {
    return absl::InvalidArgumentError(StrCat("store: node ", c.self_id, " is not in the cluster"));
  }
  if (self->disk_count != opts_.drives.size()) {
    return absl::InvalidArgumentError(
        StrCat("store: node ", c.self_id, " has disk_count ", self->disk_count,
               " in the cluster's list but ", opts_.drives.size(), " drive folders"));
  }
  layout_digest_ = LayoutDigest(c.nodes, n_, m_);
  pb::DriveHello hello;
  hello.set_layout_digest(layout_digest_);
  hello.set_node_id(c.self_id);
  hello_ = hello.SerializeAsString();
  net::RpcChannelOptions co;
  co.secret = c.secret;
  co.call_timeout = c.call_timeout;
  co.connect_timeout = std::min(c.call_timeout, absl::Seconds(3));
  std::map<uint32_t, PeerLink*> link_of;
  for (const ClusterNodeSpec& node : c.nodes) {
    if (node.id == c.self_id) continue;
    links_.push_back(std::make_unique<PeerLink>(node.id, node.rpc_addr, co,
                                                ProbeRequest{kDriveHello, hello_}));
    link_of[node.id] = links_.back().get();
  }
  links_were_up_.assign(links_.size(), true);
  FileBackendFactory factory = opts_.backend_factory;
  if (!factory) factory = [](const std::string& root) { return NewLocalFileBackend(root); };

  const size_t total = slots.size();
  std::vector<Seen> seen(total);
  std::vector<DriveProbe> probes(total);  // this node's drives
  std::string deployment;
  const absl::Time deadline = absl::Now() + c.boot_timeout;
  absl::Time next_note = absl::Now() + absl::Seconds(5);
  bool formatted_here = false;
  while (true) {
    // The peers must run this layout; a peer that does not answer is waited for. One taken as
    // down (not started yet) is probed first, so that the hello goes to it at once if it now
    // answers.
    std::vector<PeerLink*> peers;
    std::vector<PeerLink*> down;
    std::vector<std::string> hellos;
    for (auto& l : links_) {
      peers.push_back(l.get());
      if (!l->up()) down.push_back(l.get());
      hellos.push_back(hello_);
    }
    if (!down.empty()) {
      (void)io::BlockOn(*c.runtime, 0, [&down] { return ProbeAll(down); });
    }
    OL_ASSIGN_OR_RETURN(Answers answers,
                        CallAllNow(*c.runtime, peers, kDriveHello, std::move(hellos)));
    std::map<uint32_t, bool> reached;
    for (size_t i = 0; i < peers.size(); ++i) {
      if (absl::IsFailedPrecondition(answers[i].status())) {
        return absl::FailedPreconditionError(StrCat("store: ", answers[i].status().message()));
      }
      reached[peers[i]->node_id()] = answers[i].ok();
    }
    // Every drive's identity.
    std::vector<PeerLink*> probe_links;
    std::vector<std::string> probe_reqs;
    std::vector<size_t> probe_slots;
    for (size_t i = 0; i < total; ++i) {
      seen[i] = Seen();
      if (slots[i].node == c.self_id) {
        probes[i] = ProbeDrive(opts_.drives[slots[i].index], factory);
        seen[i].answered = true;
        seen[i].state = probes[i].state;
        seen[i].detail = probes[i].detail;
        seen[i].path = probes[i].path;
        seen[i].format = probes[i].format;
        continue;
      }
      seen[i].path = StrCat(link_of[slots[i].node]->address(), "#", slots[i].index);
      if (!reached[slots[i].node]) continue;
      pb::DrivePath m;
      m.set_drive(slots[i].index);
      probe_links.push_back(link_of[slots[i].node]);
      probe_reqs.push_back(m.SerializeAsString());
      probe_slots.push_back(i);
    }
    OL_ASSIGN_OR_RETURN(Answers probed,
                        CallAllNow(*c.runtime, probe_links, kDriveProbe, std::move(probe_reqs)));
    for (size_t j = 0; j < probe_slots.size(); ++j) {
      Seen& s = seen[probe_slots[j]];
      pb::DriveProbed p;
      if (!probed[j].ok() || !p.ParseFromString(*probed[j])) continue;
      s.answered = true;
      s.state = static_cast<DriveState>(p.state());
      s.detail = p.detail();
      if (!p.path().empty()) {
        s.path = StrCat(link_of[slots[probe_slots[j]].node]->address(), ":", p.path());
      }
      if (s.state == DriveState::kOk && !ParseDriveFormat(p.format_json(), &s.format)) {
        s.state = DriveState::kCorruptFormat;
      }
    }
    size_t answered = 0, blank = 0;
    std::map<std::string, size_t> votes;
    for (const Seen& s : seen) {
      answered += s.answered ? 1 : 0;
      blank += s.answered && s.state == DriveState::kUnformattedEmpty ? 1 : 0;
      if (s.state == DriveState::kOk) ++votes[s.format.deployment_id()];
    }
    if (!votes.empty()) {
      auto best = std::max_element(votes.begin(), votes.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
      // A majority, never less: the drives that answer blank may be ones the formatting node
      // has not reached yet, and taking them for replacements would split the cluster.
      if (best->second > total / 2) {
        deployment = best->first;
        break;
      }
    } else if (answered == total && c.self_id == lowest && !formatted_here) {
      // Only the formatting node judges the folders: to the others a drive it is formatting
      // right now looks half made (its system folder before its identity) for a moment.
      if (blank != total) {
        for (size_t i = 0; i < total; ++i) {
          if (seen[i].state != DriveState::kUnformattedEmpty) {
            return absl::FailedPreconditionError(StrCat(
                "store: a blank cluster cannot be formatted: drive ", seen[i].path, " of node ",
                slots[i].node, " is ", DriveStateName(seen[i].state),
                seen[i].detail.empty() ? "" : StrCat(" (", seen[i].detail, ")")));
          }
        }
      }
      {
        // Every drive of the deployment, this node's directly and the others' through their
        // owners (who refuse to overwrite anything but a blank folder).
        deployment_id_ = NewUuid();
        std::vector<PeerLink*> fmt_links;
        std::vector<std::string> fmt_reqs;
        for (size_t i = 0; i < total; ++i) {
          const int set = static_cast<int>(i / static_cast<size_t>(n_));
          const int pos = static_cast<int>(i % static_cast<size_t>(n_));
          const pb::DriveFormat f = NewFormat(set, pos, slots[i].node, layout_digest_);
          if (slots[i].node == c.self_id) {
            const absl::Status s = WriteFormat(*probes[i].fs, probes[i].path, f);
            if (!s.ok()) return Annotate(s, StrCat("store: formatting ", probes[i].path));
            continue;
          }
          pb::DriveFormatRequest req;
          req.set_drive(slots[i].index);
          req.set_format_json(FormatJson(f));
          fmt_links.push_back(link_of[slots[i].node]);
          fmt_reqs.push_back(req.SerializeAsString());
        }
        OL_ASSIGN_OR_RETURN(Answers done,
                            CallAllNow(*c.runtime, fmt_links, kDriveFormat, std::move(fmt_reqs)));
        for (const absl::StatusOr<std::string>& d : done) {
          if (!d.ok()) OL_LOG(kWarning) << "store: formatting a drive of another node: " << d.status();
        }
        OL_LOG(kInfo) << "store: formatted a blank cluster of " << c.nodes.size() << " nodes, "
                      << total << " drives: deployment " << deployment_id_;
        formatted_here = true;
        continue;  // read the identities back
      }
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return Error(ErrorKind::kInsufficientDrives,
                   StrCat("store: the cluster did not come together within ",
                          absl::FormatDuration(c.boot_timeout), ": ", answered, " of ", total,
                          " drives answer, ",
                          votes.empty() ? std::string("none formatted")
                                        : StrCat("the most with one identity: ",
                                                 std::max_element(votes.begin(), votes.end(),
                                                                  [](const auto& a, const auto& b) {
                                                                    return a.second < b.second;
                                                                  })->second)));
    }
    if (now >= next_note) {
      next_note = now + absl::Seconds(10);
      if (votes.empty() && answered == total) {
        OL_LOG(kInfo) << "store: waiting for node " << lowest << " to format the cluster";
      } else {
        OL_LOG(kInfo) << "store: waiting for the cluster: " << answered << " of " << total
                      << " drives answer";
      }
    }
    if (c.cancelled && c.cancelled()) {
      return absl::CancelledError("store: the start was cancelled while waiting for the cluster");
    }
    absl::SleepFor(absl::Seconds(1));
  }
  deployment_id_ = deployment;
  if (!UuidBytes(deployment_id_, &sip_key_)) {
    return absl::DataLossError(StrCat("store: deployment id \"", deployment_id_,
                                      "\" is not a UUID"));
  }

  drives_.clear();
  for (size_t i = 0; i < total; ++i) {
    auto dp = std::make_unique<Drive>();
    Drive& d = *dp;
    drives_.push_back(std::move(dp));
    const Seen& s = seen[i];
    d.set = static_cast<int>(i / static_cast<size_t>(n_));
    d.position = static_cast<int>(i % static_cast<size_t>(n_));
    d.node = slots[i].node;
    d.index = slots[i].index;
    d.path = s.path;
    d.state = s.state;
    const bool mine = slots[i].node == c.self_id;
    if (!mine) {
      d.link = link_of[d.node];
      d.api = std::make_unique<RemoteDrive>(d.link, d.index, d.path);
    }
    pb::DriveFormat f = s.format;
    if (s.state == DriveState::kUnformattedEmpty && mine) {
      // A new disk in the place of a lost one: formatted as its replacement, healed later.
      f = NewFormat(d.set, d.position, d.node, layout_digest_);
      const absl::Status st = WriteFormat(*probes[i].fs, probes[i].path, f);
      if (!st.ok()) {
        d.state = DriveState::kError;
        OL_LOG(kError) << "store: formatting " << d.path << ": " << st;
        continue;
      }
      d.state = DriveState::kReplaced;
      OL_LOG(kWarning) << "store: " << d.path << " is empty: formatted as the replacement of set "
                       << d.set << " position " << d.position << "; a heal rebuilds it";
    } else if (s.state != DriveState::kOk) {
      if (!s.answered) d.state = DriveState::kMissing;
      OL_LOG(kWarning) << "store: drive " << d.path << " (node " << d.node << ") is "
                       << (s.answered ? DriveStateName(s.state) : "unreachable")
                       << (s.detail.empty() ? "" : StrCat(": ", s.detail)) << "; left offline";
      continue;
    } else if (f.deployment_id() != deployment_id_) {
      d.state = DriveState::kForeign;
      OL_LOG(kError) << "store: drive " << d.path << " belongs to deployment " << f.deployment_id()
                     << ", not " << deployment_id_ << "; left offline";
      continue;
    } else if (f.layout() != layout_digest_) {
      return absl::FailedPreconditionError(StrCat(
          "store: drive ", d.path, " was formatted for cluster layout ", f.layout(),
          " but the configuration makes ", layout_digest_,
          " (nodes, disk counts, set size or parity changed); placement would change, refusing "
          "to open"));
    } else if (f.node_id() != d.node || static_cast<int>(f.set_index()) != d.set ||
               static_cast<int>(f.position()) != d.position) {
      d.state = DriveState::kDuplicate;
      OL_LOG(kError) << "store: drive " << d.path << " was formatted as node " << f.node_id()
                     << " set " << f.set_index() << " position " << f.position()
                     << ", not node " << d.node << " set " << d.set << " position " << d.position
                     << "; left offline";
      continue;
    } else {
      d.state = DriveState::kOk;
    }
    d.format = f;
    if (mine) {
      d.fs = std::move(probes[i].fs);
    }
    d.online = true;
  }
  // Locks: every node's table, this node's own over loopback like the others'.
  std::vector<PeerLink*> lockers;
  for (const ClusterNodeSpec& node : c.nodes) {
    if (node.id == c.self_id) {
      self_link_ = std::make_unique<PeerLink>(node.id, node.rpc_addr, co,
                                              ProbeRequest{kDriveHello, hello_});
      lockers.push_back(self_link_.get());
    } else {
      lockers.push_back(link_of[node.id]);
    }
  }
  dist_locks_ = std::make_unique<DistLocks>(std::move(lockers), c.self_id, DistLocksOptions());
  return PrepareLocalDrives();
}

io::Task<absl::StatusOr<NsLock>> Engine::Lock(std::string name, bool exclusive) {
  NsLock out;
  out.local = co_await locks_.Lock(name, exclusive);
  if (dist_locks_ == nullptr) co_return out;
  // Too few nodes answer for any quorum: say so now rather than after the lock's timeout (a
  // node taken as down is tried again each second, so this clears as soon as it returns).
  size_t up = 1;  // this node
  for (const auto& l : links_) up += l->up() ? 1 : 0;
  const size_t quorum = DistLocks::Quorum(links_.size() + 1, exclusive);
  if (up < quorum) {
    co_return Error(ErrorKind::kInsufficientDrives,
                    StrCat("could not lock \"", name, "\": only ", up, " of ", links_.size() + 1,
                           " nodes answer and a lock needs ", quorum));
  }
  const absl::Duration timeout = absl::Seconds(30);
  absl::StatusOr<DistLock> held = co_await dist_locks_->Lock(name, exclusive, timeout);
  if (!held.ok()) {
    co_return Error(ErrorKind::kInsufficientDrives,
                    StrCat("could not lock \"", name, "\" on a quorum of the cluster's nodes: ",
                           held.status().message()));
  }
  out.cluster = *std::move(held);
  co_return out;
}

ClusterCounters Engine::cluster_counters() const {
  ClusterCounters c;
  c.peers = static_cast<int>(links_.size());
  for (const auto& l : links_) c.peers_up += l->up() ? 1 : 0;
  if (dist_locks_ != nullptr) {
    const DistLocks::Counters d = dist_locks_->counters();
    c.lock_rounds = d.rounds;
    c.lock_requests = d.rpcs;
    c.locks_acquired = d.acquired;
    c.locks_timed_out = d.timed_out;
    c.locks_unreachable = d.unreachable;
    c.locks_lost = d.lost;
  }
  return c;
}

absl::Status Engine::StillHeld(const NsLock& lock, std::string_view what) {
  if (lock.held()) return absl::OkStatus();
  return Error(ErrorKind::kInsufficientDrives,
               StrCat("lost the cluster lock of ", what,
                      " (too few nodes confirm it): nothing was committed"));
}

bool Engine::ProbeRemote(Drive& d) {
  if (d.link == nullptr || d.online.load()) return false;
  const DriveState state = d.state.load(std::memory_order_acquire);
  if (state != DriveState::kError && state != DriveState::kMissing) return false;
  pb::DrivePath m;
  m.set_drive(d.index);
  PeerLink* link = d.link;
  std::string req = m.SerializeAsString();
  absl::StatusOr<std::string> r = io::BlockOn(*opts_.cluster->runtime, 0, [link, req] {
    return CallOnce(link, kDriveProbe, req);
  });
  pb::DriveProbed p;
  pb::DriveFormat f;
  if (!r.ok() || !p.ParseFromString(*r) || p.state() != static_cast<uint32_t>(DriveState::kOk) ||
      !ParseDriveFormat(p.format_json(), &f)) {
    return false;
  }
  // Its own identity: the one it had, or (never seen) the one its place calls for.
  const bool same = d.format.drive_id().empty()
                        ? f.deployment_id() == deployment_id_ && f.node_id() == d.node &&
                              static_cast<int>(f.set_index()) == d.set &&
                              static_cast<int>(f.position()) == d.position
                        : f.drive_id() == d.format.drive_id();
  if (!same) return false;
  if (!p.path().empty()) d.path = StrCat(link->address(), ":", p.path());
  d.format = f;
  d.state.store(DriveState::kOk, std::memory_order_release);
  d.online.store(true);
  OL_LOG(kInfo) << "store: drive " << d.path << " of node " << d.node
                << " answers: back online; a heal rebuilds what it missed";
  return true;
}

int Engine::ProbeLinks() {
  int returned = 0;
  // A probe (a hello) to each peer at once, up or down: a node that died or was cut off without
  // this one writing to it is noticed here too, and one taken as down comes back at its answer.
  std::vector<PeerLink*> links;
  for (const auto& l : links_) links.push_back(l.get());
  (void)io::BlockOn(*opts_.cluster->runtime, 0, [&links] { return ProbeAll(links); });
  for (size_t i = 0; i < links_.size(); ++i) {
    const bool up = links_[i]->up();
    if (up && !links_were_up_[i]) ++returned;
    links_were_up_[i] = up;
  }
  return returned;
}

}  // namespace openlake::store

// The object store of openlaked (see object_store.h).
#include "object_store.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "openlake/io/socket.h"
#include "openlake/io/task.h"
#include "openlake/log.h"
#include "openlake/s3/server.h"
#include "openlake/store/store.h"

namespace {
// A drive with less room than this takes no more writes: readiness counts it as full.
constexpr uint64_t kMinWritableBytes = 4ull << 20;
}  // namespace

struct ObjectStoreNode::Impl {
  openlake::io::Runtime* rt = nullptr;
  std::unique_ptr<openlake::store::Store> store;
  std::unique_ptr<openlake::s3::S3Server> server;
  std::thread healer;
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  bool heal_all = false;  // a drive was replaced: heal everything once
  std::atomic<uint64_t> healed_objects{0};
  std::atomic<uint64_t> healed_shards{0};
  std::atomic<uint64_t> heal_failures{0};
  std::atomic<uint64_t> healed_bytes{0};
  std::chrono::seconds interval{10};
  std::chrono::seconds lifecycle_interval{3600};
  std::chrono::steady_clock::time_point next_lifecycle;
  // Capacity and free bytes of each drive's file system, by path, as of the last check.
  mutable std::mutex space_mu;
  std::map<std::string, std::pair<uint64_t, uint64_t>> space;

  void MeasureSpace() {
    std::map<std::string, std::pair<uint64_t, uint64_t>> now;
    for (const openlake::store::DriveInfo& d : store->Drives()) {
      struct statvfs v {};
      if (d.online && d.local && statvfs(d.path.c_str(), &v) == 0) {
        now[d.path] = {static_cast<uint64_t>(v.f_blocks) * v.f_frsize,
                       static_cast<uint64_t>(v.f_bavail) * v.f_frsize};
      }
    }
    std::lock_guard<std::mutex> g(space_mu);
    space = std::move(now);
  }

  void HealLoop() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stopping) {
      MeasureSpace();
      // A drive folder removed or emptied under us gets its identity back, then a full heal.
      absl::StatusOr<int> restored = store->RestoreDrives();
      if (!restored.ok()) {
        OL_LOG(kWarning) << "openlaked: checking drives: " << restored.status();
      } else if (*restored > 0) {
        heal_all = true;
      }
      const bool all = heal_all;
      heal_all = false;
      if (all || store->heal_backlog() > 0) {
        lock.unlock();
        openlake::store::Store* st = store.get();
        absl::StatusOr<openlake::store::HealResult> r = openlake::io::BlockOn(
            *rt, 0, [st, all] { return all ? st->Heal("", "") : st->DrainHealQueue(); });
        if (!r.ok()) {
          OL_LOG(kWarning) << "openlaked: healing: " << r.status();
        } else if (r->objects_healed > 0 || r->buckets_healed > 0 || r->objects_failed > 0) {
          healed_objects += r->objects_healed;
          healed_shards += r->shards_written;
          heal_failures += r->objects_failed;
          healed_bytes += r->bytes_written;
          OL_LOG(kInfo) << "openlaked: healed " << r->objects_healed << " objects ("
                        << r->shards_written << " shards, " << r->buckets_healed
                        << " bucket folders); " << r->objects_failed << " could not be healed";
        }
        lock.lock();
      }
      if (server && std::chrono::steady_clock::now() >= next_lifecycle) {
        lock.unlock();
        openlake::s3::S3Server* srv = server.get();
        const absl::StatusOr<bool> pass_done = openlake::io::BlockOn(
            *rt, 0, [srv] { return srv->RunLifecycleRound(absl::Now()); });
        // A pass cut short by its budget goes on at the next tick.
        const bool cut_short = pass_done.ok() && !*pass_done;
        next_lifecycle = std::chrono::steady_clock::now() +
                         (cut_short ? std::chrono::seconds(0) : lifecycle_interval);
        lock.lock();
      }
      cv.wait_for(lock, interval, [this] { return stopping; });
    }
  }
};

absl::StatusOr<std::unique_ptr<ObjectStoreNode>> ObjectStoreNode::Start(
    const openlake::tools::Config& cfg, openlake::io::Runtime& rt,
    std::function<bool()> cancelled) {
  if (cfg.data_dirs.empty()) {
    return absl::InvalidArgumentError("the object store needs data_dirs");
  }
  if (cfg.s3_tls) {
    return absl::UnimplementedError(
        "[s3_tls]: TLS for S3 is not part of this build; serve it through a TLS proxy (and "
        "remove [s3_tls]) rather than have it fall back to plain HTTP");
  }
  // First start: none of the folders exist yet (the embedded default's ./data/d0..d3), so they
  // are made, owner-only. Later a missing folder is a missing drive and stays missing: making
  // it could put a drive's data on the wrong file system (an unmounted disk's mount point).
  bool any = false;
  for (const std::string& d : cfg.data_dirs) any = any || std::filesystem::exists(d);
  if (!any) {
    for (const std::string& d : cfg.data_dirs) {
      // Every folder made here is owner-only, the ones above the drive (./data) too.
      std::vector<std::filesystem::path> made;
      for (std::filesystem::path p = std::filesystem::absolute(d).lexically_normal();
           !p.empty() && !std::filesystem::exists(p) && p != p.parent_path(); p = p.parent_path()) {
        made.push_back(p);
      }
      std::error_code ec;
      std::filesystem::create_directories(d, ec);
      if (ec) return absl::InternalError(absl::StrCat("creating ", d, ": ", ec.message()));
      for (const std::filesystem::path& p : made) chmod(p.c_str(), 0700);
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->rt = &rt;
  impl->interval = std::chrono::seconds(cfg.heal_interval_secs);
  impl->lifecycle_interval = std::chrono::seconds(cfg.lifecycle_interval_secs);
  impl->next_lifecycle = std::chrono::steady_clock::now() + impl->lifecycle_interval;
  openlake::store::StoreOptions so = openlake::tools::StoreOptionsFor(cfg);
  if (so.cluster) {
    so.cluster->runtime = &rt;
    so.cluster->cancelled = std::move(cancelled);
    std::printf("object store: one store over %zu nodes; waiting for the cluster (up to %u s)\n",
                cfg.nodes.size(), cfg.cluster_boot_timeout_secs);
    std::fflush(stdout);
  }
  absl::StatusOr<std::unique_ptr<openlake::store::Store>> store =
      openlake::store::Store::Open(std::move(so));
  if (!store.ok()) return store.status();
  impl->store = *std::move(store);

  absl::StatusOr<std::unique_ptr<openlake::s3::S3Server>> server =
      openlake::s3::S3Server::Start(rt, *impl->store, openlake::tools::S3ServerOptionsFor(cfg));
  if (!server.ok()) return server.status();
  impl->server = *std::move(server);

  const openlake::store::Store& st = *impl->store;
  int online = 0;
  for (const openlake::store::DriveInfo& d : st.Drives()) {
    online += d.online;
    if (d.state == "replaced") impl->heal_all = true;
    if (!d.online) {
      std::printf("object store: drive %s is offline (%s)\n", d.path.c_str(), d.state.c_str());
    }
  }
  std::printf("S3: http://%s (region %s) over %zu drive folders (%d online; %d set(s), "
              "RS %d+%d)\n",
              impl->server->address().c_str(), cfg.region.c_str(), cfg.data_dirs.size(), online,
              st.set_count(), st.data_shards(), st.parity_shards());
  if (impl->server->generated_credentials()) {
    const openlake::s3::Credential& k = impl->server->credentials().front();
    std::printf("S3 credentials (generated; kept in %s, owner-only):\n"
                "  access key: %s\n  secret key: %s\n",
                impl->server->credentials_file().c_str(), k.access_key.c_str(),
                k.secret_key.c_str());
  } else if (!impl->server->credentials_file().empty()) {
    std::printf("S3 credentials: from %s\n", impl->server->credentials_file().c_str());
  }
  auto parsed = openlake::io::SocketAddress::Parse(cfg.s3_addr);
  if (parsed.ok() && !parsed->IsLoopback()) {
    std::printf("S3 listens beyond loopback: every request must be signed (SigV4); traffic is "
                "plain HTTP unless a TLS proxy is in front\n");
  }
  impl->MeasureSpace();
  Impl* raw = impl.get();
  impl->healer = std::thread([raw] { raw->HealLoop(); });
  return std::unique_ptr<ObjectStoreNode>(new ObjectStoreNode(std::move(impl)));
}

ObjectStoreNode::ObjectStoreNode(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ObjectStoreNode::~ObjectStoreNode() { Stop(); }

void ObjectStoreNode::WriteMetrics(openlake::PrometheusWriter& w) const {
  if (!impl_ || !impl_->store) return;
  if (impl_->server) impl_->server->WriteMetrics(w);
  const std::vector<openlake::store::DriveInfo> drives = impl_->store->Drives();
  std::map<std::string, int> states;
  for (const openlake::store::DriveInfo& d : drives) ++states[d.state];
  for (const auto& [state, n] : states) {
    w.Gauge("openlake_store_drives", "Drives of the object store, by state", n,
            {{"state", state}});
  }
  for (const openlake::store::DriveInfo& d : drives) {
    w.Gauge("openlake_store_drive_online", "1 while a drive serves, 0 when it is offline",
            d.online ? 1 : 0, {{"drive", d.path}, {"state", d.state}});
  }
  for (const openlake::store::DriveInfo& d : drives) {
    w.Counter("openlake_store_drive_errors_total",
              "I/O errors and damaged data found on a drive: failed or checksum-mismatched "
              "reads, failed writes",
              static_cast<double>(d.errors), {{"drive", d.path}});
  }
  w.Gauge("openlake_store_heal_queue", "Objects queued for healing by reads",
          static_cast<double>(impl_->store->heal_backlog()));
  w.Counter("openlake_store_healed_objects_total", "Objects the healer rewrote on some drive",
            static_cast<double>(impl_->healed_objects.load()));
  w.Counter("openlake_store_healed_shards_total", "Drive copies of objects the healer rebuilt",
            static_cast<double>(impl_->healed_shards.load()));
  w.Counter("openlake_store_healed_bytes_total", "Shard bytes the healer rebuilt",
            static_cast<double>(impl_->healed_bytes.load()));
  w.Counter("openlake_store_heal_failures_total", "Objects the healer could not rebuild",
            static_cast<double>(impl_->heal_failures.load()));
  const openlake::store::ClusterCounters c = impl_->store->cluster_counters();
  if (c.peers > 0) {
    w.Gauge("openlake_store_cluster_peers", "Other nodes of the object store", c.peers);
    w.Gauge("openlake_store_cluster_peers_up", "Other nodes of the object store answering now",
            c.peers_up);
    w.Counter("openlake_store_lock_rounds_total",
              "Cluster lock rounds (lock, unlock, refresh), one request to each node",
              static_cast<double>(c.lock_rounds));
    w.Counter("openlake_store_locks_acquired_total", "Cluster locks that reached their quorum",
              static_cast<double>(c.locks_acquired));
    w.Counter("openlake_store_locks_timed_out_total",
              "Cluster locks that found no quorum within their timeout",
              static_cast<double>(c.locks_timed_out));
    w.Counter("openlake_store_locks_unreachable_total",
              "Cluster locks given up at once: too few nodes answered for a quorum",
              static_cast<double>(c.locks_unreachable));
    w.Counter("openlake_store_locks_lost_total", "Held cluster locks a refresh found gone",
              static_cast<double>(c.locks_lost));
  }
}

bool ObjectStoreNode::Ready(std::string* why) const {
  if (!impl_ || !impl_->store) {
    *why = "the object store is stopped";
    return false;
  }
  const openlake::store::Store& st = *impl_->store;
  // Ready means a write would succeed: count the drives that can take one, not those merely
  // online (a drive remounted read-only or full is online and takes nothing).
  std::vector<int> writable(static_cast<size_t>(st.set_count()), 0);
  for (const openlake::store::DriveInfo& d : st.Drives()) {
    if (!d.online || d.set < 0 || d.set >= st.set_count()) continue;
    if (!d.local) {
      // Another node's drive: online means its node answers; its own readiness checks its
      // file system.
      ++writable[static_cast<size_t>(d.set)];
      continue;
    }
    struct statvfs v {};
    if (statvfs(d.path.c_str(), &v) != 0 || (v.f_flag & ST_RDONLY) != 0) continue;
    if (static_cast<uint64_t>(v.f_bavail) * v.f_frsize < kMinWritableBytes) continue;
    ++writable[static_cast<size_t>(d.set)];
  }
  const int quorum = st.write_quorum();
  for (size_t s = 0; s < writable.size(); ++s) {
    if (writable[s] < quorum) {
      *why = absl::StrCat("erasure set ", s, " has ", writable[s],
                          " drives that can take writes (online, not read-only, not full), "
                          "fewer than the ",
                          quorum, " a write needs");
      return false;
    }
  }
  return true;
}

void ObjectStoreNode::FillStatus(openlake::node::NodeStatus* st) const {
  if (!impl_ || !impl_->store) return;
  const openlake::store::Store& store = *impl_->store;
  st->s3 = impl_->server != nullptr;
  if (impl_->server) st->s3_addr = impl_->server->address();
  st->deployment_id = store.deployment_id();
  st->set_count = store.set_count();
  st->data_shards = store.data_shards();
  st->parity_shards = store.parity_shards();
  std::lock_guard<std::mutex> g(impl_->space_mu);
  for (const openlake::store::DriveInfo& d : store.Drives()) {
    openlake::node::DriveStatus ds;
    ds.path = d.path;
    ds.set = d.set;
    ds.position = d.position;
    ds.online = d.online;
    ds.state = d.state;
    ds.drive_id = d.drive_id;
    ds.errors = d.errors;
    ds.node = d.node;
    ds.remote = !d.local;
    if (auto it = impl_->space.find(d.path); it != impl_->space.end()) {
      ds.total_bytes = it->second.first;
      ds.free_bytes = it->second.second;
    }
    st->drives.push_back(std::move(ds));
  }
}

void ObjectStoreNode::Stop() {
  if (!impl_) return;
  if (impl_->server) impl_->server->Stop();
  {
    std::lock_guard<std::mutex> g(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->healer.joinable()) impl_->healer.join();
  impl_->server.reset();
  impl_->store.reset();
}

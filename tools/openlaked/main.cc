// openlaked: the OpenLake daemon. It owns the process (config, signals, log sink, CPU pinning)
// and runs what libopenlake provides: the KV pool and the S3 object store.
//
//   openlaked                      # the embedded default: KV pool on 127.0.0.1:9400,
//                                  # S3 on 127.0.0.1:9000 over ./data/d0..d3
//   openlaked --config node.toml   # upstream-compatible TOML (see docs/configuration.md)
#include <arpa/inet.h>
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"

#include "admin_sources.h"
#include "daemon_config.h"
#include "human_bytes.h"
#include "node_status.h"
#include "object_store.h"

#include "openlake/cluster/membership.h"
#include "openlake/cluster/prober.h"
#include "openlake/io/reactor.h"
#include "openlake/io/socket.h"
#include "openlake/kv/service.h"
#include "openlake/net/ucx.h"
#include "openlake/log.h"
#include "openlake/node/status.h"
#include "openlake/status.h"
#include "openlake/store/cluster.h"
#include "openlake/version.h"

namespace {

using openlake::tools::HumanBytes;

// SIGINT or SIGTERM, taken from the start by a thread of its own, so that one arriving while
// the store still waits for its cluster ends that wait instead of pending until it is over.
// Made once and never freed: the thread stays in sigwait when main returns early.
class StopSignal {
 public:
  // `signals` must be blocked in every thread already.
  static const StopSignal& Watch(sigset_t signals) {
    static StopSignal* const stop = new StopSignal;
    std::thread([signals] {
      int sig = 0;
      if (sigwait(&signals, &sig) != 0) return;
      stop->received_.store(sig);
      stop->done_.Notify();
    }).detach();
    return *stop;
  }
  static const char* Name(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }

  // The signal received, or 0.
  int received() const { return received_.load(); }
  void Wait() const { done_.WaitForNotification(); }

 private:
  std::atomic<int> received_{0};
  absl::Notification done_;
};

// Parses the address `what` names; one beyond loopback without its secret (`secured` false) is
// refused with `beyond`. Prints why and answers nothing on failure.
std::optional<openlake::io::SocketAddress> CheckAddress(const std::string& what,
                                                        const std::string& address, bool secured,
                                                        const char* beyond) {
  auto addr = openlake::io::SocketAddress::Parse(address);
  if (!addr.ok()) {
    std::fprintf(stderr, "openlaked: %s: %s\n", what.c_str(),
                 std::string(addr.status().message()).c_str());
    return std::nullopt;
  }
  if (!addr->IsLoopback() && !secured) {
    std::fprintf(stderr, "openlaked: %s %s %s\n", what.c_str(), address.c_str(), beyond);
    return std::nullopt;
  }
  return *addr;
}

// "127.0.0.1:9400", "[::1]:9400", "localhost:9400" (without resolving anything).
bool IsLoopbackLiteral(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

// Default place of the KV pool's Unix socket: /run/openlake for root, the user's runtime
// folder otherwise, else a per-user folder in /tmp (checked to be ours by the service).
std::string DefaultSocketPath(uint16_t port) {
  const std::string file = absl::StrCat("kv-", port, ".sock");
  if (geteuid() == 0) {
    mkdir("/run/openlake", 0700);
    if (access("/run/openlake", W_OK) == 0) return absl::StrCat("/run/openlake/", file);
  }
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && *xdg && access(xdg, W_OK) == 0) {
    return absl::StrCat(xdg, "/openlake/", file);
  }
  return absl::StrCat("/tmp/openlake-", geteuid(), "/", file);
}

// Overrides from the environment, for containers: the pod ordinal as the node id (as upstream
// reads it), and the secrets a Kubernetes Secret passes as variables rather than in a config
// file. False (after printing why) when a value is unusable.
bool ApplyEnvironment(openlake::tools::Config* cfg) {
  auto env = [](const char* name) -> const char* {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  std::vector<std::string> applied;
  if (const char* id = env("OPENLAKE_SELF_ID")) {
    uint32_t v = 0;
    if (!absl::SimpleAtoi(id, &v) || v > 65535) {
      std::fprintf(stderr, "openlaked: OPENLAKE_SELF_ID=%s is not a node id\n", id);
      return false;
    }
    cfg->self_id = v;
    applied.push_back(absl::StrCat("OPENLAKE_SELF_ID=", id));
  }
  if (const char* s = env("OPENLAKE_RPC_SECRET")) {
    cfg->rpc_secret = s;
    applied.push_back("OPENLAKE_RPC_SECRET");
  }
  if (const char* t = env("OPENLAKE_ADMIN_TOKEN")) {
    cfg->admin_token = t;
    applied.push_back("OPENLAKE_ADMIN_TOKEN");
  }
  const char* ak = env("OPENLAKE_S3_ACCESS_KEY");
  const char* sk = env("OPENLAKE_S3_SECRET_KEY");
  if ((ak == nullptr) != (sk == nullptr)) {
    std::fprintf(stderr,
                 "openlaked: OPENLAKE_S3_ACCESS_KEY and OPENLAKE_S3_SECRET_KEY go "
                 "together: set both or neither\n");
    return false;
  }
  if (ak != nullptr) {
    cfg->credentials = {openlake::s3::Credential{ak, sk}};
    applied.push_back("OPENLAKE_S3_ACCESS_KEY/OPENLAKE_S3_SECRET_KEY");
  }
  if (applied.empty()) return true;
  if (absl::Status st = openlake::tools::ValidateConfig(*cfg); !st.ok()) {
    std::fprintf(stderr, "openlaked: with %s: %s\n", absl::StrJoin(applied, ", ").c_str(),
                 std::string(st.message()).c_str());
    return false;
  }
  return true;
}

int Run(const std::string& config_path) {
  const absl::Time started = absl::Now();
  absl::StatusOr<openlake::tools::Config> cfg_or =
      config_path.empty() ? openlake::tools::DefaultConfig()
                          : openlake::tools::LoadConfigFile(config_path);
  if (!cfg_or.ok()) {
    std::fprintf(stderr, "openlaked: %s\n", std::string(cfg_or.status().message()).c_str());
    return 2;
  }
  openlake::tools::Config cfg = *std::move(cfg_or);
  if (!ApplyEnvironment(&cfg)) return 2;

  const bool admin_explicit = !cfg.admin_addr.empty();
  const std::string admin_at = admin_explicit ? cfg.admin_addr : "127.0.0.1:9464";
  if (cfg.admin_addr != "off" &&
      !CheckAddress("admin_addr", admin_at, !cfg.admin_token.empty(),
                    "listens beyond loopback: set admin_token (clients send it as "
                    "\"Authorization: Bearer <token>\")")) {
    return 2;
  }
  // rpc_addr serves the KV pool and the node status (every node answers it there).
  auto rpc_addr = CheckAddress("rpc_addr", cfg.rpc_addr, !cfg.rpc_secret.empty(),
                               "listens beyond loopback: set rpc_secret (or OPENLAKE_RPC_SECRET); "
                               "its clients present it in the RPC handshake");
  if (!rpc_addr) return 2;
  // A cluster: every member's address must parse, and links beyond loopback need the secret
  // (the peers' listeners ask for it, and this node's probes present it).
  const bool cluster = cfg.nodes.size() > 1;
  // Peers are not resolved here: a name (a Kubernetes pod's) may resolve only once that peer
  // runs. Anything but a loopback literal counts as beyond loopback.
  for (const openlake::tools::NodeConfig& n :
       cluster ? cfg.nodes : std::vector<openlake::tools::NodeConfig>{}) {
    if (!IsLoopbackLiteral(n.rpc_addr) && cfg.rpc_secret.empty()) {
      std::fprintf(stderr,
                   "openlaked: [[nodes]] id %u rpc_addr %s is beyond loopback: a cluster beyond "
                   "loopback needs rpc_secret (or OPENLAKE_RPC_SECRET), the same on every node\n",
                   n.id, n.rpc_addr.c_str());
      return 2;
    }
  }
  // A storage cluster is one S3 endpoint on every node: each must accept the same keys. A pair
  // generated on each node would lock clients out of all but one.
  const bool storage_cluster = cluster && cfg.mode == openlake::tools::Mode::kStorage;
  if (storage_cluster && cfg.credentials.empty()) {
    std::fprintf(stderr,
                 "openlaked: an object store over several [[nodes]] needs its S3 credentials in "
                 "the config ([[credentials]]) or the environment (OPENLAKE_S3_ACCESS_KEY and "
                 "OPENLAKE_S3_SECRET_KEY), the same on every node\n");
    return 2;
  }

  // Block the stop signals before any thread starts, so every thread inherits the mask and only
  // the sigwait below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  const StopSignal& stop = StopSignal::Watch(stop_signals);

  auto rt_or = openlake::io::Runtime::Create(openlake::tools::RuntimeOptionsFor(cfg));
  if (!rt_or.ok()) {
    std::fprintf(stderr, "openlaked: %s\n", std::string(rt_or.status().message()).c_str());
    return 1;
  }
  auto rt = *std::move(rt_or);
  if (absl::Status st = rt->Start(); !st.ok()) {
    std::fprintf(stderr, "openlaked: starting reactors: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  std::vector<int> cpus;
  for (unsigned i = 0; i < rt->size(); ++i) cpus.push_back(rt->reactor(i).cpu());
  std::printf("openlaked %s (%s, config %s): %u reactors pinned to CPUs %s, io_uring %s\n",
              std::string(openlake::Version()).c_str(),
              std::string(openlake::tools::ModeName(cfg.mode)).c_str(), cfg.source.c_str(),
              rt->size(), absl::StrJoin(cpus, ",").c_str(),
              rt->reactor(0).deferred_taskrun() ? "SINGLE_ISSUER|DEFER_TASKRUN"
                                                : "(plain flags: older kernel)");

  // Every node answers the node status RPC on rpc_addr: on the KV pool's listeners when it runs
  // one, else on a listener of its own (below).
  auto status = std::make_shared<NodeStatusSource>(cfg, rt->size(), started);
  openlake::node::StatusFn status_fn = [status] { return status->Status(); };
  // A storage cluster's services on the same RPC server: this node's drives for the peers'
  // engines (which start by reading them, so they are served before this node's store opens).
  std::unique_ptr<openlake::store::ClusterServices> cluster_services;
  unsigned cluster_services_reactor = 0;
  openlake::node::ExtendFn extend_cluster;
  if (storage_cluster) {
    const openlake::store::StoreOptions so = openlake::tools::StoreOptionsFor(cfg);
    openlake::store::ClusterServiceOptions co;
    co.node_id = cfg.self_id;
    co.drives = cfg.data_dirs;
    co.layout_digest =
        openlake::store::LayoutDigest(so.cluster->nodes, so.set_drive_count, so.parity);
    extend_cluster = [&cluster_services, &cluster_services_reactor,
                      co](openlake::net::RpcServer& server) {
      cluster_services = openlake::store::ClusterServices::Attach(server, co);
      cluster_services_reactor = server.reactor().id();
    };
  }
  // Closes the cluster services on their reactor, once their server has stopped.
  auto stop_cluster_services = [&] {
    if (cluster_services) {
      (void)rt->RunOn(cluster_services_reactor, [&] { cluster_services.reset(); });
    }
  };
  // The cluster's members (liveness comes from the prober, started below): the KV pool asks
  // them for the prefixes it misses.
  std::unique_ptr<openlake::cluster::Membership> membership;
  if (cluster) {
    std::vector<openlake::cluster::Member> members;
    for (const auto& n : cfg.nodes) members.push_back({n.id, n.rpc_addr});
    membership = std::make_unique<openlake::cluster::Membership>(
        cfg.self_id, std::move(members), openlake::cluster::MembershipOptions{});
  }
  std::unique_ptr<openlake::kv::KvService> kv;
  if (cfg.kv_enabled) {
    auto slab = openlake::tools::KvSlabBytes(cfg.kv_slab, openlake::tools::MemTotalBytes());
    if (!slab.ok()) {
      std::fprintf(stderr, "openlaked: %s\n", std::string(slab.status().message()).c_str());
      return 2;
    }
    openlake::kv::KvServiceOptions ko = openlake::tools::KvServiceOptionsFor(
        cfg, *slab, cfg.kv_socket.empty() ? DefaultSocketPath(rpc_addr->port()) : cfg.kv_socket);
    ko.extend = [&status_fn, &extend_cluster](openlake::net::RpcServer& server) {
      openlake::node::ServeStatus(server, status_fn);
      if (extend_cluster) extend_cluster(server);
    };
    if (membership) {
      ko.cluster.membership = membership.get();
      ko.cluster.secret = cfg.rpc_secret;
      // An RDMA device name becomes UCX's device selection; UCX_TLS and UCX_NET_DEVICES in
      // the environment apply otherwise.
      if (cfg.rdma && cfg.rdma->backend == "ucx" && !cfg.rdma->dev_name.empty()) {
        ko.cluster.ucx_devices = cfg.rdma->dev_name;
      }
      if (openlake::net::UcxBuilt()) {
        // What UCX will use: the config's choice, else the environment's, else its own ("").
        auto effective = [](const std::string& chosen, const char* variable) {
          const char* env = std::getenv(variable);
          return chosen.empty() && env != nullptr ? std::string(env) : chosen;
        };
        status->SetKvUcx(effective(ko.cluster.ucx_tls, "UCX_TLS"),
                         effective(ko.cluster.ucx_devices, "UCX_NET_DEVICES"));
      }
    }
    status->SetKv(*slab);
    auto svc = openlake::kv::KvService::Start(*rt, ko);
    if (!svc.ok()) {
      std::fprintf(stderr, "openlaked: KV pool: %s\n", std::string(svc.status().message()).c_str());
      stop_cluster_services();
      rt->Stop();
      return 1;
    }
    kv = *std::move(svc);
    std::printf(
        "KV pool: tcp %s, unix %s; slab %s in shared memory (committed as used), "
        "segments of %s, leases %u s%s\n",
        kv->tcp_address().c_str(), kv->unix_socket().c_str(), HumanBytes(kv->slab_bytes()).c_str(),
        HumanBytes(kv->segment_bytes()).c_str(), cfg.kv_slab.reserve_ttl_secs,
        rpc_addr->IsLoopback() ? "" : " (beyond loopback: clients must present rpc_secret)");
    if (!cfg.kv_disk.paths.empty()) {
      auto st = kv->Stats();
      if (st.ok()) {
        std::printf(
            "KV disk tier: %u of %u path(s) online (%s), %s; %llu blocks recovered in %.3f s%s\n",
            st->disk_paths_online, st->disk_paths, absl::StrJoin(cfg.kv_disk.paths, ", ").c_str(),
            HumanBytes(st->disk_capacity_bytes).c_str(),
            static_cast<unsigned long long>(st->recovered_blocks), st->recovery_seconds,
            cfg.kv_disk.spill ? "" : "; spill off (written at shutdown only)");
      }
    }
  }
  std::unique_ptr<openlake::node::StatusServer> status_server;
  if (!kv && cfg.mode == openlake::tools::Mode::kStorage) {
    auto srv = openlake::node::StatusServer::Start(*rt, 0, cfg.rpc_addr, cfg.rpc_secret, status_fn,
                                                   extend_cluster);
    if (!srv.ok() && cfg.nodes.empty()) {
      // A lone storage node whose rpc_addr is taken (say, by another daemon's KV pool on the
      // default port) serves S3 all the same; in a cluster every node must answer.
      std::printf("node status: not served (rpc_addr %s: %s)\n", cfg.rpc_addr.c_str(),
                  std::string(srv.status().message()).c_str());
    } else if (!srv.ok()) {
      std::fprintf(stderr, "openlaked: node status on rpc_addr %s: %s\n", cfg.rpc_addr.c_str(),
                   std::string(srv.status().message()).c_str());
      rt->Stop();
      return 1;
    } else {
      status_server = *std::move(srv);
      std::printf("node status: rpc %s\n", status_server->address().c_str());
    }
  }
  std::unique_ptr<ObjectStoreNode> objects;
  if (cfg.mode == openlake::tools::Mode::kStorage) {
    auto node = ObjectStoreNode::Start(cfg, *rt, [&stop] { return stop.received() != 0; });
    if (!node.ok()) {
      const bool stopped = absl::IsCancelled(node.status()) && stop.received() != 0;
      if (stopped) {
        std::printf("openlaked: %s received while waiting for the cluster, shutting down\n",
                    StopSignal::Name(stop.received()));
      } else {
        std::fprintf(stderr, "openlaked: object store: %s\n",
                     std::string(node.status().message()).c_str());
      }
      if (status_server) status_server->Stop();
      if (kv) kv->Stop();
      stop_cluster_services();
      rt->Stop();
      if (stopped) std::printf("openlaked: stopped\n");
      return stopped ? 0 : 1;
    }
    objects = *std::move(node);
    status->SetObjects(objects.get());
  }
  if (!kv && !objects) {
    std::fprintf(stderr, "openlaked: this configuration enables nothing this build serves\n");
    if (status_server) status_server->Stop();
    rt->Stop();
    return 2;
  }
  // Liveness of the other members, probed over their node status RPC.
  std::unique_ptr<openlake::cluster::Prober> prober;
  if (cluster) {
    openlake::cluster::ProberOptions po;
    po.secret = cfg.rpc_secret;
    auto p = openlake::cluster::Prober::Start(*membership, po);
    if (!p.ok()) {
      std::fprintf(stderr, "openlaked: cluster: %s\n", std::string(p.status().message()).c_str());
      status->SetObjects(nullptr);
      if (objects) objects->Stop();
      if (status_server) status_server->Stop();
      if (kv) kv->Stop();
      stop_cluster_services();
      rt->Stop();
      return 1;
    }
    prober = *std::move(p);
    status->SetMembership(membership.get());
    std::printf("cluster: node %u of %zu, probing its peers' node status every 1 s\n", cfg.self_id,
                cfg.nodes.size());
  }
  std::unique_ptr<openlake::AdminServer> admin;
  if (cfg.admin_addr != "off") {
    auto a = openlake::AdminServer::Start(
        {admin_at, cfg.admin_token},
        MakeAdminSources(rt.get(), kv.get(), objects.get(), membership.get(), started));
    if (!a.ok() && !admin_explicit) {
      std::printf("admin: not started (%s: %s); set admin_addr to serve /metrics elsewhere\n",
                  admin_at.c_str(), std::string(a.status().message()).c_str());
    } else if (!a.ok()) {
      std::fprintf(stderr, "openlaked: admin listener: %s\n",
                   std::string(a.status().message()).c_str());
      status->SetMembership(nullptr);
      if (prober) prober->Stop();
      status->SetObjects(nullptr);
      if (objects) objects->Stop();
      if (status_server) status_server->Stop();
      if (kv) kv->Stop();
      stop_cluster_services();
      rt->Stop();
      return 1;
    } else {
      admin = *std::move(a);
      status->SetAdmin(admin->address());
      std::printf("admin: http://%s/metrics, /health/live, /health/ready%s\n",
                  admin->address().c_str(), cfg.admin_token.empty() ? "" : " (bearer token)");
    }
  }
  std::fflush(stdout);

  stop.Wait();
  std::printf("openlaked: %s received, shutting down\n", StopSignal::Name(stop.received()));
  std::fflush(stdout);
  if (admin) admin->Stop();
  status->SetMembership(nullptr);
  if (prober) prober->Stop();
  status->SetObjects(nullptr);
  if (objects) objects->Stop();
  if (status_server) status_server->Stop();
  if (kv) kv->Stop();
  stop_cluster_services();
  rt->Stop();
  std::printf("openlaked: stopped\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Buffers of 256 KiB and more (large RPC frames, answers a slow client has not taken) come
  // from mmap and go back to the system when freed. Setting the threshold turns off glibc's
  // habit of raising it after such a free, which kept that memory in the heap for good.
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  // Every connection is a descriptor: take all the hard limit allows (Go's runtime, and so
  // MinIO, does the same), so the caps in [limits] are what bounds them, not a soft 1024.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &files);
  }
  CLI::App app{"openlaked: the OpenLake daemon (KV-cache pool and S3 object store)"};
  std::string config;
  app.add_option("-c,--config", config, "TOML config (upstream OpenLake keys); default: embedded")
      ->check(CLI::ExistingFile);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "debug, info, warning or error")
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}));
  bool version = false;
  app.add_flag("--version", version, "print the version and exit");
  app.footer(
      "Examples:\n"
      "  openlaked                        KV pool on 127.0.0.1:9400 (slab = half the RAM),\n"
      "                                   S3 on 127.0.0.1:9000 over ./data/d0..d3\n"
      "  openlaked --config kv_local.toml\n");
  CLI11_PARSE(app, argc, argv);
  if (version) {
    std::printf("openlaked %s\n", std::string(openlake::Version()).c_str());
    return 0;
  }
  using openlake::LogLevel;
  openlake::SetMinLogLevel(log_level == "debug"     ? LogLevel::kDebug
                           : log_level == "warning" ? LogLevel::kWarning
                           : log_level == "error"   ? LogLevel::kError
                                                    : LogLevel::kInfo);
  return Run(config);
}

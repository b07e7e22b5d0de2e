// `openlake cluster status` and `cluster topology`: every node of a config, asked over its RPC
// (the node status method, openlake/node/status.h) rather than with a bare TCP connect, so
// "up" means an openlaked answered, with its id, version, uptime, services and drives.
// Nodes are asked in parallel, each within --probe-timeout-secs, so one dead node costs one
// timeout, not one per node.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "cli.h"

#include "openlake/kv/client.h"
#include "openlake/node/status.h"
#include "openlake/store/cluster.h"

namespace openlake::cli {

namespace {

struct StatusOptions {
  std::string config;
  std::string secret;       // overrides the config's rpc_secret
  double timeout_secs = 2;  // as upstream
  bool probe = false;       // topology only: ask the nodes too
  bool json = false;
};

// One node as the config describes it, and what asking it found.
struct NodeReport {
  NodeConfig node;
  bool asked = false;
  absl::Status error;  // OK when the node answered as itself
  node::NodeStatus status;
  std::optional<kv::PoolStats> pool;  // topology --probe, for a node that serves KV
  std::string pool_error;
};

std::string Message(const absl::Status& s) { return std::string(s.message()); }

// The config's nodes; a config without [[nodes]] is one node, this one.
std::vector<NodeReport> ConfiguredNodes(const Config& cfg) {
  std::vector<NodeReport> out;
  if (cfg.nodes.empty()) {
    NodeReport r;
    r.node.id = cfg.self_id;
    r.node.rpc_addr = cfg.rpc_addr;
    r.node.disk_count = static_cast<uint32_t>(cfg.data_dirs.size());
    out.push_back(std::move(r));
  }
  for (const NodeConfig& n : cfg.nodes) out.push_back(NodeReport{n});
  return out;
}

void Ask(NodeReport* r, const Config& cfg, const StatusOptions& o, bool with_pool) {
  r->asked = true;
  node::QueryOptions q;
  q.secret = o.secret.empty() ? cfg.rpc_secret : o.secret;
  q.timeout = absl::Seconds(o.timeout_secs);
  absl::StatusOr<node::NodeStatus> st = node::QueryStatus(r->node.rpc_addr, q);
  if (!st.ok()) {
    r->error = st.status();
    return;
  }
  r->status = *std::move(st);
  if (r->status.node_id != r->node.id) {
    r->error = absl::FailedPreconditionError(
        absl::StrFormat("answers as node %u, not %u: the address belongs to another node",
                        r->status.node_id, r->node.id));
    return;
  }
  if (!with_pool || !r->status.kv) return;
  auto client = ConnectPoolControl(r->node.rpc_addr, q.secret, q.timeout);
  absl::StatusOr<kv::PoolStats> pool =
      client.ok() ? (*client)->Stats() : absl::StatusOr<kv::PoolStats>(client.status());
  if (pool.ok()) {
    r->pool = *std::move(pool);
  } else {
    r->pool_error = Message(pool.status());
  }
}

void AskAll(std::vector<NodeReport>& nodes, const Config& cfg, const StatusOptions& o,
            bool with_pool) {
  std::vector<std::thread> threads;
  threads.reserve(nodes.size());
  for (NodeReport& r : nodes) {
    threads.emplace_back([&r, &cfg, &o, with_pool] { Ask(&r, cfg, o, with_pool); });
  }
  for (std::thread& t : threads) t.join();
}

std::string Uptime(double secs) {
  const uint64_t s = static_cast<uint64_t>(secs);
  if (s < 60) return absl::StrFormat("%us", s);
  if (s < 3600) return absl::StrFormat("%um%02us", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%uh%02um", s / 3600, s / 60 % 60);
  return absl::StrFormat("%ud%02uh", s / 86400, s / 3600 % 24);
}

std::vector<std::string> Services(const node::NodeStatus& st) {
  std::vector<std::string> out;
  if (st.kv) out.push_back("kv");
  if (st.s3) out.push_back("s3");
  return out;
}

int OnlineDrives(const node::NodeStatus& st) {
  int n = 0;
  for (const node::DriveStatus& d : st.drives) n += d.online;
  return n;
}

// A node's own drives (an object store over several nodes also reports the others', as it
// sees them).
std::pair<int, int> OwnDrives(const node::NodeStatus& st) {
  int online = 0, total = 0;
  for (const node::DriveStatus& d : st.drives) {
    if (d.remote) continue;
    ++total;
    online += d.online;
  }
  return {online, total};
}

bool StorageCluster(const Config& cfg) {
  return cfg.mode == tools::Mode::kStorage && cfg.nodes.size() > 1;
}

// ---- cluster status

void PrintStatusJson(const StatusOptions& o, const std::vector<NodeReport>& nodes, int up) {
  JsonWriter w;
  w.BeginObject().Field("config", o.config).Key("nodes").BeginArray();
  for (const NodeReport& r : nodes) {
    w.BeginObject().Field("id", r.node.id).Field("address", r.node.rpc_addr);
    w.Field("up", r.error.ok());
    if (r.error.ok()) {
      const node::NodeStatus& st = r.status;
      w.Field("version", st.version).Field("uptime_secs", st.uptime_secs);
      w.Key("serves").BeginArray();
      for (const std::string& s : Services(st)) w.String(s);
      w.EndArray();
      w.Key("s3_addr");
      st.s3 ? w.String(st.s3_addr) : w.Null();
      w.Key("admin_addr");
      st.admin_addr.empty() ? w.Null() : w.String(st.admin_addr);
      // Its own drives; and in a storage cluster every drive of the cluster as it sees them.
      const auto [own_online, own] = OwnDrives(st);
      w.Field("drives", static_cast<uint64_t>(own)).Field("drives_online", own_online);
      w.Field("cluster_drives", static_cast<uint64_t>(st.drives.size()))
          .Field("cluster_drives_online", OnlineDrives(st));
      // Its own view of the other members (its liveness probes).
      w.Key("peers").BeginArray();
      for (const node::PeerView& p : st.peers) {
        w.BeginObject()
            .Field("id", p.id)
            .Field("state", p.state)
            .Field("missed", p.missed)
            .Field("since_secs", p.since_secs)
            .EndObject();
      }
      w.EndArray();
      // How its KV pool pulls from the peers ("" = UCX's own choice); null when it does not.
      w.Key("kv_ucx");
      if (st.kv_ucx) {
        w.BeginObject().Field("tls", st.kv_ucx_tls).Field("devices", st.kv_ucx_devices).EndObject();
      } else {
        w.Null();
      }
      w.Key("error").Null();
    } else {
      w.Key("version").Null().Key("uptime_secs").Null();
      w.Key("serves").BeginArray().EndArray();
      w.Key("s3_addr").Null().Key("admin_addr").Null();
      w.Key("drives").Null().Key("drives_online").Null();
      w.Key("cluster_drives").Null().Key("cluster_drives_online").Null();
      w.Key("peers").BeginArray().EndArray();
      w.Key("kv_ucx").Null();
      w.Field("error", Message(r.error));
    }
    w.EndObject();
  }
  w.EndArray();
  w.Field("up", up).Field("down", static_cast<int>(nodes.size()) - up).EndObject();
  PrintJson(w);
}

void PrintStatusText(const std::vector<NodeReport>& nodes, int up) {
  std::printf("%-5s %-24s %-5s %-9s %-8s %-7s %s\n", "NODE", "ADDRESS", "STATE", "VERSION",
              "UPTIME", "SERVES", "DETAIL");
  for (const NodeReport& r : nodes) {
    if (!r.error.ok()) {
      std::printf("%-5u %-24s %-5s %-9s %-8s %-7s %s\n", r.node.id, r.node.rpc_addr.c_str(), "down",
                  "-", "-", "-", Message(r.error).c_str());
      continue;
    }
    const node::NodeStatus& st = r.status;
    std::string detail;
    if (st.s3) detail = "s3 " + st.s3_addr + ", ";
    const auto [own_online, own] = OwnDrives(st);
    if (own != static_cast<int>(st.drives.size())) {
      // One store over the cluster: its own drives, then every drive as it sees them.
      detail += absl::StrFormat("drives %d/%d online, sees %d/%zu of the cluster's, ", own_online,
                                own, OnlineDrives(st), st.drives.size());
    } else if (!st.drives.empty()) {
      detail += absl::StrFormat("drives %d/%zu online, ", OnlineDrives(st), st.drives.size());
    }
    if (st.kv) detail += "KV slab " + HumanBytes(st.kv_slab_bytes) + ", ";
    if (!st.admin_addr.empty()) detail += "admin " + st.admin_addr + ", ";
    if (!st.peers.empty()) {
      std::vector<std::string> down;
      for (const node::PeerView& p : st.peers) {
        if (p.state != "up") down.push_back(absl::StrCat(p.id));
      }
      detail +=
          absl::StrFormat("sees %zu/%zu peers up", st.peers.size() - down.size(), st.peers.size());
      if (!down.empty()) detail += " (not " + absl::StrJoin(down, ",") + ")";
      detail += ", ";
    }
    if (st.kv_ucx) {
      detail += "pulls over UCX " + (st.kv_ucx_tls.empty() ? "(its choice)" : st.kv_ucx_tls);
      if (!st.kv_ucx_devices.empty()) detail += " on " + st.kv_ucx_devices;
      detail += ", ";
    }
    if (!detail.empty()) detail.resize(detail.size() - 2);
    std::printf("%-5u %-24s %-5s %-9s %-8s %-7s %s\n", r.node.id, r.node.rpc_addr.c_str(), "up",
                st.version.c_str(), Uptime(st.uptime_secs).c_str(),
                absl::StrJoin(Services(st), ",").c_str(), detail.c_str());
  }
  const int down = static_cast<int>(nodes.size()) - up;
  std::printf("%zu node%s: %d up, %d down\n", nodes.size(), nodes.size() == 1 ? "" : "s", up, down);
}

int RunStatus(const StatusOptions& o) {
  std::optional<Config> cfg = LoadConfigOrReport(o.config);
  if (!cfg) return kExitUsage;
  std::vector<NodeReport> nodes = ConfiguredNodes(*cfg);
  AskAll(nodes, *cfg, o, /*with_pool=*/false);
  int up = 0;
  for (const NodeReport& r : nodes) up += r.error.ok();
  if (o.json) {
    PrintStatusJson(o, nodes, up);
  } else {
    PrintStatusText(nodes, up);
  }
  return up == static_cast<int>(nodes.size()) ? kExitOk : kExitRuntime;
}

// ---- cluster topology

// The erasure layout a node's drives get (as openlaked opens them): sets of
// min(disk_count, set_drive_count) drives, parity at most half a set.
struct Layout {
  uint32_t set_drives = 0;
  uint32_t parity = 0;
  uint32_t sets = 0;
};

Layout LayoutOf(const Config& cfg, uint32_t disk_count) {
  Layout l;
  l.set_drives = std::min(disk_count, cfg.set_drive_count);
  l.parity = std::min(cfg.default_parity_count, l.set_drives / 2);
  l.sets = l.set_drives == 0 ? 0 : disk_count / l.set_drives;
  return l;
}

void JsonProbe(JsonWriter& w, const NodeReport& r) {
  w.Key("probe");
  if (!r.asked) {
    w.Null();
    return;
  }
  w.BeginObject().Field("up", r.error.ok());
  if (!r.error.ok()) {
    w.Field("error", Message(r.error)).EndObject();
    return;
  }
  const node::NodeStatus& st = r.status;
  w.Field("version", st.version).Field("deployment_id", st.deployment_id);
  w.Key("drives").BeginArray();
  for (const node::DriveStatus& d : st.drives) {
    w.BeginObject()
        .Field("path", d.path)
        .Field("set", d.set)
        .Field("position", d.position)
        .Field("online", d.online)
        .Field("state", d.state)
        .Field("drive_id", d.drive_id)
        .Field("errors", d.errors)
        .Field("node", d.node)
        .Field("remote", d.remote);
    w.Key("total_bytes");
    d.total_bytes ? w.Uint(d.total_bytes) : w.Null();
    w.Key("free_bytes");
    d.total_bytes ? w.Uint(d.free_bytes) : w.Null();
    w.EndObject();
  }
  w.EndArray().Key("kv_pool");
  if (r.pool) {
    w.BeginObject()
        .Field("capacity_bytes", r.pool->capacity_bytes)
        .Field("used_bytes", r.pool->used_bytes)
        .Field("blocks", r.pool->committed_blocks)
        .Field("namespaces", r.pool->namespaces)
        .EndObject();
  } else if (!r.pool_error.empty()) {
    w.BeginObject().Field("error", r.pool_error).EndObject();
  } else {
    w.Null();
  }
  w.EndObject();
}

void PrintTopologyJson(const StatusOptions& o, const Config& cfg,
                       const std::vector<NodeReport>& nodes) {
  JsonWriter w;
  w.BeginObject()
      .Field("config", o.config)
      .Field("self_id", cfg.self_id)
      .Field("set_drive_count", cfg.set_drive_count)
      .Field("parity", cfg.default_parity_count);
  w.Key("nodes").BeginArray();
  for (const NodeReport& r : nodes) {
    const Layout l = LayoutOf(cfg, r.node.disk_count);
    w.BeginObject()
        .Field("id", r.node.id)
        .Field("address", r.node.rpc_addr)
        .Field("disk_count", r.node.disk_count)
        .Field("sets", l.sets)
        .Field("set_drives", l.set_drives)
        .Field("parity", l.parity);
    // Paths are known for this node only (each node's config lists its own data_dirs).
    w.Key("drives");
    if (r.node.id == cfg.self_id) {
      w.BeginArray();
      for (size_t i = 0; i < cfg.data_dirs.size(); ++i) {
        w.BeginObject().Field("path", cfg.data_dirs[i]);
        if (l.set_drives > 0) {
          w.Field("set", static_cast<uint64_t>(i / l.set_drives))
              .Field("position", static_cast<uint64_t>(i % l.set_drives));
        }
        w.EndObject();
      }
      w.EndArray();
    } else {
      w.Null();
    }
    JsonProbe(w, r);
    w.EndObject();
  }
  w.EndArray().EndObject();
  PrintJson(w);
}

void PrintProbedDrives(const node::NodeStatus& st) {
  for (int set = -1; set < st.set_count; ++set) {
    bool header = false;
    for (const node::DriveStatus& d : st.drives) {
      if (d.set != set) continue;
      if (!header) {
        if (set < 0) {
          std::printf("  not in any set:\n");
        } else {
          std::printf("  set %d (RS %d+%d):\n", set, st.data_shards, st.parity_shards);
        }
        header = true;
      }
      const std::string space =
          d.total_bytes
              ? absl::StrFormat("%s, %s free", HumanBytes(d.total_bytes), HumanBytes(d.free_bytes))
              : std::string("capacity unknown");
      const std::string errors =
          d.errors ? absl::StrFormat(", %u errors", d.errors) : std::string();
      std::printf("    %-3s %-32s %-22s %s%s\n",
                  d.position >= 0 ? absl::StrCat(d.position).c_str() : "-", d.path.c_str(),
                  d.state.c_str(), space.c_str(), errors.c_str());
    }
  }
}

// The sets of an object store over several nodes, each place with its node and drive, and with
// --probe the drive's state as its node reports it and how many answering nodes reach it.
void PrintClusterSets(const Config& cfg, const std::vector<NodeReport>& nodes) {
  absl::StatusOr<std::vector<store::DriveSlot>> slots =
      store::ClusterLayout(tools::ClusterNodesOf(cfg), static_cast<int>(cfg.set_drive_count));
  if (!slots.ok()) {
    std::printf("one object store over %zu nodes: no valid layout: %s\n", cfg.nodes.size(),
                Message(slots.status()).c_str());
    return;
  }
  const uint32_t n = cfg.set_drive_count;
  const uint32_t parity = std::min(cfg.default_parity_count, n / 2);
  const size_t most = (n + cfg.nodes.size() - 1) / cfg.nodes.size();
  std::printf("one object store over %zu nodes: %zu set%s of %u (RS %u+%u); a node's loss costs "
              "each set at most %zu drive%s\n",
              cfg.nodes.size(), slots->size() / n, slots->size() / n == 1 ? "" : "s", n,
              n - parity, parity, most, most == 1 ? "" : "s");
  for (size_t i = 0; i < slots->size(); ++i) {
    const int set = static_cast<int>(i / n), pos = static_cast<int>(i % n);
    if (pos == 0) std::printf("  set %d:\n", set);
    const store::DriveSlot& s = (*slots)[i];
    std::string state = "-", seen;
    int answering = 0, reach = 0;
    for (const NodeReport& r : nodes) {
      if (!r.asked || !r.error.ok()) continue;
      ++answering;
      for (const node::DriveStatus& d : r.status.drives) {
        if (d.set != set || d.position != pos) continue;
        reach += d.online;
        if (!d.remote && r.node.id == s.node) state = d.path + " " + d.state;
      }
    }
    if (answering > 0) seen = absl::StrFormat("  reached by %d/%d nodes", reach, answering);
    std::printf("    %-3d node %-4u drive %-3u %s%s\n", pos, s.node, s.index, state.c_str(),
                seen.c_str());
  }
}

void PrintTopologyText(const StatusOptions& o, const Config& cfg,
                       const std::vector<NodeReport>& nodes) {
  if (StorageCluster(cfg)) {
    PrintClusterSets(cfg, nodes);
    for (const NodeReport& r : nodes) {
      if (!r.asked) continue;
      if (!r.error.ok()) {
        std::printf("node %u  %s  unreachable: %s\n", r.node.id, r.node.rpc_addr.c_str(),
                    Message(r.error).c_str());
        continue;
      }
      const auto [own_online, own] = OwnDrives(r.status);
      std::printf("node %u  %s  up: openlaked %s, up %s, deployment %s, drives %d/%d online\n",
                  r.node.id, r.node.rpc_addr.c_str(), r.status.version.c_str(),
                  Uptime(r.status.uptime_secs).c_str(), r.status.deployment_id.c_str(),
                  own_online, own);
      if (r.pool) {
        std::printf("  KV pool: %s, %s used, %llu blocks in %llu namespaces\n",
                    HumanBytes(r.pool->capacity_bytes).c_str(),
                    HumanBytes(r.pool->used_bytes).c_str(),
                    static_cast<unsigned long long>(r.pool->committed_blocks),
                    static_cast<unsigned long long>(r.pool->namespaces));
      }
    }
    return;
  }
  uint64_t drives = 0;
  for (const NodeReport& r : nodes) drives += r.node.disk_count;
  std::printf("%s: %zu node%s, %llu drives; erasure sets of up to %u drives with %u parity\n",
              o.config.c_str(), nodes.size(), nodes.size() == 1 ? "" : "s",
              static_cast<unsigned long long>(drives), cfg.set_drive_count,
              cfg.default_parity_count);
  for (const NodeReport& r : nodes) {
    const Layout l = LayoutOf(cfg, r.node.disk_count);
    std::printf(
        "node %u  %s  %u drives: %u set%s of %u (RS %u+%u, survives %u lost drives per "
        "set)%s\n",
        r.node.id, r.node.rpc_addr.c_str(), r.node.disk_count, l.sets, l.sets == 1 ? "" : "s",
        l.set_drives, l.set_drives - l.parity, l.parity, l.parity,
        r.node.id == cfg.self_id ? "  [this config's node]" : "");
    if (!r.asked) {
      if (r.node.id == cfg.self_id && l.set_drives > 0) {
        for (size_t i = 0; i < cfg.data_dirs.size(); ++i) {
          std::printf("    set %zu, position %zu: %s\n", i / l.set_drives, i % l.set_drives,
                      cfg.data_dirs[i].c_str());
        }
      }
      continue;
    }
    if (!r.error.ok()) {
      std::printf("  unreachable: %s\n", Message(r.error).c_str());
      continue;
    }
    const node::NodeStatus& st = r.status;
    std::printf("  up: openlaked %s, up %s%s\n", st.version.c_str(), Uptime(st.uptime_secs).c_str(),
                st.deployment_id.empty() ? "" : (", deployment " + st.deployment_id).c_str());
    if (r.pool) {
      const double pct = r.pool->capacity_bytes ? 100.0 * static_cast<double>(r.pool->used_bytes) /
                                                      static_cast<double>(r.pool->capacity_bytes)
                                                : 0.0;
      std::printf("  KV pool: %s, %s used (%.1f%%), %llu blocks in %llu namespaces\n",
                  HumanBytes(r.pool->capacity_bytes).c_str(),
                  HumanBytes(r.pool->used_bytes).c_str(), pct,
                  static_cast<unsigned long long>(r.pool->committed_blocks),
                  static_cast<unsigned long long>(r.pool->namespaces));
    } else if (!r.pool_error.empty()) {
      std::printf("  KV pool: %s\n", r.pool_error.c_str());
    }
    PrintProbedDrives(st);
  }
}

int RunTopology(const StatusOptions& o) {
  std::optional<Config> cfg = LoadConfigOrReport(o.config);
  if (!cfg) return kExitUsage;
  std::vector<NodeReport> nodes = ConfiguredNodes(*cfg);
  if (o.probe) AskAll(nodes, *cfg, o, /*with_pool=*/true);
  if (o.json) {
    PrintTopologyJson(o, *cfg, nodes);
  } else {
    PrintTopologyText(o, *cfg, nodes);
  }
  for (const NodeReport& r : nodes) {
    if (r.asked && !r.error.ok()) return kExitRuntime;
  }
  return kExitOk;
}

void AddCommonOptions(CLI::App* cmd, StatusOptions* o) {
  cmd->add_option("--secret", o->secret,
                  "rpc_secret of the nodes, when the config leaves it to the environment (as the "
                  "Helm chart does)")
      ->envname("OPENLAKE_RPC_SECRET");
  cmd->add_option("--probe-timeout-secs", o->timeout_secs,
                  "how long each node has to answer (connect and call)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
}

}  // namespace

void AddClusterStatusCommands(CLI::App& cluster, int* exit_code) {
  {
    auto o = std::make_shared<StatusOptions>();
    CLI::App* status = cluster.add_subcommand(
        "status", "ask every node of a config whether it is up, what it serves, its version");
    status->add_option("-c,--config", o->config, "the deployment's TOML config")->required();
    AddCommonOptions(status, o.get());
    status->add_flag("--json", o->json, "one JSON object on stdout");
    status->footer(
        "Each node is asked over its RPC address (rpc_addr of its [[nodes]] entry; the config's\n"
        "rpc_secret, or --secret / OPENLAKE_RPC_SECRET, authenticates). Exit status 1 when any\n"
        "node is down or another node answers on its address.\n"
        "\n"
        "Examples:\n"
        "  openlake cluster status --config cluster.toml\n"
        "  openlake cluster status --config cluster.toml --probe-timeout-secs 1 --json");
    status->callback([o, exit_code] { *exit_code = RunStatus(*o); });
  }
  {
    auto o = std::make_shared<StatusOptions>();
    CLI::App* topo = cluster.add_subcommand(
        "topology", "nodes, drives and erasure sets as configured (--probe: as they are)");
    topo->add_option("-c,--config", o->config, "the deployment's TOML config")->required();
    topo->add_flag("--probe", o->probe,
                   "ask each node for its drives' live state, capacity and free space, and its "
                   "KV pool's size and use");
    AddCommonOptions(topo, o.get());
    topo->add_flag("--json", o->json, "one JSON object on stdout");
    topo->footer(
        "Without --probe nothing is contacted. With it, exit status 1 when a node cannot be "
        "asked.\n"
        "\n"
        "Examples:\n"
        "  openlake cluster topology --config cluster.toml\n"
        "  openlake cluster topology --config cluster.toml --probe --json");
    topo->callback([o, exit_code] { *exit_code = RunTopology(*o); });
  }
}

}  // namespace openlake::cli

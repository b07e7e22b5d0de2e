// The daemon's configuration file (docs/configuration.md): the TOML keys of upstream OpenLake
// (so its example configs run unchanged) plus a few of our own. This is the tools' code, not
// the library's: openlaked, the openlake CLI and the tests read it, and map it onto the option
// structs libopenlake takes (RuntimeOptions, KvServiceOptions, StoreOptions, S3ServerOptions),
// so an embedder links libopenlake without toml++ or this schema.
//
//   OL_ASSIGN_OR_RETURN(tools::Config cfg, tools::LoadConfigFile("kv_local.toml"));
//   OL_ASSIGN_OR_RETURN(uint64_t slab, tools::KvSlabBytes(cfg.kv_slab, tools::MemTotalBytes()));
//   auto rt = io::Runtime::Create(tools::RuntimeOptionsFor(cfg));
//
// Parsing never throws. A syntax error, a wrong type or an invalid value comes back as
// InvalidArgument naming the file, the line and the key at fault. Unknown keys are logged as
// warnings and otherwise ignored (upstream ignores them too).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "openlake/io/reactor.h"
#include "openlake/kv/service.h"
#include "openlake/s3/credential.h"
#include "openlake/s3/server.h"
#include "openlake/store/store.h"

namespace openlake::tools {

enum class Mode { kStorage, kKv };
enum class Transport { kH2, kRdma };

struct NodeConfig {
  uint32_t id = 0;
  std::string rpc_addr;
  uint32_t disk_count = 1;
};

struct KvSlabConfig {
  // Upstream keys. cpu_ram_frac (a fraction of MemTotal in (0, 1]) wins over capacity_gb.
  std::optional<double> cpu_ram_frac;
  std::optional<double> capacity_gb;  // may be fractional here (upstream: whole GiB)
  uint32_t reserve_ttl_secs = 60;     // lease time of reservations and read pins
  // Ours: the slab is carved into segments of this size, each holding slots of one size.
  uint64_t segment_bytes = 64ull << 20;
};

// Ours: the KV pool's disk tier ([kv_disk]; docs/kv-pool.md, "Disk tier").
struct KvDiskConfig {
  std::vector<std::string> paths;     // a folder per NVMe drive; empty: RAM only
  double capacity_gb = 0;             // per path; required with paths
  bool spill = true;                  // write evicted (and cold) blocks behind
  uint32_t shutdown_spill_secs = 30;  // on SIGTERM, time allowed to write the slab out
};

struct RdmaConfig {
  std::string backend = "dct";  // "dct" or "ucx"
  std::optional<uint32_t> self_node_id;
  std::string dev_name;
  std::optional<uint64_t> dc_key;
  uint32_t qos_traffic_class = 0;
  uint32_t qos_service_level = 0;
  uint32_t bulk_pool_cap = 64;
  uint64_t network_timeout_secs = 36000;
  uint32_t srq_depth = 4096;
  uint32_t max_send_wr = 256;
  uint32_t peer_credit = 4;
  std::optional<uint32_t> max_clients;
};

// Ours: what clients may hold ([limits]; docs/security.md, "Under attack").
struct LimitsConfig {
  uint32_t s3_max_connections = 4096;
  uint32_t s3_max_connections_per_client = 1024;
  uint32_t s3_head_timeout_secs = 30;
  uint32_t kv_max_tcp_connections = 4096;
  uint32_t kv_max_unix_connections = 1024;
  uint32_t rpc_max_buffered_mb = 1024;
  uint32_t kv_max_reserved_percent = 25;  // of the slab, per client session
  uint32_t kv_idle_timeout_secs = 600;    // TCP control connections; never the Unix socket
};

struct TlsConfig {
  std::string cert_path;
  std::string key_path;
  std::string client_ca;
};

struct Config {
  uint32_t self_id = 0;
  Mode mode = Mode::kStorage;
  Transport transport = Transport::kH2;
  std::string rpc_addr = "127.0.0.1:9400";
  std::string s3_addr = "127.0.0.1:9000";
  std::optional<uint16_t> s3_port;
  std::string region = "us-east-1";
  std::vector<std::string> data_dirs;
  uint32_t set_drive_count = 4;
  uint32_t default_parity_count = 2;
  // Parity of REDUCED_REDUNDANCY objects; -1: one, or the parity when that is less.
  int reduced_parity_count = -1;
  std::vector<s3::Credential> credentials;
  std::vector<NodeConfig> nodes;
  KvSlabConfig kv_slab;
  KvDiskConfig kv_disk;
  // True when the node runs the KV pool: mode = "kv", or a [kv_slab] table is present (the
  // embedded default has one).
  bool kv_enabled = false;
  std::optional<RdmaConfig> rdma;
  std::optional<TlsConfig> s3_tls;
  std::optional<TlsConfig> rpc_tls;

  // Ours.
  // Shared secret for RPC listeners beyond loopback (required there; see docs/rpc.md).
  std::string rpc_secret;
  // Local users admitted to the KV pool's RPC besides the daemon's own and root; they may
  // read every namespace and change only those they created (docs/security.md).
  std::vector<uint32_t> rpc_allowed_uids;
  // Path of the KV pool's Unix socket; empty = a per-user runtime folder (docs/kv-pool.md).
  std::string kv_socket;
  // The admin listener (/metrics, /health/*; docs/operations.md). Empty: 127.0.0.1:9464,
  // skipped with a warning when that port is taken (several daemons on one machine); "off":
  // none. Beyond loopback it needs admin_token, sent as "Authorization: Bearer <token>".
  std::string admin_addr;
  std::string admin_token;
  // How often the object store's healer checks its drives and repairs what reads found damaged.
  uint32_t heal_interval_secs = 10;
  // How often the S3 lifecycle rules are applied (a pass over every bucket with rules; a pass
  // too long for one round goes on at the healer's pace).
  uint32_t lifecycle_interval_secs = 3600;
  // An object store over several [[nodes]]: how long a starting node waits for enough of the
  // cluster (every drive of a blank one, a majority of a formatted one) before it gives up.
  uint32_t cluster_boot_timeout_secs = 300;
  LimitsConfig limits;
  // CPUs to run reactors on; empty = every CPU in the process's affinity mask.
  std::vector<int> cores;
  // Where the config came from, for messages ("<embedded default>" or a path).
  std::string source = "<embedded default>";
};

// The embedded default `openlaked` runs with no arguments: KV pool on 127.0.0.1:9400, slab of
// half the RAM (lazily committed), object store over ./data.
Config DefaultConfig();

// Parses TOML text. `source_name` is used in error messages.
absl::StatusOr<Config> ParseConfig(std::string_view toml, std::string_view source_name);

// Checks the cross-key rules (self_id among [[nodes]], parity at most half the set, ...);
// ParseConfig runs it, and a daemon that changes a parsed config (say, from the environment)
// runs it again.
absl::Status ValidateConfig(const Config& cfg);

// Reads and parses a TOML file. NotFound when it does not exist.
absl::StatusOr<Config> LoadConfigFile(const std::string& path);

// Total RAM from /proc/meminfo (MemTotal), in bytes; 0 if unreadable.
uint64_t MemTotalBytes();

// Slab size for `cfg`: cpu_ram_frac × mem_total when set, else capacity_gb GiB, else half of
// mem_total. InvalidArgument when the result is under 16 MiB or beyond mem_total.
absl::StatusOr<uint64_t> KvSlabBytes(const KvSlabConfig& cfg, uint64_t mem_total);

std::string_view ModeName(Mode mode);

// ---- The config mapped onto the library's options.

// The reactors: one per CPU of `cores` (all allowed CPUs when empty), pinned; a node with the KV
// pool polls for 50 µs after work so an engine's next request needs no wake-up.
io::RuntimeOptions RuntimeOptionsFor(const Config& cfg);
// The KV pool on rpc_addr and `unix_socket`, with a slab of `slab_bytes` (KvSlabBytes), the
// [kv_slab] segments and lease, and rpc_secret. The service's reactor is 0.
kv::KvServiceOptions KvServiceOptionsFor(const Config& cfg, uint64_t slab_bytes,
                                         std::string unix_socket);
// The [[nodes]] as the store's cluster spec.
std::vector<store::ClusterNodeSpec> ClusterNodesOf(const Config& cfg);
// The object store over data_dirs: sets of set_drive_count drives (fewer when fewer are listed),
// default_parity_count parity (at most half a set). With several [[nodes]], one store over
// every node's drives (StoreOptions::cluster; the caller sets its runtime).
store::StoreOptions StoreOptionsFor(const Config& cfg);
// The S3 server on s3_addr in `region`, with [[credentials]]; a generated pair is kept in the
// folder the data_dirs are in.
s3::S3ServerOptions S3ServerOptionsFor(const Config& cfg);

}  // namespace openlake::tools

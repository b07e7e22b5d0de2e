// The daemon's configuration file (see daemon_config.h).
#include "daemon_config.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "openlake/log.h"
#include "openlake/status.h"
#include "openlake/strings.h"

// toml++ reports syntax errors by throwing toml::parse_error; the one call that parses is
// wrapped below, so no exception leaves this file.
#include <toml++/toml.h>

namespace openlake::tools {
namespace {

// Shortest secrets accepted (rpc_secret, admin_token, S3 secret keys) and S3 access keys, as
// MinIO requires; checked by the parser (with the line) and again by ValidateImpl (for values
// from the environment).
constexpr size_t kMinSecretChars = 8;
constexpr size_t kMinAccessKeyChars = 3;

// Reads typed values out of one TOML table, turning every problem into an InvalidArgument that
// names the source, the line and the key. Keys never asked for are reported as unknown.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string_view source, std::string prefix)
      : table_(table), source_(source), prefix_(std::move(prefix)) {}

  absl::Status Error(const toml::node* node, std::string_view key, std::string_view what) const {
    const auto line = node ? node->source().begin.line : 0;
    return absl::InvalidArgumentError(
        StrCat(source_, line ? StrCat(":", line) : "", ": key '", prefix_, key, "' ", what));
  }

  std::string_view source() const { return source_; }

  const toml::node* Find(std::string_view key) {
    seen_.insert(std::string(key));
    return table_.get(key);
  }

  absl::Status String(std::string_view key, std::string* out, bool required = false) {
    const toml::node* n = Find(key);
    if (!n) return required ? Error(nullptr, key, "is required") : absl::OkStatus();
    if (!n->is_string()) return Error(n, key, "must be a string");
    *out = n->as_string()->get();
    return absl::OkStatus();
  }

  // A string that guards something: empty (unset) or at least `min` characters.
  absl::Status Secret(std::string_view key, std::string* out, size_t min, bool required = false) {
    OL_RETURN_IF_ERROR(String(key, out, required));
    if ((!out->empty() || required) && out->size() < min) {
      return Error(Find(key), key,
                   StrCat("must be at least ", min, " characters (got ", out->size(), ")"));
    }
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status Int(std::string_view key, T* out, int64_t lo, int64_t hi, bool required = false) {
    const toml::node* n = Find(key);
    if (!n) return required ? Error(nullptr, key, "is required") : absl::OkStatus();
    if (!n->is_integer()) return Error(n, key, "must be an integer");
    const int64_t v = n->as_integer()->get();
    if (v < lo || v > hi) {
      return Error(n, key, StrCat("must be between ", lo, " and ", hi, " (got ", v, ")"));
    }
    *out = static_cast<T>(v);
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status OptInt(std::string_view key, std::optional<T>* out, int64_t lo, int64_t hi) {
    if (!table_.get(key)) {
      seen_.insert(std::string(key));
      return absl::OkStatus();
    }
    T v{};
    if (auto s = Int(key, &v, lo, hi); !s.ok()) return s;
    *out = v;
    return absl::OkStatus();
  }

  absl::Status Number(std::string_view key, std::optional<double>* out) {
    const toml::node* n = Find(key);
    if (!n) return absl::OkStatus();
    if (n->is_integer()) {
      *out = static_cast<double>(n->as_integer()->get());
    } else if (n->is_floating_point()) {
      *out = n->as_floating_point()->get();
    } else {
      return Error(n, key, "must be a number");
    }
    return absl::OkStatus();
  }

  absl::Status Bool(std::string_view key, bool* out) {
    const toml::node* n = Find(key);
    if (!n) return absl::OkStatus();
    if (!n->is_boolean()) return Error(n, key, "must be true or false");
    *out = n->as_boolean()->get();
    return absl::OkStatus();
  }

  absl::Status StringList(std::string_view key, std::vector<std::string>* out) {
    const toml::node* n = Find(key);
    if (!n) return absl::OkStatus();
    if (!n->is_array()) return Error(n, key, "must be an array of strings");
    out->clear();
    for (const toml::node& e : *n->as_array()) {
      if (!e.is_string()) return Error(&e, key, "must be an array of strings");
      out->push_back(e.as_string()->get());
    }
    return absl::OkStatus();
  }

  // An array of integers in lo..hi: "must be an array of <array_what>" when it is not an array,
  // "must be an array of <item_what> (lo..hi)" for an element that does not fit.
  template <typename T>
  absl::Status IntList(std::string_view key, std::vector<T>* out, int64_t lo, int64_t hi,
                       std::string_view array_what, std::string_view item_what) {
    const toml::node* n = Find(key);
    if (!n) return absl::OkStatus();
    if (!n->is_array()) return Error(n, key, StrCat("must be an array of ", array_what));
    out->clear();
    for (const toml::node& e : *n->as_array()) {
      if (!e.is_integer() || e.as_integer()->get() < lo || e.as_integer()->get() > hi) {
        return Error(&e, key, StrCat("must be an array of ", item_what, " (", lo, "..", hi, ")"));
      }
      out->push_back(static_cast<T>(e.as_integer()->get()));
    }
    return absl::OkStatus();
  }

  const toml::table* Table(std::string_view key, absl::Status* status) {
    const toml::node* n = Find(key);
    if (!n) return nullptr;
    if (!n->is_table()) {
      *status = Error(n, key, "must be a table");
      return nullptr;
    }
    return n->as_table();
  }

  const toml::array* ArrayOfTables(std::string_view key, absl::Status* status) {
    const toml::node* n = Find(key);
    if (!n) return nullptr;
    if (!n->is_array_of_tables() && !(n->is_array() && n->as_array()->empty())) {
      *status = Error(n, key, StrCat("must be an array of tables ([[", key, "]])"));
      return nullptr;
    }
    return n->as_array();
  }

  // Logs a warning for every key of the table that no reader asked for.
  void WarnUnknown() const {
    for (const auto& [k, v] : table_) {
      if (!seen_.contains(std::string(k.str()))) {
        OL_LOG(kWarning) << source_ << ":" << v.source().begin.line << ": unknown key '" << prefix_
                         << k.str() << "' ignored";
      }
    }
  }

 private:
  const toml::table& table_;
  std::string_view source_;
  std::string prefix_;
  absl::flat_hash_set<std::string> seen_;
};

absl::Status ParseKvSlab(TableReader& r, KvSlabConfig* kv) {
  OL_RETURN_IF_ERROR(r.Number("cpu_ram_frac", &kv->cpu_ram_frac));
  if (kv->cpu_ram_frac && !(*kv->cpu_ram_frac > 0 && *kv->cpu_ram_frac <= 1)) {
    return r.Error(r.Find("cpu_ram_frac"), "cpu_ram_frac", "must be in (0, 1]");
  }
  OL_RETURN_IF_ERROR(r.Number("capacity_gb", &kv->capacity_gb));
  if (kv->capacity_gb && !(*kv->capacity_gb > 0 && *kv->capacity_gb <= (1 << 20))) {
    return r.Error(r.Find("capacity_gb"), "capacity_gb",
                   "must be a positive number of GiB, at most 1048576");
  }
  OL_RETURN_IF_ERROR(r.Int("reserve_ttl_secs", &kv->reserve_ttl_secs, 1, 86400));
  uint64_t segment_mb = kv->segment_bytes >> 20;
  OL_RETURN_IF_ERROR(r.Int("segment_mb", &segment_mb, 1, 1024));
  kv->segment_bytes = segment_mb << 20;
  return absl::OkStatus();
}

absl::Status ParseKvDisk(TableReader& r, KvDiskConfig* d) {
  OL_RETURN_IF_ERROR(r.StringList("paths", &d->paths));
  std::optional<double> gb;
  OL_RETURN_IF_ERROR(r.Number("capacity_gb", &gb));
  if (!d->paths.empty() && !gb) {
    return r.Error(r.Find("paths"), "capacity_gb", "is required with paths (GiB per path)");
  }
  if (gb && !(*gb >= 0.0625 && *gb <= (1 << 24))) {
    return r.Error(r.Find("capacity_gb"), "capacity_gb",
                   "must be at least 0.0625 (64 MiB) and at most 16777216 GiB");
  }
  d->capacity_gb = gb.value_or(0);
  OL_RETURN_IF_ERROR(r.Bool("spill", &d->spill));
  OL_RETURN_IF_ERROR(r.Int("shutdown_spill_secs", &d->shutdown_spill_secs, 0, 3600));
  for (const std::string& p : d->paths) {
    if (p.empty()) return r.Error(r.Find("paths"), "paths", "holds an empty path");
  }
  return absl::OkStatus();
}

absl::Status ParseRdma(TableReader& r, RdmaConfig* rd) {
  OL_RETURN_IF_ERROR(r.String("backend", &rd->backend));
  if (rd->backend != "dct" && rd->backend != "ucx") {
    return r.Error(r.Find("backend"), "backend", "must be \"dct\" or \"ucx\"");
  }
  OL_RETURN_IF_ERROR(r.OptInt("self_node_id", &rd->self_node_id, 0, 65535));
  OL_RETURN_IF_ERROR(r.String("dev_name", &rd->dev_name));
  OL_RETURN_IF_ERROR(r.OptInt("dc_key", &rd->dc_key, 0, INT64_MAX));
  OL_RETURN_IF_ERROR(r.Int("bulk_pool_cap", &rd->bulk_pool_cap, 1, 1 << 20));
  OL_RETURN_IF_ERROR(r.Int("network_timeout_secs", &rd->network_timeout_secs, 1, INT64_MAX));
  OL_RETURN_IF_ERROR(r.Int("srq_depth", &rd->srq_depth, 1, 1 << 20));
  OL_RETURN_IF_ERROR(r.Int("max_send_wr", &rd->max_send_wr, 1, 1 << 20));
  OL_RETURN_IF_ERROR(r.Int("peer_credit", &rd->peer_credit, 1, 1 << 16));
  OL_RETURN_IF_ERROR(r.OptInt("max_clients", &rd->max_clients, 1, 1 << 20));
  absl::Status st;
  if (const toml::table* qos = r.Table("qos", &st)) {
    TableReader q(*qos, r.source(), "rdma.qos.");
    OL_RETURN_IF_ERROR(q.Int("traffic_class", &rd->qos_traffic_class, 0, 255));
    OL_RETURN_IF_ERROR(q.Int("tc", &rd->qos_traffic_class, 0, 255));
    OL_RETURN_IF_ERROR(q.Int("service_level", &rd->qos_service_level, 0, 15));
    OL_RETURN_IF_ERROR(q.Int("sl", &rd->qos_service_level, 0, 15));
    q.WarnUnknown();
  }
  OL_RETURN_IF_ERROR(st);
  if (rd->max_clients && uint64_t{*rd->max_clients} * (rd->peer_credit + 1) > rd->srq_depth) {
    return r.Error(r.Find("max_clients"), "max_clients",
                   "times (peer_credit + 1) must not exceed srq_depth");
  }
  r.WarnUnknown();
  return absl::OkStatus();
}

absl::Status ParseTls(TableReader& r, TlsConfig* tls) {
  OL_RETURN_IF_ERROR(r.String("cert_path", &tls->cert_path, true));
  OL_RETURN_IF_ERROR(r.String("key_path", &tls->key_path, true));
  OL_RETURN_IF_ERROR(r.String("client_ca", &tls->client_ca));
  r.WarnUnknown();
  return absl::OkStatus();
}

absl::Status ParseTop(const toml::table& root, std::string_view source, Config* cfg) {
  TableReader r(root, source, "");
  OL_RETURN_IF_ERROR(r.Int("self_id", &cfg->self_id, 0, 65535));

  std::string mode = std::string(ModeName(cfg->mode));
  OL_RETURN_IF_ERROR(r.String("mode", &mode));
  if (mode == "storage") {
    cfg->mode = Mode::kStorage;
  } else if (mode == "kv") {
    cfg->mode = Mode::kKv;
  } else {
    return r.Error(r.Find("mode"), "mode", "must be \"storage\" or \"kv\"");
  }
  std::string transport = cfg->transport == Transport::kRdma ? "rdma" : "h2";
  OL_RETURN_IF_ERROR(r.String("transport", &transport));
  if (transport == "h2" || transport == "tcp") {
    cfg->transport = Transport::kH2;
  } else if (transport == "rdma") {
    cfg->transport = Transport::kRdma;
  } else {
    return r.Error(r.Find("transport"), "transport", "must be \"h2\" (alias \"tcp\") or \"rdma\"");
  }

  OL_RETURN_IF_ERROR(r.String("rpc_addr", &cfg->rpc_addr));
  OL_RETURN_IF_ERROR(r.String("s3_addr", &cfg->s3_addr));
  OL_RETURN_IF_ERROR(r.OptInt("s3_port", &cfg->s3_port, 1, 65535));
  OL_RETURN_IF_ERROR(r.String("region", &cfg->region));
  if (cfg->region.empty()) return r.Error(r.Find("region"), "region", "must not be empty");

  std::string legacy_dir;
  OL_RETURN_IF_ERROR(r.String("data_dir", &legacy_dir));
  OL_RETURN_IF_ERROR(r.StringList("data_dirs", &cfg->data_dirs));
  if (!legacy_dir.empty() && !root.get("data_dirs")) cfg->data_dirs = {legacy_dir};

  for (const std::string& d : cfg->data_dirs) {
    struct stat sb {};
    if (!d.empty() && stat(d.c_str(), &sb) == 0 && !S_ISDIR(sb.st_mode)) {
      const char* key = root.get("data_dirs") ? "data_dirs" : "data_dir";
      return r.Error(r.Find(key), key, StrCat("lists '", d, "', which is a file, not a folder"));
    }
  }

  OL_RETURN_IF_ERROR(r.Int("set_drive_count", &cfg->set_drive_count, 1, 256));
  OL_RETURN_IF_ERROR(r.Int("replication", &cfg->set_drive_count, 1, 256));
  OL_RETURN_IF_ERROR(r.Int("default_parity_count", &cfg->default_parity_count, 0, 128));
  OL_RETURN_IF_ERROR(r.Int("reduced_parity_count", &cfg->reduced_parity_count, 0, 128));

  absl::Status st;
  if (const toml::array* creds = r.ArrayOfTables("credentials", &st)) {
    cfg->credentials.clear();
    for (const toml::node& n : *creds) {
      TableReader c(*n.as_table(), source, "credentials.");
      s3::Credential cred;
      OL_RETURN_IF_ERROR(c.Secret("access_key", &cred.access_key, kMinAccessKeyChars, true));
      OL_RETURN_IF_ERROR(c.Secret("secret_key", &cred.secret_key, kMinSecretChars, true));
      OL_RETURN_IF_ERROR(c.String("display_name", &cred.display_name));
      c.WarnUnknown();
      cfg->credentials.push_back(std::move(cred));
    }
  }
  OL_RETURN_IF_ERROR(st);

  if (const toml::array* nodes = r.ArrayOfTables("nodes", &st)) {
    cfg->nodes.clear();
    absl::flat_hash_set<uint32_t> ids;
    for (const toml::node& n : *nodes) {
      TableReader t(*n.as_table(), source, "nodes.");
      NodeConfig node;
      OL_RETURN_IF_ERROR(t.Int("id", &node.id, 0, 65535, true));
      OL_RETURN_IF_ERROR(t.String("rpc_addr", &node.rpc_addr, true));
      OL_RETURN_IF_ERROR(t.Int("disk_count", &node.disk_count, 0, 4096));
      if (!ids.insert(node.id).second) {
        return t.Error(&n, "id", StrCat("duplicates node ", node.id));
      }
      t.WarnUnknown();
      cfg->nodes.push_back(std::move(node));
    }
  }
  OL_RETURN_IF_ERROR(st);

  if (const toml::table* kv = r.Table("kv_slab", &st)) {
    TableReader k(*kv, source, "kv_slab.");
    OL_RETURN_IF_ERROR(ParseKvSlab(k, &cfg->kv_slab));
    k.WarnUnknown();
    cfg->kv_enabled = true;
  }
  if (cfg->mode == Mode::kKv) cfg->kv_enabled = true;
  OL_RETURN_IF_ERROR(st);

  if (const toml::table* kd = r.Table("kv_disk", &st)) {
    TableReader k(*kd, source, "kv_disk.");
    OL_RETURN_IF_ERROR(ParseKvDisk(k, &cfg->kv_disk));
    k.WarnUnknown();
  }
  OL_RETURN_IF_ERROR(st);

  if (const toml::table* rd = r.Table("rdma", &st)) {
    TableReader k(*rd, source, "rdma.");
    RdmaConfig rdma;
    OL_RETURN_IF_ERROR(ParseRdma(k, &rdma));
    cfg->rdma = std::move(rdma);
  }
  OL_RETURN_IF_ERROR(st);

  for (const char* key : {"s3_tls", "rpc_tls"}) {
    if (const toml::table* t = r.Table(key, &st)) {
      TableReader k(*t, source, StrCat(key, "."));
      TlsConfig tls;
      OL_RETURN_IF_ERROR(ParseTls(k, &tls));
      (std::string_view(key) == "s3_tls" ? cfg->s3_tls : cfg->rpc_tls) = std::move(tls);
    }
    OL_RETURN_IF_ERROR(st);
  }
  if (const toml::table* t = r.Table("limits", &st)) {
    TableReader k(*t, source, "limits.");
    LimitsConfig& l = cfg->limits;
    OL_RETURN_IF_ERROR(k.Int("s3_max_connections", &l.s3_max_connections, 1, 1 << 20));
    OL_RETURN_IF_ERROR(
        k.Int("s3_max_connections_per_client", &l.s3_max_connections_per_client, 0, 1 << 20));
    OL_RETURN_IF_ERROR(k.Int("s3_head_timeout_secs", &l.s3_head_timeout_secs, 1, 3600));
    OL_RETURN_IF_ERROR(k.Int("kv_max_tcp_connections", &l.kv_max_tcp_connections, 1, 1 << 20));
    OL_RETURN_IF_ERROR(k.Int("kv_max_unix_connections", &l.kv_max_unix_connections, 1, 1 << 20));
    OL_RETURN_IF_ERROR(k.Int("rpc_max_buffered_mb", &l.rpc_max_buffered_mb, 16, 1 << 20));
    OL_RETURN_IF_ERROR(k.Int("kv_max_reserved_percent", &l.kv_max_reserved_percent, 1, 100));
    OL_RETURN_IF_ERROR(k.Int("kv_idle_timeout_secs", &l.kv_idle_timeout_secs, 1, 1 << 30));
    k.WarnUnknown();
  }
  OL_RETURN_IF_ERROR(st);
  // Upstream's buffer pool knobs: accepted, our allocator sizes itself.
  r.Find("memory_pool");

  OL_RETURN_IF_ERROR(r.Secret("rpc_secret", &cfg->rpc_secret, kMinSecretChars));
  OL_RETURN_IF_ERROR(r.IntList("rpc_allowed_uids", &cfg->rpc_allowed_uids, 0,
                               int64_t{UINT32_MAX} - 1, "user ids", "user ids"));
  OL_RETURN_IF_ERROR(r.String("kv_socket", &cfg->kv_socket));
  OL_RETURN_IF_ERROR(r.Int("heal_interval_secs", &cfg->heal_interval_secs, 1, 86400));
  OL_RETURN_IF_ERROR(r.Int("lifecycle_interval_secs", &cfg->lifecycle_interval_secs, 1, 86400));
  OL_RETURN_IF_ERROR(
      r.Int("cluster_boot_timeout_secs", &cfg->cluster_boot_timeout_secs, 1, 86400));
  OL_RETURN_IF_ERROR(r.String("admin_addr", &cfg->admin_addr));
  OL_RETURN_IF_ERROR(r.Secret("admin_token", &cfg->admin_token, kMinSecretChars));
  OL_RETURN_IF_ERROR(r.IntList("cores", &cfg->cores, 0, 4095, "integers", "CPU numbers"));
  for (const char* key : {"set_drive_count", "replication"}) {
    const toml::node* n = root.get(key);
    // One node's drives only: with [[nodes]] a set may span the nodes.
    if (n && cfg->mode == Mode::kStorage && cfg->nodes.size() <= 1 && !cfg->data_dirs.empty() &&
        cfg->set_drive_count > cfg->data_dirs.size()) {
      return r.Error(
          n, key,
          StrCat("is ", cfg->set_drive_count, " but data_dirs lists ", cfg->data_dirs.size(),
                 " folders: a set cannot have more drives "
                 "than there are folders"));
    }
  }
  r.WarnUnknown();
  return absl::OkStatus();
}

absl::Status ValidateImpl(const Config& cfg) {
  const std::string& src = cfg.source;
  if (cfg.transport == Transport::kRdma && !cfg.rdma) {
    return absl::InvalidArgumentError(StrCat(src, ": transport = \"rdma\" needs an [rdma] table"));
  }
  if (cfg.rdma && cfg.rdma->backend == "ucx" && cfg.mode != Mode::kKv) {
    return absl::InvalidArgumentError(
        StrCat(src, ": [rdma] backend = \"ucx\" is only valid with mode = \"kv\""));
  }
  if (!cfg.nodes.empty()) {
    absl::flat_hash_set<uint32_t> ids;
    for (const NodeConfig& n : cfg.nodes) {
      if (!ids.insert(n.id).second) {
        return absl::InvalidArgumentError(StrCat(src, ": [[nodes]] lists id ", n.id, " twice"));
      }
    }
    bool found = false;
    for (const NodeConfig& n : cfg.nodes) found = found || n.id == cfg.self_id;
    if (!found) {
      return absl::InvalidArgumentError(
          StrCat(src, ": self_id ", cfg.self_id, " is not the id of any [[nodes]] entry"));
    }
  }
  if (cfg.mode == Mode::kStorage) {
    if (cfg.default_parity_count > cfg.set_drive_count / 2) {
      return absl::InvalidArgumentError(
          StrCat(src, ": default_parity_count ", cfg.default_parity_count,
                 " must be at most half of set_drive_count ", cfg.set_drive_count));
    }
    if (cfg.reduced_parity_count > static_cast<int>(cfg.default_parity_count)) {
      return absl::InvalidArgumentError(
          StrCat(src, ": reduced_parity_count ", cfg.reduced_parity_count,
                 " must be at most default_parity_count ", cfg.default_parity_count));
    }
    if (cfg.nodes.size() > 1) {
      // One object store over every node's drives: this node brings its disk_count of them.
      // (Whether they divide into sets, the store checks as it opens: upstream's sample
      // configs list clusters that never ran as one.)
      for (const NodeConfig& n : cfg.nodes) {
        if (n.id == cfg.self_id && n.disk_count != cfg.data_dirs.size()) {
          return absl::InvalidArgumentError(
              StrCat(src, ": [[nodes]] id ", n.id, " (this node) has disk_count ", n.disk_count,
                     " but data_dirs lists ", cfg.data_dirs.size(), " folders"));
        }
      }
    }
  }
  for (const auto& [what, value] :
       {std::pair<const char*, const std::string*>{"rpc_secret", &cfg.rpc_secret},
        {"admin_token", &cfg.admin_token}}) {
    if (!value->empty() && value->size() < kMinSecretChars) {
      return absl::InvalidArgumentError(StrCat(src, ": ", what, " must be at least ",
                                               kMinSecretChars, " characters (got ",
                                               value->size(), ")"));
    }
  }
  for (const s3::Credential& c : cfg.credentials) {
    if (c.access_key.size() < kMinAccessKeyChars || c.secret_key.size() < kMinSecretChars) {
      return absl::InvalidArgumentError(
          StrCat(src, ": S3 access keys need at least ", kMinAccessKeyChars,
                 " characters and secret keys at least ", kMinSecretChars));
    }
  }
  absl::flat_hash_set<std::string> dirs;
  for (const std::string& d : cfg.data_dirs) {
    if (d.empty()) return absl::InvalidArgumentError(StrCat(src, ": empty data_dirs entry"));
    if (!dirs.insert(d).second) {
      return absl::InvalidArgumentError(StrCat(src, ": data_dirs lists '", d, "' twice"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateConfig(const Config& cfg) { return ValidateImpl(cfg); }

std::string_view ModeName(Mode mode) { return mode == Mode::kKv ? "kv" : "storage"; }

Config DefaultConfig() {
  Config cfg;
  cfg.mode = Mode::kStorage;
  cfg.data_dirs = {"./data/d0", "./data/d1", "./data/d2", "./data/d3"};
  cfg.set_drive_count = 4;
  cfg.default_parity_count = 2;
  cfg.kv_slab.cpu_ram_frac = 0.5;
  cfg.kv_enabled = true;
  return cfg;
}

absl::StatusOr<Config> ParseConfig(std::string_view text, std::string_view source_name) {
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(StrCat(source_name, ":", e.source().begin.line, ":",
                                             e.source().begin.column, ": ", e.description()));
  }
  Config cfg;
  cfg.source = std::string(source_name);
  OL_RETURN_IF_ERROR(ParseTop(root, source_name, &cfg));
  OL_RETURN_IF_ERROR(ValidateImpl(cfg));
  return cfg;
}

absl::StatusOr<Config> LoadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoStatus(errno, StrCat("open config ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseConfig(text.str(), path);
}

uint64_t MemTotalBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemTotal:") return kib * 1024;
  }
  return 0;
}

absl::StatusOr<uint64_t> KvSlabBytes(const KvSlabConfig& cfg, uint64_t mem_total) {
  uint64_t bytes;
  if (cfg.cpu_ram_frac) {
    bytes = static_cast<uint64_t>(*cfg.cpu_ram_frac * static_cast<double>(mem_total));
  } else if (cfg.capacity_gb) {
    bytes = static_cast<uint64_t>(*cfg.capacity_gb * static_cast<double>(1ull << 30));
  } else {
    bytes = mem_total / 2;
  }
  if (bytes < (16ull << 20)) {
    return absl::InvalidArgumentError(
        StrCat("kv_slab: the slab would be ", bytes, " bytes; at least 16 MiB is needed"));
  }
  if (mem_total != 0 && bytes > mem_total) {
    return absl::InvalidArgumentError(StrCat(
        "kv_slab: the slab (", bytes, " bytes) exceeds the machine's RAM (", mem_total, " bytes)"));
  }
  return bytes;
}

io::RuntimeOptions RuntimeOptionsFor(const Config& cfg) {
  io::RuntimeOptions ro;
  ro.cpus = cfg.cores;
  // KV requests that follow closely (an engine's steps) are picked up without a wake-up; a node
  // without the KV pool does not spin (its S3 clients gain nothing from it on a small box).
  if (cfg.kv_enabled) ro.poll_window = absl::Microseconds(50);
  return ro;
}

kv::KvServiceOptions KvServiceOptionsFor(const Config& cfg, uint64_t slab_bytes,
                                         std::string unix_socket) {
  kv::KvServiceOptions ko;
  ko.tcp_address = cfg.rpc_addr;
  ko.unix_socket = std::move(unix_socket);
  ko.slab_bytes = slab_bytes;
  ko.segment_bytes = cfg.kv_slab.segment_bytes;
  ko.lease = absl::Seconds(cfg.kv_slab.reserve_ttl_secs);
  ko.secret = cfg.rpc_secret;
  ko.allowed_uids.assign(cfg.rpc_allowed_uids.begin(), cfg.rpc_allowed_uids.end());
  ko.reactor = 0;
  ko.max_tcp_connections = cfg.limits.kv_max_tcp_connections;
  ko.max_unix_connections = cfg.limits.kv_max_unix_connections;
  ko.max_buffered_bytes = size_t{cfg.limits.rpc_max_buffered_mb} << 20;
  ko.max_reserved_percent = cfg.limits.kv_max_reserved_percent;
  ko.tcp_idle_timeout = absl::Seconds(cfg.limits.kv_idle_timeout_secs);
  ko.disk.paths = cfg.kv_disk.paths;
  ko.disk.capacity_bytes = static_cast<uint64_t>(cfg.kv_disk.capacity_gb * double(1ull << 30));
  ko.disk.spill = cfg.kv_disk.spill;
  ko.disk.shutdown_spill = absl::Seconds(cfg.kv_disk.shutdown_spill_secs);
  return ko;
}

std::vector<store::ClusterNodeSpec> ClusterNodesOf(const Config& cfg) {
  std::vector<store::ClusterNodeSpec> out;
  for (const NodeConfig& n : cfg.nodes) out.push_back({n.id, n.rpc_addr, n.disk_count});
  return out;
}

store::StoreOptions StoreOptionsFor(const Config& cfg) {
  store::StoreOptions so;
  so.drives = cfg.data_dirs;
  so.set_drive_count = cfg.data_dirs.size() < cfg.set_drive_count && cfg.nodes.size() <= 1
                           ? static_cast<int>(cfg.data_dirs.size())
                           : static_cast<int>(cfg.set_drive_count);
  if (cfg.nodes.size() > 1) {
    store::ClusterSpec c;
    c.self_id = cfg.self_id;
    c.nodes = ClusterNodesOf(cfg);
    c.secret = cfg.rpc_secret;
    c.boot_timeout = absl::Seconds(cfg.cluster_boot_timeout_secs);
    so.cluster = std::move(c);  // the runtime is the daemon's (ObjectStoreNode)
  }
  so.parity = std::min<int>(static_cast<int>(cfg.default_parity_count), so.set_drive_count / 2);
  so.reduced_parity =
      cfg.reduced_parity_count < 0 ? -1 : std::min(cfg.reduced_parity_count, so.parity);
  return so;
}

s3::S3ServerOptions S3ServerOptionsFor(const Config& cfg) {
  s3::S3ServerOptions o;
  o.address = cfg.s3_addr;
  o.region = cfg.region;
  o.credentials = cfg.credentials;
  o.max_connections = cfg.limits.s3_max_connections;
  o.max_connections_per_client = cfg.limits.s3_max_connections_per_client;
  o.head_timeout = absl::Seconds(cfg.limits.s3_head_timeout_secs);
  // A storage cluster: the other nodes change buckets too.
  if (cfg.mode == Mode::kStorage && cfg.nodes.size() > 1) o.bucket_cache_ttl = absl::Seconds(2);
  // The folder the data_dirs live in keeps a generated key pair.
  if (!cfg.data_dirs.empty()) {
    const std::filesystem::path parent = std::filesystem::path(cfg.data_dirs.front()).parent_path();
    o.data_dir = parent.empty() ? std::string(".") : parent.string();
  }
  return o;
}

}  // namespace openlake::tools

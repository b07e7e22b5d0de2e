// `openlake kv stats`: the KV pool of a running openlaked, through kv::Client::Stats(). The
// client connects for control only (it never maps the slab), so it works from any host that
// can reach the pool's RPC address.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/time/time.h"

#include "cli.h"

#include "openlake/kv/client.h"

namespace openlake::cli {

namespace {

struct KvOptions {
  std::string target = "127.0.0.1:9400";
  std::string secret;
  double timeout_secs = 5;
  bool json = false;
};

std::string Message(const absl::Status& s) { return std::string(s.message()); }

void PrintJsonStats(const KvOptions& o, const std::string& version, const kv::PoolStats& s) {
  JsonWriter w;
  w.BeginObject()
      .Field("target", o.target)
      .Field("server_version", version)
      .Field("capacity_bytes", s.capacity_bytes)
      .Field("used_bytes", s.used_bytes)
      .Field("segment_bytes", s.segment_bytes)
      .Field("segments_total", s.segments_total)
      .Field("segments_used", s.segments_used)
      .Field("committed_blocks", s.committed_blocks)
      .Field("reserved_slots", s.reserved_slots)
      .Field("pinned_slots", s.pinned_slots)
      .Field("namespaces", s.namespaces)
      .Field("sessions", s.sessions)
      .Field("lookups", s.lookups)
      .Field("lookup_keys", s.lookup_keys)
      .Field("hits", s.hits)
      .Field("misses", s.misses)
      .Field("hit_rate", s.hit_rate())
      .Field("commits", s.commits)
      .Field("evictions", s.evictions)
      .Field("expired_reservations", s.expired_reservations)
      .Field("expired_pins", s.expired_pins)
      .Field("reserve_failures", s.reserve_failures)
      .Field("bytes_in", s.bytes_in)
      .Field("bytes_out", s.bytes_out);
  w.Key("tiers").BeginObject();
  w.Key("ram")
      .BeginObject()
      .Field("capacity_bytes", s.capacity_bytes)
      .Field("used_bytes", s.used_bytes)
      .Field("blocks", s.committed_blocks)
      .Field("hits", s.hits - s.disk_hits - s.remote_hits)
      .Field("dirty_blocks", s.dirty_blocks)
      .EndObject();
  w.Key("disk")
      .BeginObject()
      .Field("paths", s.disk_paths)
      .Field("paths_online", s.disk_paths_online)
      .Field("capacity_bytes", s.disk_capacity_bytes)
      .Field("used_bytes", s.disk_used_bytes)
      .Field("blocks", s.disk_blocks)
      .Field("hits", s.disk_hits)
      .Field("spilled_blocks", s.spilled_blocks)
      .Field("spilled_bytes", s.spilled_bytes)
      .Field("promoted_blocks", s.promoted_blocks)
      .Field("promoted_bytes", s.promoted_bytes)
      .Field("spill_drops", s.spill_drops)
      .Field("evictions", s.disk_evictions)
      .Field("errors", s.disk_errors)
      .Field("checksum_errors", s.disk_checksum_errors)
      .Field("recovered_blocks", s.recovered_blocks)
      .Field("recovery_seconds", s.recovery_seconds)
      .EndObject();
  w.Key("peers")
      .BeginObject()
      .Field("nodes", s.cluster_nodes)
      .Field("hits", s.remote_hits)
      .Field("probe_hits", s.remote_probe_hits)
      .Field("pulls", s.pulls)
      .Field("pulled_blocks", s.pulled_blocks)
      .Field("pulled_bytes", s.pulled_bytes)
      .Field("pull_failures", s.pull_failures)
      .Field("rejected_blocks", s.pull_rejected_blocks)
      .Field("get_seconds", s.pull_get_seconds)
      .Field("probes", s.probes)
      .Field("announcements", s.announcements)
      .Field("served_lookups", s.peer_lookups)
      .Field("served_blocks", s.peer_served_blocks)
      .EndObject();
  w.EndObject();
  w.Key("per_namespace").BeginArray();
  for (const kv::NamespaceStats& n : s.per_namespace) {
    w.BeginObject()
        .Field("name", n.name)
        .Field("id", n.id)
        .Field("block_bytes", n.block_bytes)
        .Field("blocks", n.blocks)
        .Field("fingerprint", n.fingerprint)
        .EndObject();
  }
  w.EndArray().EndObject();
  PrintJson(w);
}

void PrintText(const KvOptions& o, const std::string& version, const kv::PoolStats& s) {
  const double used_pct = s.capacity_bytes ? 100.0 * static_cast<double>(s.used_bytes) /
                                                 static_cast<double>(s.capacity_bytes)
                                           : 0.0;
  std::printf("KV pool at %s (openlaked %s)\n", o.target.c_str(), version.c_str());
  std::printf("  capacity:   %s, used %s (%.1f%%); segments %u of %u used (%s each)\n",
              HumanBytes(s.capacity_bytes).c_str(), HumanBytes(s.used_bytes).c_str(), used_pct,
              s.segments_used, s.segments_total, HumanBytes(s.segment_bytes).c_str());
  std::printf("  blocks:     %llu committed, %llu slots reserved, %llu pinned\n",
              static_cast<unsigned long long>(s.committed_blocks),
              static_cast<unsigned long long>(s.reserved_slots),
              static_cast<unsigned long long>(s.pinned_slots));
  std::printf("  clients:    %llu session(s), %llu namespace(s)\n",
              static_cast<unsigned long long>(s.sessions),
              static_cast<unsigned long long>(s.namespaces));
  std::printf("  lookups:    %llu (%llu keys): %llu hits, %llu misses, hit rate %.1f%%\n",
              static_cast<unsigned long long>(s.lookups),
              static_cast<unsigned long long>(s.lookup_keys),
              static_cast<unsigned long long>(s.hits), static_cast<unsigned long long>(s.misses),
              100.0 * s.hit_rate());
  std::printf("  writes:     %llu blocks committed, %llu reserve failures (pool full)\n",
              static_cast<unsigned long long>(s.commits),
              static_cast<unsigned long long>(s.reserve_failures));
  std::printf("  evictions:  %llu; expired: %llu reservations, %llu pins\n",
              static_cast<unsigned long long>(s.evictions),
              static_cast<unsigned long long>(s.expired_reservations),
              static_cast<unsigned long long>(s.expired_pins));
  std::printf("  traffic:    %s in, %s out\n", HumanBytes(s.bytes_in).c_str(),
              HumanBytes(s.bytes_out).c_str());
  if (s.disk_paths == 0) {
    std::printf("  disk tier:  none (RAM only)\n");
  } else {
    std::printf("  disk tier:  %u of %u path(s) online; %s of %s used, %llu blocks\n",
                s.disk_paths_online, s.disk_paths, HumanBytes(s.disk_used_bytes).c_str(),
                HumanBytes(s.disk_capacity_bytes).c_str(),
                static_cast<unsigned long long>(s.disk_blocks));
    std::printf("  hits:       %llu from RAM, %llu from disk\n",
                static_cast<unsigned long long>(s.hits - s.disk_hits - s.remote_hits),
                static_cast<unsigned long long>(s.disk_hits));
    std::printf(
        "  spill:      %llu blocks (%s) written, %llu read back (%s); %llu not yet on "
        "disk, %llu dropped before the disk had them\n",
        static_cast<unsigned long long>(s.spilled_blocks), HumanBytes(s.spilled_bytes).c_str(),
        static_cast<unsigned long long>(s.promoted_blocks), HumanBytes(s.promoted_bytes).c_str(),
        static_cast<unsigned long long>(s.dirty_blocks),
        static_cast<unsigned long long>(s.spill_drops));
    std::printf(
        "  disk:       %llu evictions, %llu I/O errors, %llu checksum errors; %llu blocks "
        "recovered at start in %.3f s\n",
        static_cast<unsigned long long>(s.disk_evictions),
        static_cast<unsigned long long>(s.disk_errors),
        static_cast<unsigned long long>(s.disk_checksum_errors),
        static_cast<unsigned long long>(s.recovered_blocks), s.recovery_seconds);
  }
  if (s.cluster_nodes == 0) {
    std::printf("  peers:      none (not in a cluster)\n");
  } else {
    std::printf("  peers:      %u node(s) in [[nodes]]; %llu hits pulled from peers\n",
                s.cluster_nodes, static_cast<unsigned long long>(s.remote_hits));
    std::printf(
        "  pulls:      %llu asked, %llu blocks (%s) pulled and verified, %llu found nothing, "
        "%llu blocks rejected (CRC-64 or lease)\n",
        static_cast<unsigned long long>(s.pulls), static_cast<unsigned long long>(s.pulled_blocks),
        HumanBytes(s.pulled_bytes).c_str(), static_cast<unsigned long long>(s.pull_failures),
        static_cast<unsigned long long>(s.pull_rejected_blocks));
    std::printf(
        "  cluster:    %llu probes (%llu keys found on peers), %llu announcements; served "
        "%llu peer lookups, %llu blocks\n",
        static_cast<unsigned long long>(s.probes),
        static_cast<unsigned long long>(s.remote_probe_hits),
        static_cast<unsigned long long>(s.announcements),
        static_cast<unsigned long long>(s.peer_lookups),
        static_cast<unsigned long long>(s.peer_served_blocks));
  }
  for (const kv::NamespaceStats& n : s.per_namespace) {
    std::printf("  namespace %s (id %u): %llu blocks of %s\n", n.name.c_str(), n.id,
                static_cast<unsigned long long>(n.blocks), HumanBytes(n.block_bytes).c_str());
  }
}

int RunKvStats(const KvOptions& o) {
  auto client = ConnectPoolControl(o.target, o.secret, absl::Seconds(o.timeout_secs));
  if (!client.ok()) {
    const int code = absl::IsInvalidArgument(client.status()) ? kExitUsage : kExitRuntime;
    return Fail(code, "cannot reach the KV pool at " + o.target + ": " + Message(client.status()));
  }
  auto stats = (*client)->Stats();
  if (!stats.ok()) {
    return Fail(kExitRuntime, "KV pool at " + o.target + ": stats: " + Message(stats.status()));
  }
  if (o.json) {
    PrintJsonStats(o, (*client)->server_version(), *stats);
  } else {
    PrintText(o, (*client)->server_version(), *stats);
  }
  return kExitOk;
}

}  // namespace

absl::StatusOr<std::unique_ptr<kv::Client>> ConnectPoolControl(const std::string& address,
                                                               const std::string& secret,
                                                               absl::Duration timeout) {
  kv::ClientOptions co;
  co.secret = secret;
  co.map_slab = false;
  co.connect_timeout = timeout;
  co.call_timeout = timeout;
  return kv::Client::Connect(address, co);
}

void AddKvCommands(CLI::App& app, int* exit_code) {
  CLI::App* kv = app.add_subcommand("kv", "the KV-cache pool");
  kv->require_subcommand(1);
  CLI::App* stats = kv->add_subcommand(
      "stats", "capacity, use, namespaces, hit rate, evictions and pins of a running pool");
  auto o = std::make_shared<KvOptions>();
  stats->add_option("-t,--target", o->target, "the pool's RPC address (host:port or unix:PATH)")
      ->capture_default_str();
  stats->add_option("--secret", o->secret, "rpc_secret, for a pool that listens beyond loopback")
      ->envname("OPENLAKE_RPC_SECRET");
  stats->add_option("--timeout-secs", o->timeout_secs, "connect and call timeout")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  stats->add_flag("--json", o->json, "one JSON object on stdout");
  stats->footer(
      "Examples:\n"
      "  openlake kv stats                              the local pool on 127.0.0.1:9400\n"
      "  openlake kv stats --target 10.0.0.5:9400 --json\n"
      "  OPENLAKE_RPC_SECRET=... openlake kv stats --target 10.0.0.5:9400");
  stats->callback([o, exit_code] { *exit_code = RunKvStats(*o); });
}

}  // namespace openlake::cli

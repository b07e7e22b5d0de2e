// openlaked's metrics and readiness (see admin_sources.h).
#include "admin_sources.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

#include "openlake/version.h"

namespace {

// The loop counters of every reactor at the previous scrape, for the busy ratio since then.
struct LoopHistory {
  absl::Mutex mu;
  std::vector<openlake::io::Reactor::LoopStats> last ABSL_GUARDED_BY(mu);
};

void RuntimeMetrics(openlake::io::Runtime& rt, LoopHistory& history,
                    openlake::PrometheusWriter& w) {
  using LoopStats = openlake::io::Reactor::LoopStats;
  std::vector<LoopStats> now(rt.size());
  for (unsigned i = 0; i < rt.size(); ++i) {
    // Read on the reactor itself: the counters are its thread's alone.
    if (!rt.RunOn(i, [&rt, &now, i] { now[i] = rt.reactor(i).loop_stats(); }).ok()) return;
  }
  std::vector<LoopStats> before;
  {
    absl::MutexLock lock(&history.mu);
    before = history.last;
    history.last = now;
  }
  before.resize(now.size());
  auto labels = [&rt](unsigned i) -> openlake::PrometheusLabels {
    return {{"reactor", absl::StrCat(i)}, {"cpu", absl::StrCat(rt.reactor(i).cpu())}};
  };
  for (unsigned i = 0; i < now.size(); ++i) {
    const double busy = static_cast<double>(now[i].busy_ns - before[i].busy_ns);
    const double idle = static_cast<double>(now[i].idle_ns - before[i].idle_ns);
    w.Gauge("openlake_reactor_busy_ratio",
            "Share of the time since the previous scrape a reactor spent running work rather "
            "than waiting in io_uring_enter",
            busy + idle > 0 ? busy / (busy + idle) : 0.0, labels(i));
  }
  // The counters as they stand, one family at a time (a family's samples must be together).
  struct Family {
    const char* name;
    const char* help;
    uint64_t LoopStats::*field;
    double scale;
  };
  static constexpr Family kCounters[] = {
      {"openlake_reactor_busy_seconds_total", "Time a reactor spent running work",
       &LoopStats::busy_ns, 1e-9},
      {"openlake_reactor_ring_submissions_total", "SQEs a reactor submitted to io_uring",
       &LoopStats::submitted, 1},
      {"openlake_reactor_ring_completions_total", "CQEs a reactor reaped from io_uring",
       &LoopStats::reaped, 1},
      {"openlake_reactor_loop_iterations_total", "Turns of a reactor's event loop",
       &LoopStats::iterations, 1},
  };
  for (const Family& f : kCounters) {
    for (unsigned i = 0; i < now.size(); ++i) {
      w.Counter(f.name, f.help, static_cast<double>(now[i].*f.field) * f.scale, labels(i));
    }
  }
}

void KvMetrics(openlake::kv::KvService& kv, openlake::PrometheusWriter& w) {
  using openlake::PrometheusWriter;
  absl::StatusOr<openlake::kv::PoolStats> st = kv.Stats();
  if (st.ok()) {
    const auto& s = *st;
    auto gauge = [&](const char* name, const char* help, double v) { w.Gauge(name, help, v); };
    auto counter = [&](const char* name, const char* help, double v) { w.Counter(name, help, v); };
    gauge("openlake_kv_capacity_bytes", "Size of the KV slab", s.capacity_bytes);
    gauge("openlake_kv_used_bytes", "Slab bytes holding committed blocks", s.used_bytes);
    gauge("openlake_kv_blocks", "Committed blocks", s.committed_blocks);
    gauge("openlake_kv_reserved_slots", "Slots reserved by writers, not yet committed",
          s.reserved_slots);
    gauge("openlake_kv_pinned_slots", "Slots pinned by readers", s.pinned_slots);
    gauge("openlake_kv_namespaces", "Open namespaces", s.namespaces);
    gauge("openlake_kv_sessions", "Connected clients", s.sessions);
    counter("openlake_kv_lookups_total", "Lookup calls", s.lookups);
    counter("openlake_kv_lookup_keys_total", "Keys asked for by Lookup", s.lookup_keys);
    counter("openlake_kv_hits_total", "Keys found by Lookup", s.hits);
    counter("openlake_kv_misses_total", "Keys Lookup did not serve", s.misses);
    counter("openlake_kv_commits_total", "Blocks committed", s.commits);
    counter("openlake_kv_evictions_total", "Blocks evicted to make room", s.evictions);
    counter("openlake_kv_expired_reservations_total", "Reservations whose lease lapsed",
            s.expired_reservations);
    counter("openlake_kv_expired_pins_total", "Read pins whose lease lapsed", s.expired_pins);
    counter("openlake_kv_reserve_failures_total", "Reserve calls refused for lack of room",
            s.reserve_failures);
    counter("openlake_kv_bytes_in_total", "Block bytes committed", s.bytes_in);
    counter("openlake_kv_bytes_out_total", "Block bytes handed to readers", s.bytes_out);
    counter("openlake_kv_ram_hits_total", "Keys Lookup found in the slab",
            s.hits - s.disk_hits - s.remote_hits);
    if (s.disk_paths > 0) {
      gauge("openlake_kv_disk_paths", "Disk tier paths configured", s.disk_paths);
      gauge("openlake_kv_disk_paths_online", "Disk tier paths serving (not offline after an error)",
            s.disk_paths_online);
      gauge("openlake_kv_disk_capacity_bytes", "Disk tier capacity of the online paths",
            s.disk_capacity_bytes);
      gauge("openlake_kv_disk_used_bytes", "Disk tier bytes holding blocks", s.disk_used_bytes);
      gauge("openlake_kv_disk_blocks", "Blocks on the disk tier", s.disk_blocks);
      gauge("openlake_kv_dirty_blocks", "Slab blocks the disk tier does not hold yet",
            s.dirty_blocks);
      counter("openlake_kv_disk_hits_total", "Keys Lookup served by reading them back from disk",
              s.disk_hits);
      counter("openlake_kv_spilled_blocks_total", "Blocks written to the disk tier",
              s.spilled_blocks);
      counter("openlake_kv_spilled_bytes_total", "Bytes written to the disk tier", s.spilled_bytes);
      counter("openlake_kv_promoted_blocks_total", "Blocks read back from disk into the slab",
              s.promoted_blocks);
      counter("openlake_kv_promoted_bytes_total", "Bytes read back from disk into the slab",
              s.promoted_bytes);
      counter("openlake_kv_spill_drops_total",
              "Blocks evicted from the slab before the disk tier had them", s.spill_drops);
      counter("openlake_kv_disk_evictions_total", "Blocks dropped from disk to make room",
              s.disk_evictions);
      counter("openlake_kv_disk_errors_total", "Disk tier reads, writes and syncs that failed",
              s.disk_errors);
      counter("openlake_kv_disk_checksum_errors_total",
              "Blocks read back from disk whose CRC-64 did not match", s.disk_checksum_errors);
      gauge("openlake_kv_disk_recovered_blocks", "Blocks found on disk at start",
            s.recovered_blocks);
      gauge("openlake_kv_disk_recovery_seconds", "Time to read the disk tier's indexes at start",
            s.recovery_seconds);
    }
    if (s.cluster_nodes > 0) {
      counter("openlake_kv_remote_hits_total",
              "Keys Lookup served by pulling them from another node's slab", s.remote_hits);
      counter("openlake_kv_remote_probe_hits_total",
              "Keys Exists counted as present on another node", s.remote_probe_hits);
      counter("openlake_kv_pulls_total", "Local misses of Lookup that asked a peer for blocks",
              s.pulls);
      counter("openlake_kv_pulled_blocks_total", "Blocks pulled from peers, verified and kept",
              s.pulled_blocks);
      counter("openlake_kv_pulled_bytes_total", "Bytes pulled from peers, verified and kept",
              s.pulled_bytes);
      counter("openlake_kv_pull_failures_total",
              "Pulls that asked an owner and brought nothing (down, late or refused)",
              s.pull_failures);
      counter("openlake_kv_pull_rejected_blocks_total",
              "Pulled blocks discarded: CRC-64 mismatch or after the owner's lease",
              s.pull_rejected_blocks);
      counter("openlake_kv_pull_get_seconds_total",
              "Time spent in the UCX gets of pulls that brought blocks", s.pull_get_seconds);
      counter("openlake_kv_probes_total", "Local misses of Exists that asked a peer", s.probes);
      counter("openlake_kv_announcements_total",
              "Messages announcing chain heads held here to their directory homes",
              s.announcements);
      counter("openlake_kv_peer_lookups_total", "Lookups served to other nodes", s.peer_lookups);
      counter("openlake_kv_peer_served_blocks_total",
              "Blocks pinned here for other nodes' UCX gets", s.peer_served_blocks);
    }
  }
  const openlake::MetricsSnapshot m = kv.Metrics();
  for (const openlake::CounterSnapshot& c : m.counters) {
    if (c.name == "kv_request_errors_total") {
      w.Counter("openlake_kv_request_errors_total", c.help, static_cast<double>(c.value));
    }
  }
  for (const openlake::HistogramSnapshot& h : m.histograms) {
    // "kv_<method>_us" → the method as a label.
    std::string method = h.name;
    if (method.rfind("kv_", 0) == 0) method = method.substr(3);
    if (method.size() > 3 && method.compare(method.size() - 3, 3, "_us") == 0) {
      method.resize(method.size() - 3);
    }
    w.Histogram("openlake_kv_request_duration_seconds", "KV RPC handling time, by method", h, 1e-6,
                {{"method", method}});
  }
}

// The members and their liveness as this node probes them.
void ClusterMetrics(const openlake::cluster::Membership& m, openlake::PrometheusWriter& w) {
  const auto states = m.Snapshot();
  w.Gauge("openlake_cluster_members", "Nodes in [[nodes]], this one included", states.size());
  w.Gauge("openlake_cluster_members_live", "Members this node sees up, itself included",
          m.live_count());
  for (const auto& s : states) {
    if (s.self) continue;
    w.Gauge("openlake_cluster_member_up", "1 while a peer answers its liveness probes",
            s.liveness == openlake::cluster::Liveness::kUp ? 1 : 0,
            {{"node", absl::StrCat(s.member.id)}, {"rpc_addr", s.member.rpc_addr}});
  }
  for (const auto& s : states) {
    if (s.self) continue;
    w.Counter("openlake_cluster_member_transitions_total", "Times a peer went down or came back up",
              s.transitions, {{"node", absl::StrCat(s.member.id)}});
  }
}

}  // namespace

openlake::AdminSources MakeAdminSources(openlake::io::Runtime* rt, openlake::kv::KvService* kv,
                                        ObjectStoreNode* objects,
                                        const openlake::cluster::Membership* membership,
                                        absl::Time started) {
  openlake::AdminSources src;
  auto history = std::make_shared<LoopHistory>();
  src.metrics = [rt, kv, objects, membership, started, history](openlake::PrometheusWriter& w) {
    w.Gauge("openlake_build_info", "The running version", 1,
            {{"version", std::string(openlake::Version())}});
    w.Gauge("openlake_uptime_seconds", "Seconds since openlaked started",
            absl::ToDoubleSeconds(absl::Now() - started));
    RuntimeMetrics(*rt, *history, w);
    if (kv != nullptr) KvMetrics(*kv, w);
    if (objects != nullptr) objects->WriteMetrics(w);
    if (membership != nullptr) ClusterMetrics(*membership, w);
  };
  src.ready = [kv, objects](std::string* why) {
    if (kv != nullptr && !kv->Stats().ok()) {
      *why = "the KV pool does not answer";
      return false;
    }
    return objects == nullptr || objects->Ready(why);
  };
  return src;
}

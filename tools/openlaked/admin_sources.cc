// openlaked's metrics and readiness (see admin_sources.h).
#include "admin_sources.h"

#include <string>

#include "absl/time/clock.h"
#include "openlake/version.h"

namespace {

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
    w.Histogram("openlake_kv_request_duration_seconds", "KV RPC handling time, by method", h,
                1e-6, {{"method", method}});
  }
}

}  // namespace

openlake::AdminSources MakeAdminSources(openlake::kv::KvService* kv, ObjectStoreNode* objects,
                                        absl::Time started) {
  openlake::AdminSources src;
  src.metrics = [kv, objects, started](openlake::PrometheusWriter& w) {
    w.Gauge("openlake_build_info", "The running version", 1,
            {{"version", std::string(openlake::Version())}});
    w.Gauge("openlake_uptime_seconds", "Seconds since openlaked started",
            absl::ToDoubleSeconds(absl::Now() - started));
    if (kv != nullptr) KvMetrics(*kv, w);
    if (objects != nullptr) objects->WriteMetrics(w);
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

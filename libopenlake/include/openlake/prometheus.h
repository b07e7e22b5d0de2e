// File: openlake/prometheus.h
//
// Prometheus' text exposition format (version 0.0.4), written from what the subsystems count:
// counters, gauges and the per-core latency histograms of openlake/metrics.h, each family with
// its HELP and TYPE once, samples with labels.
//
//   PrometheusWriter w;
//   w.Counter("openlake_kv_hits_total", "Blocks found by Lookup", stats.hits);
//   w.Gauge("openlake_store_drives", "Drives by state", 4, {{"state", "ok"}});
//   w.Histogram("openlake_s3_request_seconds", "S3 latency", snapshot, 1e-6,
//               {{"op", "GetObject"}});
//   std::string body = w.Finish();   // served as text/plain; version=0.0.4
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "openlake/export.h"
#include "openlake/metrics.h"

namespace openlake {

using PrometheusLabels = std::vector<std::pair<std::string, std::string>>;

class OL_EXPORT PrometheusWriter {
 public:
  void Counter(std::string_view name, std::string_view help, double value,
               const PrometheusLabels& labels = {});
  void Gauge(std::string_view name, std::string_view help, double value,
             const PrometheusLabels& labels = {});
  // A histogram of openlake/metrics.h; `scale` converts its unit to the exposed one (1e-6 for
  // µs → seconds). Buckets are the fixed ladder below (cumulative, as Prometheus wants).
  void Histogram(std::string_view name, std::string_view help, const HistogramSnapshot& h,
                 double scale, const PrometheusLabels& labels = {});
  std::string Finish() { return std::move(out_); }

  // Upper bounds of the exposed buckets, in the exposed unit (seconds): 10 µs to 10 s.
  static const std::vector<double>& Ladder();

 private:
  void Family(std::string_view name, std::string_view help, std::string_view type);
  void Sample(std::string_view name, const PrometheusLabels& labels, double value,
              std::string_view extra_label = {}, std::string_view extra_value = {});

  std::string out_;
  std::set<std::string, std::less<>> families_;
};

}  // namespace openlake

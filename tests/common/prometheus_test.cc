// The Prometheus text exposition: families once, labels escaped, histograms cumulative.
#include <catch2/catch.hpp>

#include <string>

#include "openlake/metrics.h"
#include "openlake/prometheus.h"

namespace openlake {
namespace {

TEST_CASE("prometheus: counters and gauges with labels, each family's HELP and TYPE once",
          "[common]") {
  PrometheusWriter w;
  w.Counter("x_total", "Things\ncounted", 3, {{"op", "Get"}});
  w.Counter("x_total", "ignored the second time", 4, {{"op", "Put \"quoted\" \\ nl\n"}});
  w.Gauge("y", "A gauge", 2.5);
  const std::string out = w.Finish();
  CHECK(out ==
        "# HELP x_total Things\\ncounted\n"
        "# TYPE x_total counter\n"
        "x_total{op=\"Get\"} 3\n"
        "x_total{op=\"Put \\\"quoted\\\" \\\\ nl\\n\"} 4\n"
        "# HELP y A gauge\n"
        "# TYPE y gauge\n"
        "y 2.5\n");
}

TEST_CASE("prometheus: histograms in seconds, cumulative, with sum and count", "[common]") {
  MetricsRegistry reg(1);
  const HistogramId h = reg.AddHistogram("lat_us", "latency");
  reg.shard(0).Record(h, 7);        // 7 µs   → le 1e-05
  reg.shard(0).Record(h, 900);      // 0.9 ms → le 0.001
  reg.shard(0).Record(h, 3000000);  // 3 s    → le 5
  reg.shard(0).Record(h, 60000000);  // 60 s: beyond the ladder → only +Inf
  PrometheusWriter w;
  w.Histogram("lat_seconds", "latency", reg.Read().histograms[0], 1e-6, {{"op", "x"}});
  const std::string out = w.Finish();
  CHECK(out.find("# TYPE lat_seconds histogram\n") != std::string::npos);
  CHECK(out.find("lat_seconds_bucket{op=\"x\",le=\"1e-05\"} 1\n") != std::string::npos);
  CHECK(out.find("lat_seconds_bucket{op=\"x\",le=\"0.0005\"} 1\n") != std::string::npos);
  CHECK(out.find("lat_seconds_bucket{op=\"x\",le=\"0.001\"} 2\n") != std::string::npos);
  CHECK(out.find("lat_seconds_bucket{op=\"x\",le=\"2.5\"} 2\n") != std::string::npos);
  CHECK(out.find("lat_seconds_bucket{op=\"x\",le=\"5\"} 3\n") != std::string::npos);
  CHECK(out.find("lat_seconds_bucket{op=\"x\",le=\"10\"} 3\n") != std::string::npos);
  CHECK(out.find("lat_seconds_bucket{op=\"x\",le=\"+Inf\"} 4\n") != std::string::npos);
  CHECK(out.find("lat_seconds_count{op=\"x\"} 4\n") != std::string::npos);
  CHECK(out.find("lat_seconds_sum{op=\"x\"} 63.000907\n") != std::string::npos);
}

}  // namespace
}  // namespace openlake

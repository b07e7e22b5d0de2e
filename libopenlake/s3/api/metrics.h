// The S3 server's metrics (docs/operations.md, "Metrics"): requests by operation and status
// class, bytes in and out by operation, and a latency histogram per operation, counted per
// reactor (no shared writes on the request path) and summed when scraped.
#pragma once

#include <cstdint>

#include "s3/api/route.h"

#include "openlake/metrics.h"
#include "openlake/prometheus.h"

namespace openlake::s3 {

class S3Metrics {
 public:
  explicit S3Metrics(unsigned reactors);
  // On reactor `reactor`'s thread only.
  void Record(unsigned reactor, Op op, int status, uint64_t bytes_in, uint64_t bytes_out,
              uint64_t micros);
  void Write(PrometheusWriter& w) const;

  static constexpr int kOps = static_cast<int>(Op::kNotImplemented) + 1;
  static constexpr int kClasses = 5;  // 1xx .. 5xx
  // One latency histogram and kClasses + 2 counters per operation, and one more counter.
  static_assert(kOps <= MetricsRegistry::kMaxHistograms, "raise kMaxHistograms");
  static_assert(kOps * (kClasses + 2) + 1 <= MetricsRegistry::kMaxCounters,
                "raise kMaxCounters");

 private:
  MetricsRegistry reg_;
  CounterId requests_[kOps][kClasses];
  CounterId bytes_in_[kOps];
  CounterId bytes_out_[kOps];
  HistogramId latency_[kOps];
  CounterId storage_full_;  // answers 507 (XMinioStorageFull)
};

}  // namespace openlake::s3

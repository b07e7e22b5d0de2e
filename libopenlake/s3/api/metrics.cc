// S3 metrics (see metrics.h).
#include "s3/api/metrics.h"

#include <algorithm>
#include <string>

#include "openlake/strings.h"

namespace openlake::s3 {

S3Metrics::S3Metrics(unsigned reactors) : reg_(std::max(1u, reactors)) {
  for (int op = 0; op < kOps; ++op) {
    const std::string name(OpName(static_cast<Op>(op)));
    for (int c = 0; c < kClasses; ++c) {
      requests_[op][c] = reg_.AddCounter(StrCat("s3_requests/", name, "/", c + 1), "");
    }
    bytes_in_[op] = reg_.AddCounter(StrCat("s3_bytes_in/", name), "");
    bytes_out_[op] = reg_.AddCounter(StrCat("s3_bytes_out/", name), "");
    latency_[op] = reg_.AddHistogram(StrCat("s3_latency/", name), "");
  }
  storage_full_ = reg_.AddCounter("s3_storage_full", "");
}

void S3Metrics::Record(unsigned reactor, Op op, int status, uint64_t bytes_in,
                       uint64_t bytes_out, uint64_t micros) {
  const int o = std::clamp(static_cast<int>(op), 0, kOps - 1);
  const int c = std::clamp(status / 100 - 1, 0, kClasses - 1);
  MetricsRegistry::Shard& s = reg_.shard(reactor % reg_.num_shards());
  s.Add(requests_[o][c]);
  if (bytes_in > 0) s.Add(bytes_in_[o], bytes_in);
  if (bytes_out > 0) s.Add(bytes_out_[o], bytes_out);
  s.Record(latency_[o], micros);
  if (status == 507) s.Add(storage_full_);
}

void S3Metrics::Write(PrometheusWriter& w) const {
  const MetricsSnapshot snap = reg_.Read();
  w.Counter("openlake_s3_storage_full_total",
            "Requests answered 507 XMinioStorageFull: too few drives had room for the write",
            static_cast<double>(snap.counters[storage_full_.index].value));
  for (int op = 0; op < kOps; ++op) {
    const std::string name(OpName(static_cast<Op>(op)));
    for (int c = 0; c < kClasses; ++c) {
      const uint64_t n = snap.counters[static_cast<size_t>(requests_[op][c].index)].value;
      if (n == 0) continue;
      w.Counter("openlake_s3_requests_total", "S3 requests answered, by operation and status",
                static_cast<double>(n), {{"op", name}, {"code", StrCat(c + 1, "xx")}});
    }
    const uint64_t in = snap.counters[bytes_in_[op].index].value;
    const uint64_t out = snap.counters[bytes_out_[op].index].value;
    if (in > 0) {
      w.Counter("openlake_s3_bytes_in_total", "Request body bytes received, by operation",
                static_cast<double>(in), {{"op", name}});
    }
    if (out > 0) {
      w.Counter("openlake_s3_bytes_out_total", "Response bytes sent, by operation",
                static_cast<double>(out), {{"op", name}});
    }
    const HistogramSnapshot& h = snap.histograms[latency_[op].index];
    if (h.count > 0) {
      w.Histogram("openlake_s3_request_duration_seconds",
                  "Time from a request's head to the end of its answer, by operation", h, 1e-6,
                  {{"op", name}});
    }
  }
}

}  // namespace openlake::s3

// File: openlake/metrics.h
//
// Per-core metrics. Each core (shard) owns its own counters and latency histograms and is the
// only writer of them, so an update is a relaxed load and store on a cache line no other core
// writes: no lock, no atomic read-modify-write. A reader (the stats RPC, later /metrics) sums
// every shard with relaxed loads; it may see a value a few updates old, never a torn one.
//
//   MetricsRegistry metrics(/*shards=*/runtime.size());
//   const CounterId hits = metrics.AddCounter("kv_lookup_hits_total", "Blocks found");
//   const HistogramId lat = metrics.AddHistogram("kv_lookup_us", "Lookup latency, µs");
//   metrics.shard(core).Add(hits, n);          // on core `core` only
//   metrics.shard(core).Record(lat, micros);
//   MetricsSnapshot s = metrics.Read();        // any thread
//
// Register every metric before the shards start writing (AddCounter is not synchronised with
// updates).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "openlake/export.h"

namespace openlake {

struct CounterId {
  uint32_t index;
};
struct HistogramId {
  uint32_t index;
};

// Log-linear buckets: values 0..7 exactly, then 8 sub-buckets per power of two, up to 2^63.
// Relative error of a percentile is below 12.5 %.
inline constexpr int kHistogramBuckets = 8 + 61 * 8;

struct OL_EXPORT HistogramSnapshot {
  std::string name;
  std::string help;
  std::vector<uint64_t> buckets;  // kHistogramBuckets counts
  uint64_t count = 0;
  uint64_t sum = 0;
  // Value at quantile q in [0, 1] (upper edge of its bucket); 0 when empty.
  uint64_t Quantile(double q) const;
  // Upper bound (inclusive) of bucket i.
  static uint64_t BucketUpperBound(int i);
};

struct CounterSnapshot {
  std::string name;
  std::string help;
  uint64_t value = 0;
};

struct OL_EXPORT MetricsSnapshot {
  std::vector<CounterSnapshot> counters;
  std::vector<HistogramSnapshot> histograms;
  // The counter named `name`, 0 when absent.
  uint64_t Counter(std::string_view name) const;
  const HistogramSnapshot* Histogram(std::string_view name) const;
};

class OL_EXPORT MetricsRegistry {
 public:
  static constexpr int kMaxCounters = 512;
  static constexpr int kMaxHistograms = 64;

  class alignas(64) Shard {
   public:
    // Owning core only.
    void Add(CounterId id, uint64_t delta = 1) {
      auto& c = counters_[id.index];
      c.store(c.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
    }
    void Record(HistogramId id, uint64_t value);

   private:
    friend class MetricsRegistry;
    struct Hist {
      std::array<std::atomic<uint64_t>, kHistogramBuckets> buckets{};
      std::atomic<uint64_t> count{0};
      std::atomic<uint64_t> sum{0};
    };
    std::array<std::atomic<uint64_t>, kMaxCounters> counters_{};
    std::unique_ptr<Hist[]> hists_;
  };

  explicit MetricsRegistry(unsigned num_shards);
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Registration; aborts past kMaxCounters / kMaxHistograms (a programming error).
  CounterId AddCounter(std::string name, std::string help);
  HistogramId AddHistogram(std::string name, std::string help);

  unsigned num_shards() const { return static_cast<unsigned>(shards_.size()); }
  Shard& shard(unsigned i) { return *shards_[i]; }

  // Sums all shards. Any thread.
  MetricsSnapshot Read() const;

  // Bucket index of `value` (exposed for tests).
  static int BucketOf(uint64_t value);

 private:
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<std::pair<std::string, std::string>> counter_names_;
  std::vector<std::pair<std::string, std::string>> histogram_names_;
};

}  // namespace openlake

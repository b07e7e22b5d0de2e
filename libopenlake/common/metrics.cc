#include "openlake/metrics.h"

#include <bit>

#include "openlake/log.h"
#include "openlake/strings.h"

namespace openlake {

int MetricsRegistry::BucketOf(uint64_t v) {
  if (v < 8) return static_cast<int>(v);
  // v in [2^e, 2^(e+1)), e >= 3: 8 linear sub-buckets from the 3 bits below the top bit.
  const int e = 63 - std::countl_zero(v);
  const int sub = static_cast<int>((v >> (e - 3)) & 7);
  return 8 + (e - 3) * 8 + sub;
}

uint64_t HistogramSnapshot::BucketUpperBound(int i) {
  if (i < 8) return static_cast<uint64_t>(i);
  const int e = (i - 8) / 8 + 3;
  const uint64_t sub = static_cast<uint64_t>((i - 8) % 8);
  const uint64_t base = uint64_t{1} << e;
  const uint64_t width = uint64_t{1} << (e - 3);
  return base + (sub + 1) * width - 1;
}

uint64_t HistogramSnapshot::Quantile(double q) const {
  if (count == 0) return 0;
  if (q < 0) q = 0;
  if (q > 1) q = 1;
  // Rank of the wanted sample, 1-based: the smallest value with at least q of the samples at
  // or below it.
  uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(count) + 0.999999);
  if (rank == 0) rank = 1;
  uint64_t seen = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    seen += buckets[i];
    if (seen >= rank) return BucketUpperBound(static_cast<int>(i));
  }
  return BucketUpperBound(static_cast<int>(buckets.size()) - 1);
}

uint64_t MetricsSnapshot::Counter(std::string_view name) const {
  for (const auto& c : counters) {
    if (c.name == name) return c.value;
  }
  return 0;
}

const HistogramSnapshot* MetricsSnapshot::Histogram(std::string_view name) const {
  for (const auto& h : histograms) {
    if (h.name == name) return &h;
  }
  return nullptr;
}

void MetricsRegistry::Shard::Record(HistogramId id, uint64_t value) {
  Hist& h = hists_[id.index];
  auto bump = [](std::atomic<uint64_t>& a, uint64_t d) {
    a.store(a.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
  };
  bump(h.buckets[BucketOf(value)], 1);
  bump(h.count, 1);
  bump(h.sum, value);
}

MetricsRegistry::MetricsRegistry(unsigned num_shards) {
  if (num_shards == 0) num_shards = 1;
  for (unsigned i = 0; i < num_shards; ++i) {
    auto s = std::make_unique<Shard>();
    s->hists_ = std::make_unique<Shard::Hist[]>(kMaxHistograms);
    shards_.push_back(std::move(s));
  }
}

CounterId MetricsRegistry::AddCounter(std::string name, std::string help) {
  OL_CHECK(counter_names_.size() < kMaxCounters) << "too many counters";
  counter_names_.emplace_back(std::move(name), std::move(help));
  return CounterId{static_cast<uint32_t>(counter_names_.size() - 1)};
}

HistogramId MetricsRegistry::AddHistogram(std::string name, std::string help) {
  OL_CHECK(histogram_names_.size() < kMaxHistograms) << "too many histograms";
  histogram_names_.emplace_back(std::move(name), std::move(help));
  return HistogramId{static_cast<uint32_t>(histogram_names_.size() - 1)};
}

MetricsSnapshot MetricsRegistry::Read() const {
  MetricsSnapshot out;
  out.counters.reserve(counter_names_.size());
  for (size_t i = 0; i < counter_names_.size(); ++i) {
    CounterSnapshot c{counter_names_[i].first, counter_names_[i].second, 0};
    for (const auto& s : shards_) c.value += s->counters_[i].load(std::memory_order_relaxed);
    out.counters.push_back(std::move(c));
  }
  for (size_t i = 0; i < histogram_names_.size(); ++i) {
    HistogramSnapshot h;
    h.name = histogram_names_[i].first;
    h.help = histogram_names_[i].second;
    h.buckets.assign(kHistogramBuckets, 0);
    for (const auto& s : shards_) {
      const Shard::Hist& sh = s->hists_[i];
      for (int b = 0; b < kHistogramBuckets; ++b) {
        h.buckets[b] += sh.buckets[b].load(std::memory_order_relaxed);
      }
      h.count += sh.count.load(std::memory_order_relaxed);
      h.sum += sh.sum.load(std::memory_order_relaxed);
    }
    out.histograms.push_back(std::move(h));
  }
  return out;
}

}  // namespace openlake

#include "openlake/metrics.h"

#include <thread>

#include <catch2/catch.hpp>

using openlake::HistogramSnapshot;
using openlake::MetricsRegistry;

TEST_CASE("bucket edges are monotonic and contain their values", "[metrics]") {
  for (uint64_t v :
       {0ull, 1ull, 7ull, 8ull, 9ull, 15ull, 16ull, 100ull, 1000ull, 123456789ull, ~0ull}) {
    const int b = MetricsRegistry::BucketOf(v);
    REQUIRE(b >= 0);
    REQUIRE(b < openlake::kHistogramBuckets);
    CHECK(HistogramSnapshot::BucketUpperBound(b) >= v);
    if (b > 0) CHECK(HistogramSnapshot::BucketUpperBound(b - 1) < v);
  }
}

TEST_CASE("a reader sums per-core shards written concurrently", "[metrics]") {
  MetricsRegistry m(4);
  const auto c = m.AddCounter("ops_total", "ops");
  const auto h = m.AddHistogram("lat_us", "latency");
  std::vector<std::thread> writers;
  for (unsigned s = 0; s < 4; ++s) {
    writers.emplace_back([&, s] {
      for (int i = 0; i < 100000; ++i) {
        m.shard(s).Add(c);
        m.shard(s).Record(h, static_cast<uint64_t>(i % 100));
      }
    });
  }
  // Reads while writers run must never crash or go backwards.
  uint64_t last = 0;
  for (int i = 0; i < 100; ++i) {
    const uint64_t v = m.Read().Counter("ops_total");
    CHECK(v >= last);
    last = v;
  }
  for (auto& t : writers) t.join();
  auto snap = m.Read();
  CHECK(snap.Counter("ops_total") == 400000);
  const auto* hs = snap.Histogram("lat_us");
  REQUIRE(hs != nullptr);
  CHECK(hs->count == 400000);
  CHECK(hs->Quantile(0.5) >= 49);
  CHECK(hs->Quantile(0.5) <= 55);
  CHECK(hs->Quantile(1.0) >= 99);
}

TEST_CASE("empty histogram quantile is zero", "[metrics]") {
  MetricsRegistry m(1);
  m.AddHistogram("x", "");
  CHECK(m.Read().Histogram("x")->Quantile(0.99) == 0);
}

// `openlake bench client`: one operation driven from N threads, each with its own connection,
// for a warm-up and then a measured period, through the library's public clients only:
// kv::Client (kv-put, kv-get), s3::Client (s3-put, s3-get) and net::RpcClient (rpc-echo).
//
// Each thread runs its operation back to back (one request in flight per thread) and records
// every measured op's latency in its own log-linear histogram; the histograms are merged at
// the end. An op counts toward the measured period when it started in it. Throughput is taken
// over the time from the end of the warm-up until the last measured op finished.
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

#include "bench.h"
#include "cli.h"

#include "openlake/io/socket.h"
#include "openlake/kv/client.h"
#include "openlake/net/rpc.h"
#include "openlake/s3/client.h"

namespace openlake::cli {
namespace {

int64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

// Latencies in nanoseconds, 64 buckets per power of two (values below 64 exact): a percentile
// is off by less than 1.6 %.
class LatencyHistogram {
 public:
  void Record(uint64_t ns) {
    ++counts_[static_cast<size_t>(Index(ns))];
    ++count_;
    sum_ += ns;
    min_ = std::min(min_, ns);
    max_ = std::max(max_, ns);
  }
  void Merge(const LatencyHistogram& o) {
    for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += o.counts_[i];
    count_ += o.count_;
    sum_ += o.sum_;
    min_ = std::min(min_, o.min_);
    max_ = std::max(max_, o.max_);
  }
  uint64_t count() const { return count_; }
  uint64_t min() const { return count_ ? min_ : 0; }
  uint64_t max() const { return max_; }
  double mean() const {
    return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0;
  }
  // The value at percentile p (0 < p ≤ 100, nearest rank): the middle of its bucket, within
  // [min, max].
  double Percentile(double p) const {
    if (count_ == 0) return 0;
    const auto rank = std::max<uint64_t>(
        1, static_cast<uint64_t>(std::ceil(p / 100 * static_cast<double>(count_))));
    uint64_t seen = 0;
    for (size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (seen < rank) continue;
      const double mid = Middle(static_cast<int>(i));
      return std::clamp(mid, static_cast<double>(min_), static_cast<double>(max_));
    }
    return static_cast<double>(max_);
  }

 private:
  static constexpr int kSubBits = 6;
  static constexpr int kSub = 1 << kSubBits;
  // [0, 64) exact; then for 2^e ≤ v < 2^(e+1), e ≥ 6: 64 equal steps of 2^(e-6).
  static int Index(uint64_t v) {
    if (v < kSub) return static_cast<int>(v);
    const int shift = static_cast<int>(std::bit_width(v)) - 1 - kSubBits;
    return ((shift + 1) << kSubBits) + static_cast<int>((v >> shift) & (kSub - 1));
  }
  static double Middle(int i) {
    if (i < kSub) return i;
    const int shift = (i >> kSubBits) - 1;
    const double low = std::ldexp(static_cast<double>(kSub + (i & (kSub - 1))), shift);
    return low + std::ldexp(1.0, shift) / 2 - (shift == 0 ? 0.5 : 0);
  }
  std::vector<uint64_t> counts_ = std::vector<uint64_t>(static_cast<size_t>(Index(~0ull)) + 1);
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t min_ = ~0ull;
  uint64_t max_ = 0;
};

// Bytes that are not all zero (a store could compress zeros), the same for every run.
void FillPattern(char* p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = static_cast<char>(x);
  }
}

// One thread's connection and operation.
class Worker {
 public:
  virtual ~Worker() = default;
  // Connects and prepares (the working set of kv-get and s3-get). On the worker's thread.
  virtual absl::Status Setup() = 0;
  // One operation; the bytes it moved.
  virtual absl::StatusOr<uint64_t> Op() = 0;
  // Removes what the bench stored, where it can. After every thread has stopped.
  virtual void Cleanup() {}
};

// ---- rpc-echo

class EchoWorker final : public Worker {
 public:
  EchoWorker(const BenchClientOptions& o, int index) : o_(o) {
    payload_.resize(o.size);
    FillPattern(payload_.data(), payload_.size(), static_cast<uint64_t>(index));
  }
  absl::Status Setup() override {
    absl::StatusOr<io::SocketAddress> addr = io::SocketAddress::Parse(o_.target);
    if (!addr.ok()) return addr.status();
    net::RpcClientOptions ro;
    ro.secret = o_.secret;
    ro.connect_timeout = absl::Seconds(o_.timeout_secs);
    ro.call_timeout = absl::Seconds(o_.timeout_secs);
    absl::StatusOr<std::unique_ptr<net::RpcClient>> c = net::RpcClient::Connect(*addr, ro);
    if (!c.ok()) return c.status();
    client_ = *std::move(c);
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> Op() override {
    absl::StatusOr<net::RpcClient::Response> r = client_->Call(kBenchEchoMethod, payload_);
    if (!r.ok()) return r.status();
    if (r->payload != payload_) {
      return absl::DataLossError(absl::StrFormat("the echo of %d bytes came back as %d other bytes",
                                                 payload_.size(), r->payload.size()));
    }
    return payload_.size();
  }

 private:
  const BenchClientOptions& o_;
  std::string payload_;
  std::unique_ptr<net::RpcClient> client_;
};

// ---- kv-put, kv-get

kv::LayoutFingerprint BenchFingerprint() {
  kv::LayoutFingerprint fp;
  fp.model = "openlake-bench";
  fp.dtype = "uint8";
  fp.layout = "bytes";
  fp.extra = "openlake bench client: synthetic blocks";
  return fp;
}

class KvWorker final : public Worker {
 public:
  KvWorker(const BenchClientOptions& o, int index, bool get) : o_(o), index_(index), get_(get) {
    block_.resize(o.size);
    FillPattern(block_.data(), block_.size(), static_cast<uint64_t>(index));
  }
  absl::Status Setup() override {
    kv::ClientOptions co;
    co.secret = o_.secret;
    co.connect_timeout = absl::Seconds(o_.timeout_secs);
    co.call_timeout = absl::Seconds(o_.timeout_secs);
    absl::StatusOr<std::unique_ptr<kv::Client>> c = kv::Client::Connect(o_.target, co);
    if (!c.ok()) return c.status();
    client_ = *std::move(c);
    if (!client_->has_slab()) {
      return absl::FailedPreconditionError(
          "this client could not map the pool's shared memory (kv-put and kv-get move bytes "
          "through it): run the bench on the daemon's host, as a user that can open its Unix "
          "socket");
    }
    // A namespace of the bench's own per block size: engines' namespaces are left alone.
    absl::StatusOr<kv::Namespace> ns =
        client_->OpenNamespace(absl::StrFormat("openlake-bench/%d", o_.size), BenchFingerprint(),
                               static_cast<uint32_t>(o_.size));
    if (!ns.ok()) return ns.status();
    ns_ = *std::move(ns);
    if (get_) return PutWorkingSet();
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> Op() override {
    if (get_) {
      const kv::BlockKey key = working_set_[next_++ % working_set_.size()];
      void* const dst = block_.data();
      absl::StatusOr<kv::GetResult> g =
          client_->Get(ns_, absl::MakeConstSpan(&key, 1), absl::MakeConstSpan(&dst, 1));
      if (!g.ok()) return g.status();
      if (g->loaded != 1) {
        return absl::NotFoundError(g->state[0] == kv::BlockState::kCorrupt
                                       ? "a block failed its checksum"
                                       : "a block of the working set is gone (evicted?)");
      }
      return uint64_t{o_.size};
    }
    const kv::BlockKey key(absl::StrFormat("t%d-%d", index_, next_++));
    const void* const src = block_.data();
    absl::StatusOr<kv::PutResult> p =
        client_->Put(ns_, absl::MakeConstSpan(&key, 1), absl::MakeConstSpan(&src, 1));
    if (!p.ok()) return p.status();
    return uint64_t{o_.size};
  }
  void Cleanup() override {
    // Every thread shares the namespace: the first one drops its blocks.
    if (index_ == 0 && client_ != nullptr && ns_.id != 0) (void)client_->Reset(ns_);
  }

 private:
  // kv-get reads a working set stored first: a quarter of the pool (at most 256 MiB) shared
  // among the threads, at least one block each.
  absl::Status PutWorkingSet() {
    absl::StatusOr<kv::PoolStats> stats = client_->Stats();
    if (!stats.ok()) return stats.status();
    const uint64_t budget = std::min<uint64_t>(stats->capacity_bytes / 4, 256ull << 20);
    const uint64_t blocks =
        std::clamp<uint64_t>(budget / o_.size / static_cast<uint64_t>(o_.threads), 1, 4096);
    std::vector<const void*> src;
    for (uint64_t i = 0; i < blocks; ++i) {
      working_set_.emplace_back(absl::StrFormat("t%d-w%d", index_, i));
      src.push_back(block_.data());
    }
    absl::StatusOr<kv::PutResult> p = client_->Put(ns_, working_set_, src);
    if (!p.ok()) return p.status();
    if (p->stored < blocks) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "the pool took %d of the %d blocks of the working set", p->stored, blocks));
    }
    return absl::OkStatus();
  }

  const BenchClientOptions& o_;
  const int index_;
  const bool get_;
  std::string block_;
  std::unique_ptr<kv::Client> client_;
  kv::Namespace ns_;
  std::vector<kv::BlockKey> working_set_;
  uint64_t next_ = 0;
};

// ---- s3-put, s3-get

s3::ClientOptions S3Options(const BenchClientOptions& o) {
  s3::ClientOptions so;
  so.endpoint = o.target;
  so.credential = {o.access_key, o.secret_key};
  so.region = o.region;
  so.connect_timeout = absl::Seconds(o.timeout_secs);
  so.io_timeout = absl::Seconds(o.timeout_secs);
  return so;
}

// The bucket, created when missing (once, before the workers start). CreateBucket rather than
// HeadBucket first: its refusal carries an error document (a wrong secret is named as such).
absl::Status EnsureBucket(const BenchClientOptions& o) {
  absl::StatusOr<std::unique_ptr<s3::Client>> c = s3::Client::Connect(S3Options(o));
  if (!c.ok()) return c.status();
  const absl::Status st = (*c)->CreateBucket(o.bucket);
  if (st.ok() || absl::IsAlreadyExists(st)) return absl::OkStatus();
  return absl::Status(st.code(), "create bucket " + o.bucket + ": " + Message(st));
}

class S3Worker final : public Worker {
 public:
  // Objects per thread: s3-put overwrites these in turn (the disk does not fill), s3-get
  // reads them in turn.
  static constexpr int kObjects = 8;

  S3Worker(const BenchClientOptions& o, int index, bool get) : o_(o), get_(get) {
    data_.resize(o.size + (get ? 1 : 0));  // a GET's buffer has room to notice a larger object
    FillPattern(data_.data(), data_.size(), static_cast<uint64_t>(index));
    for (int i = 0; i < kObjects; ++i) {
      keys_.push_back(absl::StrFormat("openlake-bench/%d/t%d/%d", getpid(), index, i));
    }
  }
  absl::Status Setup() override {
    absl::StatusOr<std::unique_ptr<s3::Client>> c = s3::Client::Connect(S3Options(o_));
    if (!c.ok()) return c.status();
    client_ = *std::move(c);
    if (!get_) return absl::OkStatus();
    for (const std::string& key : keys_) {
      absl::StatusOr<std::string> etag =
          client_->PutObject(o_.bucket, key, std::string_view(data_.data(), o_.size));
      if (!etag.ok()) return etag.status();
    }
    written_ = kObjects;
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> Op() override {
    const std::string& key = keys_[next_++ % keys_.size()];
    if (get_) {
      absl::StatusOr<size_t> n = client_->GetObject(o_.bucket, key, absl::MakeSpan(data_));
      if (!n.ok()) return n.status();
      if (*n != o_.size) {
        return absl::DataLossError(
            absl::StrFormat("GET %s returned %d bytes, not %d", key, *n, o_.size));
      }
      return uint64_t{*n};
    }
    absl::StatusOr<std::string> etag =
        client_->PutObject(o_.bucket, key, std::string_view(data_.data(), o_.size));
    if (!etag.ok()) return etag.status();
    written_ = std::max<uint64_t>(written_, std::min<uint64_t>(next_, kObjects));
    return uint64_t{o_.size};
  }
  void Cleanup() override {
    if (client_ == nullptr) return;
    for (uint64_t i = 0; i < written_; ++i) (void)client_->DeleteObject(o_.bucket, keys_[i]);
  }

 private:
  const BenchClientOptions& o_;
  const bool get_;
  std::string data_;
  std::vector<std::string> keys_;
  std::unique_ptr<s3::Client> client_;
  uint64_t next_ = 0;
  uint64_t written_ = 0;
};

// ---- The run

struct ThreadState {
  std::unique_ptr<Worker> worker;
  absl::Status setup;
  // Measured period only; written by the worker, read after it has been joined.
  LatencyHistogram latency;
  uint64_t ops = 0;
  uint64_t errors = 0;
  uint64_t bytes = 0;
  int64_t last_end_ns = 0;
  std::string first_error;
  // Every op, warm-up included, for the progress line (read while the worker runs).
  std::atomic<uint64_t> live_ops{0};
  std::atomic<uint64_t> live_bytes{0};
  std::atomic<uint64_t> live_errors{0};
};

struct Clock {
  std::atomic<bool> go{false};
  std::atomic<bool> abort{false};
  int64_t measure_from_ns = 0;  // set before `go`
  int64_t end_ns = 0;
};

void RunThread(ThreadState* t, Clock* clock, std::atomic<int>* ready) {
  t->setup = t->worker->Setup();
  ready->fetch_add(1, std::memory_order_release);
  ready->notify_all();
  clock->go.wait(false, std::memory_order_acquire);
  if (!t->setup.ok() || clock->abort.load(std::memory_order_acquire)) return;
  while (true) {
    const int64_t start = NowNs();
    if (start >= clock->end_ns) break;
    const absl::StatusOr<uint64_t> r = t->worker->Op();
    const int64_t end = NowNs();
    const bool measured = start >= clock->measure_from_ns;
    if (r.ok()) {
      t->live_ops.fetch_add(1, std::memory_order_relaxed);
      t->live_bytes.fetch_add(*r, std::memory_order_relaxed);
      if (measured) {
        ++t->ops;
        t->bytes += *r;
        t->latency.Record(static_cast<uint64_t>(end - start));
      }
    } else {
      t->live_errors.fetch_add(1, std::memory_order_relaxed);
      if (measured) {
        ++t->errors;
        if (t->first_error.empty()) t->first_error = Message(r.status());
      }
      // A broken connection fails at once: do not spin on it.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (measured) t->last_end_ns = end;
  }
}

// "12,345".
std::string Grouped(uint64_t v) {
  std::string digits = std::to_string(v);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) {
    digits.insert(static_cast<size_t>(i), ",");
  }
  return digits;
}

// Decimal units, as MB/s: "512 B", "65.5 kB", "804.6 MB", "7.97 GB".
std::string DecimalBytes(uint64_t bytes) {
  const auto b = static_cast<double>(bytes);
  if (b >= 1e9) return absl::StrFormat("%.2f GB", b / 1e9);
  if (b >= 1e6) return absl::StrFormat("%.1f MB", b / 1e6);
  if (b >= 1e3) return absl::StrFormat("%.1f kB", b / 1e3);
  return absl::StrFormat("%d B", bytes);
}

// "75.2 µs", "1.25 ms", "2.10 s".
std::string FormatNs(double ns) {
  if (ns < 1e6) return absl::StrFormat("%.1f µs", ns / 1e3);
  if (ns < 1e9) return absl::StrFormat("%.2f ms", ns / 1e6);
  return absl::StrFormat("%.2f s", ns / 1e9);
}

// Prints "  3 s  12,345 ops/s  96.4 MB/s" on stderr once a second until `end_ns`.
void Progress(const std::vector<std::unique_ptr<ThreadState>>& threads, const Clock& clock,
              int64_t start_ns) {
  uint64_t last_ops = 0, last_bytes = 0, last_errors = 0;
  int64_t last_ns = start_ns;
  for (int second = 1;; ++second) {
    const int64_t tick = start_ns + int64_t{second} * 1000000000;
    if (tick > clock.end_ns) break;
    std::this_thread::sleep_for(std::chrono::nanoseconds(tick - NowNs()));
    uint64_t ops = 0, bytes = 0, errors = 0;
    for (const auto& t : threads) {
      ops += t->live_ops.load(std::memory_order_relaxed);
      bytes += t->live_bytes.load(std::memory_order_relaxed);
      errors += t->live_errors.load(std::memory_order_relaxed);
    }
    const int64_t now = NowNs();
    const double secs = static_cast<double>(now - last_ns) / 1e9;
    std::string line =
        absl::StrFormat("  %d s  %s ops/s  %.1f MB/s", second,
                        Grouped(static_cast<uint64_t>(static_cast<double>(ops - last_ops) / secs)),
                        static_cast<double>(bytes - last_bytes) / 1e6 / secs);
    if (errors > last_errors) absl::StrAppendFormat(&line, "  %d errors", errors - last_errors);
    if (tick <= clock.measure_from_ns) line += "  (warm-up)";
    std::fprintf(stderr, "%s\n", line.c_str());
    last_ops = ops;
    last_bytes = bytes;
    last_errors = errors;
    last_ns = now;
  }
}

std::unique_ptr<Worker> MakeWorker(const BenchClientOptions& o, int index) {
  if (o.op == "rpc-echo") return std::make_unique<EchoWorker>(o, index);
  if (o.op == "kv-put" || o.op == "kv-get") {
    return std::make_unique<KvWorker>(o, index, o.op == "kv-get");
  }
  return std::make_unique<S3Worker>(o, index, o.op == "s3-get");
}

// An error of setting up: bad arguments for this target exit 2, the rest 1.
int SetupFailure(const BenchClientOptions& o, const absl::Status& st) {
  const bool usage = absl::IsInvalidArgument(st);
  return Fail(usage ? kExitUsage : kExitRuntime,
              absl::StrFormat("bench client: %s against %s: %s", o.op, o.target, Message(st)));
}

void PrintReport(const BenchClientOptions& o, uint64_t ops, uint64_t errors, uint64_t bytes,
                 double elapsed, const LatencyHistogram& h, const std::string& first_error) {
  const double ops_per_sec = static_cast<double>(ops) / elapsed;
  const double mb_per_sec = static_cast<double>(bytes) / 1e6 / elapsed;
  if (o.json) {
    JsonWriter w;
    w.BeginObject()
        .Field("op", o.op)
        .Field("target", o.target)
        .Field("size_bytes", o.size)
        .Field("threads", o.threads)
        .Field("warmup_secs", o.warmup_secs)
        .Field("duration_secs", o.duration_secs)
        .Field("elapsed_secs", elapsed)
        .Field("ops", ops)
        .Field("errors", errors)
        .Field("bytes", bytes)
        .Field("ops_per_sec", ops_per_sec)
        .Field("mb_per_sec", mb_per_sec);
    w.Key("latency_us")
        .BeginObject()
        .Field("p50", h.Percentile(50) / 1e3)
        .Field("p99", h.Percentile(99) / 1e3)
        .Field("p999", h.Percentile(99.9) / 1e3)
        .Field("min", static_cast<double>(h.min()) / 1e3)
        .Field("mean", h.mean() / 1e3)
        .Field("max", static_cast<double>(h.max()) / 1e3)
        .EndObject();
    w.Key("first_error");
    if (first_error.empty()) {
      w.Null();
    } else {
      w.String(first_error);
    }
    w.EndObject();
    PrintJson(w);
    return;
  }
  std::printf(
      "bench client: %s of %s to %s, %d thread(s), %.1f s measured after %.1f s of "
      "warm-up\n",
      o.op.c_str(), HumanBytes(o.size).c_str(), o.target.c_str(), o.threads, elapsed,
      o.warmup_secs);
  std::printf("  ops:      %s (%s ops/s), %s errors\n", Grouped(ops).c_str(),
              Grouped(static_cast<uint64_t>(ops_per_sec)).c_str(), Grouped(errors).c_str());
  std::printf("  traffic:  %s (%.1f MB/s)\n", DecimalBytes(bytes).c_str(), mb_per_sec);
  std::printf("  latency:  p50 %s, p99 %s, p999 %s (min %s, mean %s, max %s)\n",
              FormatNs(h.Percentile(50)).c_str(), FormatNs(h.Percentile(99)).c_str(),
              FormatNs(h.Percentile(99.9)).c_str(), FormatNs(static_cast<double>(h.min())).c_str(),
              FormatNs(h.mean()).c_str(), FormatNs(static_cast<double>(h.max())).c_str());
  if (!first_error.empty()) std::printf("  first error: %s\n", first_error.c_str());
}

}  // namespace

bool ParseByteSize(std::string_view text, uint64_t* out) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 12) return false;
  const uint64_t n = std::stoull(std::string(text.substr(0, digits)));
  std::string unit(text.substr(digits));
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::pair<const char*, uint64_t> kUnits[] = {{"", 1},           {"b", 1},
                                                            {"k", 1ull << 10}, {"kib", 1ull << 10},
                                                            {"m", 1ull << 20}, {"mib", 1ull << 20},
                                                            {"g", 1ull << 30}, {"gib", 1ull << 30},
                                                            {"kb", 1000},      {"mb", 1000000},
                                                            {"gb", 1000000000}};
  for (const auto& [name, scale] : kUnits) {
    if (unit == name) {
      *out = n * scale;
      return n > 0;
    }
  }
  return false;
}

int RunBenchClient(const BenchClientOptions& o) {
  const bool kv = o.op == "kv-put" || o.op == "kv-get";
  const bool s3 = o.op == "s3-put" || o.op == "s3-get";
  if (kv && (o.size < kv::kMinBlockBytes || o.size > UINT32_MAX)) {
    return Fail(kExitUsage, absl::StrFormat("bench client: %s needs a --size of %d bytes to 4 GiB",
                                            o.op, kv::kMinBlockBytes));
  }
  if (o.op == "rpc-echo" && o.size > net::kDefaultMaxFrameBytes - 64) {
    return Fail(kExitUsage,
                "bench client: rpc-echo payloads are limited to 64 MiB (the frame "
                "limit)");
  }
  if (s3 && (o.access_key.empty() || o.secret_key.empty())) {
    return Fail(kExitUsage,
                absl::StrFormat("bench client: %s needs credentials: --access-key and "
                                "--secret-key, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
                                o.op));
  }
  if (absl::StatusOr<io::SocketAddress> a = io::SocketAddress::Parse(o.target); !a.ok()) {
    return Fail(kExitUsage,
                absl::StrFormat("bench client: --target %s: %s", o.target, Message(a.status())));
  }
  if (s3) {
    if (absl::Status st = EnsureBucket(o); !st.ok()) return SetupFailure(o, st);
  }

  std::vector<std::unique_ptr<ThreadState>> threads;
  for (int i = 0; i < o.threads; ++i) {
    threads.push_back(std::make_unique<ThreadState>());
    threads.back()->worker = MakeWorker(o, i);
  }
  Clock clock;
  std::atomic<int> ready{0};
  std::vector<std::thread> running;
  for (auto& t : threads) running.emplace_back(RunThread, t.get(), &clock, &ready);
  // Every thread connected (and stored its working set) before the clock starts.
  for (int n = ready.load(std::memory_order_acquire); n < o.threads;
       n = ready.load(std::memory_order_acquire)) {
    ready.wait(n, std::memory_order_acquire);
  }
  absl::Status setup;
  for (const auto& t : threads) {
    if (!t->setup.ok()) {
      setup = t->setup;
      break;
    }
  }
  const int64_t start_ns = NowNs();
  clock.measure_from_ns = start_ns + static_cast<int64_t>(o.warmup_secs * 1e9);
  clock.end_ns = clock.measure_from_ns + static_cast<int64_t>(o.duration_secs * 1e9);
  clock.abort.store(!setup.ok(), std::memory_order_release);
  clock.go.store(true, std::memory_order_release);
  clock.go.notify_all();
  if (setup.ok()) Progress(threads, clock, start_ns);
  for (std::thread& t : running) t.join();
  for (auto& t : threads) t->worker->Cleanup();
  if (!setup.ok()) return SetupFailure(o, setup);

  LatencyHistogram all;
  uint64_t ops = 0, errors = 0, bytes = 0;
  int64_t last_end = clock.measure_from_ns;
  std::string first_error;
  for (const auto& t : threads) {
    all.Merge(t->latency);
    ops += t->ops;
    errors += t->errors;
    bytes += t->bytes;
    last_end = std::max(last_end, t->last_end_ns);
    if (first_error.empty()) first_error = t->first_error;
  }
  if (ops == 0) {
    return Fail(kExitRuntime,
                errors > 0 ? absl::StrFormat("bench client: every %s against %s failed (%d "
                                             "errors): %s",
                                             o.op, o.target, errors, first_error)
                           : absl::StrFormat("bench client: no %s against %s completed in the "
                                             "measured period",
                                             o.op, o.target));
  }
  const double elapsed = static_cast<double>(last_end - clock.measure_from_ns) / 1e9;
  PrintReport(o, ops, errors, bytes, elapsed, all, first_error);
  return kExitOk;
}

}  // namespace openlake::cli

#include "openlake/log.h"

#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#include "openlake/strings.h"

namespace openlake {
namespace {

class StderrSink : public LogSink {
 public:
  void Write(const LogRecord& r) override {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    tm tm_utc;
    gmtime_r(&ts.tv_sec, &tm_utc);
    char stamp[32];
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm_utc);
    std::string_view file = r.file;
    if (auto slash = file.rfind('/'); slash != std::string_view::npos) {
      file.remove_prefix(slash + 1);
    }
    // One fprintf per line: stdio locks the stream, so lines from threads do not interleave.
    std::fprintf(stderr, "%s.%03ldZ %s %.*s:%d] %.*s\n", stamp, ts.tv_nsec / 1000000,
                 LogLevelName(r.level).data(), static_cast<int>(file.size()), file.data(), r.line,
                 static_cast<int>(r.message.size()), r.message.data());
  }
};

std::atomic<int> g_min_level{static_cast<int>(LogLevel::kInfo)};

absl::Mutex& SinkMutex() {
  static absl::Mutex mu;
  return mu;
}
std::shared_ptr<LogSink>& SinkSlot() ABSL_EXCLUSIVE_LOCKS_REQUIRED(SinkMutex()) {
  static auto* sink = new std::shared_ptr<LogSink>(std::make_shared<StderrSink>());
  return *sink;
}

std::shared_ptr<LogSink> CurrentSink() {
  absl::MutexLock lock(&SinkMutex());
  return SinkSlot();
}

}  // namespace

void SetLogSink(std::shared_ptr<LogSink> sink) {
  if (!sink) sink = std::make_shared<StderrSink>();
  absl::MutexLock lock(&SinkMutex());
  SinkSlot() = std::move(sink);
}

void SetMinLogLevel(LogLevel level) {
  g_min_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

LogLevel MinLogLevel() {
  return static_cast<LogLevel>(g_min_level.load(std::memory_order_relaxed));
}

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "D";
    case LogLevel::kInfo:
      return "I";
    case LogLevel::kWarning:
      return "W";
    case LogLevel::kError:
      return "E";
    case LogLevel::kFatal:
      return "F";
  }
  return "?";
}

namespace internal {

LogMessage::~LogMessage() {
  const std::string text = stream_.str();
  CurrentSink()->Write(LogRecord{level_, file_, line_, text});
  if (level_ == LogLevel::kFatal) std::abort();
}

bool LogEveryNSec(std::atomic<int64_t>& last_ns, double seconds) {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t last = last_ns.load(std::memory_order_relaxed);
  if (last != 0 && now - last < static_cast<int64_t>(seconds * 1e9)) return false;
  return last_ns.compare_exchange_strong(last, now, std::memory_order_relaxed);
}

}  // namespace internal
}  // namespace openlake

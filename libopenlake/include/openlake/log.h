// File: openlake/log.h
//
// Logging for libopenlake. The library never owns the process: it writes every log line to a
// sink the embedder installs (stderr until one is). Nothing on a per-I/O path logs at INFO;
// rate-limited warnings use OL_LOG_EVERY_N_SEC.
//
//   class MySink : public openlake::LogSink {
//     void Write(const openlake::LogRecord& r) override { my_logger.log(r.level, r.message); }
//   };
//   openlake::SetLogSink(std::make_shared<MySink>());
//   OL_LOG(kWarning) << "drive " << path << " is slow";
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string_view>

#include "openlake/export.h"

namespace openlake {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kFatal = 4 };

struct LogRecord {
  LogLevel level;
  std::string_view file;  // source file that logged
  int line;
  std::string_view message;
};

// Receives every log line at or above the minimum level. Write may be called from any thread
// concurrently; implementations synchronise themselves.
class LogSink {
 public:
  virtual ~LogSink() = default;
  virtual void Write(const LogRecord& record) = 0;
};

// Installs `sink` for all later log lines; nullptr restores the stderr sink. Thread-safe.
OL_EXPORT void SetLogSink(std::shared_ptr<LogSink> sink);
// Lines below `level` are dropped before formatting. Default kInfo.
OL_EXPORT void SetMinLogLevel(LogLevel level);
OL_EXPORT LogLevel MinLogLevel();
OL_EXPORT std::string_view LogLevelName(LogLevel level);

namespace internal {

class OL_EXPORT LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line)
      : level_(level), file_(file), line_(line) {}
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  ~LogMessage();  // hands the line to the sink; aborts after a kFatal line
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};

// True at most once per `seconds` for the call site owning `last_ns`.
OL_EXPORT bool LogEveryNSec(std::atomic<int64_t>& last_ns, double seconds);

// Makes `OL_LOG(...) << x` a void expression so it can sit in a ternary.
struct LogVoidify {
  void operator&(std::ostream&) {}
};

}  // namespace internal
}  // namespace openlake

#define OL_LOG(level)                                                                         \
  !(::openlake::LogLevel::level >= ::openlake::MinLogLevel())                                 \
      ? (void)0                                                                               \
      : ::openlake::internal::LogVoidify() &                                                  \
            ::openlake::internal::LogMessage(::openlake::LogLevel::level, __FILE__, __LINE__) \
                .stream()

// One statement (safe as the body of an unbraced if): the if-with-initializer holds the call
// site's timestamp, and its own else keeps a following `else` bound to the caller's if.
#define OL_LOG_EVERY_N_SEC(level, seconds)                              \
  if (static std::atomic<int64_t> ol_log_last_{0};                      \
      !(::openlake::LogLevel::level >= ::openlake::MinLogLevel() &&     \
        ::openlake::internal::LogEveryNSec(ol_log_last_, (seconds)))) { \
  } else                                                                \
    ::openlake::internal::LogVoidify() &                                \
        ::openlake::internal::LogMessage(::openlake::LogLevel::level, __FILE__, __LINE__).stream()

#define OL_LOG_CONCAT_INNER_(a, b) a##b
#define OL_LOG_CONCAT_(a, b) OL_LOG_CONCAT_INNER_(a, b)

// Invariants whose violation would corrupt data: log and abort, in every build.
#define OL_CHECK(cond)                                                                            \
  (cond) ? (void)0                                                                                \
         : ::openlake::internal::LogVoidify() &                                                   \
               ::openlake::internal::LogMessage(::openlake::LogLevel::kFatal, __FILE__, __LINE__) \
                       .stream()                                                                  \
                   << "check failed: " #cond " "

// Programmer errors checked in debug and sanitizer builds only.
#ifndef NDEBUG
#define OL_DCHECK(cond) OL_CHECK(cond)
#else
#define OL_DCHECK(cond) OL_CHECK(true || (cond))
#endif

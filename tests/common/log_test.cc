#include "openlake/log.h"

#include <memory>
#include <mutex>
#include <vector>

#include <catch2/catch.hpp>

#include "openlake/status.h"

namespace {
class Capture : public openlake::LogSink {
 public:
  void Write(const openlake::LogRecord& r) override {
    std::lock_guard<std::mutex> l(mu);
    lines.emplace_back(r.message);
    levels.push_back(r.level);
  }
  std::mutex mu;
  std::vector<std::string> lines;
  std::vector<openlake::LogLevel> levels;
};
}  // namespace

TEST_CASE("log lines reach the installed sink, filtered by level", "[log]") {
  auto sink = std::make_shared<Capture>();
  openlake::SetLogSink(sink);
  OL_LOG(kInfo) << "hello " << 42;
  OL_LOG(kDebug) << "hidden";
  openlake::SetMinLogLevel(openlake::LogLevel::kDebug);
  OL_LOG(kDebug) << "shown";
  openlake::SetMinLogLevel(openlake::LogLevel::kInfo);
  for (int i = 0; i < 5; ++i) {
    OL_LOG_EVERY_N_SEC(kWarning, 60) << "rate limited";
  }
  openlake::SetLogSink(nullptr);
  REQUIRE(sink->lines.size() == 3);
  CHECK(sink->lines[0] == "hello 42");
  CHECK(sink->lines[1] == "shown");
  CHECK(sink->lines[2] == "rate limited");
  CHECK(sink->levels[2] == openlake::LogLevel::kWarning);
}

TEST_CASE("status macros propagate and assign", "[status]") {
  auto fails = []() -> absl::StatusOr<int> { return absl::NotFoundError("nope"); };
  auto works = []() -> absl::StatusOr<int> { return 7; };
  auto user = [&](bool fail) -> absl::StatusOr<int> {
    OL_ASSIGN_OR_RETURN(int v, fail ? fails() : works());
    OL_RETURN_IF_ERROR(absl::OkStatus());
    return v + 1;
  };
  CHECK(user(false).value() == 8);
  CHECK(user(true).status().code() == absl::StatusCode::kNotFound);
  absl::Status e = openlake::ErrnoStatus(-ENOENT, "open x");
  CHECK(e.code() == absl::StatusCode::kNotFound);
  CHECK(std::string(e.message()) == "open x: No such file or directory");
}

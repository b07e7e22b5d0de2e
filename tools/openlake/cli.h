// Shared pieces of the `openlake` command-line tool: exit codes, error lines, byte formatting and
// a small JSON writer for --json output. The tool is a thin consumer of libopenlake's public API.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "daemon_config.h"
#include "human_bytes.h"

#include "openlake/kv/client.h"

namespace openlake::cli {

// The daemon's config file (tools/common/daemon_config.h).
using tools::Config;
using tools::DefaultConfig;
using tools::LoadConfigFile;
using tools::MemTotalBytes;
using tools::NodeConfig;

// Exit codes of every command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntime = 1;  // the command ran and failed (daemon unreachable, ...)
inline constexpr int kExitUsage = 2;    // bad arguments or a bad config

// Prints "openlake: <message>" on stderr and returns `code`.
int Fail(int code, std::string_view message);

// Loads the config at `path` (empty: the embedded default). On failure prints the parser's
// message (file, line and key) as the command's error and returns nothing; the caller exits
// with kExitUsage.
std::optional<Config> LoadConfigOrReport(const std::string& path);

// A KV client for control calls only (Stats): it never maps the slab, so it works from any host
// that reaches the pool's RPC address. `timeout` bounds the connect and each call.
absl::StatusOr<std::unique_ptr<kv::Client>> ConnectPoolControl(const std::string& address,
                                                               const std::string& secret,
                                                               absl::Duration timeout);

// "1.5 GiB".
using tools::HumanBytes;

// Builds one JSON value as text. Commas and quoting are handled here; keys are written with
// Key() inside objects. Not validating: callers nest Begin/End correctly.
class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  JsonWriter& String(std::string_view value);
  JsonWriter& Uint(uint64_t value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Double(double value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();

  // Key(k) followed by the value.
  JsonWriter& Field(std::string_view k, std::string_view v) { return Key(k).String(v); }
  JsonWriter& Field(std::string_view k, const char* v) { return Key(k).String(v); }
  JsonWriter& Field(std::string_view k, const std::string& v) { return Key(k).String(v); }
  JsonWriter& Field(std::string_view k, uint64_t v) { return Key(k).Uint(v); }
  JsonWriter& Field(std::string_view k, uint32_t v) { return Key(k).Uint(v); }
  JsonWriter& Field(std::string_view k, int v) { return Key(k).Int(v); }
  JsonWriter& Field(std::string_view k, double v) { return Key(k).Double(v); }
  JsonWriter& Field(std::string_view k, bool v) { return Key(k).Bool(v); }

  const std::string& str() const { return out_; }

 private:
  void Separate();
  std::string out_;
  // One entry per open object/array: true once it holds an element.
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

// Writes `json` and a newline to stdout.
void PrintJson(const JsonWriter& json);

// Each command group registers its subcommands on `app`. A command's callback stores its exit
// code in `*exit_code`.
void AddVersionCommand(CLI::App& app, int* exit_code);
void AddNodeCommands(CLI::App& app, int* exit_code);
void AddDiskCommands(CLI::App& app, int* exit_code);
void AddKvCommands(CLI::App& app, int* exit_code);
void AddClusterCommands(CLI::App& app, int* exit_code);
void AddBenchCommands(CLI::App& app, int* exit_code);
// `cluster status` and `cluster topology` (cluster_status.cc), under the `cluster` command.
void AddClusterStatusCommands(CLI::App& cluster, int* exit_code);

}  // namespace openlake::cli

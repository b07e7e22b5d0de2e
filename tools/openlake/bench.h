// `openlake bench`: load generators against a running store (docs/cli.md, "bench"). The client
// (bench_client.cc) drives one operation from N threads for a fixed time and reports ops/s,
// MB/s and latency percentiles; the target (bench_cmd.cc) is an RPC echo server for measuring
// the transport alone.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace openlake::cli {

// The RPC method `openlake bench target` answers with the request's payload, unchanged. Outside
// the KV pool's methods (1..11), so pointing rpc-echo at an openlaked fails plainly ("unknown
// method") instead of calling something.
inline constexpr uint16_t kBenchEchoMethod = 1007;

struct BenchClientOptions {
  std::string target;
  std::string op;  // kv-put, kv-get, s3-put, s3-get, rpc-echo
  uint64_t size = 4096;
  int threads = 1;
  double duration_secs = 10;
  double warmup_secs = 1;
  double timeout_secs = 10;
  std::string secret;  // rpc_secret (kv-*, rpc-echo)
  // S3 (s3-*).
  std::string access_key;
  std::string secret_key;
  std::string bucket = "openlake-bench";
  std::string region = "us-east-1";
  bool json = false;
};

// Runs the client; the command's exit code.
int RunBenchClient(const BenchClientOptions& o);

// "4096", "4KiB", "1MiB", "2GiB", "4K", "1M" (binary), "4KB", "1MB" (decimal); false when the
// text is none of these or the value is 0.
bool ParseByteSize(std::string_view text, uint64_t* out);

}  // namespace openlake::cli

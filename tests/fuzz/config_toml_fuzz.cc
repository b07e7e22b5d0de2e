// Fuzz target for the daemon's config file (tools/common/daemon_config.cc, over toml++): the
// text is parsed, validated and mapped onto every library option struct, as openlaked does at
// start. Beyond "no crash" (toml++ reports errors by exception; none may escape ParseConfig):
// a config ParseConfig accepts passes ValidateConfig again, and the error of one it refuses
// names the file.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "daemon_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace tools = openlake::tools;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<tools::Config> cfg = tools::ParseConfig(text, "fuzz.toml");
  if (!cfg.ok()) {
    if (cfg.status().message().find("fuzz.toml") == std::string_view::npos) __builtin_trap();
    return 0;
  }
  if (!tools::ValidateConfig(*cfg).ok()) __builtin_trap();
  (void)tools::RuntimeOptionsFor(*cfg);
  (void)tools::StoreOptionsFor(*cfg);
  (void)tools::S3ServerOptionsFor(*cfg);
  if (cfg->kv_enabled) {
    absl::StatusOr<uint64_t> slab = tools::KvSlabBytes(cfg->kv_slab, 64ull << 30);
    if (slab.ok()) (void)tools::KvServiceOptionsFor(*cfg, *slab, "/tmp/fuzz.sock");
  }
  return 0;
}

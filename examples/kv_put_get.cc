// Stores four blocks in a running openlaked's KV pool and reads them back.
//
//   openlaked &                     # or: openlaked --config examples/configs/kv_local.toml
//   ./build/examples/kv_put_get 127.0.0.1:9400
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "openlake/kv/client.h"

int main(int argc, char** argv) {
  const std::string addr = argc > 1 ? argv[1] : "127.0.0.1:9400";
  auto client = openlake::kv::Client::Connect(addr);
  if (!client.ok()) {
    std::fprintf(stderr, "connect %s: %s\n", addr.c_str(),
                 std::string(client.status().message()).c_str());
    return 1;
  }
  openlake::kv::LayoutFingerprint fp;
  fp.model = "example-model";
  fp.dtype = "bfloat16";
  fp.layout = "NHD";
  fp.num_layers = 2;
  fp.num_kv_heads = 8;
  fp.head_size = 128;
  fp.block_tokens = 16;
  const uint32_t block_bytes =
      2 * 2 * 16 * 8 * 128 * 2;  // layers × K,V × tokens × heads × dim × bf16
  auto ns = (*client)->OpenNamespace("example/tp0", fp, block_bytes);
  if (!ns.ok()) {
    std::fprintf(stderr, "open namespace: %s\n", std::string(ns.status().message()).c_str());
    return 1;
  }
  std::vector<openlake::kv::BlockKey> keys;
  std::vector<std::vector<char>> blocks(4, std::vector<char>(block_bytes));
  std::vector<const void*> src;
  for (int i = 0; i < 4; ++i) {
    keys.emplace_back("example-block-hash-" + std::to_string(i));
    std::memset(blocks[i].data(), 'a' + i, block_bytes);
    src.push_back(blocks[i].data());
  }
  auto put = (*client)->Put(*ns, keys, src);
  if (!put.ok()) {
    std::fprintf(stderr, "put: %s\n", std::string(put.status().message()).c_str());
    return 1;
  }
  std::vector<std::vector<char>> out(4, std::vector<char>(block_bytes));
  std::vector<void*> dst;
  for (auto& o : out) dst.push_back(o.data());
  auto got = (*client)->Get(*ns, keys, dst);
  if (!got.ok()) {
    std::fprintf(stderr, "get: %s\n", std::string(got.status().message()).c_str());
    return 1;
  }
  const bool same = got->loaded == 4 && out == blocks;
  std::printf("stored %zu blocks, loaded %zu, bytes %s\n", put->stored, got->loaded,
              same ? "identical" : "DIFFERENT");
  return same ? 0 : 1;
}

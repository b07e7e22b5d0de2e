// Helpers shared by the KV tests.
#pragma once

#include <string>

#include "openlake/kv/types.h"

namespace openlake::testing {

// A Llama-3-8B-like layout fingerprint; tests vary the dtype to make a mismatching one.
inline kv::LayoutFingerprint TestFingerprint(std::string dtype = "bfloat16") {
  kv::LayoutFingerprint f;
  f.model = "test-model";
  f.dtype = std::move(dtype);
  f.layout = "NHD";
  f.num_layers = 32;
  f.num_kv_heads = 8;
  f.head_size = 128;
  f.block_tokens = 16;
  return f;
}

}  // namespace openlake::testing

#include "openlake/checksum.h"
#include "openlake/kv/types.h"
#include "openlake/strings.h"

namespace openlake::kv {
namespace {

struct Field {
  const char* name;
  std::string value;
};

std::vector<Field> Fields(const LayoutFingerprint& f) {
  return {{"model", f.model},
          {"dtype", f.dtype},
          {"layout", f.layout},
          {"layers", StrCat(f.num_layers)},
          {"kv_heads", StrCat(f.num_kv_heads)},
          {"head_size", StrCat(f.head_size)},
          {"block_tokens", StrCat(f.block_tokens)},
          {"tp", StrCat(f.tp_rank, "/", f.tp_size)},
          {"pp", StrCat(f.pp_rank, "/", f.pp_size)},
          {"extra", f.extra}};
}

}  // namespace

std::string LayoutFingerprint::Describe() const {
  std::string out;
  for (const Field& f : Fields(*this)) {
    if (!out.empty()) out += ' ';
    out += StrCat(f.name, "=", f.value);
  }
  return out;
}

uint64_t LayoutFingerprint::Digest() const {
  // Canonical encoding: every field as <len u32 LE><bytes>, in a fixed order.
  std::string enc;
  for (const Field& f : Fields(*this)) {
    const auto n = static_cast<uint32_t>(f.value.size());
    for (int i = 0; i < 4; ++i) enc.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
    enc += f.value;
  }
  return Crc64(enc.data(), enc.size());
}

std::string LayoutFingerprint::Diff(const LayoutFingerprint& other) const {
  const std::vector<Field> a = Fields(*this);
  const std::vector<Field> b = Fields(other);
  std::string out;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].value == b[i].value) continue;
    if (!out.empty()) out += "; ";
    out += StrCat(a[i].name, ": ", a[i].value, " requested vs ", b[i].value, " stored");
  }
  return out;
}

}  // namespace openlake::kv

#include "store/placement.h"

#include <cstring>
#include <string>

namespace openlake::store {
namespace {

inline uint64_t Rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);  // little-endian hosts only (x86-64, aarch64)
  return v;
}

struct SipState {
  uint64_t v0, v1, v2, v3;
  void Round() {
    v0 += v1;
    v1 = Rotl(v1, 13);
    v1 ^= v0;
    v0 = Rotl(v0, 32);
    v2 += v3;
    v3 = Rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = Rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = Rotl(v1, 17);
    v1 ^= v2;
    v2 = Rotl(v2, 32);
  }
};

}  // namespace

uint64_t SipHash24(const SipKey& key, std::string_view data) {
  const uint64_t k0 = Load64(key.data());
  const uint64_t k1 = Load64(key.data() + 8);
  SipState s{k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL,
             k0 ^ 0x6c7967656e657261ULL, k1 ^ 0x7465646279746573ULL};
  const auto* in = reinterpret_cast<const uint8_t*>(data.data());
  const size_t len = data.size();
  const size_t full = len - len % 8;
  for (size_t i = 0; i < full; i += 8) {
    const uint64_t m = Load64(in + i);
    s.v3 ^= m;
    s.Round();
    s.Round();
    s.v0 ^= m;
  }
  uint64_t b = static_cast<uint64_t>(len) << 56;
  for (size_t i = 0; i < len % 8; ++i) b |= static_cast<uint64_t>(in[full + i]) << (8 * i);
  s.v3 ^= b;
  s.Round();
  s.Round();
  s.v0 ^= b;
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) s.Round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

Placement Place(const SipKey& key, uint32_t set_count, uint32_t set_drive_count,
                std::string_view bucket, std::string_view object_key) {
  std::string buf;
  buf.reserve(bucket.size() + 1 + object_key.size());
  buf.append(bucket).append("/").append(object_key);
  const uint64_t h = SipHash24(key, buf);
  Placement p;
  p.set = set_count ? static_cast<uint32_t>(h % set_count) : 0;
  // Independent bits for the rotation.
  p.rotation = set_drive_count ? static_cast<uint32_t>((h >> 32) % set_drive_count) : 0;
  return p;
}

}  // namespace openlake::store

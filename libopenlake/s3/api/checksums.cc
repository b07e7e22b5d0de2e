// S3's additional checksums (see checksums.h).
#include "s3/api/checksums.h"

#include <algorithm>
#include <array>

#include <isa-l/crc.h>

namespace openlake::s3 {
namespace {

constexpr std::string_view kNames[] = {"crc32", "crc32c", "crc64nvme", "sha1", "sha256"};
constexpr std::string_view kDisplay[] = {"CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"};

// Slicing-by-8 tables for CRC-64/NVME: t[0] is the byte table, t[k] advances k more bytes.
struct Crc64NvmeTables {
  std::array<std::array<uint64_t, 256>, 8> t{};
  Crc64NvmeTables() {
    constexpr uint64_t kPoly = 0x9A6C9329AC4BC9B5ull;
    for (uint64_t i = 0; i < 256; ++i) {
      uint64_t c = i;
      for (int b = 0; b < 8; ++b) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      t[0][i] = c;
    }
    for (int k = 1; k < 8; ++k) {
      for (int i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
    }
  }
};

std::string BigEndian(uint64_t v, size_t bytes) {
  std::string out(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) out[bytes - 1 - i] = static_cast<char>(v >> (8 * i));
  return out;
}

}  // namespace

std::optional<ChecksumAlgo> ChecksumAlgoFromName(std::string_view lower_name) {
  for (size_t i = 0; i < std::size(kNames); ++i) {
    if (kNames[i] == lower_name) return static_cast<ChecksumAlgo>(i);
  }
  return std::nullopt;
}

std::string_view ChecksumAlgoName(ChecksumAlgo a) { return kNames[static_cast<int>(a)]; }
std::string_view ChecksumAlgoDisplay(ChecksumAlgo a) { return kDisplay[static_cast<int>(a)]; }

size_t ChecksumBytes(ChecksumAlgo a) {
  constexpr size_t kBytes[] = {4, 4, 8, 20, 32};
  return kBytes[static_cast<int>(a)];
}

uint64_t Crc64Nvme(const void* data, size_t len, uint64_t crc) {
  static const Crc64NvmeTables tables;
  const auto& t = tables.t;
  auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  while (len >= 8) {
    uint64_t w = 0;
    for (int i = 0; i < 8; ++i) w |= static_cast<uint64_t>(p[i]) << (8 * i);
    w ^= crc;
    crc = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^ t[5][(w >> 16) & 0xff] ^
          t[4][(w >> 24) & 0xff] ^ t[3][(w >> 32) & 0xff] ^ t[2][(w >> 40) & 0xff] ^
          t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];
    p += 8;
    len -= 8;
  }
  while (len-- > 0) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xff];
  return ~crc;
}

Checksummer::Checksummer(ChecksumAlgo a) : algo_(a) {
  if (a == ChecksumAlgo::kSha1) digest_ = std::make_unique<Digest>(Digest::kSha1);
  if (a == ChecksumAlgo::kSha256) digest_ = std::make_unique<Digest>(Digest::kSha256);
  if (a == ChecksumAlgo::kCrc32c) crc_ = 0xffffffffu;  // crc32_iscsi neither inverts in nor out
}

void Checksummer::Update(std::string_view data) {
  auto* p = reinterpret_cast<unsigned char*>(const_cast<char*>(data.data()));
  switch (algo_) {
    case ChecksumAlgo::kCrc32:
      crc_ = crc32_gzip_refl(static_cast<uint32_t>(crc_), p, data.size());
      break;
    case ChecksumAlgo::kCrc32c:
      // crc32_iscsi takes an int length: feed it in pieces below 2 GiB.
      for (size_t off = 0; off < data.size(); off += 1u << 30) {
        const size_t n = std::min<size_t>(data.size() - off, 1u << 30);
        crc_ = crc32_iscsi(p + off, static_cast<int>(n), static_cast<uint32_t>(crc_));
      }
      break;
    case ChecksumAlgo::kCrc64Nvme:
      crc_ = Crc64Nvme(p, data.size(), crc_);
      break;
    case ChecksumAlgo::kSha1:
    case ChecksumAlgo::kSha256:
      digest_->Update(data);
      break;
  }
}

std::string Checksummer::Final() {
  switch (algo_) {
    case ChecksumAlgo::kCrc32: return BigEndian(crc_, 4);
    case ChecksumAlgo::kCrc32c: return BigEndian(~crc_ & 0xffffffffu, 4);
    case ChecksumAlgo::kCrc64Nvme: return BigEndian(crc_, 8);
    default: return digest_->Final();
  }
}

namespace {

// Polynomials over GF(2) modulo a CRC's polynomial, in the CRC's reflected form: the top bit
// (bit width-1) is x^0 and bit 0 is x^(width-1).
struct CrcField {
  uint64_t poly;  // reflected, without x^width
  int width;

  uint64_t One() const { return uint64_t{1} << (width - 1); }
  // a * b mod poly: b times x at each step, added where a has the power.
  uint64_t Mul(uint64_t a, uint64_t b) const {
    uint64_t product = 0;
    for (uint64_t power = One(); power != 0; power >>= 1) {
      if ((a & power) != 0) product ^= b;
      b = (b & 1) != 0 ? (b >> 1) ^ poly : b >> 1;
    }
    return product;
  }
  // x^n mod poly, by squaring.
  uint64_t XPow(uint64_t n) const {
    uint64_t result = One(), square = One() >> 1;  // x^0, x^1
    while (n != 0) {
      if ((n & 1) != 0) result = Mul(result, square);
      square = Mul(square, square);
      n >>= 1;
    }
    return result;
  }
};

uint64_t FromBigEndian(std::string_view raw) {
  uint64_t v = 0;
  for (char c : raw) v = (v << 8) | static_cast<uint8_t>(c);
  return v;
}

}  // namespace

std::optional<std::string> CombineCrc(ChecksumAlgo a, std::string_view raw_a,
                                      std::string_view raw_b, uint64_t len_b) {
  CrcField f{};
  switch (a) {
    case ChecksumAlgo::kCrc32: f = {0xEDB88320u, 32}; break;
    case ChecksumAlgo::kCrc32c: f = {0x82F63B78u, 32}; break;
    case ChecksumAlgo::kCrc64Nvme: f = {0x9A6C9329AC4BC9B5ull, 64}; break;
    default: return std::nullopt;
  }
  const size_t bytes = ChecksumBytes(a);
  if (raw_a.size() != bytes || raw_b.size() != bytes) return std::nullopt;
  // With init and xorout both all ones, CRC(A B) = CRC(A) * x^(8 len B) + CRC(B).
  const uint64_t combined = f.Mul(f.XPow(8 * len_b), FromBigEndian(raw_a)) ^ FromBigEndian(raw_b);
  return BigEndian(combined, bytes);
}

}  // namespace openlake::s3

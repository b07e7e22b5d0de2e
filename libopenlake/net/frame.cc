#include "net/frame.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>

#include "absl/base/internal/endian.h"
#include "absl/strings/str_cat.h"

#include "openlake/log.h"
#include "openlake/strings.h"

namespace openlake::net {
namespace {
constexpr std::string_view kAuthLabel = "openlake-rpc-v1";
}  // namespace

void EncodeHeader(const FrameHeader& h, char* out) {
  std::memset(out, 0, kFrameHeaderBytes);
  absl::little_endian::Store32(out + 0, kFrameMagic);
  out[4] = static_cast<char>(kFrameVersion);
  out[5] = static_cast<char>(h.type);
  out[6] = static_cast<char>(h.flags);
  absl::little_endian::Store16(out + 8, h.method);
  absl::little_endian::Store32(out + 12, h.length);
  absl::little_endian::Store32(out + 16, h.aux);
  absl::little_endian::Store64(out + 24, h.request_id);
}

void AppendFrame(const FrameHeader& h, std::string_view payload, std::string* out) {
  FrameHeader hh = h;
  hh.length = static_cast<uint32_t>(payload.size());
  const size_t at = out->size();
  out->resize(at + kFrameHeaderBytes);
  EncodeHeader(hh, out->data() + at);
  out->append(payload);
}

absl::Status DecodeHeader(const char* in, uint32_t max_length, FrameHeader* h) {
  const uint32_t magic = absl::little_endian::Load32(in);
  if (magic != kFrameMagic) {
    return absl::InvalidArgumentError(StrCat("bad frame magic 0x", absl::Hex(magic)));
  }
  const auto version = static_cast<uint8_t>(in[4]);
  if (version != kFrameVersion) {
    return absl::InvalidArgumentError(StrCat("unsupported frame version ", version));
  }
  const auto type = static_cast<uint8_t>(in[5]);
  if (type < 1 || type > 4) {
    return absl::InvalidArgumentError(StrCat("unknown frame type ", type));
  }
  if (in[7] != 0 || in[10] != 0 || in[11] != 0 || absl::little_endian::Load32(in + 20) != 0) {
    return absl::InvalidArgumentError("nonzero reserved bytes in frame header");
  }
  h->type = static_cast<FrameType>(type);
  h->flags = static_cast<uint8_t>(in[6]);
  if (h->flags & ~kFrameFlagFd) {
    return absl::InvalidArgumentError(StrCat("unknown frame flags 0x", absl::Hex(h->flags)));
  }
  h->method = absl::little_endian::Load16(in + 8);
  h->length = absl::little_endian::Load32(in + 12);
  h->aux = absl::little_endian::Load32(in + 16);
  h->request_id = absl::little_endian::Load64(in + 24);
  if (h->length > max_length) {
    return absl::InvalidArgumentError(
        StrCat("frame of ", h->length, " bytes exceeds the limit of ", max_length));
  }
  return absl::OkStatus();
}

std::string EncodeHello(bool auth_required, const uint8_t nonce[kNonceBytes],
                        std::string_view version) {
  std::string out;
  out.push_back(auth_required ? 1 : 0);
  out.append(reinterpret_cast<const char*>(nonce), kNonceBytes);
  out.append(version);
  return out;
}

absl::Status DecodeHello(std::string_view payload, bool* auth_required, uint8_t nonce[kNonceBytes],
                         std::string* version) {
  if (payload.size() < 1 + kNonceBytes || payload.size() > 1 + kNonceBytes + 256) {
    return absl::InvalidArgumentError("malformed hello from server");
  }
  *auth_required = payload[0] != 0;
  std::memcpy(nonce, payload.data() + 1, kNonceBytes);
  *version = std::string(payload.substr(1 + kNonceBytes));
  return absl::OkStatus();
}

std::string AuthMac(std::string_view secret, const uint8_t nonce[kNonceBytes]) {
  std::string msg(kAuthLabel);
  msg.append(reinterpret_cast<const char*>(nonce), kNonceBytes);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac, &len);
  return std::string(reinterpret_cast<const char*>(mac), len);
}

bool AuthMacMatches(std::string_view secret, const uint8_t nonce[kNonceBytes],
                    std::string_view mac) {
  const std::string want = AuthMac(secret, nonce);
  return mac.size() == want.size() && CRYPTO_memcmp(mac.data(), want.data(), want.size()) == 0;
}

}  // namespace openlake::net

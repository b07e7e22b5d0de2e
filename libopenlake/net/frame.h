// The RPC frame: a fixed 32-byte little-endian header followed by `length` payload bytes.
// Specified in prose in docs/rpc.md; keep the two in step.
//
//   off size field
//    0   4   magic       "OLRP"
//    4   1   version     1
//    5   1   type        1 request, 2 response, 3 hello (server → client), 4 auth
//    6   1   flags       bit 0: an SCM_RIGHTS descriptor travels with this frame
//    7   1   reserved    0
//    8   2   method      request/response: the method number
//   10   2   reserved    0
//   12   4   length      payload bytes (≤ the receiver's max frame size)
//   16   4   aux         request: deadline budget in ms (0 = none); response: status code
//   20   4   reserved    0
//   24   8   request_id  chosen by the client, echoed in the response
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace openlake::net {

inline constexpr uint32_t kFrameMagic = 0x50524C4F;  // "OLRP" read as little-endian u32
inline constexpr uint8_t kFrameVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 32;
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;

enum class FrameType : uint8_t { kRequest = 1, kResponse = 2, kHello = 3, kAuth = 4 };
inline constexpr uint8_t kFrameFlagFd = 1;

struct FrameHeader {
  FrameType type = FrameType::kRequest;
  uint8_t flags = 0;
  uint16_t method = 0;
  uint32_t length = 0;
  uint32_t aux = 0;
  uint64_t request_id = 0;
};

// Writes the 32 header bytes for `h` at `out`.
void EncodeHeader(const FrameHeader& h, char* out);
// Appends header + payload to `out`.
void AppendFrame(const FrameHeader& h, std::string_view payload, std::string* out);

// Parses and validates the header at `in` (32 bytes). InvalidArgument names what is wrong:
// bad magic, unknown version or type, nonzero reserved bytes, or a length over `max_length`.
absl::Status DecodeHeader(const char* in, uint32_t max_length, FrameHeader* h);

// Hello payload: [auth_required u8][nonce 32][version bytes...].
std::string EncodeHello(bool auth_required, const uint8_t nonce[kNonceBytes],
                        std::string_view version);
absl::Status DecodeHello(std::string_view payload, bool* auth_required, uint8_t nonce[kNonceBytes],
                         std::string* version);

// HMAC-SHA256(secret, "openlake-rpc-v1" || nonce): the auth frame's payload.
std::string AuthMac(std::string_view secret, const uint8_t nonce[kNonceBytes]);
// Constant-time comparison of an auth payload against the expected MAC.
bool AuthMacMatches(std::string_view secret, const uint8_t nonce[kNonceBytes],
                    std::string_view mac);

}  // namespace openlake::net

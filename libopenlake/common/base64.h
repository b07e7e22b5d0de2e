// Standard base64 (RFC 4648 §4, with padding), as HTTP headers carry digests (Content-MD5,
// x-amz-checksum-*): encoding, and a strict decoder that refuses anything but canonical input.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace openlake {

std::string Base64(std::string_view bytes);
// Strict standard base64 (padding required); nullopt when malformed or over 1 MiB of text.
std::optional<std::string> Unbase64(std::string_view text);

}  // namespace openlake

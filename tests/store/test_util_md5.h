// MD5 helpers for checking ETags in tests (OpenSSL's one-shot digest).
#pragma once

#include <openssl/evp.h>

#include <string>

#include "openlake/strings.h"

namespace openlake::testing {

inline std::string Md5Hex(const std::string& data) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), d, &n, EVP_md5(), nullptr);
  return Hex(std::string_view(reinterpret_cast<const char*>(d), n));
}

inline std::string UnhexForTest(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

}  // namespace openlake::testing

// Base64 over OpenSSL's EVP block coder (see base64.h).
#include "common/base64.h"

#include <openssl/evp.h>

#include <cctype>

namespace openlake {

std::string Base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(n);
  return out;
}

std::optional<std::string> Unbase64(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0 || text.size() > (1 << 20)) return std::nullopt;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool pad_ok =
        c == '=' && i + 2 >= text.size() && (i + 1 == text.size() || text[i + 1] == '=');
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || pad_ok)) {
      return std::nullopt;
    }
  }
  std::string out(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  size_t len = static_cast<size_t>(n);
  if (text.back() == '=') --len;  // EVP_DecodeBlock counts padding as zero bytes
  if (text[text.size() - 2] == '=') --len;
  out.resize(len);
  return out;
}

}  // namespace openlake

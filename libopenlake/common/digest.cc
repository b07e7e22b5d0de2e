#include "common/digest.h"

#include <openssl/evp.h>

namespace openlake {
namespace {

// Fetched once: OpenSSL 3 looks an algorithm up on every init given its legacy EVP_sha256()
// form, which costs more than hashing a short string.
const EVP_MD* Md(Digest::Kind k) {
  static const EVP_MD* md5 = EVP_MD_fetch(nullptr, "MD5", nullptr);
  static const EVP_MD* sha1 = EVP_MD_fetch(nullptr, "SHA1", nullptr);
  static const EVP_MD* sha256 = EVP_MD_fetch(nullptr, "SHA2-256", nullptr);
  switch (k) {
    case Digest::kMd5: return md5;
    case Digest::kSha1: return sha1;
    case Digest::kSha256: break;
  }
  return sha256;
}

}  // namespace

Digest::Digest(Kind kind) : kind_(kind), ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(ctx_, Md(kind_), nullptr);
}

Digest::~Digest() { EVP_MD_CTX_free(ctx_); }

void Digest::Update(const void* data, size_t len) { EVP_DigestUpdate(ctx_, data, len); }

std::string Digest::Final() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_, out, &len);
  EVP_DigestInit_ex(ctx_, Md(kind_), nullptr);
  return std::string(reinterpret_cast<char*>(out), len);
}

}  // namespace openlake

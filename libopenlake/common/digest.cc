#include "common/digest.h"

#include <openssl/evp.h>

namespace openlake {
namespace {

const EVP_MD* Md(Digest::Kind k) {
  switch (k) {
    case Digest::kMd5: return EVP_md5();
    case Digest::kSha1: return EVP_sha1();
    case Digest::kSha256: break;
  }
  return EVP_sha256();
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

// Message digests (MD5, SHA-1, SHA-256) computed incrementally, over OpenSSL's EVP: the object
// engine's MD5 ETags and the S3 server's Content-MD5, payload hash and x-amz-checksum-sha*.
//
//   Digest h(Digest::kMd5);
//   h.Update(piece);  // as many pieces as there are
//   std::string raw = h.Final();  // 16 bytes (20 for SHA-1, 32 for SHA-256)
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

typedef struct evp_md_ctx_st EVP_MD_CTX;

namespace openlake {

class Digest {
 public:
  enum Kind { kMd5, kSha1, kSha256 };
  explicit Digest(Kind kind);
  ~Digest();
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;

  void Update(const void* data, size_t len);
  void Update(std::string_view data) { Update(data.data(), data.size()); }
  // The digest of everything given since construction or the last Final (which starts over).
  std::string Final();

 private:
  Kind kind_;
  EVP_MD_CTX* ctx_;
};

}  // namespace openlake

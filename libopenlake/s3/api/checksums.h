// The additional checksums of S3 (docs/s3.md, "Checksums"): x-amz-checksum-crc32, -crc32c,
// -crc64nvme, -sha1 and -sha256, each the base64 of the big-endian checksum of the object's
// bytes, sent as a header or as a trailer of an aws-chunked body.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/digest.h"

namespace openlake::s3 {

enum class ChecksumAlgo { kCrc32, kCrc32c, kCrc64Nvme, kSha1, kSha256 };

// "crc32" → kCrc32 (the lower-case suffix of the header name); nullopt when unknown.
std::optional<ChecksumAlgo> ChecksumAlgoFromName(std::string_view lower_name);
std::string_view ChecksumAlgoName(ChecksumAlgo a);  // "crc32", ...
std::string_view ChecksumAlgoDisplay(ChecksumAlgo a);  // "CRC32", ... (for messages)
// Bytes of the raw checksum (4, 4, 8, 20, 32).
size_t ChecksumBytes(ChecksumAlgo a);

class Checksummer {
 public:
  explicit Checksummer(ChecksumAlgo a);
  void Update(std::string_view data);
  // The raw checksum, big-endian (what S3 sends in base64).
  std::string Final();
  ChecksumAlgo algo() const { return algo_; }

 private:
  ChecksumAlgo algo_;
  uint64_t crc_ = 0;
  std::unique_ptr<Digest> digest_;
};

// CRC-64/NVME (reflected polynomial 0x9A6C9329AC4BC9B5, init and xorout all ones), continuing
// from `crc` (0 to start).
uint64_t Crc64Nvme(const void* data, size_t len, uint64_t crc = 0);

// The CRC (crc32, crc32c, crc64nvme) of A followed by B from the raw checksums of A and B and
// the length of B: how a multipart object's full-object checksum follows from its parts'.
// nullopt for the SHA algorithms, which do not combine, or raw checksums of the wrong size.
std::optional<std::string> CombineCrc(ChecksumAlgo a, std::string_view raw_a,
                                      std::string_view raw_b, uint64_t len_b);

}  // namespace openlake::s3

// Fuzz target for every XML document the S3 server (and its client) reads: the first byte picks
// the parser (CompleteMultipartUpload, Delete, CreateBucketConfiguration, an Error body), the
// rest is the document. Beyond "no crash": a parsed Delete holds 1..max_keys keys, and every
// part number of a parsed CompleteMultipartUpload is one S3 allows (1..10000).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "s3/api/xml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace s3 = openlake::s3;
  if (size == 0) return 0;
  const std::string_view doc(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto parts = s3::ParseCompleteMultipartUpload(doc);
      if (parts.ok()) {
        for (const s3::CompletedPart& p : *parts) {
          if (p.number < 1 || p.number > 10000) __builtin_trap();
        }
      }
      break;
    }
    case 1: {
      auto del = s3::ParseDelete(doc, 16);
      if (del.ok() && (del->keys.empty() || del->keys.size() > 16)) __builtin_trap();
      break;
    }
    case 2:
      (void)s3::ParseLocationConstraint(doc);
      break;
    default: {
      auto err = s3::ParseErrorXml(doc);
      (void)err;
      break;
    }
  }
  return 0;
}

// The body of an S3 request as the handlers see it (docs/s3.md, "Payloads"): the object bytes,
// decoded and verified while they stream in. PayloadReader undoes the aws-chunked encoding of
// streamed uploads and checks each chunk's signature (STREAMING-AWS4-HMAC-SHA256-PAYLOAD), the
// trailer's signature (...-TRAILER), the payload's SHA-256 when the request signed one,
// Content-MD5, and an x-amz-checksum-* sent as a header or as a trailer. Nothing is trusted
// until Next() has returned the empty piece: a handler commits only then.
//
//   PayloadReader body(ex, auth);
//   if (!body.Init()) { answer body.error(); }
//   while (true) {
//     auto piece = co_await body.Next();
//     if (!piece.ok()) { answer body.error(); }   // nothing committed
//     if (piece->empty()) break;                  // whole and verified
//     write *piece;
//   }
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

#include "common/digest.h"
#include "http/framing.h"
#include "http/server.h"
#include "s3/api/checksums.h"
#include "s3/api/errors.h"
#include "s3/auth/sigv4.h"

#include "openlake/io/task.h"

namespace openlake::s3 {

class PayloadReader {
 public:
  PayloadReader(http::Exchange& ex, const SigV4Result& auth);

  // Reads the headers that describe the body; false (see error()) when they are malformed or
  // contradict each other. With `header_checksums` false, x-amz-checksum-* headers are not
  // the body's (CompleteMultipartUpload's name the whole object's) and are left alone.
  bool Init(bool header_checksums = true);
  // The decoded body's size when known, -1 otherwise.
  int64_t size() const { return size_; }
  // The next decoded bytes (a view valid until the next call); empty once the whole body
  // arrived and passed every check. An error leaves error() set.
  io::Task<absl::StatusOr<std::string_view>> Next();
  // Reads and verifies the whole body into `out`, refusing more than `limit` bytes
  // (for XML documents).
  io::Task<absl::Status> ReadAll(size_t limit, std::string* out);

  const S3Error& error() const { return error_; }
  // The checksum the client sent and the body matched, to echo in the response
  // ("x-amz-checksum-crc32", value); empty name when none.
  const std::pair<std::string, std::string>& checksum() const { return checksum_; }
  uint64_t bytes() const { return bytes_; }

 private:
  absl::Status Fail(std::string code, int status, std::string message);
  absl::Status FailFrom(const absl::Status& st);
  // Raw body bytes from the HTTP layer into pending_; false at the end of the HTTP body.
  io::Task<absl::StatusOr<bool>> Fill();
  absl::Status EndChunk();      // the current aws-chunk ended: check its signature
  absl::Status CheckTrailer();  // trailer fields of an aws-chunked body
  absl::Status Finish();        // every check on the whole body
  void Consume(std::string_view data);

  http::Exchange& ex_;
  const SigV4Result& auth_;
  S3Error error_;
  int64_t size_ = -1;
  uint64_t bytes_ = 0;
  bool chunked_ = false;       // aws-chunked
  bool signed_chunks_ = false;
  bool trailer_expected_ = false;
  bool http_done_ = false;
  bool finished_ = false;
  std::string_view pending_;   // raw bytes not yet decoded
  std::unique_ptr<http::ChunkedDecoder> decoder_;
  bool in_chunk_ = false;
  std::string chunk_signature_;  // the current chunk's claimed signature
  std::string previous_signature_;
  std::unique_ptr<Digest> chunk_sha_;
  std::unique_ptr<Digest> payload_sha_;  // the whole body, when a hex payload hash was signed
  std::string payload_sha_hex_;
  std::unique_ptr<Digest> md5_;
  std::string content_md5_;       // raw 16 bytes
  std::unique_ptr<Checksummer> checksummer_;
  std::string checksum_name_;     // "x-amz-checksum-crc32"
  std::optional<std::string> checksum_value_;  // base64, from the header (or later the trailer)
  std::pair<std::string, std::string> checksum_;
};

}  // namespace openlake::s3

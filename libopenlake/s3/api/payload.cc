// Decoding and verifying request bodies (see payload.h).
#include "s3/api/payload.h"

#include <openssl/crypto.h>

#include "s3/api/fields.h"

#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

constexpr std::string_view kChecksumPrefix = "x-amz-checksum-";

bool IsHex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (http::HexDigit(c) < 0) return false;
  }
  return true;
}

bool SameSecret(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace

PayloadReader::PayloadReader(http::Exchange& ex, const SigV4Result& auth) : ex_(ex), auth_(auth) {}

absl::Status PayloadReader::Fail(std::string code, int status, std::string message) {
  error_ = S3Error{std::move(code), status, std::move(message)};
  return absl::InvalidArgumentError(error_.message);
}

absl::Status PayloadReader::FailFrom(const absl::Status& st) {
  error_ = ErrorFromStatus(st);
  return st;
}

bool PayloadReader::Init(bool header_checksums) {
  const http::Request& req = ex_.request();
  const std::string_view payload = auth_.payload;
  if (payload == kStreamingPayload || payload == kStreamingPayloadTrailer ||
      payload == kStreamingUnsignedTrailer) {
    chunked_ = true;
    signed_chunks_ = payload != kStreamingUnsignedTrailer;
    trailer_expected_ = payload != kStreamingPayload;
    if (auth_.presigned && signed_chunks_) {
      (void)Fail("InvalidRequest", 400, "A presigned URL cannot carry a signed streaming body.");
      return false;
    }
  } else if (payload.substr(0, 10) == "STREAMING-") {
    (void)Fail("NotImplemented", 501,
               StrCat("The payload form ", payload, " (SigV4a) is not implemented."));
    return false;
  } else if (IsHex64(payload)) {
    payload_sha_hex_ = http::AsciiLower(payload);
    payload_sha_ = std::make_unique<Digest>(Digest::kSha256);
  } else if (!payload.empty() && payload != kUnsignedPayload) {
    (void)Fail("InvalidArgument", 400,
               "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
               " or a SHA-256 hex digest.");
    return false;
  }

  if (chunked_) {
    const http::Header* dl = req.Find("x-amz-decoded-content-length");
    uint64_t v = 0;
    bool ok = dl != nullptr && !dl->value.empty() && dl->value.size() <= 19;
    for (char c : dl ? dl->value : std::string()) ok = ok && c >= '0' && c <= '9';
    if (!ok) {
      (void)Fail("MissingContentLength", 411,
                 "A streamed (aws-chunked) body needs a valid x-amz-decoded-content-length.");
      return false;
    }
    for (char c : dl->value) v = v * 10 + static_cast<uint64_t>(c - '0');
    size_ = static_cast<int64_t>(v);
    decoder_ = std::make_unique<http::ChunkedDecoder>();
    previous_signature_ = auth_.seed_signature;
    chunk_sha_ = std::make_unique<Digest>(Digest::kSha256);
  } else if (req.framing == http::BodyFraming::kLength) {
    size_ = static_cast<int64_t>(req.content_length);
  } else if (req.framing == http::BodyFraming::kNone) {
    size_ = 0;
  }

  if (const http::Header* h = req.Find("content-md5")) {
    std::optional<std::string> raw = Unbase64(h->value);
    if (!raw || raw->size() != 16) {
      (void)Fail("InvalidDigest", 400, "The Content-MD5 you specified is not valid.");
      return false;
    }
    content_md5_ = *std::move(raw);
    md5_ = std::make_unique<Digest>(Digest::kMd5);
  }

  // An x-amz-checksum-* header, or one named by x-amz-trailer (at most one of all of them).
  auto take_algo = [&](std::string_view lower_name) -> bool {
    const std::string_view algo = lower_name.substr(kChecksumPrefix.size());
    std::optional<ChecksumAlgo> a = ChecksumAlgoFromName(algo);
    if (!a) {
      (void)Fail("InvalidRequest", 400, StrCat("Unknown checksum header ", lower_name, "."));
      return false;
    }
    if (checksummer_) {
      (void)Fail("InvalidRequest", 400,
                 "Expecting a single x-amz-checksum- header. Multiple checksum Types are not "
                 "allowed.");
      return false;
    }
    checksummer_ = std::make_unique<Checksummer>(*a);
    checksum_name_ = std::string(lower_name);
    return true;
  };
  for (const http::Header& h : req.headers) {
    if (!header_checksums) break;
    if (h.name.compare(0, kChecksumPrefix.size(), kChecksumPrefix) != 0) continue;
    if (h.name == "x-amz-checksum-mode" || h.name == "x-amz-checksum-type" ||
        h.name == "x-amz-checksum-algorithm") {
      continue;
    }
    if (!take_algo(h.name)) return false;
    std::optional<std::string> raw = Unbase64(h.value);
    if (!raw || raw->size() != ChecksumBytes(checksummer_->algo())) {
      (void)Fail("InvalidRequest", 400, StrCat("Value for ", h.name, " header is invalid."));
      return false;
    }
    checksum_value_ = h.value;
  }
  if (const http::Header* t = req.Find("x-amz-trailer"); t != nullptr && !t->value.empty()) {
    if (!trailer_expected_) {
      (void)Fail("InvalidRequest", 400,
                 "x-amz-trailer needs a body sent as STREAMING-*-TRAILER (aws-chunked).");
      return false;
    }
    const std::string name = http::AsciiLower(t->value);
    if (name.compare(0, kChecksumPrefix.size(), kChecksumPrefix) == 0 && !take_algo(name)) {
      return false;
    }
  }
  return true;
}

void PayloadReader::Consume(std::string_view data) {
  bytes_ += data.size();
  if (payload_sha_) payload_sha_->Update(data);
  if (md5_) md5_->Update(data);
  if (checksummer_) checksummer_->Update(data);
}

io::Task<absl::StatusOr<bool>> PayloadReader::Fill() {
  absl::StatusOr<std::string_view> piece = co_await ex_.ReadBody();
  if (!piece.ok()) co_return FailFrom(piece.status());
  if (piece->empty()) {
    http_done_ = true;
    co_return false;
  }
  pending_ = *piece;
  co_return true;
}

absl::Status PayloadReader::EndChunk() {
  in_chunk_ = false;
  if (!signed_chunks_) return absl::OkStatus();
  const std::string expected =
      ChunkSignature(auth_, previous_signature_, Hex(chunk_sha_->Final()));
  if (!SameSecret(expected, chunk_signature_)) {
    return Fail("SignatureDoesNotMatch", 403,
                "The chunk signature of the streamed body does not match.");
  }
  previous_signature_ = chunk_signature_;
  return absl::OkStatus();
}

absl::Status PayloadReader::CheckTrailer() {
  const std::vector<http::Header>& fields = decoder_->trailers();
  if (signed_chunks_ && trailer_expected_) {
    std::string signed_bytes;
    const http::Header* sig = nullptr;
    for (const http::Header& h : fields) {
      if (h.name == "x-amz-trailer-signature") {
        sig = &h;
      } else {
        signed_bytes.append(h.name).append(":").append(h.value).append("\n");
      }
    }
    if (sig == nullptr ||
        !SameSecret(TrailerSignature(auth_, previous_signature_, signed_bytes), sig->value)) {
      return Fail("SignatureDoesNotMatch", 403,
                  "The trailer signature of the streamed body is missing or does not match.");
    }
  }
  if (checksummer_ && !checksum_value_) {
    const http::Header* h = http::FindHeader(fields, checksum_name_);
    if (h == nullptr) {
      return Fail("InvalidRequest", 400,
                  StrCat("x-amz-trailer announced ", checksum_name_,
                         " but the body's trailer does not carry it."));
    }
    std::optional<std::string> raw = Unbase64(h->value);
    if (!raw || raw->size() != ChecksumBytes(checksummer_->algo())) {
      return Fail("InvalidRequest", 400, StrCat("Value for ", checksum_name_, " is invalid."));
    }
    checksum_value_ = h->value;
  }
  return absl::OkStatus();
}

absl::Status PayloadReader::Finish() {
  if (chunked_ && bytes_ != static_cast<uint64_t>(size_)) {
    return Fail("IncompleteBody", 400,
                StrCat("The streamed body decoded to ", bytes_,
                       " bytes, not x-amz-decoded-content-length's ", size_, "."));
  }
  if (payload_sha_ && Hex(payload_sha_->Final()) != payload_sha_hex_) {
    return Fail("XAmzContentSHA256Mismatch", 400,
                "The provided 'x-amz-content-sha256' header does not match what was computed.");
  }
  if (md5_ && md5_->Final() != content_md5_) {
    return Fail("BadDigest", 400, "The Content-MD5 you specified did not match what we received.");
  }
  if (checksummer_ && checksum_value_) {
    if (Base64(checksummer_->Final()) != *checksum_value_) {
      return Fail("BadDigest", 400,
                  StrCat("The ", ChecksumAlgoDisplay(checksummer_->algo()),
                         " you specified did not match the calculated checksum."));
    }
    checksum_ = {checksum_name_, *checksum_value_};
  }
  finished_ = true;
  return absl::OkStatus();
}

io::Task<absl::StatusOr<std::string_view>> PayloadReader::Next() {
  if (finished_) co_return std::string_view();
  if (!chunked_) {
    if (pending_.empty()) {
      absl::StatusOr<bool> more = co_await Fill();
      if (!more.ok()) co_return more.status();
      if (!*more) {
        OL_CO_RETURN_IF_ERROR(Finish());
        co_return std::string_view();
      }
    }
    const std::string_view data = pending_;
    pending_ = {};
    Consume(data);
    co_return data;
  }
  while (true) {
    if (pending_.empty() && !decoder_->done()) {
      absl::StatusOr<bool> more = co_await Fill();
      if (!more.ok()) co_return more.status();
      if (!*more) {
        co_return Fail("IncompleteBody", 400,
                       "The streamed (aws-chunked) body ended before its last chunk.");
      }
    }
    http::ChunkedDecoder::Event ev;
    const size_t used = decoder_->Next(pending_, &ev);
    pending_.remove_prefix(used);
    switch (ev.kind) {
      case http::ChunkedDecoder::Event::kNeedMore:
        continue;
      case http::ChunkedDecoder::Event::kError:
        co_return Fail("IncompleteBody", 400, StrCat("Malformed aws-chunked body: ", ev.error));
      case http::ChunkedDecoder::Event::kChunk: {
        if (in_chunk_) OL_CO_RETURN_IF_ERROR(EndChunk());
        in_chunk_ = true;
        chunk_signature_.clear();
        if (signed_chunks_) {
          constexpr std::string_view kSig = ";chunk-signature=";
          if (ev.extensions.substr(0, kSig.size()) != kSig) {
            co_return Fail("SignatureDoesNotMatch", 403,
                           "A chunk of the streamed body carries no chunk-signature.");
          }
          chunk_signature_ = std::string(ev.extensions.substr(kSig.size()));
        }
        continue;
      }
      case http::ChunkedDecoder::Event::kData:
        if (signed_chunks_) chunk_sha_->Update(ev.data);
        Consume(ev.data);
        co_return ev.data;
      case http::ChunkedDecoder::Event::kEnd: {
        if (in_chunk_) OL_CO_RETURN_IF_ERROR(EndChunk());
        OL_CO_RETURN_IF_ERROR(CheckTrailer());
        // Nothing may follow the aws-chunked body inside the HTTP body.
        while (pending_.empty() && !http_done_) {
          absl::StatusOr<bool> more = co_await Fill();
          if (!more.ok()) co_return more.status();
        }
        if (!pending_.empty()) {
          co_return Fail("IncompleteBody", 400, "Bytes follow the end of the aws-chunked body.");
        }
        OL_CO_RETURN_IF_ERROR(Finish());
        co_return std::string_view();
      }
    }
  }
}

io::Task<absl::Status> PayloadReader::ReadAll(size_t limit, std::string* out) {
  while (true) {
    absl::StatusOr<std::string_view> piece = co_await Next();
    if (!piece.ok()) co_return piece.status();
    if (piece->empty()) co_return absl::OkStatus();
    if (out->size() + piece->size() > limit) {
      co_return Fail("MaxMessageLengthExceeded", 400, "Your request was too big.");
    }
    out->append(*piece);
  }
}

}  // namespace openlake::s3

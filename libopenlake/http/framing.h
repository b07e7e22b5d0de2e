// HTTP/1.1 message framing for the S3 server (docs/s3.md, "HTTP"): the request head parser and
// the chunked-body decoder. Both are pure functions of the bytes given (no I/O), so the server
// feeds them whatever its socket reads and they are fuzzed and tested on their own.
//
//   s3::Request req;
//   s3::HeadResult r = s3::ParseRequestHead(buffer, limits, &req);
//   if (r.state == s3::HeadResult::kIncomplete) { read more; }
//   if (r.state == s3::HeadResult::kError) { answer r.status, close; }
//   buffer.erase(0, r.consumed);  // the body (or the next pipelined request) follows
//
// The parser follows RFC 9112 strictly where leniency lets two parties frame one message
// differently (request smuggling): CRLF line ends only, no whitespace before a field's colon,
// no obsolete line folding, Content-Length digits only and consistent, Transfer-Encoding only
// "chunked" and never together with Content-Length, exactly one Host in HTTP/1.1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace openlake::http {

struct Limits {
  size_t max_request_line = 16 << 10;  // method, target and version (414 beyond)
  size_t max_header_bytes = 64 << 10;  // every header line together (431 beyond)
  size_t max_headers = 128;            // header fields (431 beyond)
  size_t max_chunk_line = 4096;        // a chunk's size line with its extensions
  size_t max_trailer_bytes = 16 << 10;
};

struct Header {
  std::string name;  // lower case
  std::string value;  // without surrounding whitespace
};

// Case-insensitive lookups in a header list (names are stored lower case).
const Header* FindHeader(const std::vector<Header>& headers, std::string_view lower_name);

enum class BodyFraming { kNone, kLength, kChunked };

struct Request {
  std::string method;  // case-sensitive token ("GET", "PUT", ...)
  std::string target;  // the raw request-target: "/bucket/key?x=y" or "http://host/..."
  int minor_version = 1;  // HTTP/1.<minor>
  std::vector<Header> headers;
  BodyFraming framing = BodyFraming::kNone;
  uint64_t content_length = 0;  // with kLength
  bool keep_alive = true;       // after this exchange (Connection, and the version's default)
  bool expect_continue = false;  // "Expect: 100-continue"

  const Header* Find(std::string_view lower_name) const { return FindHeader(headers, lower_name); }
  // The value of a header, or "" when absent.
  std::string_view Value(std::string_view lower_name) const;
};

struct HeadResult {
  enum State { kIncomplete, kComplete, kError };
  State state = kIncomplete;
  size_t consumed = 0;  // with kComplete: bytes of the head, the blank line included
  int status = 0;       // with kError: the status to answer (400, 414, 431, 501, 505)
  std::string error;    // with kError: why, for the log and the error body
};

// Parses one request head at the start of `in`. kIncomplete asks for more bytes (unless the
// limits are already exceeded, which is an error at once). Empty lines before the request line
// are skipped, as RFC 9112 allows. Each call parses from the start: a server should call it
// again only when HeadMayBeComplete says so, or a client dripping bytes one at a time makes
// it rescan the head once per byte.
HeadResult ParseRequestHead(std::string_view in, const Limits& limits, Request* out);

// A response head, as a client reads it (the S3 client, openlake/s3/client.h).
struct ResponseHead {
  int status = 0;
  int minor_version = 1;
  std::vector<Header> headers;
  // How the body is delimited: kNone (HEAD, 1xx, 204, 304), kLength, kChunked, or, with neither
  // header, by the server closing the connection (`until_close`).
  BodyFraming framing = BodyFraming::kNone;
  uint64_t content_length = 0;
  bool until_close = false;
  bool keep_alive = true;  // the connection may carry another request after this one

  const Header* Find(std::string_view lower_name) const { return FindHeader(headers, lower_name); }
  std::string_view Value(std::string_view lower_name) const;
};

// Parses one response head at the start of `in` (same results as ParseRequestHead: `status`
// of an error is 502, the server's reply being malformed). `head_request`: the response
// answers a HEAD, so it has no body whatever its headers say.
HeadResult ParseResponseHead(std::string_view in, const Limits& limits, bool head_request,
                             ResponseHead* out);

// True when the bytes from `from` on (with the three before them) hold the blank line ending a
// head, or `in` has outgrown what a head may be: then ParseRequestHead has something to say.
bool HeadMayBeComplete(std::string_view in, size_t from, const Limits& limits);

// Decodes a chunked body (RFC 9112 §7.1), and also the "aws-chunked" payload encoding S3
// clients stream, which has the same framing with a chunk-signature extension per chunk.
// Feed it bytes as they come; each call consumes some and reports one event:
//
//   kNeedMore     nothing to report: call again with the bytes that follow (read more from
//                 the socket when none are left)
//   kChunk        a chunk begins: `size` and its raw `extensions` (";name=value..." or "")
//   kData         `data` (a view into the input) is body bytes of the current chunk
//   kEnd          the last chunk and the trailer fields are done (see trailers())
//   kError        malformed framing or a limit exceeded; `error` says which
class ChunkedDecoder {
 public:
  struct Event {
    enum Kind { kNeedMore, kChunk, kData, kEnd, kError };
    Kind kind = kNeedMore;
    uint64_t size = 0;
    std::string_view extensions;
    std::string_view data;
    std::string error;
  };

  explicit ChunkedDecoder(const Limits& limits = Limits()) : limits_(limits) {}

  // Consumes bytes from the front of `in` and returns how many; `ev` says what they were.
  // Views in `ev` point into `in` or into the decoder, valid until the next call.
  size_t Next(std::string_view in, Event* ev);

  bool done() const { return state_ == kDone; }
  const std::vector<Header>& trailers() const { return trailers_; }
  uint64_t body_bytes() const { return body_bytes_; }

 private:
  enum State { kSizeLine, kData, kDataEnd, kTrailer, kDone, kFailed };
  // Collects one CRLF-terminated line into line_ (across calls); true when it is whole.
  bool TakeLine(std::string_view in, size_t* used, size_t limit, Event* ev);

  Limits limits_;
  State state_ = kSizeLine;
  std::string line_;
  std::string ext_;  // the current chunk's extensions
  uint64_t remaining_ = 0;
  uint64_t body_bytes_ = 0;
  size_t trailer_bytes_ = 0;
  std::vector<Header> trailers_;
};

// The value of a hexadecimal digit, or -1.
inline int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (c | 0x20) - 'a' + 10;
  return -1;
}

// Percent-decoding ('+' stays '+'); false on a malformed escape.
bool PercentDecode(std::string_view in, std::string* out);
// "k=v&k2&k3=" into decoded (name, value) pairs in order; false on a malformed escape.
bool ParseQueryString(std::string_view q, std::vector<std::pair<std::string, std::string>>* out);
// The first value of `name` among parsed query parameters, or nullptr.
const std::string* FindParam(const std::vector<std::pair<std::string, std::string>>& params,
                             std::string_view name);

// Splits a request target into its path and query (both still percent-encoded); an
// absolute-form target ("http://host/p?q") gives its path and query too.
void SplitTarget(std::string_view target, std::string_view* path, std::string_view* query);

// Lower-cases ASCII letters.
std::string AsciiLower(std::string_view s);
// True when `s` equals `lower` ignoring ASCII case (`lower` given in lower case).
bool EqualsLower(std::string_view s, std::string_view lower);

}  // namespace openlake::http

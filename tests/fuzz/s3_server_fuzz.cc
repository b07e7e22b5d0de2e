// Fuzz target for the S3 server as a client reaches it: a real S3Server over a real object
// engine (four drives, 2+2), on a loopback port, fed by a client on a real connection. Random
// bytes never pass SigV4, so most inputs are requests the harness signs with the server's
// credential, the way an SDK would; what the fuzzer then explores is everything behind
// authentication: routing, every handler and its query parameters, the XML bodies, the
// aws-chunked decoder with its chunk signatures and trailers, multipart, copies, listings.
// The first byte chooses how the rest (a request as text: fuzz_request.h) goes out:
//   0: the bytes as they are (HTTP framing, unsigned and malformed requests);
//   1: signed, with x-amz-content-sha256 the body's hash and Content-Length its size;
//   2: signed, the body as STREAMING-AWS4-HMAC-SHA256-PAYLOAD (signed aws-chunks, of a size the
//      first byte's high bits choose);
//   3: signed, the body as STREAMING-UNSIGNED-PAYLOAD-TRAILER with an x-amz-checksum-crc32
//      trailer (the body's real checksum when the first byte's bit 4 is set).
// The server must answer or close; it must never crash, and it must still answer afterwards.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/base64.h"
#include "fuzz_request.h"
#include "fuzz_socket.h"
#include "s3/api/checksums.h"
#include "s3/auth/sigv4.h"
#include "store/store_test_util.h"

#include "openlake/s3/server.h"

namespace {

namespace s3 = openlake::s3;
namespace http = openlake::http;

constexpr char kAccess[] = "fuzzaccesskey";
constexpr char kSecret[] = "fuzz-secret-key-0123456789";

struct Server {
  openlake::testing::StoreFixture f{4, 4, 2, 64 << 10, /*faulty=*/false};
  openlake::testing::TempDir data;
  std::unique_ptr<s3::S3Server> server;

  Server() {
    if (!f.Open().ok() || !f.MakeBucket("fuzz").ok()) __builtin_trap();
    s3::S3ServerOptions o;
    o.address = "127.0.0.1:0";
    o.credentials = {{kAccess, kSecret}};
    o.data_dir = data.path();
    o.idle_timeout = absl::Seconds(2);
    o.head_timeout = absl::Seconds(2);
    auto s = s3::S3Server::Start(f.rt(), f.st(), o);
    if (!s.ok()) __builtin_trap();
    server = *std::move(s);
  }
};

bool Has(const std::vector<http::Header>& h, std::string_view name) {
  return http::FindHeader(h, name) != nullptr;
}

std::string Hex(size_t n) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%zx", n);
  return buf;
}

// The request's head, signed; `payload` is the x-amz-content-sha256 it signs.
std::string SignedHead(openlake::fuzz::RequestText& t, std::string_view payload,
                       std::optional<uint64_t> content_length, s3::SigV4Result* auth) {
  std::vector<http::Header>& h = t.headers;
  std::erase_if(h, [](const http::Header& x) {
    return x.name == "authorization" || x.name == "x-amz-date" ||
           x.name == "x-amz-content-sha256" || x.name == "content-length";
  });
  if (!Has(h, "host")) h.push_back({"host", "127.0.0.1"});
  if (!Has(h, "connection")) h.push_back({"connection", "close"});
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  h.push_back({"x-amz-date", s3::FormatAmzDate(now)});
  h.push_back({"x-amz-content-sha256", std::string(payload)});
  if (content_length) h.push_back({"content-length", std::to_string(*content_length)});
  std::string_view path, query;
  http::SplitTarget(t.target, &path, &query);
  s3::SigV4SignInput si;
  si.method = t.method;
  si.path = path;
  si.query = query;
  si.headers = &h;
  si.access_key = kAccess;
  si.secret_key = kSecret;
  si.region = "us-east-1";
  h.push_back({"authorization", s3::SignV4(si)});
  if (auth) {
    // The verifier's view of the same request: its signing key continues the chunk chain.
    const s3::SigV4Request req{t.method, path, query, &h};
    *auth = s3::VerifySigV4(
        req,
        [](std::string_view k) -> std::optional<std::string> {
          if (k == kAccess) return std::string(kSecret);
          return std::nullopt;
        },
        now);
  }
  std::string out = t.method + " " + (t.target.empty() ? "/" : t.target) + " HTTP/1.1\r\n";
  for (const http::Header& x : h) out += x.name + ": " + x.value + "\r\n";
  out += "\r\n";
  return out;
}

std::string Request(uint8_t mode, std::string_view text) {
  openlake::fuzz::RequestText t = openlake::fuzz::ParseRequestText(text);
  const std::string body = t.body;
  switch (mode & 3) {
    case 1:
      return SignedHead(t, s3::Sha256Hex(body), body.size(), nullptr) + body;
    case 2: {
      const size_t chunk = 1 + (mode >> 2) * 331;
      t.headers.push_back({"content-encoding", "aws-chunked"});
      t.headers.push_back({"x-amz-decoded-content-length", std::to_string(body.size())});
      // The encoded length first needs the chunks; signatures are 64 hex digits each.
      std::string encoded_sizes;
      uint64_t encoded = 0;
      for (size_t at = 0;; at += chunk) {
        const size_t n = at < body.size() ? std::min(chunk, body.size() - at) : 0;
        encoded += Hex(n).size() + std::string_view(";chunk-signature=").size() + 64 + 4 + n;
        if (n == 0) break;
      }
      s3::SigV4Result auth;
      std::string out = SignedHead(t, s3::kStreamingPayload, encoded, &auth);
      std::string previous = auth.seed_signature;
      for (size_t at = 0;; at += chunk) {
        const size_t n = at < body.size() ? std::min(chunk, body.size() - at) : 0;
        const std::string_view piece = std::string_view(body).substr(std::min(at, body.size()), n);
        previous = s3::ChunkSignature(auth, previous, s3::Sha256Hex(piece));
        out += Hex(n) + ";chunk-signature=" + previous + "\r\n";
        out.append(piece);
        out += "\r\n";
        if (n == 0) break;
      }
      return out;
    }
    case 3: {
      t.headers.push_back({"content-encoding", "aws-chunked"});
      t.headers.push_back({"x-amz-decoded-content-length", std::to_string(body.size())});
      t.headers.push_back({"x-amz-trailer", "x-amz-checksum-crc32"});
      s3::Checksummer crc(s3::ChecksumAlgo::kCrc32);
      crc.Update(body);
      const std::string value = (mode & 16) ? openlake::Base64(crc.Final()) : "AAAAAA==";
      std::string chunked;
      if (!body.empty()) chunked += Hex(body.size()) + "\r\n" + body + "\r\n";
      chunked += "0\r\nx-amz-checksum-crc32:" + value + "\r\n\r\n";
      return SignedHead(t, s3::kStreamingUnsignedTrailer, chunked.size(), nullptr) + chunked;
    }
    default:
      return std::string(text);
  }
}

// Sends `bytes` on a new connection and reads until the server closes (or 20 s pass without a
// byte: a loaded machine under the sanitizers is slow, a stuck server is slower).
bool Exchange(uint16_t port, const std::string& bytes, std::string* answer) {
  openlake::fuzz::Socket sock;
  if (!sock.ConnectLoopback(port)) return false;
  (void)sock.SendAll(bytes);
  sock.ShutdownWrite();
  while (sock.Read(answer, 1 << 20, 20000) > 0 && answer->size() < (16u << 20)) {
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Server instance;  // destroyed at exit: its folders go too
  Server* const server = &instance;
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string answer;
  if (!Exchange(server->server->port(), Request(data[0], text), &answer)) __builtin_trap();
  // Still serving: an unauthenticated request gets its 403.
  std::string again;
  if (!Exchange(server->server->port(), "GET /fuzz HTTP/1.1\r\nHost: x\r\n\r\n", &again) ||
      again.rfind("HTTP/1.1 403", 0) != 0) {
    std::fprintf(stderr, "fuzz: the server's next answer: %s\n", again.substr(0, 200).c_str());
    __builtin_trap();
  }
  return 0;
}

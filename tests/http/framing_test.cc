// HTTP/1.1 request heads and chunked bodies: what is accepted, what is refused with which
// status, and that feeding the bytes in any pieces gives the same answer.
#include "http/framing.h"

#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace openlake::http {
namespace {

HeadResult Parse(const std::string& s, Request* r, Limits l = Limits()) {
  return ParseRequestHead(s, l, r);
}

int ErrorStatus(const std::string& s, Limits l = Limits()) {
  Request r;
  HeadResult h = Parse(s, &r, l);
  INFO(h.error);
  return h.state == HeadResult::kError ? h.status : 0;
}

TEST_CASE("request heads: the parts, framing and persistence", "[s3][http]") {
  Request r;
  const std::string head =
      "PUT /bkt/dir/key.bin?uploadId=7&partNumber=2 HTTP/1.1\r\n"
      "Host: 127.0.0.1:9000\r\n"
      "Content-Length: 12\r\n"
      "X-Amz-Meta-Colour:  blue \t\r\n"
      "Expect: 100-Continue\r\n"
      "\r\n";
  HeadResult h = Parse(head + "hello world!", &r);
  REQUIRE(h.state == HeadResult::kComplete);
  CHECK(h.consumed == head.size());
  CHECK(r.method == "PUT");
  CHECK(r.target == "/bkt/dir/key.bin?uploadId=7&partNumber=2");
  CHECK(r.minor_version == 1);
  CHECK(r.framing == BodyFraming::kLength);
  CHECK(r.content_length == 12);
  CHECK(r.keep_alive);
  CHECK(r.expect_continue);
  CHECK(r.Value("x-amz-meta-colour") == "blue");
  CHECK(r.Value("host") == "127.0.0.1:9000");
  CHECK(r.Value("absent").empty());

  // Chunked; Connection: close; stray CRLFs before the request line.
  h = Parse("\r\n\r\nPOST /b?delete HTTP/1.1\r\nhost: h\r\nTransfer-Encoding: Chunked\r\n"
            "Connection: keep-alive, Close\r\n\r\n", &r);
  REQUIRE(h.state == HeadResult::kComplete);
  CHECK(r.framing == BodyFraming::kChunked);
  CHECK(!r.keep_alive);

  // HTTP/1.0: no Host needed, closes unless keep-alive is asked for.
  REQUIRE(Parse("GET / HTTP/1.0\r\n\r\n", &r).state == HeadResult::kComplete);
  CHECK(!r.keep_alive);
  CHECK(r.framing == BodyFraming::kNone);
  REQUIRE(Parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r).state ==
          HeadResult::kComplete);
  CHECK(r.keep_alive);

  // Equal repeated lengths are one length.
  REQUIRE(Parse("PUT /b/k HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n"
                "Content-Length: 5\r\n\r\n", &r).state == HeadResult::kComplete);
  CHECK(r.content_length == 5);

  // An expectation other than 100-continue is ignored, as S3 does (no 417).
  REQUIRE(Parse("PUT /b/k HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n"
                "Expect: something-else\r\n\r\n", &r).state == HeadResult::kComplete);
  CHECK(!r.expect_continue);
}

TEST_CASE("request heads: pipelined requests follow one another", "[s3][http]") {
  const std::string two =
      "GET /a HTTP/1.1\r\nHost: h\r\n\r\nHEAD /b HTTP/1.1\r\nHost: h\r\n\r\n";
  Request r;
  HeadResult h = Parse(two, &r);
  REQUIRE(h.state == HeadResult::kComplete);
  CHECK(r.target == "/a");
  h = Parse(two.substr(h.consumed), &r);
  REQUIRE(h.state == HeadResult::kComplete);
  CHECK(r.method == "HEAD");
  CHECK(r.target == "/b");
}

TEST_CASE("request heads: every prefix is incomplete, never an error", "[s3][http]") {
  const std::string head =
      "GET /bucket/k%20ey?list-type=2&prefix=a%2F HTTP/1.1\r\nHost: localhost\r\n"
      "Authorization: AWS4-HMAC-SHA256 Credential=AKIA/20261130/us-east-1/s3/aws4_request, "
      "SignedHeaders=host;x-amz-date, Signature=abc\r\nX-Amz-Date: 20261130T000000Z\r\n\r\n";
  for (size_t n = 0; n < head.size(); ++n) {
    Request r;
    HeadResult h = Parse(head.substr(0, n), &r);
    INFO(n << ": " << h.error);
    REQUIRE(h.state == HeadResult::kIncomplete);
  }
  Request r;
  CHECK(Parse(head, &r).state == HeadResult::kComplete);
  // Fed a byte at a time, the cheap check asks for a parse only when something can be said.
  int parses = 0;
  for (size_t n = 1; n <= head.size(); ++n) {
    if (HeadMayBeComplete(std::string_view(head).substr(0, n), n - 1, Limits())) ++parses;
  }
  CHECK(parses == 1);  // at the blank line, not once per byte
  CHECK(HeadMayBeComplete(head, head.size() - 1, Limits()));
}

TEST_CASE("request heads: malformed or ambiguous input gets the right status", "[s3][http]") {
  // Framing ambiguities (request smuggling) and syntax.
  CHECK(ErrorStatus("GET / HTTP/1.1\nHost: h\r\n\r\n") == 400);           // bare LF
  CHECK(ErrorStatus("GET / HTTP/1.1\r\nHost: h\n\r\n") == 400);
  CHECK(ErrorStatus("GET  / HTTP/1.1\r\nHost: h\r\n\r\n") == 400);         // double space
  CHECK(ErrorStatus("GET / HTTP/1.1 x\r\nHost: h\r\n\r\n") == 400);
  CHECK(ErrorStatus("G(T / HTTP/1.1\r\nHost: h\r\n\r\n") == 400);          // not a token
  CHECK(ErrorStatus("GET /a\x01 HTTP/1.1\r\nHost: h\r\n\r\n") == 400);
  CHECK(ErrorStatus("GET / HTTP/1.x\r\nHost: h\r\n\r\n") == 400);
  CHECK(ErrorStatus("GET / HTTP/2.0\r\nHost: h\r\n\r\n") == 505);
  CHECK(ErrorStatus("GET / HTTP/1.1\r\n\r\n") == 400);                     // no Host
  CHECK(ErrorStatus("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n") == 400);
  CHECK(ErrorStatus("GET / HTTP/1.1\r\nHost : h\r\n\r\n") == 400);         // space before colon
  CHECK(ErrorStatus("GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n  folded\r\n\r\n") == 400);
  CHECK(ErrorStatus("GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n") == 400);
  CHECK(ErrorStatus("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x7f\r\n\r\n") == 400);
  const char with_nul[] = "GET / HTTP/1.1\r\nHost: h\r\nX-A: a\0b\r\n\r\n";
  CHECK(ErrorStatus(std::string(with_nul, sizeof(with_nul) - 1)) == 400);
  CHECK(ErrorStatus("PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n") == 400);
  CHECK(ErrorStatus("PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 1x\r\n\r\n") == 400);
  CHECK(ErrorStatus("PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999\r\n\r\n") ==
        400);
  CHECK(ErrorStatus("PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                    "Content-Length: 6\r\n\r\n") == 400);
  CHECK(ErrorStatus("PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 6\r\n\r\n") == 400);
  CHECK(ErrorStatus("PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n") == 400);
  CHECK(ErrorStatus("PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n") == 501);
  CHECK(ErrorStatus("PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n") ==
        501);
  CHECK(ErrorStatus("PUT / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n") == 400);

  // Limits: at once, without waiting for the rest.
  Limits small;
  small.max_request_line = 64;
  small.max_header_bytes = 128;
  small.max_headers = 3;
  CHECK(ErrorStatus("GET /" + std::string(100, 'a'), small) == 414);
  CHECK(ErrorStatus("GET /" + std::string(100, 'a') + " HTTP/1.1\r\n", small) == 414);
  CHECK(ErrorStatus("GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + std::string(200, 'v'), small) == 431);
  CHECK(ErrorStatus("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", small) == 431);
}

TEST_CASE("request heads: random bytes never crash and never parse as more than they are",
          "[s3][http]") {
  std::mt19937 rng(20261130);
  const std::string alphabet = "GETPUT /:HTTP1.0\r\n\r\nHost: aContent-Length:5\t,;chunked\x80\x01";
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    const size_t n = rng() % 200;
    for (size_t j = 0; j < n; ++j) {
      s.push_back(rng() % 4 == 0 ? static_cast<char>(rng())
                                 : alphabet[rng() % alphabet.size()]);
    }
    Request r;
    HeadResult h = Parse(s, &r);
    if (h.state == HeadResult::kComplete) {
      CHECK(h.consumed <= s.size());
      CHECK(s.substr(0, h.consumed).find("\r\n\r\n") != std::string::npos);
    } else if (h.state == HeadResult::kError) {
      CHECK(h.status >= 400);
      CHECK(!h.error.empty());
    }
  }
}

// ---- Chunked bodies

struct Decoded {
  std::string body;
  std::vector<std::pair<uint64_t, std::string>> chunks;  // size, extensions
  bool ended = false;
  std::string error;
  size_t consumed = 0;
};

// Feeds `in` in pieces of the given sizes (cycled), as a socket would deliver it.
Decoded Decode(const std::string& in, const std::vector<size_t>& pieces, Limits l = {}) {
  ChunkedDecoder d(l);
  Decoded out;
  std::string pending;
  size_t at = 0, p = 0;
  while (true) {
    if (pending.empty() && at < in.size()) {
      const size_t n = std::min(pieces[p++ % pieces.size()], in.size() - at);
      pending = in.substr(at, n);
      at += n;
    }
    ChunkedDecoder::Event ev;
    const size_t used = d.Next(pending, &ev);
    // The event's views point into `pending`: use them before it changes.
    if (ev.kind == ChunkedDecoder::Event::kData) out.body.append(ev.data);
    if (ev.kind == ChunkedDecoder::Event::kChunk) {
      out.chunks.emplace_back(ev.size, std::string(ev.extensions));
    }
    pending.erase(0, used);
    out.consumed += used;
    if (ev.kind == ChunkedDecoder::Event::kEnd) {
      out.ended = true;
      break;
    }
    if (ev.kind == ChunkedDecoder::Event::kError) {
      out.error = ev.error;
      break;
    }
    if (ev.kind == ChunkedDecoder::Event::kNeedMore && used == 0 && pending.empty() &&
        at == in.size()) {
      break;  // the input ended inside the body
    }
  }
  return out;
}

TEST_CASE("chunked bodies decode the same in any pieces", "[s3][http]") {
  const std::string body =
      "5;chunk-signature=abc\r\nhello\r\n"
      "1A\r\nabcdefghijklmnopqrstuvwxyz\r\n"
      "0;chunk-signature=fin\r\n"
      "x-amz-checksum-crc32: AAAAAA==\r\n"
      "\r\n"
      "GET /next";
  for (const std::vector<size_t>& pieces :
       {std::vector<size_t>{1}, {2}, {3, 7}, {5}, {1000}, {4, 1, 9, 2}}) {
    ChunkedDecoder d;
    Decoded out = Decode(body, pieces);
    INFO(pieces.size() << " " << pieces[0] << " " << out.error);
    REQUIRE(out.ended);
    CHECK(out.body == "helloabcdefghijklmnopqrstuvwxyz");
    REQUIRE(out.chunks.size() == 3);
    CHECK(out.chunks[0] == std::make_pair(uint64_t{5}, std::string(";chunk-signature=abc")));
    CHECK(out.chunks[1] == std::make_pair(uint64_t{26}, std::string()));
    CHECK(out.chunks[2].first == 0);
    CHECK(out.consumed == body.size() - 9);  // the next request is left alone
  }
  ChunkedDecoder d;
  std::string all = body;
  ChunkedDecoder::Event ev;
  while (!d.done()) {
    const size_t used = d.Next(all, &ev);
    all.erase(0, used);
    REQUIRE(ev.kind != ChunkedDecoder::Event::kError);
  }
  REQUIRE(d.trailers().size() == 1);
  CHECK(d.trailers()[0].name == "x-amz-checksum-crc32");
  CHECK(d.trailers()[0].value == "AAAAAA==");
  CHECK(d.body_bytes() == 31);
}

TEST_CASE("chunked bodies: random bodies round-trip", "[s3][http]") {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::string plain, framed;
    const int chunks = static_cast<int>(rng() % 6);
    for (int c = 0; c < chunks; ++c) {
      const size_t n = 1 + rng() % 3000;
      std::string data(n, '\0');
      for (char& ch : data) ch = static_cast<char>(rng());
      char hex[32];
      std::snprintf(hex, sizeof(hex), rng() % 2 ? "%zx" : "%zX", n);
      framed += hex;
      framed += "\r\n" + data + "\r\n";
      plain += data;
    }
    framed += "0\r\n\r\n";
    Decoded out = Decode(framed, {1 + rng() % 50, 1 + rng() % 4000});
    INFO(out.error);
    REQUIRE(out.ended);
    CHECK(out.body == plain);
  }
}

TEST_CASE("chunked bodies: malformed framing is an error", "[s3][http]") {
  auto error = [](const std::string& s) {
    Decoded out = Decode(s, {1000});
    return !out.error.empty();
  };
  CHECK(error("x\r\nabc\r\n0\r\n\r\n"));                 // not hex
  CHECK(error("\r\n"));                                  // no size
  CHECK(error("3\r\nabcd\r\n0\r\n\r\n"));                // data longer than its size
  CHECK(error("3\nabc\r\n0\r\n\r\n"));                   // bare LF
  CHECK(error("3\r\nabc\rX0\r\n\r\n"));                  // bare CR
  CHECK(error("11111111111111111\r\n"));                 // 17 hex digits
  CHECK(error("0\r\nbad trailer\r\n\r\n"));
  CHECK(error("0\r\n folded: x\r\n\r\n"));
  CHECK(error("5;" + std::string(5000, 'e') + "\r\n"));  // size line too long
  Limits l;
  l.max_trailer_bytes = 64;
  CHECK(!Decode("0\r\nx-a: " + std::string(100, 'v') + "\r\n\r\n", {1000}, l).error.empty());
  // Truncated: no error, no end (the server reports the short body when the peer closes).
  Decoded cut = Decode("5\r\nhel", {1000});
  CHECK(cut.error.empty());
  CHECK(!cut.ended);
  CHECK(cut.body == "hel");
}

}  // namespace
}  // namespace openlake::http

#include "net/frame.h"

#include <catch2/catch.hpp>

#include "common/random.h"

using namespace openlake::net;
using openlake::RandomBytes;

TEST_CASE("frame header round trip", "[net][frame]") {
  FrameHeader h;
  h.type = FrameType::kResponse;
  h.flags = kFrameFlagFd;
  h.method = 513;
  h.aux = 14;
  h.request_id = 0x0102030405060708ull;
  std::string out;
  AppendFrame(h, "payload", &out);
  REQUIRE(out.size() == kFrameHeaderBytes + 7);
  CHECK(out.substr(0, 4) == "OLRP");
  FrameHeader d;
  REQUIRE(DecodeHeader(out.data(), 1024, &d).ok());
  CHECK(d.type == FrameType::kResponse);
  CHECK(d.flags == kFrameFlagFd);
  CHECK(d.method == 513);
  CHECK(d.length == 7);
  CHECK(d.aux == 14);
  CHECK(d.request_id == 0x0102030405060708ull);
}

TEST_CASE("malformed headers are rejected with a reason", "[net][frame]") {
  FrameHeader h;
  std::string good;
  AppendFrame(h, std::string(100, 'x'), &good);
  FrameHeader d;
  auto corrupt = [&](size_t at, char v) {
    std::string b = good;
    b[at] = v;
    return DecodeHeader(b.data(), 1 << 20, &d);
  };
  CHECK(std::string(corrupt(0, 'X').message()).find("magic") != std::string::npos);
  CHECK(std::string(corrupt(4, 9).message()).find("version") != std::string::npos);
  CHECK(std::string(corrupt(5, 0).message()).find("type") != std::string::npos);
  CHECK(std::string(corrupt(5, 7).message()).find("type") != std::string::npos);
  CHECK(std::string(corrupt(6, 4).message()).find("flags") != std::string::npos);
  CHECK(std::string(corrupt(7, 1).message()).find("reserved") != std::string::npos);
  CHECK(std::string(corrupt(20, 1).message()).find("reserved") != std::string::npos);
  auto over = DecodeHeader(good.data(), 99, &d);
  CHECK(std::string(over.message()).find("exceeds") != std::string::npos);
  CHECK(DecodeHeader(good.data(), 100, &d).ok());
}

TEST_CASE("hello and auth", "[net][frame]") {
  uint8_t nonce[kNonceBytes];
  RandomBytes(nonce, sizeof(nonce));
  const std::string hello = EncodeHello(true, nonce, "0.1.0");
  bool auth = false;
  uint8_t got[kNonceBytes];
  std::string version;
  REQUIRE(DecodeHello(hello, &auth, got, &version).ok());
  CHECK(auth);
  CHECK(version == "0.1.0");
  CHECK(std::memcmp(got, nonce, kNonceBytes) == 0);
  CHECK(!DecodeHello("short", &auth, got, &version).ok());

  const std::string mac = AuthMac("secret", nonce);
  CHECK(mac.size() == kMacBytes);
  CHECK(AuthMacMatches("secret", nonce, mac));
  CHECK(!AuthMacMatches("Secret", nonce, mac));
  CHECK(!AuthMacMatches("secret", nonce, mac.substr(1)));
  uint8_t other[kNonceBytes];
  RandomBytes(other, sizeof(other));
  CHECK(!AuthMacMatches("secret", other, mac));
}

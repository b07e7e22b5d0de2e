// Base64 (common/base64.h).
#include "common/base64.h"

#include <optional>
#include <string>

#include <catch2/catch.hpp>

namespace openlake {
namespace {

TEST_CASE("base64: encodes; decodes canonical input only", "[common]") {
  CHECK(Base64("") == "");
  CHECK(Base64("f") == "Zg==");
  CHECK(Base64("fooba") == "Zm9vYmE=");
  CHECK(Unbase64("Zm9vYmFy") == std::optional<std::string>("foobar"));
  CHECK(Unbase64("Zm9vYmE=") == std::optional<std::string>("fooba"));
  CHECK(Unbase64("Zg==") == std::optional<std::string>("f"));
  for (const char* bad : {"", "Zg=", "Zg", "Z===", "Zm9v!mFy", "Zg==Zg==", "=Zg="}) {
    CHECK_FALSE(Unbase64(bad).has_value());
  }
}

}  // namespace
}  // namespace openlake

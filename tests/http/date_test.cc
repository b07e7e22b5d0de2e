// HTTP dates (http/date.h).
#include "http/date.h"

#include <catch2/catch.hpp>

namespace openlake::http {
namespace {

TEST_CASE("dates: the three forms parse; responses carry the IMF-fixdate", "[http]") {
  const absl::Time t = absl::FromUnixSeconds(784111777);  // Sun, 06 Nov 1994 08:49:37 GMT
  CHECK(ParseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT") == t);
  CHECK(ParseHttpDate("Sunday, 06-Nov-94 08:49:37 GMT") == t);
  CHECK(ParseHttpDate("Sun Nov  6 08:49:37 1994") == t);
  CHECK(ParseHttpDate("  Sun, 06 Nov 1994 08:49:37 GMT ") == t);
  CHECK_FALSE(ParseHttpDate("yesterday").has_value());
  CHECK_FALSE(ParseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT trailing").has_value());
  CHECK(FormatHttpDate(t) == "Sun, 06 Nov 1994 08:49:37 GMT");
}

}  // namespace
}  // namespace openlake::http

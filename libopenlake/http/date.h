// HTTP dates (RFC 9110 §5.6.7): the IMF-fixdate every response's Date header carries, and the
// three forms a request may send (If-Modified-Since, Date, Expires).
//
//   std::string d = http::FormatHttpDate(absl::Now());  // "Sun, 06 Nov 1994 08:49:37 GMT"
//   std::optional<absl::Time> t = http::ParseHttpDate(req.Value("if-modified-since"));
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"

namespace openlake::http {

// "Sun, 06 Nov 1994 08:49:37 GMT", and the RFC 850 and asctime forms; nullopt when malformed.
std::optional<absl::Time> ParseHttpDate(std::string_view s);
// The IMF-fixdate of `t` (seconds; UTC).
std::string FormatHttpDate(absl::Time t);

}  // namespace openlake::http

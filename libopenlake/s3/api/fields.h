// The HTTP field values the S3 handlers read and write (docs/s3.md, "Headers"): dates in the
// three HTTP forms and S3's ISO 8601, byte ranges, conditional headers, user metadata, quoted
// ETags and base64.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"

#include "common/base64.h"
#include "http/date.h"
#include "http/framing.h"

#include "openlake/store/store.h"

namespace openlake::s3 {

// "2009-10-12T17:50:30.000Z", as S3's XML carries times.
std::string FormatIsoTime(absl::Time t);
// An ISO 8601 time with a zone ("2030-01-01T00:00:00Z", fractions allowed) or a day
// ("2030-01-01", midnight UTC), as lifecycle rules and policy conditions name dates.
std::optional<absl::Time> ParseIsoDate(std::string_view text);

// A Range header as S3 takes it: one "bytes=" range. nullopt when absent, malformed or a list
// of several ranges: the whole object is then served, as RFC 9110 and S3 do.
std::optional<store::RangeSpec> ParseRange(std::string_view value);
// "bytes=first-last" of x-amz-copy-source-range (both required); false when malformed.
bool ParseCopyRange(std::string_view value, uint64_t* first, uint64_t* last);

// If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since, read from headers named
// `prefix` + "if-match" and so on ("" for GET and HEAD, "x-amz-copy-source-" for copies).
// Dates that do not parse are ignored, as HTTP says.
store::Conditions ConditionsFrom(const http::Request& req, std::string_view prefix = "");

// x-amz-meta-* headers: names lower-cased without the prefix. False with `error` when they
// exceed S3's 2 KiB limit.
bool UserMetaFrom(const http::Request& req, std::map<std::string, std::string>* meta,
                  std::string* error);

// An ETag as HTTP carries it: in double quotes.
std::string QuoteEtag(std::string_view etag);

}  // namespace openlake::s3

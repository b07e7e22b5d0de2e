// HTTP dates (see date.h).
#include "http/date.h"

#include <time.h>

#include <ctime>

namespace openlake::http {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<absl::Time> ParseHttpDate(std::string_view s) {
  s = Trim(s);
  if (s.empty() || s.size() > 64) return std::nullopt;
  const std::string text(s);
  // IMF-fixdate, RFC 850 and asctime (RFC 9110 §5.6.7); %a also takes full day names.
  for (const char* fmt :
       {"%a, %d %b %Y %H:%M:%S GMT", "%a, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"}) {
    std::tm tm{};
    const char* end = strptime(text.c_str(), fmt, &tm);
    if (end != nullptr && *end == '\0') return absl::FromTimeT(timegm(&tm));
  }
  return std::nullopt;
}

std::string FormatHttpDate(absl::Time t) {
  // strftime on gmtime_r: absl::FormatTime's time-zone machinery costs several times more,
  // and every GET and HEAD formats one.
  const time_t tt = absl::ToTimeT(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return std::string(buf, n);
}

}  // namespace openlake::http

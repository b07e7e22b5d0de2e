// Fuzz inputs that describe an HTTP request as text, so that corpora stay readable and a
// mutation stays a request: "METHOD target" on the first line, "name: value" lines until a blank
// line, then the body. Names are lower-cased and values trimmed, as http/framing.cc stores them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "http/framing.h"

namespace openlake::fuzz {

struct RequestText {
  std::string method;
  std::string target;
  std::vector<http::Header> headers;
  std::string body;
};

inline std::string_view NextLine(std::string_view* in) {
  const size_t nl = in->find('\n');
  std::string_view line = in->substr(0, nl);
  in->remove_prefix(nl == std::string_view::npos ? in->size() : nl + 1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

inline std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

inline RequestText ParseRequestText(std::string_view in) {
  RequestText r;
  std::string_view first = NextLine(&in);
  const size_t sp = first.find(' ');
  r.method = std::string(first.substr(0, sp));
  if (sp != std::string_view::npos) r.target = std::string(first.substr(sp + 1));
  while (!in.empty()) {
    std::string_view line = NextLine(&in);
    if (line.empty()) break;
    const size_t colon = line.find(':');
    http::Header h;
    h.name = http::AsciiLower(line.substr(0, colon));
    if (colon != std::string_view::npos) h.value = std::string(Trim(line.substr(colon + 1)));
    r.headers.push_back(std::move(h));
  }
  r.body = std::string(in);
  return r;
}

}  // namespace openlake::fuzz

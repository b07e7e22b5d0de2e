// HTTP/1.1 request heads and chunked bodies (see http.h).
#include "http/framing.h"

#include <algorithm>

namespace openlake::http {
namespace {

// RFC 9110 tchar: the characters of a token (methods, field names).
bool IsTchar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+': case '-':
    case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return IsTchar(static_cast<unsigned char>(c)); });
}

// A field value: visible characters, spaces, tabs and obs-text; never CR, LF or NUL.
bool IsFieldValue(std::string_view v) {
  for (char ch : v) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\t' || c == ' ' || c >= 0x21) {
      if (c == 0x7f) return false;
      continue;
    }
    return false;
  }
  return true;
}

std::string_view TrimOws(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  return v;
}

HeadResult Fail(int status, std::string why) {
  HeadResult r;
  r.state = HeadResult::kError;
  r.status = status;
  r.error = std::move(why);
  return r;
}

// Parses a decimal Content-Length; false when not digits only or too large.
bool ParseLength(std::string_view v, uint64_t* out) {
  if (v.empty() || v.size() > 19) return false;
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = n;
  return true;
}

// Calls fn(token) for each comma-separated element of a list-valued field, trimmed.
template <typename Fn>
void ForEachListItem(std::string_view v, Fn fn) {
  while (!v.empty()) {
    const size_t comma = v.find(',');
    std::string_view item = TrimOws(v.substr(0, comma));
    if (!item.empty()) fn(item);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
}

// Splits "name: value" (no CR/LF) into a header; an empty status on success.
HeadResult ParseField(std::string_view line, Header* h) {
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return Fail(400, "header line without a colon");
  const std::string_view name = line.substr(0, colon);
  if (!IsToken(name)) {
    return Fail(400, name.empty() || name.back() == ' ' || name.back() == '\t'
                         ? "whitespace or nothing before a header's colon"
                         : "invalid header name");
  }
  const std::string_view value = TrimOws(line.substr(colon + 1));
  if (!IsFieldValue(value)) return Fail(400, "invalid character in header " + std::string(name));
  h->name = AsciiLower(name);
  h->value = std::string(value);
  return HeadResult();
}

// Header fields from `*pos` up to and including the empty line that ends a head; `*pos` then
// points past it. kIncomplete asks for more bytes; kComplete carries no `consumed`.
HeadResult ParseFields(std::string_view in, size_t* pos, const Limits& limits,
                       std::vector<Header>* out) {
  const size_t head_start = *pos;
  while (true) {
    const size_t end = in.find("\r\n", *pos);
    if (end == std::string_view::npos) {
      if (in.size() - head_start > limits.max_header_bytes) return Fail(431, "headers too large");
      if (in.find('\n', *pos) != std::string_view::npos) return Fail(400, "bare LF in headers");
      return HeadResult();
    }
    if (end - head_start > limits.max_header_bytes) return Fail(431, "headers too large");
    if (end == *pos) {
      *pos += 2;
      HeadResult done;
      done.state = HeadResult::kComplete;
      return done;
    }
    const std::string_view field = in.substr(*pos, end - *pos);
    if (field.find('\n') != std::string_view::npos || field.find('\r') != std::string_view::npos) {
      return Fail(400, "bare CR or LF in a header");
    }
    if (field.front() == ' ' || field.front() == '\t') {
      return Fail(400, "obsolete line folding in headers");
    }
    if (out->size() == limits.max_headers) return Fail(431, "too many headers");
    Header h;
    HeadResult f = ParseField(field, &h);
    if (f.state == HeadResult::kError) return f;
    out->push_back(std::move(h));
    *pos = end + 2;
  }
}

// A Content-Length value. A list of equal values ("5, 5") is allowed by RFC 9110; anything
// else is not.
bool ParseContentLength(std::string_view value, uint64_t* out) {
  uint64_t n = 0;
  bool ok = true, first = true;
  ForEachListItem(value, [&](std::string_view item) {
    uint64_t v = 0;
    if (!ParseLength(item, &v) || (!first && v != n)) ok = false;
    n = v;
    first = false;
  });
  *out = n;
  return ok && !first;
}

// A Transfer-Encoding value: true when it is "chunked" alone (nothing else is supported, and
// nothing may follow chunked).
bool IsChunkedOnly(std::string_view value) {
  bool chunked = false, ok = true;
  ForEachListItem(value, [&](std::string_view item) {
    if (chunked || !EqualsLower(item, "chunked")) ok = false;
    chunked = true;
  });
  return ok && chunked;
}

// Whether the Connection header's items and the version leave the connection open.
bool KeepsAlive(const std::vector<Header>& headers, int minor_version) {
  bool close = minor_version == 0, keep_alive_token = false;
  for (const Header& h : headers) {
    if (h.name != "connection") continue;
    ForEachListItem(h.value, [&](std::string_view item) {
      if (EqualsLower(item, "close")) close = true;
      if (EqualsLower(item, "keep-alive")) keep_alive_token = true;
    });
  }
  if (minor_version == 0) close = !keep_alive_token;
  return !close;
}

// "HTTP/1.x" as the version field of a start line: x, or -1 when malformed; -2 for another
// major version.
int MinorVersion(std::string_view version) {
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' ||
      version[5] < '0' || version[5] > '9' || version[7] < '0' || version[7] > '9') {
    return -1;
  }
  if (version[5] != '1') return -2;
  return version[7] - '0';
}

}  // namespace

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool EqualsLower(std::string_view s, std::string_view lower) {
  if (s.size() != lower.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

bool PercentDecode(std::string_view in, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    int v = 0;
    for (int j = 1; j <= 2; ++j) {
      const int d = HexDigit(in[i + static_cast<size_t>(j)]);
      if (d < 0) return false;
      v = v * 16 + d;
    }
    out->push_back(static_cast<char>(v));
    i += 2;
  }
  return true;
}

const std::string* FindParam(const std::vector<std::pair<std::string, std::string>>& params,
                             std::string_view name) {
  for (const auto& [k, v] : params) {
    if (k == name) return &v;
  }
  return nullptr;
}

bool ParseQueryString(std::string_view q,
                      std::vector<std::pair<std::string, std::string>>* out) {
  while (!q.empty()) {
    const size_t amp = q.find('&');
    const std::string_view item = q.substr(0, amp);
    if (!item.empty()) {
      const size_t eq = item.find('=');
      std::string k, v;
      if (!PercentDecode(item.substr(0, eq), &k)) return false;
      if (eq != std::string_view::npos && !PercentDecode(item.substr(eq + 1), &v)) return false;
      out->emplace_back(std::move(k), std::move(v));
    }
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return true;
}

const Header* FindHeader(const std::vector<Header>& headers, std::string_view lower_name) {
  for (const Header& h : headers) {
    if (h.name == lower_name) return &h;
  }
  return nullptr;
}

std::string_view Request::Value(std::string_view lower_name) const {
  const Header* h = Find(lower_name);
  return h == nullptr ? std::string_view() : std::string_view(h->value);
}

bool HeadMayBeComplete(std::string_view in, size_t from, const Limits& limits) {
  if (in.size() > limits.max_request_line + limits.max_header_bytes + 4) return true;
  const size_t start = from > 3 ? from - 3 : 0;
  if (start >= in.size()) return false;
  // "\n\n" too: a client ending lines with bare LFs gets its 400 at once, not at a limit.
  const std::string_view fresh = in.substr(start);
  return fresh.find("\r\n\r\n") != std::string_view::npos ||
         fresh.find("\n\n") != std::string_view::npos;
}

HeadResult ParseRequestHead(std::string_view in, const Limits& limits, Request* out) {
  // Empty lines before the request line are tolerated (a client's stray CRLF after a body).
  size_t pos = 0;
  while (in.size() - pos >= 2 && in[pos] == '\r' && in[pos + 1] == '\n') pos += 2;
  if (pos == in.size() || (in.size() - pos == 1 && in[pos] == '\r')) return HeadResult();

  // Request line.
  const size_t eol = in.find("\r\n", pos);
  if (eol == std::string_view::npos) {
    if (in.size() - pos > limits.max_request_line) return Fail(414, "request line too long");
    if (in.find('\n', pos) != std::string_view::npos) return Fail(400, "bare LF in request line");
    return HeadResult();
  }
  const std::string_view line = in.substr(pos, eol - pos);
  if (line.size() > limits.max_request_line) return Fail(414, "request line too long");
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return Fail(400, "malformed request line");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) return Fail(400, "invalid method");
  if (target.empty()) return Fail(400, "empty request target");
  for (char ch : target) {
    const auto c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c == 0x7f) return Fail(400, "invalid character in request target");
  }
  const int minor = MinorVersion(version);
  if (minor == -1) return Fail(400, "malformed HTTP version");
  if (minor < 0) return Fail(505, "only HTTP/1.x is served");
  Request req;
  req.method = std::string(method);
  req.target = std::string(target);
  req.minor_version = minor;
  pos = eol + 2;

  // Header fields, up to the empty line.
  const HeadResult fields = ParseFields(in, &pos, limits, &req.headers);
  if (fields.state != HeadResult::kComplete) return fields;

  // Framing, persistence and expectations.
  bool have_length = false, chunked = false, has_te = false;
  int hosts = 0;
  for (const Header& h : req.headers) {
    if (h.name == "content-length") {
      uint64_t n = 0;
      if (!ParseContentLength(h.value, &n)) return Fail(400, "invalid Content-Length");
      if (have_length && n != req.content_length) return Fail(400, "conflicting Content-Length");
      have_length = true;
      req.content_length = n;
    } else if (h.name == "transfer-encoding") {
      // One Transfer-Encoding field only: a second one would follow chunked.
      if (has_te || !IsChunkedOnly(h.value)) {
        return Fail(501, "unsupported Transfer-Encoding: " + h.value);
      }
      has_te = chunked = true;
    } else if (h.name == "host") {
      ++hosts;
    } else if (h.name == "expect") {
      // Any other expectation is ignored, as S3 does (not 417): the request is served as if
      // it had none.
      if (EqualsLower(h.value, "100-continue")) req.expect_continue = req.minor_version >= 1;
    }
  }
  if (has_te && req.minor_version == 0) return Fail(400, "Transfer-Encoding in HTTP/1.0");
  if (has_te && !chunked) return Fail(501, "unsupported Transfer-Encoding");
  if (has_te && have_length) return Fail(400, "both Transfer-Encoding and Content-Length");
  if (req.minor_version >= 1 && hosts != 1) {
    return Fail(400, hosts == 0 ? "missing Host header" : "more than one Host header");
  }
  if (chunked) {
    req.framing = BodyFraming::kChunked;
  } else if (have_length) {
    req.framing = BodyFraming::kLength;
  }
  req.keep_alive = KeepsAlive(req.headers, req.minor_version);

  *out = std::move(req);
  HeadResult r;
  r.state = HeadResult::kComplete;
  r.consumed = pos;
  return r;
}

std::string_view ResponseHead::Value(std::string_view lower_name) const {
  const Header* h = Find(lower_name);
  return h == nullptr ? std::string_view() : std::string_view(h->value);
}

HeadResult ParseResponseHead(std::string_view in, const Limits& limits, bool head_request,
                             ResponseHead* out) {
  // Status line: "HTTP/1.1 200 OK" (the reason phrase may be empty or hold spaces).
  const size_t eol = in.find("\r\n");
  if (eol == std::string_view::npos) {
    if (in.size() > limits.max_request_line) return Fail(502, "status line too long");
    return HeadResult();
  }
  const std::string_view line = in.substr(0, eol);
  const size_t sp = line.find(' ');
  const int minor = MinorVersion(line.substr(0, sp));
  if (sp == std::string_view::npos || minor < 0 || line.size() < sp + 4 ||
      (line.size() > sp + 4 && line[sp + 4] != ' ')) {
    return Fail(502, "malformed status line");
  }
  int status = 0;
  for (char c : line.substr(sp + 1, 3)) {
    if (c < '0' || c > '9') return Fail(502, "malformed status code");
    status = status * 10 + (c - '0');
  }
  ResponseHead resp;
  resp.status = status;
  resp.minor_version = minor;
  size_t pos = eol + 2;
  HeadResult fields = ParseFields(in, &pos, limits, &resp.headers);
  if (fields.state == HeadResult::kError) fields.status = 502;
  if (fields.state != HeadResult::kComplete) return fields;

  bool have_length = false, chunked = false;
  for (const Header& h : resp.headers) {
    if (h.name == "content-length") {
      uint64_t n = 0;
      if (!ParseContentLength(h.value, &n) || (have_length && n != resp.content_length)) {
        return Fail(502, "invalid Content-Length");
      }
      have_length = true;
      resp.content_length = n;
    } else if (h.name == "transfer-encoding") {
      if (chunked || !IsChunkedOnly(h.value)) {
        return Fail(502, "unsupported Transfer-Encoding: " + h.value);
      }
      chunked = true;
    }
  }
  resp.keep_alive = KeepsAlive(resp.headers, minor);
  if (head_request || status < 200 || status == 204 || status == 304) {
    resp.framing = BodyFraming::kNone;
  } else if (chunked) {
    resp.framing = BodyFraming::kChunked;  // it wins over a Content-Length (RFC 9112 6.3)
  } else if (have_length) {
    resp.framing = BodyFraming::kLength;
  } else {
    resp.until_close = true;
    resp.keep_alive = false;
  }
  *out = std::move(resp);
  HeadResult r;
  r.state = HeadResult::kComplete;
  r.consumed = pos;
  return r;
}

// ---- Chunked bodies

bool ChunkedDecoder::TakeLine(std::string_view in, size_t* used, size_t limit, Event* ev) {
  // line_ may end with a lone '\r' from the previous call.
  size_t i = 0;
  while (i < in.size()) {
    const char c = in[i++];
    if (!line_.empty() && line_.back() == '\r') {
      if (c != '\n') {
        ev->kind = Event::kError;
        ev->error = "bare CR in chunk framing";
        state_ = kFailed;
        *used = i;
        return false;
      }
      line_.pop_back();
      *used = i;
      return true;
    }
    if (c == '\n') {
      ev->kind = Event::kError;
      ev->error = "bare LF in chunk framing";
      state_ = kFailed;
      *used = i;
      return false;
    }
    line_.push_back(c);
    if (line_.size() > limit + 1) {
      ev->kind = Event::kError;
      ev->error = "chunk line too long";
      state_ = kFailed;
      *used = i;
      return false;
    }
  }
  *used = i;
  ev->kind = Event::kNeedMore;
  return false;
}

size_t ChunkedDecoder::Next(std::string_view in, Event* ev) {
  *ev = Event();
  switch (state_) {
    case kDone:
      ev->kind = Event::kEnd;
      return 0;
    case kFailed:
      ev->kind = Event::kError;
      ev->error = "chunked body already failed";
      return 0;
    case kData: {
      if (in.empty()) return 0;
      const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, in.size()));
      remaining_ -= n;
      body_bytes_ += n;
      if (remaining_ == 0) state_ = kDataEnd;
      ev->kind = Event::kData;
      ev->data = in.substr(0, n);
      return n;
    }
    case kDataEnd: {
      size_t used = 0;
      if (!TakeLine(in, &used, 0, ev)) return used;
      if (!line_.empty()) {
        ev->kind = Event::kError;
        ev->error = "chunk data longer than its size";
        state_ = kFailed;
        return used;
      }
      state_ = kSizeLine;
      ev->kind = Event::kNeedMore;
      return used;
    }
    case kSizeLine: {
      size_t used = 0;
      if (!TakeLine(in, &used, limits_.max_chunk_line, ev)) return used;
      std::string_view line = line_;
      const size_t semi = line.find(';');
      std::string_view hex = line.substr(0, semi);
      while (!hex.empty() && (hex.back() == ' ' || hex.back() == '\t')) hex.remove_suffix(1);
      if (hex.empty() || hex.size() > 16) {
        ev->kind = Event::kError;
        ev->error = hex.empty() ? "missing chunk size" : "chunk size too large";
        state_ = kFailed;
        return used;
      }
      uint64_t size = 0;
      for (char c : hex) {
        const int d = HexDigit(c);
        if (d < 0) {
          ev->kind = Event::kError;
          ev->error = "invalid chunk size";
          state_ = kFailed;
          return used;
        }
        size = size * 16 + static_cast<uint64_t>(d);
      }
      ext_ = semi == std::string_view::npos ? std::string() : std::string(line.substr(semi));
      line_.clear();
      ev->kind = Event::kChunk;
      ev->size = size;
      ev->extensions = ext_;
      if (size == 0) {
        state_ = kTrailer;
      } else {
        remaining_ = size;
        state_ = kData;
      }
      return used;
    }
    case kTrailer: {
      size_t used = 0;
      if (!TakeLine(in, &used, limits_.max_trailer_bytes, ev)) return used;
      trailer_bytes_ += line_.size() + 2;
      if (trailer_bytes_ > limits_.max_trailer_bytes) {
        ev->kind = Event::kError;
        ev->error = "trailer fields too large";
        state_ = kFailed;
        return used;
      }
      if (line_.empty()) {
        state_ = kDone;
        ev->kind = Event::kEnd;
        return used;
      }
      Header h;
      HeadResult f = line_.front() == ' ' || line_.front() == '\t'
                         ? Fail(400, "obsolete line folding in trailers")
                         : ParseField(line_, &h);
      line_.clear();
      if (f.state == HeadResult::kError) {
        ev->kind = Event::kError;
        ev->error = f.error;
        state_ = kFailed;
        return used;
      }
      trailers_.push_back(std::move(h));
      ev->kind = Event::kNeedMore;
      return used;
    }
  }
  return 0;
}

void SplitTarget(std::string_view target, std::string_view* path, std::string_view* query) {
  if (target.substr(0, 7) == "http://" || target.substr(0, 8) == "https://") {
    const size_t start = target.find("//") + 2;
    const size_t slash = target.find_first_of("/?", start);
    target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
    if (!target.empty() && target.front() == '?') {
      *path = "/";
      *query = target.substr(1);
      return;
    }
  }
  const size_t q = target.find('?');
  *path = target.substr(0, q);
  *query = q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
}

}  // namespace openlake::http

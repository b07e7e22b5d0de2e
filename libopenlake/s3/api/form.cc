// multipart/form-data, streamed (see form.h).
#include "s3/api/form.h"

#include <algorithm>
#include <utility>

#include "http/framing.h"

#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

constexpr size_t kMaxPartHead = 16 << 10;  // one part's header lines
constexpr size_t kMaxPreamble = 64 << 10;  // bytes before the first delimiter

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The value of parameter `name` in "form-data; name=\"x\"; filename=\"y\"" (quoted or not).
std::optional<std::string> Param(std::string_view header, std::string_view name) {
  size_t pos = 0;
  while (pos < header.size()) {
    size_t semi = header.find(';', pos);
    if (semi == std::string_view::npos) semi = header.size();
    const std::string_view item = Trim(header.substr(pos, semi - pos));
    const size_t eq = item.find('=');
    if (eq != std::string_view::npos && http::EqualsLower(Trim(item.substr(0, eq)), name)) {
      std::string_view v = Trim(item.substr(eq + 1));
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      return std::string(v);
    }
    pos = semi + 1;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> FormBoundary(std::string_view content_type) {
  const size_t semi = content_type.find(';');
  if (!http::EqualsLower(Trim(content_type.substr(0, semi)), "multipart/form-data")) {
    return std::nullopt;
  }
  if (semi == std::string_view::npos) return std::nullopt;
  std::optional<std::string> b = Param(content_type.substr(semi + 1), "boundary");
  if (!b || b->empty() || b->size() > 70) return std::nullopt;  // RFC 2046: 1-70 characters
  return b;
}

FormReader::FormReader(http::Exchange& ex, std::string boundary, size_t max_fields_bytes)
    : ex_(ex), delimiter_("\r\n--" + boundary), max_fields_bytes_(max_fields_bytes) {
  buf_ = "\r\n";  // the first delimiter may open the body: the same search finds it
}

absl::Status FormReader::Malformed(std::string_view why) const {
  return absl::InvalidArgumentError(StrCat("malformed multipart/form-data body: ", why));
}

io::Task<absl::Status> FormReader::Fill() {
  if (body_done_) co_return absl::DataLossError("the form ended early");
  absl::StatusOr<std::string_view> piece = co_await ex_.ReadBody();
  if (!piece.ok()) co_return piece.status();
  if (piece->empty()) {
    body_done_ = true;
    co_return absl::DataLossError("the form ended early");
  }
  buf_.append(piece->data(), piece->size());
  co_return absl::OkStatus();
}

io::Task<absl::StatusOr<std::optional<FormField>>> FormReader::NextField() {
  if (in_file_) co_return Malformed("a field asked for inside the file");
  if (ended_) co_return std::optional<FormField>();
  if (!started_) {
    size_t at = 0;
    while ((at = buf_.find(delimiter_)) == std::string::npos) {
      if (buf_.size() > kMaxPreamble) co_return Malformed("no boundary where the form starts");
      const absl::Status filled = co_await Fill();
      if (!filled.ok()) co_return filled;
    }
    buf_.erase(0, at + delimiter_.size());
    started_ = true;
  }
  // After a delimiter: "--" closes the form, otherwise (padding and) CRLF, the part's head.
  while (buf_.size() < 2) {
    const absl::Status filled = co_await Fill();
    if (!filled.ok()) co_return filled;
  }
  if (buf_.compare(0, 2, "--") == 0) {
    ended_ = true;
    co_return std::optional<FormField>();
  }
  size_t head_end = 0;
  while ((head_end = buf_.find("\r\n\r\n")) == std::string::npos) {
    if (buf_.size() > kMaxPartHead) co_return Malformed("a part's header lines are too long");
    const absl::Status filled = co_await Fill();
    if (!filled.ok()) co_return filled;
  }
  const size_t first_line = buf_.find("\r\n");
  if (!Trim(std::string_view(buf_).substr(0, first_line)).empty()) {
    co_return Malformed("text after a boundary");
  }
  FormField field;
  bool named = false;
  std::string_view lines = std::string_view(buf_).substr(first_line + 2, head_end - first_line);
  while (!lines.empty()) {
    size_t eol = lines.find("\r\n");
    if (eol == std::string_view::npos) eol = lines.size();
    const std::string_view line = lines.substr(0, eol);
    lines.remove_prefix(std::min(lines.size(), eol + 2));
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = Trim(line.substr(0, colon));
    const std::string_view value = Trim(line.substr(colon + 1));
    if (http::EqualsLower(name, "content-disposition")) {
      std::optional<std::string> n = Param(value, "name");
      if (n) {
        field.name = *std::move(n);
        named = true;
      }
      if (std::optional<std::string> f = Param(value, "filename")) field.filename = *std::move(f);
    } else if (http::EqualsLower(name, "content-type")) {
      field.content_type = std::string(value);
    }
  }
  if (!named) co_return Malformed("a part without a Content-Disposition name");
  buf_.erase(0, head_end + 4);
  if (http::EqualsLower(field.name, "file")) {
    field.is_file = true;
    in_file_ = true;
    co_return std::optional<FormField>(std::move(field));
  }
  size_t at = 0;
  while ((at = buf_.find(delimiter_)) == std::string::npos) {
    if (fields_bytes_ + buf_.size() > max_fields_bytes_) {
      co_return absl::ResourceExhaustedError("the form's fields are larger than allowed");
    }
    const absl::Status filled = co_await Fill();
    if (!filled.ok()) co_return filled;
  }
  fields_bytes_ += at;
  if (fields_bytes_ > max_fields_bytes_) {
    co_return absl::ResourceExhaustedError("the form's fields are larger than allowed");
  }
  field.value = buf_.substr(0, at);
  buf_.erase(0, at + delimiter_.size());
  co_return std::optional<FormField>(std::move(field));
}

io::Task<absl::StatusOr<std::string_view>> FormReader::NextFilePiece() {
  if (!in_file_) co_return std::string_view();
  while (true) {
    const size_t at = buf_.find(delimiter_);
    if (at == 0) {
      buf_.erase(0, delimiter_.size());
      in_file_ = false;
      co_return std::string_view();
    }
    // Bytes that cannot begin the delimiter go out; the rest waits for more.
    const size_t safe = at != std::string::npos ? at
                        : buf_.size() >= delimiter_.size() ? buf_.size() - delimiter_.size() + 1
                                                            : 0;
    if (safe > 0) {
      piece_.assign(buf_, 0, safe);
      buf_.erase(0, safe);
      co_return std::string_view(piece_);
    }
    const absl::Status filled = co_await Fill();
    if (!filled.ok()) co_return filled;
  }
}

}  // namespace openlake::s3

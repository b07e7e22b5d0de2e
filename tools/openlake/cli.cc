#include "cli.h"

#include <cmath>
#include <cstdio>

#include "absl/strings/str_format.h"

namespace openlake::cli {

int Fail(int code, std::string_view message) {
  std::fprintf(stderr, "openlake: %.*s\n", static_cast<int>(message.size()), message.data());
  return code;
}

std::optional<Config> LoadConfigOrReport(const std::string& path) {
  absl::StatusOr<Config> cfg = path.empty() ? absl::StatusOr<Config>(DefaultConfig())
                                            : LoadConfigFile(path);
  if (!cfg.ok()) {
    const auto m = cfg.status().message();
    Fail(kExitUsage, std::string_view(m.data(), m.size()));
    return std::nullopt;
  }
  return *std::move(cfg);
}

void JsonWriter::Separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_element_.empty()) {
    if (has_element_.back()) out_ += ',';
    has_element_.back() = true;
  }
}

JsonWriter& JsonWriter::BeginObject() {
  Separate();
  out_ += '{';
  has_element_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  out_ += '}';
  has_element_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  Separate();
  out_ += '[';
  has_element_.push_back(false);
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  out_ += ']';
  has_element_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  String(key);
  out_ += ':';
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view value) {
  Separate();
  out_ += '"';
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out_ += "\\\"";
        break;
      case '\\':
        out_ += "\\\\";
        break;
      case '\n':
        out_ += "\\n";
        break;
      case '\r':
        out_ += "\\r";
        break;
      case '\t':
        out_ += "\\t";
        break;
      default:
        if (u < 0x20) {
          out_ += absl::StrFormat("\\u%04x", u);
        } else {
          out_ += c;
        }
    }
  }
  out_ += '"';
  return *this;
}

JsonWriter& JsonWriter::Uint(uint64_t value) {
  Separate();
  out_ += std::to_string(value);
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t value) {
  Separate();
  out_ += std::to_string(value);
  return *this;
}

JsonWriter& JsonWriter::Double(double value) {
  if (!std::isfinite(value)) return Null();
  Separate();
  out_ += absl::StrFormat("%.6g", value);
  return *this;
}

JsonWriter& JsonWriter::Bool(bool value) {
  Separate();
  out_ += value ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::Null() {
  Separate();
  out_ += "null";
  return *this;
}

void PrintJson(const JsonWriter& json) { std::printf("%s\n", json.str().c_str()); }

}  // namespace openlake::cli

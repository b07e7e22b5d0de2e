#include "store/names.h"

#include <cctype>

#include "store/errors.h"

#include "openlake/strings.h"

namespace openlake::store {
namespace {

bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    for (size_t j = 1; j <= n; ++j) {
      if (i + j >= s.size()) return false;
      const auto cc = static_cast<unsigned char>(s[i + j]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

absl::Status BadKey(std::string_view key, std::string_view why) {
  std::string shown(key.substr(0, 64));
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  return Error(ErrorKind::kInvalidObjectName,
               StrCat("invalid object name \"", shown, key.size() > 64 ? "..." : "", "\": ",
                      why));
}

absl::Status CheckKeyText(std::string_view key) {
  if (key.size() > kMaxKeyBytes) return BadKey(key, "longer than 1024 bytes");
  if (!ValidUtf8(key)) return BadKey(key, "not valid UTF-8");
  return absl::OkStatus();
}

// Appends "/<on-disk names>" of one key segment: its escape, or for an escape longer than a
// file name, the pieces (see names.h).
void AppendSegment(std::string* out, std::string_view segment) {
  const std::string esc = EscapeSegment(segment);
  std::string_view rest = esc;
  while (rest.size() > kMaxSegmentBytes) {
    size_t cut = kPieceBytes;
    // Never inside an escape ("%25", "%00"): a piece unescapes only as part of the whole.
    if (rest[cut - 1] == '%') cut -= 1;
    else if (rest[cut - 2] == '%') cut -= 2;
    out->append("/").append(kContinuation).append(rest.substr(0, cut));
    rest.remove_prefix(cut);
  }
  out->append("/").append(rest);
}

bool IsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

absl::Status ValidateBucketName(std::string_view b) {
  auto bad = [&](std::string_view why) {
    return Error(ErrorKind::kInvalidBucketName,
                 StrCat("invalid bucket name \"", b.substr(0, 80), "\": ", why));
  };
  if (b.size() < 3 || b.size() > 63) return bad("must be 3 to 63 characters long");
  for (char c : b) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-')) {
      return bad("only lowercase letters, digits, '.' and '-' are allowed");
    }
  }
  if (!std::isalnum(static_cast<unsigned char>(b.front())) ||
      !std::isalnum(static_cast<unsigned char>(b.back()))) {
    return bad("must start and end with a letter or a digit");
  }
  if (b.find("..") != std::string_view::npos || b.find(".-") != std::string_view::npos ||
      b.find("-.") != std::string_view::npos) {
    return bad("must not contain \"..\", \".-\" or \"-.\"");
  }
  int dots = 0;
  bool all_digits_dots = true;
  for (char c : b) {
    if (c == '.') ++dots;
    else if (!std::isdigit(static_cast<unsigned char>(c))) all_digits_dots = false;
  }
  if (dots == 3 && all_digits_dots) return bad("must not look like an IP address");
  if (b == "openlake") return bad("\"openlake\" is reserved");
  return absl::OkStatus();
}

absl::Status ValidateObjectKey(std::string_view key) {
  if (key.empty()) return BadKey(key, "empty");
  return CheckKeyText(key);
}

absl::Status ValidatePrefix(std::string_view prefix) {
  if (prefix.empty()) return absl::OkStatus();
  return CheckKeyText(prefix);
}

std::string EscapeSegment(std::string_view segment) {
  if (segment.empty()) return "%";
  if (segment == ".") return "%2E";
  if (segment == "..") return "%2E%2E";
  std::string out;
  out.reserve(segment.size());
  for (char c : segment) {
    if (c == '%') out += "%25";
    else if (c == '\0') out += "%00";
    else out += c;
  }
  return out;
}

bool UnescapeSegment(std::string_view name, std::string* segment) {
  segment->clear();
  if (name == "%") return true;  // an empty segment ("a/", "a//b", "/a")
  if (name == "%2E") {
    *segment = ".";
    return true;
  }
  if (name == "%2E%2E") {
    *segment = "..";
    return true;
  }
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] != '%') {
      *segment += name[i];
      continue;
    }
    const std::string_view esc = name.substr(i, 3);
    if (esc == "%25") *segment += '%';
    else if (esc == "%00") *segment += '\0';
    else return false;  // one of ours ("%meta", "%data.<version>")
    i += 2;
  }
  // A name that escapes nothing would have been written plain; "." and ".." never are names.
  return *segment != "." && *segment != "..";
}

bool IsContinuation(std::string_view name) {
  return name.size() > kContinuation.size() && name.substr(0, kContinuation.size()) == kContinuation;
}

std::string ObjectDir(std::string_view bucket, std::string_view key) {
  std::string out(bucket);
  size_t start = 0;
  while (true) {
    size_t end = key.find('/', start);
    const bool last = end == std::string_view::npos;
    if (last) end = key.size();
    AppendSegment(&out, key.substr(start, end - start));
    if (last) break;
    start = end + 1;
  }
  return out;
}

std::string PrefixDir(std::string_view bucket, std::string_view dir_prefix) {
  if (dir_prefix.empty()) return std::string(bucket);
  // "a/b/" → "<bucket>/a/b"
  return ObjectDir(bucket, dir_prefix.substr(0, dir_prefix.size() - 1));
}

std::string MetaPath(std::string_view bucket, std::string_view key) {
  return StrCat(ObjectDir(bucket, key), "/", kMetaName);
}

std::string DataDirName(std::string_view version_hex) { return StrCat(kDataPrefix, version_hex); }

std::string BucketMetaPath(std::string_view bucket) {
  return StrCat(kBucketMetaDir, "/", bucket, ".meta");
}

std::string UploadDir(std::string_view bucket, std::string_view upload_id) {
  return StrCat(kMultipartDir, "/", bucket, "/", upload_id);
}

bool ValidUploadId(std::string_view id) {
  if (id.size() != 32) return false;
  for (char c : id) {
    if (!IsHex(c)) return false;
  }
  return true;
}

}  // namespace openlake::store

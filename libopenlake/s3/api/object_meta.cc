// Object metadata between S3 headers and the engine (see ops.h): what a write may carry, the
// headers a read answers with, and the copy source.
#include <utility>
#include <vector>

#include "s3/api/fields.h"
#include "s3/api/ops.h"

#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

// The standard headers S3 stores with an object and returns on reads, kept in the engine's
// user metadata under "std:<name>" (a colon never occurs in a header name, so no
// x-amz-meta-* can collide).
constexpr std::string_view kStdHeaders[] = {"cache-control", "content-disposition",
                                            "content-encoding", "content-language", "expires"};
constexpr std::string_view kStdDisplay[] = {"Cache-Control", "Content-Disposition",
                                            "Content-Encoding", "Content-Language", "Expires"};
constexpr std::string_view kStdPrefix = "std:";

// response-* query parameters of GetObject and the header each overrides.
constexpr std::pair<std::string_view, std::string_view> kOverrides[] = {
    {"response-content-type", "Content-Type"},
    {"response-content-language", "Content-Language"},
    {"response-expires", "Expires"},
    {"response-cache-control", "Cache-Control"},
    {"response-content-disposition", "Content-Disposition"},
    {"response-content-encoding", "Content-Encoding"}};

// A Content-Encoding as stored: without "aws-chunked", which only frames the request's body
// ("gzip, aws-chunked" stores "gzip"; "aws-chunked" alone stores none), as S3 does.
std::string StoredContentEncoding(std::string_view value) {
  std::string out;
  size_t pos = 0;
  while (pos <= value.size()) {
    size_t comma = value.find(',', pos);
    if (comma == std::string_view::npos) comma = value.size();
    std::string_view coding = value.substr(pos, comma - pos);
    while (!coding.empty() && (coding.front() == ' ' || coding.front() == '\t')) {
      coding.remove_prefix(1);
    }
    while (!coding.empty() && (coding.back() == ' ' || coding.back() == '\t')) {
      coding.remove_suffix(1);
    }
    if (!coding.empty() && !http::EqualsLower(coding, "aws-chunked")) {
      if (!out.empty()) out += ", ";
      out += coding;
    }
    pos = comma + 1;
  }
  return out;
}

}  // namespace

std::string UnsupportedWriteHeader(const http::Request& req, bool conditional) {
  for (const http::Header& h : req.headers) {
    const std::string_view n = h.name;
    if (n == "x-amz-storage-class") {
      if (h.value != "STANDARD" && h.value != "REDUCED_REDUNDANCY") return h.name;
    } else if (n.substr(0, 28) == "x-amz-server-side-encryption" ||
               n.substr(0, 17) == "x-amz-object-lock" ||
               n == "x-amz-website-redirect-location" ||
               // Conditions on a write that does not take them are refused, never ignored.
               (!conditional && (n == "if-match" || n == "if-none-match"))) {
      return h.name;
    }
  }
  return "";
}

std::string StorageClassOf(const store::ObjectInfo& info) {
  auto it = info.user_meta.find(std::string(kStorageClassMeta));
  return it == info.user_meta.end() ? "STANDARD" : it->second;
}

void SetStorageClass(const http::Request& req, store::PutOptions* po) {
  std::map<std::string, std::string>& meta = po->user_meta;
  const std::string_view sc = req.Value("x-amz-storage-class");
  if (sc == "STANDARD") {
    meta.erase(std::string(kStorageClassMeta));
  } else if (!sc.empty()) {
    meta[std::string(kStorageClassMeta)] = std::string(sc);
  }
  auto it = meta.find(std::string(kStorageClassMeta));
  po->reduced_redundancy = it != meta.end() && it->second == "REDUCED_REDUNDANCY";
}

bool PutOptionsFrom(const http::Request& req, store::PutOptions* out, S3Error* error) {
  out->content_type = std::string(req.Value("content-type"));
  std::string why;
  if (!UserMetaFrom(req, &out->user_meta, &why)) {
    *error = S3Error{"MetadataTooLarge", 400, why};
    return false;
  }
  for (std::string_view name : kStdHeaders) {
    const http::Header* h = req.Find(name);
    if (h == nullptr) continue;
    std::string value = name == "content-encoding" ? StoredContentEncoding(h->value) : h->value;
    if (!value.empty()) out->user_meta[StrCat(kStdPrefix, name)] = std::move(value);
  }
  SetStorageClass(req, out);
  return TagsFromHeader(req, &out->user_meta, error);
}

void AddObjectHeaders(Call& c, const store::ObjectInfo& info) {
  std::vector<std::pair<std::string, std::string>> hs;
  hs.emplace_back("Content-Type",
                  info.content_type.empty() ? "application/octet-stream" : info.content_type);
  for (const auto& [name, value] : info.user_meta) {
    if (IsChecksumMeta(name)) continue;  // answered by AddChecksumHeaders
    if (name == kAclMeta) continue;  // answered by GetObjectAcl
    if (name == kTagsMeta) {
      hs.emplace_back("x-amz-tagging-count", StrCat(TagsOf(info.user_meta).size()));
      continue;
    }
    if (name == kStorageClassMeta) {
      hs.emplace_back("x-amz-storage-class", value);  // S3 names only classes but STANDARD
      continue;
    }
    if (name.compare(0, kStdPrefix.size(), kStdPrefix) != 0) {
      hs.emplace_back(StrCat("x-amz-meta-", name), value);
      continue;
    }
    for (size_t i = 0; i < std::size(kStdHeaders); ++i) {
      if (name.substr(kStdPrefix.size()) == kStdHeaders[i]) {
        hs.emplace_back(std::string(kStdDisplay[i]), value);
      }
    }
  }
  for (const auto& [param, header] : kOverrides) {
    const std::string* v = c.route.Param(param);
    if (v == nullptr) continue;
    bool replaced = false;
    for (auto& [name, value] : hs) {
      if (name == header) {
        value = *v;
        replaced = true;
      }
    }
    if (!replaced) hs.emplace_back(std::string(header), *v);
  }
  hs.emplace_back("ETag", QuoteEtag(info.etag));
  hs.emplace_back("Last-Modified", http::FormatHttpDate(info.mod_time));
  hs.emplace_back("Accept-Ranges", "bytes");
  for (auto& [name, value] : hs) c.ex.AddHeader(std::move(name), std::move(value));
}

bool ParseCopySource(const http::Request& req, std::string* bucket, std::string* key,
                     std::string* version_id, S3Error* error) {
  std::string_view v = req.Value("x-amz-copy-source");
  const size_t q = v.find('?');
  version_id->clear();
  if (q != std::string_view::npos) {
    const std::string_view params = v.substr(q + 1);
    constexpr std::string_view kParam = "versionId=";
    if (params.substr(0, kParam.size()) != kParam || params.size() == kParam.size()) {
      *error = S3Error{"InvalidArgument", 400, "Invalid version id specified"};
      return false;
    }
    *version_id = std::string(params.substr(kParam.size()));
    v = v.substr(0, q);
  }
  std::string path;
  if (!http::PercentDecode(v, &path)) {
    *error = S3Error{"InvalidArgument", 400, "Invalid copy source encoding."};
    return false;
  }
  if (!path.empty() && path.front() == '/') path.erase(0, 1);
  const size_t slash = path.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == path.size()) {
    *error = S3Error{"InvalidArgument", 400,
                     "Copy Source must mention the source bucket and key: sourcebucket/sourcekey."};
    return false;
  }
  *bucket = path.substr(0, slash);
  *key = path.substr(slash + 1);
  return true;
}

}  // namespace openlake::s3

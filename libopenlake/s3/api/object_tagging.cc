// Object tagging (see ops.h): x-amz-tagging on PUT, CreateMultipartUpload and copies, and
// Get/Put/DeleteObjectTagging. Tags live in the object's user metadata (kTagsMeta); changing
// them commits new metadata over the same shards (Store::UpdateObjectMeta), so the ETag and
// Last-Modified stay as they were, as in S3.
#include <set>
#include <string>
#include <utility>

#include "s3/api/ops.h"
#include "s3/api/xml.h"
#include "s3/auth/sigv4.h"

#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

constexpr size_t kMaxKeyChars = 128;
constexpr size_t kMaxValueChars = 256;

// Characters of valid UTF-8 `s`; npos when it is not UTF-8 or holds a control character.
size_t TagChars(std::string_view s) {
  size_t chars = 0;
  for (size_t i = 0; i < s.size(); ++chars) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return std::string_view::npos;
    for (size_t j = 1; j < len; ++j) {
      if ((static_cast<unsigned char>(s[i + j]) & 0xC0) != 0x80) return std::string_view::npos;
    }
    if (len == 1 && (c < 0x20 || c == 0x7F)) return std::string_view::npos;
    i += len;
  }
  return chars;
}

// A query-string component: percent-decoded, '+' a space.
bool DecodeComponent(std::string_view in, std::string* out) {
  std::string spaced(in);
  for (char& ch : spaced) {
    if (ch == '+') ch = ' ';
  }
  return http::PercentDecode(spaced, out);
}

// "k1=v1&k2=v2" (as x-amz-tagging and the stored form carry them) into tags; false when a
// component is not valid percent-encoding.
bool ParseQueryTags(std::string_view text, TagSet* tags) {
  tags->clear();
  size_t pos = 0;
  while (pos < text.size()) {
    size_t amp = text.find('&', pos);
    if (amp == std::string_view::npos) amp = text.size();
    const std::string_view pair = text.substr(pos, amp - pos);
    pos = amp + 1;
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    std::string key, value;
    if (!DecodeComponent(pair.substr(0, eq), &key)) return false;
    if (eq != std::string_view::npos && !DecodeComponent(pair.substr(eq + 1), &value)) {
      return false;
    }
    tags->emplace_back(std::move(key), std::move(value));
  }
  return true;
}

// Replaces the object's tags (none: removes them) and answers `status`.
io::Task<void> WriteTags(Call& c, const TagSet& tags, int status) {
  store::MetaUpdate update;
  if (tags.empty()) {
    update.erase.emplace_back(kTagsMeta);
  } else {
    SetTags(tags, &update.set);
  }
  update.version_id = VersionIdParam(c.route);
  absl::StatusOr<store::ObjectInfo> info =
      co_await c.store.UpdateObjectMeta(c.route.bucket, c.route.key, std::move(update));
  if (!info.ok()) {
    co_await c.Fail(info.status());
    co_return;
  }
  AddVersionHeader(c, *info);
  co_await c.Empty(status);
}

}  // namespace

TagSet TagsOf(const std::map<std::string, std::string>& meta) {
  TagSet tags;
  auto it = meta.find(std::string(kTagsMeta));
  if (it != meta.end()) (void)ParseQueryTags(it->second, &tags);
  return tags;
}

void SetTags(const TagSet& tags, std::map<std::string, std::string>* meta) {
  if (tags.empty()) {
    meta->erase(std::string(kTagsMeta));
    return;
  }
  std::string text;
  for (const auto& [key, value] : tags) {
    if (!text.empty()) text += '&';
    text += UriEncode(key, false);
    text += '=';
    text += UriEncode(value, false);
  }
  (*meta)[std::string(kTagsMeta)] = std::move(text);
}

bool ValidateTags(const TagSet& tags, S3Error* error, size_t max_tags) {
  if (tags.size() > max_tags) {
    *error = S3Error{"InvalidTag", 400,
                     max_tags == kMaxBucketTags ? "Bucket tag count cannot be greater than 50"
                                                : "Object tags cannot be greater than 10"};
    return false;
  }
  std::set<std::string_view> keys;
  for (const auto& [key, value] : tags) {
    const size_t key_chars = TagChars(key);
    const size_t value_chars = TagChars(value);
    if (key_chars == 0 || key_chars == std::string_view::npos || key_chars > kMaxKeyChars) {
      *error = S3Error{"InvalidTag", 400, "The TagKey you have provided is invalid"};
      return false;
    }
    if (value_chars == std::string_view::npos || value_chars > kMaxValueChars) {
      *error = S3Error{"InvalidTag", 400, "The TagValue you have provided is invalid"};
      return false;
    }
    if (key.compare(0, 4, "aws:") == 0) {
      *error = S3Error{"InvalidTag", 400, "Your TagKey cannot be prefixed with aws:"};
      return false;
    }
    if (!keys.insert(key).second) {
      *error = S3Error{"InvalidTag", 400, "Cannot provide multiple Tags with the same key"};
      return false;
    }
  }
  return true;
}

bool TagsFromHeader(const http::Request& req, std::map<std::string, std::string>* meta,
                    S3Error* error) {
  const http::Header* h = req.Find("x-amz-tagging");
  if (h == nullptr) return true;
  TagSet tags;
  if (!ParseQueryTags(h->value, &tags)) {
    *error = S3Error{"InvalidArgument", 400, "The header 'x-amz-tagging' shall be encoded as "
                                             "UTF-8 then URLEncoded URL query parameters"};
    return false;
  }
  if (!ValidateTags(tags, error)) return false;
  SetTags(tags, meta);
  return true;
}

std::string TaggingXml(const TagSet& tags) {
  XmlWriter w("Tagging");
  w.Open("TagSet");
  for (const auto& [key, value] : tags) {
    w.Open("Tag");
    w.Element("Key", key);
    w.Element("Value", value);
    w.Close();
  }
  w.Close();
  return w.Finish();
}

io::Task<std::optional<TagSet>> ReadTagging(Call& c, size_t max_tags) {
  std::string doc;
  const bool have_doc = co_await ReadDocument(c, c.opts.max_xml_bytes, &doc);
  if (!have_doc) co_return std::nullopt;
  absl::StatusOr<TagSet> tags = ParseTagging(doc);
  if (!tags.ok()) {
    co_await FailMalformedDocument(c, tags.status());
    co_return std::nullopt;
  }
  S3Error err;
  if (!ValidateTags(*tags, &err, max_tags)) {
    co_await c.Error(std::move(err));
    co_return std::nullopt;
  }
  co_return *std::move(tags);
}

io::Task<void> GetObjectTagging(Call& c) {
  std::optional<store::ObjectInfo> info = co_await StatRouted(c);
  if (!info) co_return;
  AddVersionHeader(c, *info);
  std::string body = TaggingXml(TagsOf(info->user_meta));
  co_await c.Xml(200, std::move(body));
}

io::Task<void> PutObjectTagging(Call& c) {
  std::optional<TagSet> tags = co_await ReadTagging(c, kMaxTags);
  if (!tags) co_return;
  co_await WriteTags(c, *tags, 200);  // an empty TagSet removes the tags
}

io::Task<void> DeleteObjectTagging(Call& c) {
  const TagSet none;
  co_await WriteTags(c, none, 204);
}

}  // namespace openlake::s3

// POST object uploads (docs/s3.md, "POST uploads"): a browser form posted to the bucket, the
// object's key, metadata and a signed policy as fields and the object as the "file" field. The
// form carries its own authentication: the policy's SigV4 signature under x-amz-credential;
// the policy's expiration and conditions (exact match, starts-with, content-length-range) are
// checked against every field, and a field no condition names is refused, as S3 does.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <map>
#include <optional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "common/base64.h"
#include "s3/api/fields.h"
#include "s3/api/form.h"
#include "s3/api/ops.h"
#include "s3/api/xml.h"
#include "s3/auth/sigv2.h"

#include "openlake/log.h"
#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

namespace pb = google::protobuf;

// Fields the policy need not name.
bool Exempt(std::string_view lower) {
  return lower == "policy" || lower == "x-amz-signature" || lower == "file" ||
         lower == "awsaccesskeyid" || lower == "signature" || lower.substr(0, 9) == "x-ignore-";
}

struct Policy {
  absl::Time expiration;
  pb::ListValue conditions;
};

// The decoded policy document; nullopt with `why` when it is not one.
std::optional<Policy> ParsePolicy(std::string_view base64, std::string* why) {
  std::optional<std::string> json = Unbase64(base64);
  if (!json) {
    *why = "the policy is not base64";
    return std::nullopt;
  }
  pb::Struct doc;
  if (!pb::util::JsonStringToMessage(*json, &doc).ok()) {
    *why = "the policy is not a JSON object";
    return std::nullopt;
  }
  Policy p;
  auto exp = doc.fields().find("expiration");
  std::string err;
  if (exp == doc.fields().end() || !exp->second.has_string_value() ||
      !absl::ParseTime(absl::RFC3339_full, exp->second.string_value(), &p.expiration, &err)) {
    *why = "the policy has no valid expiration";
    return std::nullopt;
  }
  auto conds = doc.fields().find("conditions");
  if (conds == doc.fields().end() || !conds->second.has_list_value()) {
    *why = "the policy has no conditions list";
    return std::nullopt;
  }
  p.conditions = conds->second.list_value();
  return p;
}

std::string Shown(const pb::Value& v) {
  std::string out;
  (void)pb::util::MessageToJsonString(v, &out);
  return out;
}

// Checks every condition against the form; "" when all hold, else S3's message. `named`
// collects the field names the conditions name (lower case).
std::string CheckConditions(const Policy& p, const std::map<std::string, std::string>& fields,
                            uint64_t* min_size, uint64_t* max_size,
                            std::map<std::string, bool>* named) {
  auto value_of = [&](std::string name) -> std::string {
    name = http::AsciiLower(name);
    if (!name.empty() && name.front() == '$') name.erase(0, 1);
    (*named)[name] = true;
    auto it = fields.find(name);
    return it == fields.end() ? std::string() : it->second;
  };
  for (const pb::Value& c : p.conditions.values()) {
    if (c.has_struct_value()) {
      for (const auto& [name, want] : c.struct_value().fields()) {
        if (!want.has_string_value() || value_of(name) != want.string_value()) {
          return StrCat("Invalid according to Policy: Policy Condition failed: ", Shown(c));
        }
      }
      continue;
    }
    if (!c.has_list_value() || c.list_value().values_size() != 3) {
      return StrCat("Invalid Policy: Invalid condition: ", Shown(c));
    }
    const auto& v = c.list_value().values();
    const std::string op = http::AsciiLower(v[0].string_value());
    if (op == "content-length-range") {
      if (!v[1].has_number_value() || !v[2].has_number_value() || v[1].number_value() < 0 ||
          v[2].number_value() < v[1].number_value()) {
        return StrCat("Invalid Policy: Invalid content-length-range: ", Shown(c));
      }
      *min_size = static_cast<uint64_t>(v[1].number_value());
      *max_size = static_cast<uint64_t>(v[2].number_value());
      continue;
    }
    if ((op != "eq" && op != "starts-with") || !v[1].has_string_value() ||
        !v[2].has_string_value() || v[1].string_value().empty() ||
        v[1].string_value().front() != '$') {
      return StrCat("Invalid Policy: Invalid condition: ", Shown(c));
    }
    const std::string have = value_of(v[1].string_value());
    const std::string& want = v[2].string_value();
    const bool ok = op == "eq" ? have == want : have.compare(0, want.size(), want) == 0;
    if (!ok) return StrCat("Invalid according to Policy: Policy Condition failed: ", Shown(c));
  }
  return "";
}

// Reads what the client sends after the file (S3 ignores it), so the connection stays usable.
io::Task<void> Drain(Call& c) {
  uint64_t drained = 0;
  while (drained < (1u << 20)) {
    absl::StatusOr<std::string_view> piece = co_await c.ex.ReadBody();
    if (!piece.ok() || piece->empty()) co_return;
    drained += piece->size();
  }
  c.ex.CloseAfter();
}

}  // namespace

io::Task<void> PostObject(Call& c) {
  const std::optional<std::string> boundary = FormBoundary(c.req.Value("content-type"));
  if (!boundary) {
    co_await c.Error("PreconditionFailed", 412,
                     "Bucket POST must be of the enclosure-type multipart/form-data");
    co_return;
  }
  FormReader form(c.ex, *boundary);
  std::map<std::string, std::string> fields;  // lower-case names; the first of each
  std::optional<FormField> file;
  while (true) {
    absl::StatusOr<std::optional<FormField>> f = co_await form.NextField();
    if (!f.ok()) {
      const bool too_large = absl::IsResourceExhausted(f.status());
      const char* code = too_large ? "MaxPostPreDataLengthExceededError" : "MalformedPOSTRequest";
      std::string message = too_large
                                ? "Your POST request fields preceding the upload file were too large."
                                : "The body of your POST request is not well-formed "
                                  "multipart/form-data.";
      co_await c.Error(code, 400, std::move(message));
      co_return;
    }
    if (!*f) break;
    if ((*f)->is_file) {
      file = *std::move(*f);
      break;
    }
    fields.emplace(http::AsciiLower((*f)->name), std::move((*f)->value));
  }
  if (!file) {
    co_await c.Error("InvalidArgument", 400, "POST requires exactly one file upload per request.");
    co_return;
  }
  // Who signed it.
  auto field = [&fields](std::string_view name) -> const std::string* {
    auto it = fields.find(std::string(name));
    return it == fields.end() ? nullptr : &it->second;
  };
  const std::string* policy_b64 = field("policy");
  const std::string* algorithm = field("x-amz-algorithm");
  const std::string* credential = field("x-amz-credential");
  const std::string* date = field("x-amz-date");
  const std::string* signature = field("x-amz-signature");
  // SigV2's form: AWSAccessKeyId and signature (older SDKs, boto3 with signature "s3").
  const std::string* v2_key = field("awsaccesskeyid");
  const std::string* v2_signature = field("signature");
  const bool v2 = algorithm == nullptr && v2_key != nullptr && v2_signature != nullptr;
  if (policy_b64 == nullptr ||
      (!v2 && (signature == nullptr || credential == nullptr || date == nullptr ||
               algorithm == nullptr))) {
    co_await c.Error("AccessDenied", 403,
                     "Anonymous POST uploads are not allowed: the form needs policy, and "
                     "x-amz-algorithm, x-amz-credential, x-amz-date and x-amz-signature "
                     "(SigV4) or AWSAccessKeyId and signature (SigV2).");
    co_return;
  }
  if (!v2 && *algorithm != "AWS4-HMAC-SHA256") {
    co_await c.Error("InvalidArgument", 400, "x-amz-algorithm must be AWS4-HMAC-SHA256");
    co_return;
  }
  const CredentialSet& creds = c.opts.credentials;
  const SecretLookup secrets = [&creds](std::string_view key) { return creds.SecretOf(key); };
  c.auth = v2 ? VerifyPostPolicySigV2(*v2_key, *policy_b64, *v2_signature, secrets,
                                      c.opts.region)
              : VerifyPostPolicySigV4(*credential, *date, *policy_b64, *signature, secrets);
  if (!c.auth.ok()) {
    co_await c.Error(c.auth.code, c.auth.http_status, c.auth.message);
    co_return;
  }
  if (c.auth.region != c.opts.region) {
    std::string message = StrCat("the region '", c.auth.region, "' is wrong; expecting '",
                                 c.opts.region, "'");
    co_await c.Error("AuthorizationQueryParametersError", 400, std::move(message));
    co_return;
  }
  c.owner_id = OwnerIdOf(c.auth.access_key);
  const bool may = co_await Authorize(c, c.route.bucket, "s3:PutObject", "");
  if (!may) co_return;
  std::string why;
  std::optional<Policy> policy = ParsePolicy(*policy_b64, &why);
  if (!policy) {
    std::string message = StrCat("Invalid Policy: ", why);
    co_await c.Error("InvalidPolicyDocument", 400, std::move(message));
    co_return;
  }
  if (policy->expiration < absl::Now()) {
    co_await c.Error("AccessDenied", 403, "Invalid according to Policy: Policy expired.");
    co_return;
  }
  // The key, with ${filename} as the file's name.
  const std::string* key_field = field("key");
  if (key_field == nullptr || key_field->empty()) {
    co_await c.Error("InvalidArgument", 400, "Bucket POST must contain a field named 'key'.");
    co_return;
  }
  std::string key = *key_field;
  const size_t subst = key.find("${filename}");
  if (subst != std::string::npos) key.replace(subst, 11, file->filename);
  fields["key"] = key;
  fields["bucket"] = c.route.bucket;
  uint64_t min_size = 0, max_size = UINT64_MAX;
  std::map<std::string, bool> named;
  why = CheckConditions(*policy, fields, &min_size, &max_size, &named);
  if (!why.empty()) {
    co_await c.Error("AccessDenied", 403, std::move(why));
    co_return;
  }
  for (const auto& [name, value] : fields) {
    if (Exempt(name) || name == "bucket" || named.count(name) != 0) continue;
    co_await c.Error("AccessDenied", 403,
                     StrCat("Invalid according to Policy: Extra input fields: ", name));
    co_return;
  }
  // The object's metadata, as a PUT's headers would give it.
  http::Request as_put;
  for (const auto& [name, value] : fields) {
    if (name.substr(0, 11) == "x-amz-meta-" || name == "content-type" || name == "acl" ||
        name == "cache-control" || name == "content-disposition" ||
        name == "content-encoding" || name == "expires" || name == "x-amz-storage-class") {
      as_put.headers.push_back({name == "acl" ? "x-amz-acl" : name, value});
    }
  }
  const std::string unsupported = UnsupportedWriteHeader(as_put, /*conditional=*/false);
  if (!unsupported.empty()) {
    co_await c.Error("NotImplemented", 501,
                     StrCat("The form field ", unsupported, " is not implemented."));
    co_return;
  }
  store::PutOptions po;
  S3Error err;
  if (!PutOptionsFrom(as_put, &po, &err)) {
    co_await c.Error(std::move(err));
    co_return;
  }
  po.versioning = co_await VersioningOf(c);
  absl::StatusOr<std::unique_ptr<store::ObjectWriter>> w =
      co_await c.store.CreateObject(c.route.bucket, key, std::move(po));
  if (!w.ok()) {
    co_await c.Fail(w.status());
    co_return;
  }
  uint64_t size = 0;
  while (true) {
    absl::StatusOr<std::string_view> piece = co_await form.NextFilePiece();
    if (!piece.ok()) {
      co_await c.Error("MalformedPOSTRequest", 400,
                       "The body of your POST request is not well-formed multipart/form-data.");
      co_return;
    }
    if (piece->empty()) break;
    size += piece->size();
    if (size > max_size) {
      c.ex.CloseAfter();  // the rest of the body is not read
      co_await c.Error("EntityTooLarge", 400,
                       "Your proposed upload exceeds the maximum allowed size");
      co_return;
    }
    const absl::Span<const std::byte> bytes(reinterpret_cast<const std::byte*>(piece->data()),
                                            piece->size());
    const absl::Status st = co_await (*w)->Write(bytes);
    if (!st.ok()) {
      co_await c.Fail(st);
      co_return;
    }
  }
  if (size < min_size) {
    co_await c.Error("EntityTooSmall", 400,
                     "Your proposed upload is smaller than the minimum allowed size");
    co_return;
  }
  co_await Drain(c);
  absl::StatusOr<store::ObjectInfo> info = co_await (*w)->Commit();
  if (!info.ok()) {
    co_await c.Fail(info.status());
    co_return;
  }
  const std::string location = StrCat("/", c.route.bucket, "/", UriEncode(key, true));
  c.ex.AddHeader("ETag", QuoteEtag(info->etag));
  AddVersionHeader(c, *info);
  const std::string* redirect = field("success_action_redirect");
  if (redirect != nullptr && (redirect->rfind("http://", 0) == 0 ||
                              redirect->rfind("https://", 0) == 0)) {
    const char* sep = redirect->find('?') == std::string::npos ? "?" : "&";
    c.ex.AddHeader("Location", StrCat(*redirect, sep, "bucket=", UriEncode(c.route.bucket, false),
                                      "&key=", UriEncode(key, false), "&etag=",
                                      UriEncode(QuoteEtag(info->etag), false)));
    co_await c.Empty(303);
    co_return;
  }
  c.ex.AddHeader("Location", location);
  const std::string* status = field("success_action_status");
  if (status != nullptr && *status == "201") {
    XmlWriter x("PostResponse", /*s3_namespace=*/false);
    x.Element("Location", location);
    x.Element("Bucket", c.route.bucket);
    x.Element("Key", key);
    x.Element("ETag", QuoteEtag(info->etag));
    co_await c.Xml(201, x.Finish());
    co_return;
  }
  const int code = status != nullptr && *status == "200" ? 200 : 204;
  co_await c.Empty(code);
}

}  // namespace openlake::s3

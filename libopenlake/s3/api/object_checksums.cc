// Stored checksums (docs/s3.md, "Checksums"): the x-amz-checksum-* a PUT or UploadPart sent and
// the body matched, kept in the object's or part's user metadata under "cks:" names; the
// algorithm and type a multipart upload was created with; the object's checksum a Complete
// derives from its parts' (COMPOSITE: the checksum of the parts' checksums, "-N"; FULL_OBJECT:
// the CRCs combined); and the answers that return them (see ops.h).
#include <map>
#include <optional>
#include <utility>

#include "common/base64.h"
#include "s3/api/checksums.h"
#include "s3/api/ops.h"
#include "s3/api/xml.h"

#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

constexpr std::string_view kAlgoMeta = "cks:algo";    // "crc32", ...
constexpr std::string_view kValueMeta = "cks:value";  // base64 (COMPOSITE: "...-N")
constexpr std::string_view kTypeMeta = "cks:type";    // "FULL_OBJECT" or "COMPOSITE"

const std::string* Find(const std::map<std::string, std::string>& meta, std::string_view name) {
  auto it = meta.find(std::string(name));
  return it == meta.end() ? nullptr : &it->second;
}

// The algorithm named in `meta`, when one is and is known.
std::optional<ChecksumAlgo> StoredAlgo(const std::map<std::string, std::string>& meta) {
  const std::string* algo = Find(meta, kAlgoMeta);
  if (algo == nullptr) return std::nullopt;
  return ChecksumAlgoFromName(*algo);
}

// "CRC32" → kCrc32.
std::optional<ChecksumAlgo> AlgoFromHeader(std::string_view value) {
  return ChecksumAlgoFromName(http::AsciiLower(value));
}

bool IsCrc(ChecksumAlgo a) {
  return a == ChecksumAlgo::kCrc32 || a == ChecksumAlgo::kCrc32c || a == ChecksumAlgo::kCrc64Nvme;
}

}  // namespace

bool IsChecksumMeta(std::string_view name) { return name.substr(0, 4) == "cks:"; }

bool HasStoredChecksum(const std::map<std::string, std::string>& meta) {
  return Find(meta, kAlgoMeta) != nullptr && Find(meta, kValueMeta) != nullptr;
}

void KeepBodyChecksum(const PayloadReader& body, store::ObjectWriter& w) {
  const auto& [header, value] = body.checksum();
  if (header.empty()) return;
  w.SetMeta(std::string(kAlgoMeta), header.substr(std::string_view("x-amz-checksum-").size()));
  w.SetMeta(std::string(kValueMeta), value);
  w.SetMeta(std::string(kTypeMeta), "FULL_OBJECT");
}

bool UploadChecksumFrom(const http::Request& req, store::PutOptions* po, S3Error* error) {
  const http::Header* algo_h = req.Find("x-amz-checksum-algorithm");
  const http::Header* type_h = req.Find("x-amz-checksum-type");
  if (algo_h == nullptr) {
    if (type_h != nullptr) {
      *error = S3Error{"InvalidRequest", 400,
                       "The x-amz-checksum-type header can only be used with the "
                       "x-amz-checksum-algorithm header."};
      return false;
    }
    return true;
  }
  const std::optional<ChecksumAlgo> algo = AlgoFromHeader(algo_h->value);
  if (!algo) {
    *error = S3Error{"InvalidRequest", 400, "Checksum algorithm provided is unsupported."};
    return false;
  }
  std::string type = type_h != nullptr ? type_h->value
                                       : (*algo == ChecksumAlgo::kCrc64Nvme ? "FULL_OBJECT"
                                                                            : "COMPOSITE");
  if ((type != "FULL_OBJECT" && type != "COMPOSITE") ||
      (type == "FULL_OBJECT" && !IsCrc(*algo)) ||
      (type == "COMPOSITE" && *algo == ChecksumAlgo::kCrc64Nvme)) {
    *error = S3Error{"InvalidRequest", 400,
                     StrCat("The ", ChecksumAlgoDisplay(*algo), " algorithm does not support the ",
                            type, " checksum type.")};
    return false;
  }
  po->user_meta[std::string(kAlgoMeta)] = std::string(ChecksumAlgoName(*algo));
  po->user_meta[std::string(kTypeMeta)] = std::move(type);
  return true;
}

void AddUploadChecksumHeaders(Call& c, const std::map<std::string, std::string>& meta) {
  const std::optional<ChecksumAlgo> a = StoredAlgo(meta);
  if (!a) return;
  const std::string* type = Find(meta, kTypeMeta);
  c.ex.AddHeader("x-amz-checksum-algorithm", std::string(ChecksumAlgoDisplay(*a)));
  if (type != nullptr) c.ex.AddHeader("x-amz-checksum-type", *type);
}

void AddChecksumHeaders(Call& c, const store::ObjectInfo& info, int part) {
  if (!http::EqualsLower(c.req.Value("x-amz-checksum-mode"), "enabled")) return;
  const std::map<std::string, std::string>* meta = &info.user_meta;
  if (part > 0 && !info.parts.empty()) {
    if (static_cast<size_t>(part) > info.parts.size()) return;
    meta = &info.parts[static_cast<size_t>(part - 1)].meta;
  }
  const std::string* algo = Find(*meta, kAlgoMeta);
  const std::string* value = Find(*meta, kValueMeta);
  if (algo == nullptr || value == nullptr) return;
  c.ex.AddHeader(StrCat("x-amz-checksum-", *algo), *value);
  const std::string* type = Find(info.user_meta, kTypeMeta);
  if (type != nullptr) c.ex.AddHeader("x-amz-checksum-type", *type);
}

void ChecksumElements(XmlWriter& w, const std::map<std::string, std::string>& meta,
                      bool with_type) {
  const std::optional<ChecksumAlgo> a = StoredAlgo(meta);
  const std::string* value = Find(meta, kValueMeta);
  if (!a || value == nullptr) return;
  w.Element(StrCat("Checksum", ChecksumAlgoDisplay(*a)), *value);
  const std::string* type = Find(meta, kTypeMeta);
  if (with_type && type != nullptr) w.Element("ChecksumType", *type);
}

void UploadChecksumElements(XmlWriter& w, const std::map<std::string, std::string>& meta) {
  const std::optional<ChecksumAlgo> a = StoredAlgo(meta);
  if (!a) return;
  const std::string* type = Find(meta, kTypeMeta);
  w.Element("ChecksumAlgorithm", ChecksumAlgoDisplay(*a));
  if (type != nullptr) w.Element("ChecksumType", *type);
}

io::Task<bool> CompleteChecksum(Call& c, const std::vector<CompletedPart>& listed,
                                store::CompleteOptions* options) {
  absl::StatusOr<store::ListPartsResult> parts =
      co_await c.store.ListParts(c.route.bucket, c.route.key, UploadId(c.route), 0, 10000);
  // Without the upload (a retried Complete, or none): the engine answers.
  if (!parts.ok()) co_return true;
  const std::string* algo_name = Find(parts->upload_meta, kAlgoMeta);
  if (algo_name == nullptr) co_return true;  // created without a checksum algorithm
  const std::optional<ChecksumAlgo> algo = ChecksumAlgoFromName(*algo_name);
  const std::string* type = Find(parts->upload_meta, kTypeMeta);
  if (!algo || type == nullptr) co_return true;
  std::map<int, const store::PartInfo*> by_number;
  for (const store::PartInfo& p : parts->parts) by_number[p.number] = &p;
  std::string composite;  // the parts' raw checksums, in order
  std::optional<std::string> full;
  for (const CompletedPart& want : listed) {
    auto it = by_number.find(want.number);
    if (it == by_number.end()) co_return true;  // the engine answers InvalidPart
    const store::PartInfo& p = *it->second;
    const std::string* part_algo = Find(p.meta, kAlgoMeta);
    const std::string* value = Find(p.meta, kValueMeta);
    std::optional<std::string> raw;
    if (value != nullptr) raw = Unbase64(*value);
    if (part_algo == nullptr || *part_algo != *algo_name || !raw ||
        raw->size() != ChecksumBytes(*algo)) {
      co_await c.Error("InvalidRequest", 400,
                       StrCat("The upload was created using a ", ChecksumAlgoDisplay(*algo),
                              " checksum; part ", want.number, " was uploaded without one."));
      co_return false;
    }
    auto named = want.checksums.find(*algo_name);
    if (named != want.checksums.end() && named->second != *value) {
      co_await c.Error("InvalidPart", 400,
                       StrCat("One or more of the specified parts could not be found: part ",
                              want.number, "'s checksum does not match."));
      co_return false;
    }
    composite += *raw;
    if (*type == "FULL_OBJECT") {
      full = full ? CombineCrc(*algo, *full, *raw, p.size) : raw;
      if (!full) co_return true;  // not a CRC: refused at CreateMultipartUpload
    }
  }
  std::string value;
  if (*type == "FULL_OBJECT") {
    value = Base64(*full);
    // A full-object checksum sent with the Complete must be the one the parts make.
    const http::Header* sent = c.req.Find(StrCat("x-amz-checksum-", *algo_name));
    if (sent != nullptr && sent->value != value) {
      co_await c.Error("BadDigest", 400,
                       StrCat("The ", ChecksumAlgoDisplay(*algo),
                              " you specified did not match the calculated checksum."));
      co_return false;
    }
  } else {
    Checksummer sum(*algo);
    sum.Update(composite);
    value = StrCat(Base64(sum.Final()), "-", listed.size());
  }
  options->meta[std::string(kValueMeta)] = std::move(value);
  co_return true;
}

}  // namespace openlake::s3

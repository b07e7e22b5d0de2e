#include "store/meta.h"

#include <cstring>
#include <random>

#include "absl/random/random.h"

#include "store/engine.h"
#include "store/errors.h"
#include "store/names.h"

#include "openlake/checksum.h"
#include "openlake/strings.h"

namespace openlake::store {
namespace {

constexpr char kMagic[4] = {'O', 'L', 'M', 'D'};

template <typename T>
void Put(std::string* out, size_t at, T v) {
  std::memcpy(out->data() + at, &v, sizeof(v));
}
template <typename T>
T Get(std::string_view in, size_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof(v));
  return v;
}

}  // namespace

std::string EncodeRecord(RecordType type, const google::protobuf::MessageLite& msg) {
  std::string body;
  msg.SerializeToString(&body);
  std::string out(kEnvelopeHeader, '\0');
  std::memcpy(out.data(), kMagic, 4);
  Put<uint16_t>(&out, 4, kMetaFormatVersion);
  Put<uint16_t>(&out, 6, static_cast<uint16_t>(type));
  Put<uint32_t>(&out, 8, static_cast<uint32_t>(body.size()));
  const uint64_t crc = Crc64(body.data(), body.size(), Crc64(out.data(), 12));
  Put<uint64_t>(&out, 12, crc);
  out += body;
  return out;
}

size_t RecordSizeAt(std::string_view in) {
  if (in.size() < kEnvelopeHeader || std::memcmp(in.data(), kMagic, 4) != 0) return 0;
  return kEnvelopeHeader + Get<uint32_t>(in, 8);
}

absl::Status DecodeRecord(RecordType type, std::string_view in,
                          google::protobuf::MessageLite* msg) {
  if (in.size() < kEnvelopeHeader) {
    return absl::DataLossError(StrCat("metadata truncated: ", in.size(), " bytes"));
  }
  if (std::memcmp(in.data(), kMagic, 4) != 0) return absl::DataLossError("metadata: bad magic");
  const auto version = Get<uint16_t>(in, 4);
  if (version != kMetaFormatVersion) {
    return absl::DataLossError(StrCat("metadata format version ", version, " is not known"));
  }
  const auto t = Get<uint16_t>(in, 6);
  if (t != static_cast<uint16_t>(type)) {
    return absl::DataLossError(StrCat("metadata record type ", t, ", expected ",
                                      static_cast<int>(type)));
  }
  const auto len = Get<uint32_t>(in, 8);
  if (len != in.size() - kEnvelopeHeader) {
    return absl::DataLossError(StrCat("metadata length ", len, " but ",
                                      in.size() - kEnvelopeHeader, " bytes follow (torn write)"));
  }
  const uint64_t want = Get<uint64_t>(in, 12);
  const uint64_t got = Crc64(in.data() + kEnvelopeHeader, len, Crc64(in.data(), 12));
  if (want != got) return absl::DataLossError("metadata checksum mismatch");
  if (!msg->ParseFromArray(in.data() + kEnvelopeHeader, static_cast<int>(len))) {
    return absl::DataLossError("metadata body does not parse");
  }
  return absl::OkStatus();
}

absl::Status CheckVersion(const pb::ObjectVersion& v, int set_drives) {
  if (v.deleted() || v.delete_marker()) return absl::OkStatus();
  const uint64_t n = static_cast<uint64_t>(set_drives);
  const uint64_t k = v.data_shards();
  if (k == 0 || k + v.parity_shards() != n) {
    return absl::DataLossError(
        StrCat("metadata: ", k, "+", v.parity_shards(), " shards in a set of ", n, " drives"));
  }
  if (v.block_size() == 0) return absl::DataLossError("metadata: block size 0");
  if (v.shard_index() >= n || v.rotation() >= n) {
    return absl::DataLossError(StrCat("metadata: shard ", v.shard_index(), " at rotation ",
                                      v.rotation(), " in a set of ", n));
  }
  if (v.inline_data()) return absl::OkStatus();
  uint64_t total = 0;
  for (const pb::Part& p : v.parts()) {
    if (p.size() > v.size() - total) {
      return absl::DataLossError(
          StrCat("metadata: parts hold more than the object's ", v.size(), " bytes"));
    }
    total += p.size();
    if (static_cast<uint64_t>(p.block_crc_size()) !=
        BlockCount(p.size(), v.data_shards(), v.block_size())) {
      return absl::DataLossError(StrCat("metadata: part ", p.number(), " has ", p.block_crc_size(),
                                        " block checksums for ", p.size(), " bytes"));
    }
    if (p.file().empty() || p.file() == "." || p.file() == ".." ||
        p.file().find('/') != std::string::npos) {
      return absl::DataLossError(StrCat("metadata: part ", p.number(), " names no plain file"));
    }
  }
  if (total != v.size()) {
    return absl::DataLossError(
        StrCat("metadata: parts hold ", total, " of the object's ", v.size(), " bytes"));
  }
  return absl::OkStatus();
}

std::string NewVersionId() {
  thread_local absl::BitGen gen;
  std::string id(16, '\0');
  for (size_t i = 0; i < 16; i += 8) {
    const uint64_t v = absl::Uniform<uint64_t>(gen);
    std::memcpy(id.data() + i, &v, 8);
  }
  return id;
}

int64_t NowNs() { return absl::ToUnixNanos(absl::Now()); }

ObjectInfo ToObjectInfo(std::string_view bucket, std::string_view key,
                        const pb::ObjectVersion& v) {
  ObjectInfo info;
  info.bucket = std::string(bucket);
  info.key = std::string(key);
  info.size = v.size();
  info.etag = v.etag();
  info.content_type = v.content_type().empty() ? "application/octet-stream" : v.content_type();
  for (const auto& [name, value] : v.user_meta()) info.user_meta[name] = value;
  info.mod_time = FromNs(v.mod_time_ns());
  if (v.multipart_count() > 0) {
    for (const auto& p : v.parts()) {
      PartSummary part{static_cast<int>(p.number()), p.size(), {}};
      for (const auto& [name, value] : p.meta()) part.meta[name] = value;
      info.parts.push_back(std::move(part));
    }
  }
  info.version_id = S3VersionIdOf(v);
  info.delete_marker = v.delete_marker();
  return info;
}

std::string IdentityOf(const pb::ObjectVersion& v) {
  if (!v.versioned()) return std::string();
  return v.origin_id().empty() ? v.version_id() : v.origin_id();
}

std::string S3VersionIdOf(const pb::ObjectVersion& v) {
  return v.versioned() ? Hex(IdentityOf(v)) : std::string(kNullVersionId);
}

absl::StatusOr<std::optional<std::string>> ParseVersionId(std::string_view id) {
  if (id.empty()) return std::optional<std::string>();
  if (id == kNullVersionId) return std::optional<std::string>(std::string());
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string raw;
  for (size_t i = 0; id.size() == 32 && i < 32; i += 2) {
    const int hi = digit(id[i]), lo = digit(id[i + 1]);
    if (hi < 0 || lo < 0) break;
    raw.push_back(static_cast<char>(hi * 16 + lo));
  }
  if (raw.size() != 16) {
    return Error(ErrorKind::kInvalidVersionId, "Invalid version id specified");
  }
  return std::optional<std::string>(std::move(raw));
}

bool SameVersion(const pb::ObjectVersion& a, const pb::ObjectVersion& b) {
  if (a.version_id() != b.version_id() || a.deleted() != b.deleted() ||
      a.delete_marker() != b.delete_marker() || a.versioned() != b.versioned() ||
      a.origin_id() != b.origin_id() || a.size() != b.size() ||
      a.etag() != b.etag() || a.data_shards() != b.data_shards() ||
      a.parity_shards() != b.parity_shards() || a.block_size() != b.block_size() ||
      a.rotation() != b.rotation() || a.parts_size() != b.parts_size() ||
      a.inline_data() != b.inline_data() || a.mod_time_ns() != b.mod_time_ns() ||
      a.data_id() != b.data_id()) {
    return false;
  }
  for (int i = 0; i < a.parts_size(); ++i) {
    if (a.parts(i).number() != b.parts(i).number() || a.parts(i).size() != b.parts(i).size() ||
        a.parts(i).block_crc_size() != b.parts(i).block_crc_size()) {
      return false;
    }
  }
  return true;
}

const std::string& DataIdOf(const pb::ObjectVersion& v) {
  return v.data_id().empty() ? v.version_id() : v.data_id();
}

std::string DataDirOf(const pb::ObjectVersion& v) { return DataDirName(Hex(DataIdOf(v))); }

}  // namespace openlake::store

#include "kv/disk_log.h"

#include <cstring>

#include "openlake/checksum.h"

namespace openlake::kv::disklog {
namespace {

// Little-endian field writer and reader over a frame's payload.
class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}
  template <typename T>
  void Put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));  // every supported target is little-endian
    out_->append(b, sizeof(T));
  }
  void Bytes(std::string_view s) { out_->append(s.data(), s.size()); }

 private:
  std::string* out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  bool Get(T* v) {
    if (in_.size() < sizeof(T)) return false;
    std::memcpy(v, in_.data(), sizeof(T));
    in_.remove_prefix(sizeof(T));
    return true;
  }
  bool Bytes(size_t n, std::string* out) {
    if (in_.size() < n) return false;
    out->assign(in_.data(), n);
    in_.remove_prefix(n);
    return true;
  }
  bool done() const { return in_.empty(); }

 private:
  std::string_view in_;
};

// Frames a payload built by `fill`.
template <typename Fn>
void AppendFrame(Type type, std::string* out, Fn fill) {
  const size_t start = out->size();
  Writer w(out);
  w.Put<uint32_t>(kFrameMagic);
  w.Put<uint16_t>(static_cast<uint16_t>(type));
  w.Put<uint16_t>(0);  // payload length, filled below
  fill(w);
  const size_t payload = out->size() - start - 8;
  const auto len = static_cast<uint16_t>(payload);
  std::memcpy(out->data() + start + 6, &len, sizeof(len));
  w.Put<uint64_t>(Crc64(out->data() + start, out->size() - start));
}

bool ParsePayload(Type type, std::string_view payload, Record* r) {
  Reader rd(payload);
  r->type = type;
  switch (type) {
    case Type::kHeader:
      if (!rd.Get(&r->header.version) || !rd.Get(&r->header.data_bytes) ||
          !rd.Get(&r->header.segment_bytes) || !rd.Get(&r->header.tier_id)) {
        return false;
      }
      return rd.done();
    case Type::kNamespace: {
      uint16_t name_len = 0, fp_len = 0;
      if (!rd.Get(&r->ns.id) || !rd.Get(&r->ns.block_bytes) || !rd.Get(&r->ns.owner) ||
          !rd.Get(&name_len) || !rd.Bytes(name_len, &r->ns.name) || !rd.Get(&fp_len) ||
          !rd.Bytes(fp_len, &r->ns.fingerprint)) {
        return false;
      }
      return rd.done();
    }
    case Type::kPut: {
      uint8_t key_len = 0;
      std::string key;
      if (!rd.Get(&r->put.ns) || !rd.Get(&r->put.depth) || !rd.Get(&r->put.offset) ||
          !rd.Get(&r->put.checksum) || !rd.Get(&key_len) || key_len == 0 ||
          key_len > kMaxKeyBytes || !rd.Bytes(key_len, &key)) {
        return false;
      }
      r->put.key = BlockKey(key);
      return rd.done();
    }
    case Type::kFree:
      return rd.Get(&r->offset) && rd.done();
    case Type::kReset:
      return rd.Get(&r->reset_ns) && rd.done();
  }
  return false;
}

}  // namespace

void AppendHeader(const Header& h, std::string* out) {
  AppendFrame(Type::kHeader, out, [&](Writer& w) {
    w.Put(h.version);
    w.Put(h.data_bytes);
    w.Put(h.segment_bytes);
    w.Put(h.tier_id);
  });
}

void AppendNamespace(const NamespaceRec& n, std::string* out) {
  AppendFrame(Type::kNamespace, out, [&](Writer& w) {
    w.Put(n.id);
    w.Put(n.block_bytes);
    w.Put(n.owner);
    w.Put(static_cast<uint16_t>(n.name.size()));
    w.Bytes(n.name);
    w.Put(static_cast<uint16_t>(n.fingerprint.size()));
    w.Bytes(n.fingerprint);
  });
}

void AppendPut(const PutRec& p, std::string* out) {
  AppendFrame(Type::kPut, out, [&](Writer& w) {
    w.Put(p.ns);
    w.Put(p.depth);
    w.Put(p.offset);
    w.Put(p.checksum);
    w.Put(static_cast<uint8_t>(p.key.size()));
    w.Bytes(p.key.bytes());
  });
}

void AppendFree(uint64_t offset, std::string* out) {
  AppendFrame(Type::kFree, out, [&](Writer& w) { w.Put(offset); });
}

void AppendReset(uint32_t ns, std::string* out) {
  AppendFrame(Type::kReset, out, [&](Writer& w) { w.Put(ns); });
}

Parsed ParseLog(std::string_view log) {
  Parsed p;
  size_t pos = 0;
  while (log.size() - pos >= kFrameOverhead) {
    uint32_t magic;
    uint16_t type, len;
    std::memcpy(&magic, log.data() + pos, 4);
    std::memcpy(&type, log.data() + pos + 4, 2);
    std::memcpy(&len, log.data() + pos + 6, 2);
    if (magic != kFrameMagic || log.size() - pos < kFrameOverhead + len) break;
    uint64_t crc;
    std::memcpy(&crc, log.data() + pos + 8 + len, 8);
    if (crc != Crc64(log.data() + pos, 8 + len)) break;
    Record r;
    if (!ParsePayload(static_cast<Type>(type), log.substr(pos + 8, len), &r)) break;
    // The header must come first, and only there.
    if ((r.type == Type::kHeader) != p.records.empty()) break;
    p.records.push_back(std::move(r));
    pos += kFrameOverhead + len;
  }
  p.valid_bytes = pos;
  p.torn = pos != log.size();
  return p;
}

}  // namespace openlake::kv::disklog

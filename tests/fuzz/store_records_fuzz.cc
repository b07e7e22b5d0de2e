// Fuzz target for what the object engine reads back from its drives: object metadata records
// (store/meta.h's envelope and the pb::ObjectMeta inside) and drive identities (format.json).
// A real engine of four drives holds a small (inline) and a larger (sharded) object; each input
// replaces the metadata of one of them on some drives (as a flipped bit, a torn write or a
// drive from elsewhere would), then the engine reads, stats, lists and heals it. Afterwards the
// original metadata goes back, and the object is rewritten if healing from the fuzzed copies
// replaced its shards. The first byte chooses: bit 0 the object, bits 1-2 how many drives
// (1..4), bit 3 the bytes as they are (else wrapped in a valid envelope, so that the fields
// inside are what gets tested), bit 4 a drive identity instead.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include "store/drive_probe.h"
#include "store/meta.h"
#include "store/names.h"
#include "store/store_test_util.h"

namespace {

namespace store = openlake::store;

constexpr char kBucket[] = "fuzz";
const char* const kKeys[2] = {"small", "large"};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct Engine {
  openlake::testing::StoreFixture f{4, 4, 2, 64 << 10, /*faulty=*/false};
  std::string data[2];
  std::string meta[2][4];  // the original records, per object and drive

  Engine() {
    if (!f.Open().ok() || !f.MakeBucket(kBucket).ok()) __builtin_trap();
    data[0] = openlake::testing::RandomBytes(300, 1);
    data[1] = openlake::testing::RandomBytes(200 << 10, 2);
    for (int o = 0; o < 2; ++o) Restore(o, true);
  }
  std::string MetaFile(int o, int d) const {
    return f.drive_path(d) + "/" + store::MetaPath(kBucket, kKeys[o]);
  }
  // Puts object `o` back as it was; `rewrite` writes it anew (and records its metadata).
  void Restore(int o, bool rewrite) {
    if (!rewrite) {
      for (int d = 0; d < 4; ++d) WriteFile(MetaFile(o, d), meta[o][d]);
      auto got = f.Get(kBucket, kKeys[o]);
      if (got.ok() && *got == data[o]) return;
    }
    if (!f.Put(kBucket, kKeys[o], data[o]).ok()) __builtin_trap();
    for (int d = 0; d < 4; ++d) meta[o][d] = ReadFile(MetaFile(o, d));
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(bytes) + 1, size - 1);
  const uint8_t mode = bytes[0];
  if (mode & 16) {
    store::pb::DriveFormat f;
    if (store::ParseDriveFormat(in, &f) && f.deployment_id().empty()) __builtin_trap();
    return 0;
  }
  static Engine engine;  // destroyed at exit: its folders go too
  Engine* const e = &engine;
  const int o = mode & 1;
  const int drives = 1 + ((mode >> 1) & 3);
  std::string record;
  if (mode & 8) {
    record = std::string(in);
    // The envelope alone: no bytes whose checksum does not hold get past it.
    store::pb::ObjectMeta m;
    (void)store::DecodeRecord(store::RecordType::kObjectMeta, record, &m);
  } else {
    store::pb::ObjectMeta m;
    if (!m.ParseFromArray(in.data(), static_cast<int>(in.size()))) return 0;
    if (m.ByteSizeLong() > (1u << 20)) return 0;
    m.set_bucket(kBucket);
    m.set_key(kKeys[o]);
    record = store::EncodeRecord(store::RecordType::kObjectMeta, m);
  }
  for (int d = 0; d < drives; ++d) WriteFile(e->MetaFile(o, d), record);

  store::GetOptions whole;
  (void)e->f.Get(kBucket, kKeys[o], whole);
  store::GetOptions ranged;
  ranged.range = store::RangeSpec{uint64_t{1}, uint64_t{70000}, std::nullopt};
  (void)e->f.Get(kBucket, kKeys[o], ranged);
  (void)e->f.Stat(kBucket, kKeys[o]);
  store::ListOptions lo;
  lo.prefix = kKeys[o];
  (void)e->f.List(kBucket, lo);
  (void)e->f.Run([&] { return e->f.st().HealObject(kBucket, kKeys[o]); });

  e->Restore(o, false);
  return 0;
}

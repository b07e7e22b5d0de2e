// The object engine end to end on real folders: buckets, objects, ranges, conditions,
// listing, multipart, overwrites and concurrent writers.
#include <openssl/evp.h>

#include <algorithm>
#include <fstream>
#include <set>

#include <catch2/catch.hpp>

#include "store/names.h"
#include "store/pack.h"
#include "store/store_test_util.h"
#include "store/test_util_md5.h"

using namespace openlake;
using namespace openlake::testing;
using store::ErrorKind;
using store::ErrorKindOf;

TEST_CASE("buckets: create, stat, list, delete only when empty", "[store]") {
  StoreFixture f(4);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("alpha").ok());
  REQUIRE(f.MakeBucket("beta").ok());
  CHECK(ErrorKindOf(f.MakeBucket("alpha")) == ErrorKind::kBucketExists);
  CHECK(ErrorKindOf(f.MakeBucket("Bad_Name")) == ErrorKind::kInvalidBucketName);

  auto list = f.Run([&] { return f.st().ListBuckets(); });
  REQUIRE(list.ok());
  REQUIRE(list->size() == 2);
  CHECK((*list)[0].name == "alpha");
  CHECK((*list)[1].name == "beta");
  CHECK(absl::Now() - (*list)[0].created < absl::Minutes(1));

  auto stat = f.Run([&] { return f.st().StatBucket("alpha"); });
  REQUIRE(stat.ok());
  CHECK(ErrorKindOf(f.Run([&] { return f.st().StatBucket("gamma"); }).status()) ==
        ErrorKind::kNoSuchBucket);

  REQUIRE(f.Put("alpha", "k", "v").ok());
  CHECK(ErrorKindOf(f.Run([&] { return f.st().DeleteBucket("alpha"); })) ==
        ErrorKind::kBucketNotEmpty);
  REQUIRE(f.Delete("alpha", "k").ok());
  CHECK(f.Run([&] { return f.st().DeleteBucket("alpha"); }).ok());
  CHECK(ErrorKindOf(f.Run([&] { return f.st().DeleteBucket("alpha"); })) ==
        ErrorKind::kNoSuchBucket);
  // Objects in a missing bucket.
  CHECK(ErrorKindOf(f.Put("alpha", "k", "v").status()) == ErrorKind::kNoSuchBucket);
  CHECK(ErrorKindOf(f.Get("alpha", "k").status()) == ErrorKind::kNoSuchBucket);
  CHECK(ErrorKindOf(f.Get("beta", "k").status()) == ErrorKind::kNoSuchKey);
}

TEST_CASE("objects of every size round-trip with MD5 ETags", "[store]") {
  StoreFixture f(4, 4, 2, /*block_size=*/16 << 10);  // RS(2+2), 32 KiB windows
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  // Sizes around the inline threshold (16 KiB), the O_DIRECT page, windows and chunking.
  for (size_t size : {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{16383},
                      size_t{16384}, size_t{16385}, size_t{32767}, size_t{32768}, size_t{32769},
                      size_t{100000}, size_t{1 << 20}, size_t{3 * 32768 + 17}}) {
    INFO(size);
    const std::string data = RandomBytes(size, static_cast<uint32_t>(size));
    const std::string key = "obj-" + std::to_string(size);
    for (size_t chunk : {size_t{7777}, size_t{1 << 20}}) {
      auto info = f.Put("bkt", key, data, {}, chunk);
      REQUIRE(info.ok());
      CHECK(info->size == size);
      CHECK(info->etag == Md5Hex(data));
      auto got = f.Get("bkt", key);
      REQUIRE(got.ok());
      CHECK(got->size() == size);
      CHECK(*got == data);
    }
    auto st = f.Stat("bkt", key);
    REQUIRE(st.ok());
    CHECK(st->size == size);
    CHECK(st->etag == Md5Hex(data));
    CHECK(st->content_type == "application/octet-stream");
  }
}

TEST_CASE("ETags stay right when windows are hashed on another reactor", "[store]") {
  // 256 KiB windows (RS(2+2), 128 KiB blocks): at the offload size, so every full window's MD5
  // runs on the second reactor while the first encodes and writes.
  StoreFixture f(4, 4, 2, /*block_size=*/128 << 10, /*faulty=*/true, /*reactors=*/2);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  for (size_t size : {size_t{300000}, size_t{(256 << 10) * 7}, size_t{(256 << 10) * 9 + 5}}) {
    INFO(size);
    const std::string data = RandomBytes(size, static_cast<uint32_t>(size) + 1);
    auto info = f.Put("bkt", "big", data, {}, 50000);
    REQUIRE(info.ok());
    CHECK(info->etag == Md5Hex(data));
    CHECK(*f.Get("bkt", "big") == data);
  }
  // A writer dropped while hashes are in flight leaves nothing behind and breaks nothing.
  auto dropped = f.Run([&]() -> io::Task<absl::Status> {
    const store::PutOptions none;
    OL_CO_ASSIGN_OR_RETURN(auto w, co_await f.st().CreateObject("bkt", "gone", none));
    const std::string data = RandomBytes(3 << 20, 5);
    OL_CO_RETURN_IF_ERROR(co_await w->Write(testing::Bytes(data)));
    co_return absl::OkStatus();
  });
  CHECK(dropped.ok());
  CHECK(absl::IsNotFound(f.Stat("bkt", "gone").status()));
}

TEST_CASE("without MD5 ETags, large objects get a CRC-derived one", "[store]") {
  StoreFixture f(4, 4, 2, /*block_size=*/16 << 10);
  f.options().etag_md5 = false;
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  const std::string a = RandomBytes(200000, 1), b = RandomBytes(200000, 2);
  auto ia = f.Put("bkt", "a", a);
  auto ia2 = f.Put("bkt", "elsewhere/a", a, {}, 3333);  // another rotation, other chunks
  auto ib = f.Put("bkt", "b", b);
  REQUIRE((ia.ok() && ia2.ok() && ib.ok()));
  CHECK(ia->etag.size() == 32);
  CHECK(ia->etag != Md5Hex(a));
  CHECK(ia->etag == ia2->etag);  // the same bytes, the same ETag
  CHECK(ia->etag != ib->etag);
  CHECK(f.Stat("bkt", "a")->etag == ia->etag);
  CHECK(*f.Get("bkt", "a") == a);
  const std::string small = RandomBytes(1000, 3);  // inline: MD5 as always
  CHECK(f.Put("bkt", "small", small)->etag == Md5Hex(small));
}

TEST_CASE("a declared size must match the body", "[store]") {
  StoreFixture f(4);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  store::PutOptions o;
  o.size = 10;
  CHECK(absl::IsInvalidArgument(f.Put("bkt", "short", "12345", o).status()));
  CHECK(ErrorKindOf(f.Put("bkt", "long", "12345678901", o).status()) == ErrorKind::kEntityTooLarge);
  CHECK(f.Put("bkt", "exact", "1234567890", o).ok());
  CHECK(ErrorKindOf(f.Get("bkt", "short").status()) == ErrorKind::kNoSuchKey);
  CHECK(ErrorKindOf(f.Get("bkt", "long").status()) == ErrorKind::kNoSuchKey);
}

TEST_CASE("content type and user metadata are kept", "[store]") {
  StoreFixture f(4);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  store::PutOptions o;
  o.content_type = "image/png";
  o.user_meta = {{"color", "blue"}, {"owner", "ada"}};
  REQUIRE(f.Put("bkt", "img", "PNG...", o).ok());
  auto st = f.Stat("bkt", "img");
  REQUIRE(st.ok());
  CHECK(st->content_type == "image/png");
  CHECK(st->user_meta == o.user_meta);
  CHECK(st->parts.empty());
}

TEST_CASE("byte ranges", "[store]") {
  StoreFixture f(4, 4, 2, 16 << 10);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  const std::string data = RandomBytes(200000, 7);
  REQUIRE(f.Put("bkt", "big", data).ok());
  REQUIRE(f.Put("bkt", "small", "0123456789").ok());
  auto range = [&](const std::string& key, std::optional<uint64_t> first,
                   std::optional<uint64_t> last, std::optional<uint64_t> suffix) {
    store::GetOptions o;
    o.range = store::RangeSpec{first, last, suffix};
    return f.Get("bkt", key, o);
  };
  CHECK(*range("small", 2, 4, {}) == "234");
  CHECK(*range("small", 7, {}, {}) == "789");
  CHECK(*range("small", {}, {}, 3) == "789");
  CHECK(*range("small", {}, {}, 100) == "0123456789");
  CHECK(*range("small", 5, 100, {}) == "56789");
  CHECK(ErrorKindOf(range("small", 10, {}, {}).status()) == ErrorKind::kInvalidRange);
  CHECK(ErrorKindOf(range("small", {}, {}, 0).status()) == ErrorKind::kInvalidRange);
  // Ranges across window boundaries (32 KiB) and inside one.
  for (auto [a, b] : std::vector<std::pair<uint64_t, uint64_t>>{
           {0, 0}, {32767, 32768}, {1000, 99999}, {65536, 65536 + 32767}, {199999, 199999},
           {150000, 250000}}) {
    INFO(a << "-" << b);
    auto got = range("big", a, b, {});
    REQUIRE(got.ok());
    CHECK(*got == data.substr(a, std::min<uint64_t>(b, data.size() - 1) - a + 1));
  }
  // The reader reports the resolved range.
  auto r = f.Run([&]() -> io::Task<absl::StatusOr<std::pair<uint64_t, uint64_t>>> {
    store::GetOptions o;
    o.range = store::RangeSpec{{}, {}, 5000};
    OL_CO_ASSIGN_OR_RETURN(auto rd, co_await f.st().OpenObject("bkt", "big", o));
    co_return std::make_pair(rd->offset(), rd->length());
  });
  REQUIRE(r.ok());
  CHECK(r->first == 195000);
  CHECK(r->second == 5000);
}

TEST_CASE("conditional reads follow S3's precedence", "[store]") {
  StoreFixture f(4);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  auto info = f.Put("bkt", "k", "hello");
  REQUIRE(info.ok());
  const std::string etag = info->etag;
  auto stat = [&](store::Conditions c) { return f.Run([&] { return f.st().StatObject("bkt", "k", c); }); };
  store::Conditions c;
  c.if_match = "\"" + etag + "\"";
  CHECK(stat(c).ok());
  c.if_match = "\"other\"";
  CHECK(ErrorKindOf(stat(c).status()) == ErrorKind::kPreconditionFailed);
  c = {};
  c.if_none_match = etag;
  CHECK(ErrorKindOf(stat(c).status()) == ErrorKind::kNotModified);
  c.if_none_match = "*";
  CHECK(ErrorKindOf(stat(c).status()) == ErrorKind::kNotModified);
  c = {};
  c.if_modified_since = absl::Now() + absl::Hours(1);
  CHECK(ErrorKindOf(stat(c).status()) == ErrorKind::kNotModified);
  c.if_modified_since = absl::Now() - absl::Hours(1);
  CHECK(stat(c).ok());
  c = {};
  c.if_unmodified_since = absl::Now() - absl::Hours(1);
  CHECK(ErrorKindOf(stat(c).status()) == ErrorKind::kPreconditionFailed);
  // If-Match true wins over If-Unmodified-Since false; If-None-Match false wins over
  // If-Modified-Since.
  c.if_match = etag;
  CHECK(stat(c).ok());
  c = {};
  c.if_none_match = "\"nope\"";
  c.if_modified_since = absl::Now() + absl::Hours(1);
  CHECK(stat(c).ok());
  // The same on GET.
  store::GetOptions g;
  g.conditions.if_match = "\"x\"";
  CHECK(ErrorKindOf(f.Get("bkt", "k", g).status()) == ErrorKind::kPreconditionFailed);
}

TEST_CASE("overwrite, delete and copy", "[store]") {
  StoreFixture f(4, 4, 2, 16 << 10);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  REQUIRE(f.MakeBucket("cat").ok());
  const std::string one = RandomBytes(100000, 1), two = RandomBytes(5000, 2);
  REQUIRE(f.Put("bkt", "k", one).ok());
  REQUIRE(f.Put("bkt", "k", two).ok());  // large → inline
  CHECK(*f.Get("bkt", "k") == two);
  REQUIRE(f.Put("bkt", "k", one).ok());  // inline → large
  CHECK(*f.Get("bkt", "k") == one);
  // Exactly one data folder per drive is left behind the current version.
  for (int d = 0; d < 4; ++d) {
    int data_dirs = 0;
    for (auto& e : std::filesystem::directory_iterator(f.drive_path(d) + "/bkt/k")) {
      if (e.path().filename().string().rfind("%data.", 0) == 0) ++data_dirs;
    }
    CHECK(data_dirs == 1);
  }
  store::PutOptions meta;
  meta.content_type = "text/x";
  meta.user_meta = {{"a", "1"}};
  REQUIRE(f.Put("bkt", "src", two, meta).ok());
  auto copied = f.Run([&] { return f.st().CopyObject("bkt", "src", "cat", "dst", {}, {}, {}); });
  REQUIRE(copied.ok());
  CHECK(copied->etag == Md5Hex(two));
  auto st = f.Stat("cat", "dst");
  REQUIRE(st.ok());
  CHECK(st->content_type == "text/x");
  CHECK(st->user_meta == meta.user_meta);
  store::PutOptions repl;
  repl.content_type = "text/y";
  REQUIRE(f.Run([&] { return f.st().CopyObject("bkt", "k", "bkt", "k", repl, {}, {}); }).ok());
  CHECK(f.Stat("bkt", "k")->content_type == "text/y");
  CHECK(*f.Get("bkt", "k") == one);

  REQUIRE(f.Delete("bkt", "k").ok());
  CHECK(ErrorKindOf(f.Get("bkt", "k").status()) == ErrorKind::kNoSuchKey);
  CHECK(ErrorKindOf(f.Delete("bkt", "k")) == ErrorKind::kNoSuchKey);
  // Nothing of it is left in the drives' namespace.
  for (int d = 0; d < 4; ++d) CHECK(!std::filesystem::exists(f.drive_path(d) + "/bkt/k"));
}

static std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_CASE("bucket policies: stored, newest record wins, healed onto stale drives", "[store]") {
  StoreFixture f(4);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  auto set = [&](const std::string& b, const std::string& p) {
    return f.Run([&] { return f.st().SetBucketPolicy(b, p); });
  };
  auto stat = [&] { return f.Run([&] { return f.st().StatBucket("bkt"); }); };
  CHECK(stat()->policy.empty());
  REQUIRE(set("bkt", "{\"v\": 1}").ok());
  CHECK(stat()->policy == "{\"v\": 1}");
  const std::string record0 = f.drive_path(0) + "/.openlake.sys/buckets/bkt.meta";
  REQUIRE(std::filesystem::exists(record0));
  const std::string old = ReadFile(record0);
  REQUIRE(set("bkt", "{\"v\": 2}").ok());
  // Drive 0 missed the change (it held the old record meanwhile): the newest record wins.
  { std::ofstream(record0, std::ios::binary | std::ios::trunc) << old; }
  REQUIRE(f.Open().ok());
  CHECK(stat()->policy == "{\"v\": 2}");
  CHECK(stat()->owner.empty());
  auto healed = f.Run([&] { return f.st().Heal("bkt", ""); });
  REQUIRE(healed.ok());
  CHECK(healed->buckets_healed == 1);
  CHECK(ReadFile(record0) == ReadFile(f.drive_path(1) + "/.openlake.sys/buckets/bkt.meta"));
  REQUIRE(set("bkt", "").ok());
  CHECK(stat()->policy.empty());
  CHECK(ErrorKindOf(set("none", "{}")) == ErrorKind::kNoSuchBucket);
}

// The data folders ("%data.<id>") of an object on drive `d`.
static int DataFolders(StoreFixture& f, int d, const std::string& object_dir) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(f.drive_path(d) + "/" + object_dir)) {
    if (e.path().filename().string().rfind("%data.", 0) == 0) ++n;
  }
  return n;
}

TEST_CASE("metadata updates rewrite no data and keep ETag and time", "[store]") {
  StoreFixture f(4);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  const std::string big = RandomBytes(300000, 7), small = "tiny";
  store::PutOptions meta;
  meta.user_meta = {{"a", "1"}, {"b", "2"}};
  for (const std::string& key : {std::string("big"), std::string("small")}) {
    INFO(key);
    const std::string& data = key == "big" ? big : small;
    auto put = f.Put("bkt", key, data, meta);
    REQUIRE(put.ok());
    store::MetaUpdate u;
    u.set = {{"a", "9"}, {"tag:set", "k=v"}};
    u.erase = {"b"};
    auto updated = f.Run([&] { return f.st().UpdateObjectMeta("bkt", key, u); });
    REQUIRE(updated.ok());
    auto st = f.Stat("bkt", key);
    REQUIRE(st.ok());
    CHECK(st->user_meta == std::map<std::string, std::string>{{"a", "9"}, {"tag:set", "k=v"}});
    CHECK(st->etag == put->etag);
    CHECK(absl::ToUnixSeconds(st->mod_time) == absl::ToUnixSeconds(put->mod_time));
    CHECK(st->version_id == put->version_id);  // the same S3 version ("null")
    CHECK(*f.Get("bkt", key) == data);
    if (key == "big") {
      // The new version shares the old one's shards: one data folder per drive, the same.
      for (int d = 0; d < 4; ++d) CHECK(DataFolders(f, d, "bkt/big") == 1);
    }
    // The ETag condition is checked under the lock.
    store::MetaUpdate stale;
    stale.if_match = "\"0123\"";
    CHECK(ErrorKindOf(f.Run([&] { return f.st().UpdateObjectMeta("bkt", key, stale); })
                          .status()) == ErrorKind::kPreconditionFailed);
  }
  // It survives a restart and a heal finds nothing to do; an overwrite then drops the shared
  // data folder as any replaced version's.
  REQUIRE(f.Open().ok());
  CHECK(*f.Get("bkt", "big") == big);
  auto healed = f.Run([&] { return f.st().HealObject("bkt", "big"); });
  REQUIRE(healed.ok());
  CHECK(healed->objects_healed == 0);
  const std::string other = RandomBytes(200000, 8);
  REQUIRE(f.Put("bkt", "big", other).ok());
  CHECK(*f.Get("bkt", "big") == other);
  for (int d = 0; d < 4; ++d) CHECK(DataFolders(f, d, "bkt/big") == 1);
  CHECK(ErrorKindOf(f.Run([&] { return f.st().UpdateObjectMeta("bkt", "none", {}); })
                        .status()) == ErrorKind::kNoSuchKey);
  CHECK(ErrorKindOf(f.Run([&] { return f.st().UpdateObjectMeta("nob", "k", {}); }).status()) ==
        ErrorKind::kNoSuchBucket);
}

TEST_CASE("keys that look like paths are ordinary keys and never leave the bucket", "[store]") {
  StoreFixture f(4);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  for (const std::string& key : std::vector<std::string>{"../../escape", "a/../../../x",
                                                         "/etc/passwd", "a//b", ".", "..",
                                                         std::string("nul\0x", 5)}) {
    INFO(key);
    REQUIRE(f.Put("bkt", key, "v:" + key).ok());
    CHECK(*f.Get("bkt", key) == "v:" + key);
  }
  for (int d = 0; d < 4; ++d) {
    CHECK(!std::filesystem::exists(f.drive_path(d) + "/../escape"));
    CHECK(!std::filesystem::exists(std::filesystem::path(f.drive_path(d)).parent_path() / "x"));
    CHECK(!std::filesystem::exists(f.drive_path(d) + "/etc"));
  }
  for (const std::string& key : std::vector<std::string>{"../../escape", "a/../../../x",
                                                         "/etc/passwd", "a//b", ".", "..",
                                                         std::string("nul\0x", 5)}) {
    REQUIRE(f.Delete("bkt", key).ok());
    CHECK(ErrorKindOf(f.Get("bkt", key).status()) == ErrorKind::kNoSuchKey);
  }
  // Only what cannot be stored is refused, and touches nothing.
  const std::string too_long(2000, 'z');
  CHECK(ErrorKindOf(f.Put("bkt", too_long, "x").status()) == ErrorKind::kInvalidObjectName);
  CHECK(ErrorKindOf(f.Get("bkt", too_long).status()) == ErrorKind::kInvalidObjectName);
  CHECK(ErrorKindOf(f.Delete("bkt", too_long)) == ErrorKind::kInvalidObjectName);
  // Names that look like the engine's own are plain keys.
  REQUIRE(f.Put("bkt", "%meta", "m").ok());
  REQUIRE(f.Put("bkt", "%+x", "c").ok());
  CHECK(*f.Get("bkt", "%+x") == "c");
  REQUIRE(f.Put("bkt", "dir/%data.x", "d").ok());
  REQUIRE(f.Put("bkt", "dir/", "").ok());
  CHECK(*f.Get("bkt", "%meta") == "m");
  CHECK(*f.Get("bkt", "dir/%data.x") == "d");
  CHECK(*f.Get("bkt", "dir/") == "");
}

namespace {
std::vector<std::string> Keys(const store::ListResult& r) {
  std::vector<std::string> out;
  for (const auto& o : r.objects) out.push_back(o.key);
  return out;
}

// Every key of a bucket, listed in pages of `per_page` with markers; each page but the last
// must be full.
std::vector<std::string> PagedKeys(StoreFixture& f, const std::string& bucket, int per_page) {
  std::vector<std::string> paged;
  store::ListOptions page;
  page.max_keys = per_page;
  for (int i = 0; i < 40; ++i) {
    auto r = f.List(bucket, page);
    REQUIRE(r.ok());
    for (auto& k : Keys(*r)) paged.push_back(k);
    if (!r->truncated) break;
    CHECK(r->objects.size() == static_cast<size_t>(per_page));
    page.marker = r->next_marker;
  }
  return paged;
}
}  // namespace

TEST_CASE("keys with segments longer than a file name round-trip and list in order",
          "[store]") {
  StoreFixture f(4);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  const std::string a200(200, 'a');
  std::vector<std::string> keys = {
      std::string(1024, 'k'),                          // S3's longest key, one segment
      a200,                                            // a long segment's first piece, alone
      a200 + "-x",                                     // sorts between the two below
      a200 + "/y",                                     // below a200 (a folder)
      a200 + std::string(300, 'b'),                    // two pieces
      a200 + std::string(300, 'b') + "/z",             // and a key below it
      a200 + std::string(300, 'c'),                    // shares the first piece
      std::string(199, 'p') + std::string(300, '%'),   // a cut that would split "%25"
      std::string(250, 'm') + "/" + std::string(900, 'n').substr(0, 700)};
  for (const auto& k : keys) REQUIRE(f.Put("bkt", k, "v:" + k).ok());
  for (const auto& k : keys) CHECK(*f.Get("bkt", k) == "v:" + k);
  std::vector<std::string> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  auto all = f.List("bkt", {});
  REQUIRE(all.ok());
  CHECK(Keys(*all) == sorted);
  store::ListOptions o;
  o.delimiter = "/";
  o.prefix = a200;
  auto under = f.List("bkt", o);
  REQUIRE(under.ok());
  CHECK(under->objects.size() == 4);  // a200, a200-x, a200 + b..., a200 + c...
  CHECK(under->common_prefixes ==
        std::vector<std::string>{a200 + "/", a200 + std::string(300, 'b') + "/"});
  // Pages of one walk the pieces in order too.
  CHECK(PagedKeys(f, "bkt", 1) == sorted);
  for (const auto& k : keys) REQUIRE(f.Delete("bkt", k).ok());
  CHECK(f.List("bkt", {})->objects.empty());
  for (int d = 0; d < 4; ++d) {
    CHECK(std::filesystem::is_empty(f.drive_path(d) + "/bkt"));
  }
}

TEST_CASE("listing: sorted, prefixes, delimiters, markers, merged across sets", "[store]") {
  StoreFixture f(8, 4, 2, 16 << 10);  // two sets of RS(2+2)
  REQUIRE(f.Open().ok());
  REQUIRE(f.st().set_count() == 2);
  REQUIRE(f.MakeBucket("bkt").ok());
  const std::vector<std::string> keys = {
      "a", "a-b", "a.c", "a/", "a/b", "a/b/c", "a/c", "a0", "b/x/y", "b/z", "cat", "photos/2024/jan.jpg",
      "photos/2024/feb.jpg", "photos/2025/mar.jpg", "photos/readme", "z%25", "日本",
      // S3 keys that are odd paths: empty, "." and ".." segments, a leading '/'.
      "/lead", "//two", "a//b", "a//", "a/./b", "a/../b", "..", "b/x/."};
  for (const auto& k : keys) REQUIRE(f.Put("bkt", k, "v:" + k).ok());
  std::vector<std::string> sorted = keys;
  std::sort(sorted.begin(), sorted.end());

  auto all = f.List("bkt", {});
  REQUIRE(all.ok());
  CHECK(Keys(*all) == sorted);
  CHECK(all->common_prefixes.empty());
  CHECK(!all->truncated);
  for (const auto& o : all->objects) CHECK(o.size == o.key.size() + 2);

  store::ListOptions o;
  o.delimiter = "/";
  auto top = f.List("bkt", o);
  REQUIRE(top.ok());
  CHECK(Keys(*top) ==
        std::vector<std::string>{"..", "a", "a-b", "a.c", "a0", "cat", "z%25", "日本"});
  CHECK(top->common_prefixes == std::vector<std::string>{"/", "a/", "b/", "photos/"});

  o.prefix = "photos/";
  auto photos = f.List("bkt", o);
  REQUIRE(photos.ok());
  CHECK(Keys(*photos) == std::vector<std::string>{"photos/readme"});
  CHECK(photos->common_prefixes == std::vector<std::string>{"photos/2024/", "photos/2025/"});

  o.prefix = "photos/2024/";
  CHECK(Keys(*f.List("bkt", o)) ==
        std::vector<std::string>{"photos/2024/feb.jpg", "photos/2024/jan.jpg"});
  o.prefix = "photos/20";
  auto partial = f.List("bkt", o);
  CHECK(partial->objects.empty());
  CHECK(partial->common_prefixes == std::vector<std::string>{"photos/2024/", "photos/2025/"});
  o.prefix = "a";
  o.delimiter = "";
  CHECK(Keys(*f.List("bkt", o)) ==
        std::vector<std::string>{"a", "a-b", "a.c", "a/", "a/../b", "a/./b", "a//", "a//b", "a/b",
                                 "a/b/c", "a/c", "a0"});
  o.prefix = "a/";
  o.delimiter = "/";
  auto ad = f.List("bkt", o);
  CHECK(Keys(*ad) == std::vector<std::string>{"a/", "a/b", "a/c"});
  CHECK(ad->common_prefixes == std::vector<std::string>{"a/../", "a/./", "a//", "a/b/"});
  o.prefix = "/";
  auto lead = f.List("bkt", o);
  CHECK(Keys(*lead) == std::vector<std::string>{"/lead"});
  CHECK(lead->common_prefixes == std::vector<std::string>{"//"});
  // A delimiter other than '/'.
  store::ListOptions dash;
  dash.delimiter = "-";
  auto d = f.List("bkt", dash);
  CHECK(d->common_prefixes == std::vector<std::string>{"a-"});
  const std::vector<std::string> dk = Keys(*d);
  CHECK(std::find(dk.begin(), dk.end(), "a-b") == dk.end());

  // Pages of 3 with markers cover everything once, in order.
  CHECK(PagedKeys(f, "bkt", 3) == sorted);
  // Pages with a delimiter: prefixes count, and are not repeated.
  std::vector<std::string> seen;
  store::ListOptions pd;
  pd.delimiter = "/";
  pd.max_keys = 2;
  for (int i = 0; i < 20; ++i) {
    auto r = f.List("bkt", pd);
    REQUIRE(r.ok());
    for (auto& k : Keys(*r)) seen.push_back(k);
    for (auto& p : r->common_prefixes) seen.push_back(p);
    if (!r->truncated) break;
    pd.marker = r->next_marker;
  }
  std::sort(seen.begin(), seen.end());
  CHECK(seen == std::vector<std::string>{"..", "/", "a", "a-b", "a.c", "a/", "a0", "b/", "cat",
                                         "photos/", "z%25", "日本"});
  // Start after a key.
  store::ListOptions after;
  after.marker = "b/x/y";
  CHECK(Keys(*f.List("bkt", after)).front() == "b/z");
  // Prefixes no key can have list nothing.
  store::ListOptions weird;
  weird.prefix = "../";
  CHECK(f.List("bkt", weird)->objects.empty());
  CHECK(ErrorKindOf(f.List("nobucket", {}).status()) == ErrorKind::kNoSuchBucket);
  // Each object is on the four drives of one set: small ones in the drive's pack, with no
  // folder of their own.
  for (const auto& k : keys) {
    int found = 0;
    for (int dr = 0; dr < 8; ++dr) {
      const std::string dir = f.drive_path(dr) + "/" + store::ObjectDir("bkt", k);
      CHECK_FALSE(std::filesystem::exists(dir + "/%meta"));
      auto pack = store::MetaPack::For(f.drive_path(dr));
      REQUIRE(pack.ok());
      found += (*pack)->Holds(store::MetaPath("bkt", k)) ? 1 : 0;
    }
    CHECK(found == 4);
  }
}

TEST_CASE("multipart: upload, list, abort, complete with validation and retry", "[store]") {
  StoreFixture f(4, 4, 2, 16 << 10);  // min part 64 KiB
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  store::PutOptions o;
  o.content_type = "video/mp4";
  o.user_meta = {{"m", "1"}};
  auto id = f.Run([&] { return f.st().CreateUpload("bkt", "movie", o); });
  REQUIRE(id.ok());
  const std::string p1 = RandomBytes(70000, 11), p2 = RandomBytes(65536, 12),
                    p3 = RandomBytes(1000, 13);
  auto e1 = f.PutPart("bkt", "movie", *id, 1, RandomBytes(70000, 99));  // replaced below
  REQUIRE(e1.ok());
  e1 = f.PutPart("bkt", "movie", *id, 1, p1);
  auto e2 = f.PutPart("bkt", "movie", *id, 2, p2);
  auto e3 = f.PutPart("bkt", "movie", *id, 3, p3);
  REQUIRE((e1.ok() && e2.ok() && e3.ok()));
  CHECK(e1->etag == Md5Hex(p1));

  auto parts = f.Run([&] { return f.st().ListParts("bkt", "movie", *id, 0, 1000); });
  REQUIRE(parts.ok());
  REQUIRE(parts->parts.size() == 3);
  CHECK(parts->parts[0].etag == Md5Hex(p1));
  CHECK(parts->parts[2].size == 1000);
  auto page = f.Run([&] { return f.st().ListParts("bkt", "movie", *id, 1, 1); });
  REQUIRE(page.ok());
  CHECK(page->parts.size() == 1);
  CHECK(page->parts[0].number == 2);
  CHECK(page->truncated);
  CHECK(page->next_marker == 2);

  auto uploads = f.Run([&] { return f.st().ListUploads("bkt", {}); });
  REQUIRE(uploads.ok());
  REQUIRE(uploads->uploads.size() == 1);
  CHECK(uploads->uploads[0].key == "movie");
  CHECK(uploads->uploads[0].upload_id == *id);

  auto complete = [&](std::vector<store::CompletePart> ps) {
    return f.Run([&] { return f.st().CompleteUpload("bkt", "movie", *id, ps, {}); });
  };
  CHECK(ErrorKindOf(complete({}).status()) == ErrorKind::kInvalidPart);
  CHECK(ErrorKindOf(complete({{2, e2->etag}, {1, e1->etag}}).status()) ==
        ErrorKind::kInvalidPartOrder);
  CHECK(ErrorKindOf(complete({{1, "\"0000\""}}).status()) == ErrorKind::kInvalidPart);
  CHECK(ErrorKindOf(complete({{1, e1->etag}, {4, e3->etag}}).status()) == ErrorKind::kInvalidPart);
  CHECK(ErrorKindOf(complete({{1, e1->etag}, {2, e2->etag}, {4, e3->etag}}).status()) ==
        ErrorKind::kInvalidPart);
  // Part 3 (1000 bytes) is too small unless it is last.
  auto bad_small = f.PutPart("bkt", "movie", *id, 4, p1);
  REQUIRE(bad_small.ok());
  CHECK(ErrorKindOf(complete({{3, e3->etag}, {4, bad_small->etag}}).status()) ==
        ErrorKind::kEntityTooSmall);
  // Nothing so far made an object.
  CHECK(ErrorKindOf(f.Get("bkt", "movie").status()) == ErrorKind::kNoSuchKey);

  auto done = complete({{1, "\"" + e1->etag + "\""}, {2, e2->etag}, {3, e3->etag}});
  REQUIRE(done.ok());
  // ETag: MD5 of the parts' binary MD5s, then "-3".
  CHECK(done->etag == Md5Hex(UnhexForTest(Md5Hex(p1)) + UnhexForTest(Md5Hex(p2)) +
                             UnhexForTest(Md5Hex(p3))) + "-3");
  auto got = f.Get("bkt", "movie");
  REQUIRE(got.ok());
  CHECK(*got == p1 + p2 + p3);
  auto st = f.Stat("bkt", "movie");
  CHECK(st->content_type == "video/mp4");
  CHECK(st->user_meta == o.user_meta);
  REQUIRE(st->parts.size() == 3);
  CHECK(st->parts[1].size == 65536);
  // Ranges across part boundaries.
  store::GetOptions g;
  g.range = store::RangeSpec{69990, 70010, {}};
  CHECK(*f.Get("bkt", "movie", g) == (p1 + p2).substr(69990, 21));
  g.range = store::RangeSpec{{}, {}, 1500};
  CHECK(*f.Get("bkt", "movie", g) == (p2 + p3).substr(p2.size() + p3.size() - 1500));
  // The upload is gone (its part 4 with it).
  CHECK(ErrorKindOf(complete({{1, e1->etag}}).status()) == ErrorKind::kNoSuchUpload);
  CHECK(f.Run([&] { return f.st().ListUploads("bkt", {}); })->uploads.empty());
  for (int d = 0; d < 4; ++d) {
    CHECK(std::filesystem::is_empty(f.drive_path(d) + "/.openlake.sys/multipart/bkt"));
  }

  // Abort really aborts.
  auto id2 = f.Run([&] { return f.st().CreateUpload("bkt", "other", {}); });
  REQUIRE(id2.ok());
  REQUIRE(f.PutPart("bkt", "other", *id2, 1, p3).ok());
  REQUIRE(f.Run([&] { return f.st().AbortUpload("bkt", "other", *id2); }).ok());
  CHECK(ErrorKindOf(f.PutPart("bkt", "other", *id2, 2, p3).status()) == ErrorKind::kNoSuchUpload);
  CHECK(ErrorKindOf(f.Run([&] { return f.st().AbortUpload("bkt", "other", *id2); })) ==
        ErrorKind::kNoSuchUpload);
  CHECK(ErrorKindOf(f.Run([&] { return f.st().ListParts("bkt", "other", "nothex", 0, 10); }).status()) ==
        ErrorKind::kNoSuchUpload);
  CHECK(ErrorKindOf(f.PutPart("bkt", "other", "../../../../etc", 1, p3).status()) ==
        ErrorKind::kNoSuchUpload);
  CHECK(absl::IsInvalidArgument(f.PutPart("bkt", "movie", *id2, 10001, p3).status()));
}

TEST_CASE("a failed complete leaves the upload whole, and completing again works", "[store]") {
  StoreFixture f(4, 4, 2, 16 << 10);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  auto id = f.Run([&] { return f.st().CreateUpload("bkt", "k", {}); });
  REQUIRE(id.ok());
  const std::string p1 = RandomBytes(70000, 1), p2 = RandomBytes(3000, 2);
  auto e1 = f.PutPart("bkt", "k", *id, 1, p1);
  auto e2 = f.PutPart("bkt", "k", *id, 2, p2);
  REQUIRE((e1.ok() && e2.ok()));
  // Three drives fail: the commit cannot reach its quorum.
  for (int d = 0; d < 3; ++d) f.faults(d).fail_all = true;
  auto r = f.Run([&] {
    return f.st().CompleteUpload("bkt", "k", *id, {{1, e1->etag}, {2, e2->etag}}, {});
  });
  CHECK(!r.ok());
  for (int d = 0; d < 3; ++d) f.faults(d).fail_all = false;
  auto again = f.Run([&] {
    return f.st().CompleteUpload("bkt", "k", *id, {{1, e1->etag}, {2, e2->etag}}, {});
  });
  REQUIRE(again.ok());
  CHECK(*f.Get("bkt", "k") == p1 + p2);
}

TEST_CASE("two writers of one key leave one whole object", "[store]") {
  StoreFixture f(4, 4, 2, 16 << 10);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  const std::string a = RandomBytes(150000, 1), b = RandomBytes(170000, 2);
  for (int round = 0; round < 5; ++round) {
    // Both stream interleaved on one reactor, then commit together.
    auto r = f.Run([&]() -> io::Task<absl::Status> {
      const store::PutOptions none;
      OL_CO_ASSIGN_OR_RETURN(auto wa, co_await f.st().CreateObject("bkt", "k", none));
      OL_CO_ASSIGN_OR_RETURN(auto wb, co_await f.st().CreateObject("bkt", "k", none));
      for (size_t at = 0; at < 170000; at += 10000) {
        if (at < a.size()) {
          OL_CO_RETURN_IF_ERROR(co_await wa->Write(Bytes(a).subspan(at, std::min<size_t>(10000, a.size() - at))));
        }
        OL_CO_RETURN_IF_ERROR(co_await wb->Write(Bytes(b).subspan(at, std::min<size_t>(10000, b.size() - at))));
      }
      std::vector<io::Task<absl::StatusOr<store::ObjectInfo>>> commits;
      commits.push_back(wa->Commit());
      commits.push_back(wb->Commit());
      auto res = co_await io::WhenAll(std::move(commits));
      OL_CO_RETURN_IF_ERROR(res[0].status());
      OL_CO_RETURN_IF_ERROR(res[1].status());
      co_return absl::OkStatus();
    });
    REQUIRE(r.ok());
    auto got = f.Get("bkt", "k");
    REQUIRE(got.ok());
    CHECK((*got == a || *got == b));
    // Every drive holds the same single version.
    std::set<std::string> etags;
    auto st = f.Stat("bkt", "k");
    REQUIRE(st.ok());
    CHECK(st->etag == Md5Hex(*got));
  }
}

TEST_CASE("a dropped writer leaves nothing behind", "[store]") {
  StoreFixture f(4, 4, 2, 16 << 10);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  const std::string data = RandomBytes(300000, 5);
  auto r = f.Run([&]() -> io::Task<absl::Status> {
    const store::PutOptions none;
    OL_CO_ASSIGN_OR_RETURN(auto w, co_await f.st().CreateObject("bkt", "gone", none));
    OL_CO_RETURN_IF_ERROR(co_await w->Write(Bytes(data)));
    co_return absl::OkStatus();  // w destroyed with writes in flight
  });
  REQUIRE(r.ok());
  // The clean-up runs on the reactor; give it a moment.
  CHECK(WaitFor([&] {
    for (int d = 0; d < 4; ++d) {
      if (!std::filesystem::is_empty(f.drive_path(d) + "/.openlake.sys/tmp")) return false;
    }
    return true;
  }));
  CHECK(ErrorKindOf(f.Get("bkt", "gone").status()) == ErrorKind::kNoSuchKey);
}

TEST_CASE("drive identities: reopen, foreign, moved and replaced drives", "[store]") {
  StoreFixture f(4, 4, 2, 16 << 10, /*faulty=*/false);
  REQUIRE(f.Open().ok());
  const std::string dep = f.st().deployment_id();
  REQUIRE(f.MakeBucket("bkt").ok());
  REQUIRE(f.Put("bkt", "k", RandomBytes(100000, 3)).ok());
  // A second process (here: a second open) cannot take the same drives.
  {
    auto second = store::Store::Open(f.options());
    CHECK(absl::IsFailedPrecondition(second.status()));
  }
  f.Close();
  REQUIRE(f.Open().ok());
  CHECK(f.st().deployment_id() == dep);
  f.Close();

  // Swap two drives in the list: each is used at the position its identity records.
  std::swap(f.options().drives[0], f.options().drives[1]);
  REQUIRE(f.Open().ok());
  auto drives = f.st().Drives();
  CHECK(drives[0].path == f.drive_path(0));
  CHECK(drives[1].path == f.drive_path(1));
  CHECK(f.Get("bkt", "k").ok());
  f.Close();
  std::swap(f.options().drives[0], f.options().drives[1]);

  // A foreign drive (another deployment's identity) is left offline.
  {
    std::string fmt;
    std::ifstream in(f.drive_path(2) + "/.openlake.sys/format.json");
    fmt.assign(std::istreambuf_iterator<char>(in), {});
    const size_t at = fmt.find(dep);
    REQUIRE(at != std::string::npos);
    fmt.replace(at, 8, "00000000");
    std::ofstream(f.drive_path(2) + "/.openlake.sys/format.json") << fmt;
  }
  REQUIRE(f.Open().ok());
  drives = f.st().Drives();
  CHECK(!drives[2].online);
  CHECK(drives[2].state == "foreign");
  CHECK(f.Get("bkt", "k").ok());  // RS(2+2) reads with three drives
  f.Close();

  // A non-empty folder without identity is never formatted over.
  std::filesystem::remove_all(f.drive_path(2));
  std::filesystem::create_directories(f.drive_path(2));
  std::ofstream(f.drive_path(2) + "/user-file") << "precious";
  REQUIRE(f.Open().ok());
  CHECK(f.st().Drives()[2].state == "unformatted-nonempty");
  f.Close();
  CHECK(std::filesystem::exists(f.drive_path(2) + "/user-file"));

  // An empty folder in its place is taken as the replacement.
  std::filesystem::remove(f.drive_path(2) + "/user-file");
  REQUIRE(f.Open().ok());
  drives = f.st().Drives();
  CHECK(drives[2].online);
  CHECK(drives[2].state == "replaced");
  CHECK(f.st().deployment_id() == dep);
}

TEST_CASE("options are validated", "[store]") {
  StoreFixture f(6);
  f.options().set_drive_count = 4;  // 6 drives do not make sets of 4
  CHECK(absl::IsInvalidArgument(f.Open()));
  f.options().set_drive_count = 6;
  f.options().parity = 4;  // more than half
  CHECK(absl::IsInvalidArgument(f.Open()));
  f.options().parity = 3;
  f.options().block_size = 1000;
  CHECK(absl::IsInvalidArgument(f.Open()));
  f.options().block_size = 4096;
  REQUIRE(f.Open().ok());
  CHECK(f.st().data_shards() == 3);
  CHECK(f.st().parity_shards() == 3);
  f.Close();
  // Reopening with another set size would move every object: refused.
  f.options().set_drive_count = 3;
  f.options().parity = 1;
  CHECK(absl::IsFailedPrecondition(f.Open()));
}

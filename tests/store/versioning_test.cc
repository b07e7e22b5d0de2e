// S3 versioning in the engine: versions kept per key, delete markers, the null version under
// Suspended, removal of one version, listing every version with its pages, metadata updates
// of an old version, and healing a drive that lost a key's versions.
#include <catch2/catch.hpp>

#include <filesystem>

#include "store/store_test_util.h"

namespace openlake::testing {
namespace {

using store::ErrorKind;
using store::ErrorKindOf;
using store::Versioning;

store::PutOptions Mode(Versioning v) {
  store::PutOptions o;
  o.versioning = v;
  return o;
}

absl::StatusOr<std::string> GetVersion(StoreFixture& f, const std::string& key,
                                       const std::string& id) {
  store::GetOptions o;
  o.conditions.version_id = id;
  return f.Get("bkt", key, o);
}

absl::StatusOr<store::DeleteResult> Delete(StoreFixture& f, const std::string& key,
                                           Versioning v, const std::string& id = "") {
  store::DeleteOptions o;
  o.versioning = v;
  o.version_id = id;
  return f.Run([&] { return f.st().DeleteObject("bkt", key, o); });
}

absl::StatusOr<store::ListVersionsResult> Versions(StoreFixture& f, store::ListVersionsOptions o) {
  return f.Run([&] { return f.st().ListObjectVersions("bkt", o); });
}

// "key@id" for every version of one listing, "D" after a delete marker, "*" after the latest.
std::vector<std::string> Describe(const store::ListVersionsResult& r) {
  std::vector<std::string> out;
  for (const store::ObjectInfo& v : r.versions) {
    out.push_back(v.key + "@" + v.version_id + (v.delete_marker ? "D" : "") +
                  (v.is_latest ? "*" : ""));
  }
  return out;
}

int DataFolders(StoreFixture& f, int d, const std::string& object_dir) {
  int n = 0;
  // A key whose versions are all inline has no folder: its record is packed.
  if (!std::filesystem::exists(f.drive_path(d) + "/" + object_dir)) return 0;
  for (const auto& e : std::filesystem::directory_iterator(f.drive_path(d) + "/" + object_dir)) {
    if (e.path().filename().string().rfind("%data.", 0) == 0) ++n;
  }
  return n;
}

TEST_CASE("an enabled bucket keeps every write and delete as a version", "[store][versioning]") {
  StoreFixture f(4);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  REQUIRE(f.Run([&] { return f.st().SetBucketVersioning("bkt", Versioning::kEnabled); }).ok());
  auto bucket = f.Run([&] { return f.st().StatBucket("bkt"); });
  REQUIRE(bucket.ok());
  CHECK(bucket->versioning == Versioning::kEnabled);

  const std::string big = RandomBytes(300000, 1), small = "second", third = RandomBytes(5000, 3);
  auto v1 = f.Put("bkt", "k", big, Mode(Versioning::kEnabled));
  auto v2 = f.Put("bkt", "k", small, Mode(Versioning::kEnabled));
  auto v3 = f.Put("bkt", "k", third, Mode(Versioning::kEnabled));
  REQUIRE((v1.ok() && v2.ok() && v3.ok()));
  CHECK(v1->version_id.size() == 32);
  CHECK(v1->version_id != v2->version_id);
  CHECK(*f.Get("bkt", "k") == third);
  CHECK(*GetVersion(f, "k", v1->version_id) == big);
  CHECK(*GetVersion(f, "k", v2->version_id) == small);
  auto st = f.Run([&] {
    store::Conditions c;
    c.version_id = v1->version_id;
    return f.st().StatObject("bkt", "k", c);
  });
  REQUIRE(st.ok());
  CHECK(st->etag == v1->etag);
  CHECK(!st->is_latest);

  store::ListVersionsOptions all;
  auto listed = Versions(f, all);
  REQUIRE(listed.ok());
  CHECK(Describe(*listed) == std::vector<std::string>{"k@" + v3->version_id + "*",
                                                      "k@" + v2->version_id,
                                                      "k@" + v1->version_id});

  // A delete makes a marker; the key is gone from plain reads and listings.
  auto marker = Delete(f, "k", Versioning::kEnabled);
  REQUIRE(marker.ok());
  CHECK(marker->delete_marker);
  absl::StatusOr<std::string> gone = f.Get("bkt", "k");
  CHECK(ErrorKindOf(gone.status()) == ErrorKind::kDeleteMarker);
  CHECK(store::VersionIdOf(gone.status()) == marker->version_id);
  CHECK(ErrorKindOf(GetVersion(f, "k", marker->version_id).status()) == ErrorKind::kDeleteMarker);
  CHECK(f.List("bkt", {})->objects.empty());
  CHECK(*GetVersion(f, "k", v3->version_id) == third);
  listed = Versions(f, all);
  REQUIRE(listed.ok());
  CHECK(listed->versions.size() == 4);
  CHECK(Describe(*listed)[0] == "k@" + marker->version_id + "D*");
  // A bucket holding versions is not empty.
  CHECK(ErrorKindOf(f.Run([&] { return f.st().DeleteBucket("bkt"); })) ==
        ErrorKind::kBucketNotEmpty);

  // Removing the marker brings the newest version back; removing a version is for good.
  auto undone = Delete(f, "k", Versioning::kEnabled, marker->version_id);
  REQUIRE(undone.ok());
  CHECK(undone->delete_marker);
  CHECK(*f.Get("bkt", "k") == third);
  REQUIRE(Delete(f, "k", Versioning::kEnabled, v2->version_id).ok());
  CHECK(ErrorKindOf(GetVersion(f, "k", v2->version_id).status()) == ErrorKind::kNoSuchVersion);
  // Removing it again succeeds, as S3's does.
  CHECK(Delete(f, "k", Versioning::kEnabled, v2->version_id).ok());
  CHECK(ErrorKindOf(GetVersion(f, "k", "xyz").status()) == ErrorKind::kInvalidVersionId);
  // v1 (files) and v3 (inline) are left: v1's data folder only.
  for (int d = 0; d < 4; ++d) CHECK(DataFolders(f, d, "bkt/k") == 1);

  // It all survives a restart; removing the last versions removes the key.
  REQUIRE(f.Open().ok());
  listed = Versions(f, all);
  REQUIRE(listed.ok());
  CHECK(Describe(*listed) ==
        std::vector<std::string>{"k@" + v3->version_id + "*", "k@" + v1->version_id});
  auto heal = f.Run([&] { return f.st().HealObject("bkt", "k"); });
  REQUIRE(heal.ok());
  CHECK(heal->objects_healed == 0);
  REQUIRE(Delete(f, "k", Versioning::kEnabled, v3->version_id).ok());
  CHECK(*f.Get("bkt", "k") == big);
  REQUIRE(Delete(f, "k", Versioning::kEnabled, v1->version_id).ok());
  CHECK(ErrorKindOf(f.Get("bkt", "k").status()) == ErrorKind::kNoSuchKey);
  CHECK(!std::filesystem::exists(f.drive_path(0) + "/bkt/k"));
  CHECK(f.Run([&] { return f.st().DeleteBucket("bkt"); }).ok());
}

TEST_CASE("suspended versioning writes the null version and keeps the others",
          "[store][versioning]") {
  StoreFixture f(4);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  // Written before versioning: the null version, which an enabled bucket keeps.
  auto n0 = f.Put("bkt", "k", "before");
  REQUIRE(n0.ok());
  CHECK(n0->version_id == "null");
  REQUIRE(f.Run([&] { return f.st().SetBucketVersioning("bkt", Versioning::kEnabled); }).ok());
  auto v1 = f.Put("bkt", "k", "enabled", Mode(Versioning::kEnabled));
  REQUIRE(v1.ok());
  REQUIRE(f.Run([&] { return f.st().SetBucketVersioning("bkt", Versioning::kSuspended); }).ok());
  // Versioning can be suspended, never turned off.
  CHECK(!f.Run([&] { return f.st().SetBucketVersioning("bkt", Versioning::kUnversioned); }).ok());
  auto n1 = f.Put("bkt", "k", "suspended-1", Mode(Versioning::kSuspended));
  auto n2 = f.Put("bkt", "k", RandomBytes(200000, 9), Mode(Versioning::kSuspended));
  REQUIRE((n1.ok() && n2.ok()));
  CHECK(n2->version_id == "null");
  store::ListVersionsOptions all;
  auto listed = Versions(f, all);
  REQUIRE(listed.ok());
  // The null version was replaced twice, wherever it stood.
  CHECK(Describe(*listed) == std::vector<std::string>{"k@null*", "k@" + v1->version_id});
  CHECK(GetVersion(f, "k", "null")->size() == 200000);

  // A delete makes a null delete marker, replacing the null version.
  auto marker = Delete(f, "k", Versioning::kSuspended);
  REQUIRE(marker.ok());
  CHECK(marker->version_id == "null");
  listed = Versions(f, all);
  REQUIRE(listed.ok());
  CHECK(Describe(*listed) == std::vector<std::string>{"k@nullD*", "k@" + v1->version_id});
  // The replaced null version's shard files went with it (v1 is inline).
  for (int d = 0; d < 4; ++d) CHECK(DataFolders(f, d, "bkt/k") == 0);
  REQUIRE(Delete(f, "k", Versioning::kSuspended, "null").ok());
  CHECK(*f.Get("bkt", "k") == "enabled");

  // Metadata of an old version changes in place: same id, same bytes, still not current.
  REQUIRE(f.Put("bkt", "k", "newest", Mode(Versioning::kEnabled)).ok());
  store::MetaUpdate u;
  u.version_id = v1->version_id;
  u.set = {{"tag:set", "a=b"}};
  auto updated = f.Run([&] { return f.st().UpdateObjectMeta("bkt", "k", u); });
  REQUIRE(updated.ok());
  CHECK(updated->version_id == v1->version_id);
  CHECK(*f.Get("bkt", "k") == "newest");
  auto old = f.Run([&] {
    store::Conditions c;
    c.version_id = v1->version_id;
    return f.st().StatObject("bkt", "k", c);
  });
  REQUIRE(old.ok());
  CHECK(old->user_meta.at("tag:set") == "a=b");
  CHECK(*GetVersion(f, "k", v1->version_id) == "enabled");
  CHECK(Versions(f, all)->versions.size() == 2);
}

TEST_CASE("a delete unaware of versioning never removes a key's versions", "[store][versioning]") {
  StoreFixture f(4);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  auto v1 = f.Put("bkt", "k", "kept", Mode(Versioning::kEnabled));
  REQUIRE(v1.ok());
  // A caller with a stale view of the bucket (no versioning): a null marker, not a removal.
  auto d = Delete(f, "k", Versioning::kUnversioned);
  REQUIRE(d.ok());
  CHECK(d->delete_marker);
  CHECK(d->version_id == "null");
  CHECK(*GetVersion(f, "k", v1->version_id) == "kept");
  store::ListVersionsOptions all;
  CHECK(Describe(*Versions(f, all)) ==
        std::vector<std::string>{"k@nullD*", "k@" + v1->version_id});
}

TEST_CASE("listing versions pages through keys, versions and prefixes", "[store][versioning]") {
  StoreFixture f(8, 4);  // two sets: keys of one listing come from both
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  std::vector<std::string> expect;
  for (const std::string key : {"a", "b", "c", "d/x", "d/y", "e"}) {
    std::vector<std::string> ids;
    const int versions = key == "b" ? 1 : 3;
    for (int i = 0; i < versions; ++i) {
      auto put = f.Put("bkt", key, key + std::to_string(i), Mode(Versioning::kEnabled));
      REQUIRE(put.ok());
      ids.insert(ids.begin(), put->version_id);
    }
    if (key == "d/y") continue;
    if (key == "d/x") {
      expect.push_back("prefix d/");
      continue;
    }
    for (size_t i = 0; i < ids.size(); ++i) expect.push_back(key + "@" + ids[i] + (i == 0 ? "*" : ""));
  }
  for (int page : {1, 2, 3, 1000}) {
    INFO(page);
    store::ListVersionsOptions o;
    o.delimiter = "/";
    o.max_keys = page;
    std::vector<std::string> got;
    for (int round = 0; round < 100; ++round) {
      auto r = Versions(f, o);
      REQUIRE(r.ok());
      CHECK(r->versions.size() + r->common_prefixes.size() <= static_cast<size_t>(page));
      // Prefixes and versions interleave by key.
      std::vector<std::string> items = Describe(*r);
      for (const std::string& p : r->common_prefixes) items.push_back("prefix " + p);
      std::sort(items.begin(), items.end(), [](const std::string& a, const std::string& b) {
        auto key = [](const std::string& s) {
          return s.rfind("prefix ", 0) == 0 ? s.substr(7) : s.substr(0, s.find('@'));
        };
        return key(a) < key(b);
      });
      got.insert(got.end(), items.begin(), items.end());
      if (!r->truncated) break;
      o.key_marker = r->next_key_marker;
      o.version_id_marker = r->next_version_id_marker;
    }
    CHECK(got == expect);
  }
  store::ListVersionsOptions prefixed;
  prefixed.prefix = "d/";
  auto r = Versions(f, prefixed);
  REQUIRE(r.ok());
  CHECK(r->versions.size() == 6);
}

TEST_CASE("healing brings back every version a drive lost", "[store][versioning]") {
  StoreFixture f(4);
  REQUIRE(f.Open().ok());
  REQUIRE(f.MakeBucket("bkt").ok());
  const std::string a = RandomBytes(300000, 4), b = "inline", c = RandomBytes(100, 5);
  auto va = f.Put("bkt", "k", a, Mode(Versioning::kEnabled));
  auto vb = f.Put("bkt", "k", b, Mode(Versioning::kEnabled));
  REQUIRE((va.ok() && vb.ok()));
  REQUIRE(Delete(f, "k", Versioning::kEnabled).ok());
  auto vc = f.Put("bkt", "k", c, Mode(Versioning::kEnabled));
  REQUIRE(vc.ok());
  f.Close();
  std::filesystem::remove_all(f.drive_path(0) + "/bkt/k");
  std::filesystem::remove_all(f.drive_path(1) + "/bkt/k/%meta");
  REQUIRE(f.Open().ok());
  auto healed = f.Run([&] { return f.st().HealObject("bkt", "k"); });
  REQUIRE(healed.ok());
  CHECK(healed->objects_healed == 1);
  // With the two drives that kept everything failing, the healed two serve every version.
  f.faults(2).fail_all = true;
  f.faults(3).fail_all = true;
  CHECK(*GetVersion(f, "k", va->version_id) == a);
  CHECK(*GetVersion(f, "k", vb->version_id) == b);
  CHECK(*f.Get("bkt", "k") == c);
  f.faults(2).fail_all = false;
  f.faults(3).fail_all = false;
  auto again = f.Run([&] { return f.st().HealObject("bkt", "k"); });
  REQUIRE(again.ok());
  store::ListVersionsOptions all;
  CHECK(Versions(f, all)->versions.size() == 4);
}

}  // namespace
}  // namespace openlake::testing

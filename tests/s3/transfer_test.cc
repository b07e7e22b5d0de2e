// Parallel transfers (openlake/s3/transfer.h) against an in-process S3Server over a real object
// engine: many objects of mixed sizes up and back at once, multipart uploads whose parts travel
// on several connections, ranged reads across part boundaries, progress, errors per item, and
// retries against a server that is gone.
#include "openlake/s3/transfer.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "s3/client_fixture.h"
#include "store/store_test_util.h"

#include "absl/strings/match.h"

#include "openlake/checksum.h"
#include "openlake/strings.h"

namespace openlake::s3 {
namespace {

TransferOptions SmallParts(const Server& s, int connections = 4) {
  TransferOptions o;
  o.client = s.Options();
  o.connections = connections;
  o.part_size = 5 << 20;
  return o;
}

TEST_CASE("s3 transfer: many objects of mixed sizes up and back at once", "[s3][transfer]") {
  Server s;
  REQUIRE(s.Connect(s.Options())->CreateBucket("ckpt").ok());
  TransferOptions o = SmallParts(s);
  std::vector<std::pair<uint64_t, uint64_t>> seen;  // (done, total) as reported
  o.progress = [&](uint64_t done, uint64_t total) { seen.emplace_back(done, total); };
  auto t = Transfer::Create(o);
  REQUIRE(t.ok());

  const std::vector<size_t> sizes = {0, 1, 4096, (5 << 20) + 1, (17 << 20) + 3, 5 << 20};
  std::vector<std::string> data;
  std::vector<PutItem> items;
  uint64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    data.push_back(testing::RandomBytes(sizes[i], static_cast<uint32_t>(i + 1)));
    total += sizes[i];
  }
  for (size_t i = 0; i < sizes.size(); ++i) items.push_back({StrCat("rank0/", i), data[i]});
  std::vector<absl::StatusOr<std::string>> etags = (*t)->PutMany("ckpt", items);
  REQUIRE(etags.size() == sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    INFO(i);
    REQUIRE(etags[i].ok());
    // Above the part size: a multipart upload (its ETag ends in the part count).
    if (sizes[i] > (5u << 20)) {
      CHECK(etags[i]->find('-') != std::string::npos);
    } else {
      CHECK(etags[i]->size() == 32);
    }
  }
  CHECK(etags[4]->substr(etags[4]->size() - 2) == "-4");
  REQUIRE(!seen.empty());
  CHECK(seen.back() == std::make_pair(total, total));
  for (size_t i = 1; i < seen.size(); ++i) CHECK(seen[i].first >= seen[i - 1].first);
  const Transfer::Counters after_put = (*t)->counters();
  CHECK(after_put.bytes_sent == total);
  CHECK(after_put.retries == 0);

  // Back, whole, into buffers of exactly their size.
  std::vector<std::string> back;
  std::vector<GetItem> reads;
  for (size_t i = 0; i < sizes.size(); ++i) back.emplace_back(sizes[i], '\0');
  for (size_t i = 0; i < sizes.size(); ++i) {
    reads.push_back({StrCat("rank0/", i), 0, absl::MakeSpan(back[i])});
  }
  std::vector<absl::Status> got = (*t)->GetMany("ckpt", reads);
  for (size_t i = 0; i < sizes.size(); ++i) {
    INFO(i);
    CHECK(got[i].ok());
    CHECK(back[i] == data[i]);
  }
  CHECK((*t)->counters().bytes_received == total);

  // A range across part boundaries, split over the connections.
  std::string mid(11 << 20, '\0');
  REQUIRE((*t)->Get("ckpt", "rank0/4", (3 << 20) + 7, absl::MakeSpan(mid)).ok());
  CHECK(mid == data[4].substr((3 << 20) + 7, 11 << 20));

  // The control connection lists what was written.
  auto control = (*t)->control();
  REQUIRE(control.ok());
  ListOptions lo;
  lo.prefix = "rank0/";
  auto page = (*control)->ListObjectsV2("ckpt", lo);
  REQUIRE(page.ok());
  CHECK(page->objects.size() == sizes.size());
}

TEST_CASE("s3 transfer: an upload's parts follow its start and it completes at once",
          "[s3][transfer]") {
  // Eight multipart uploads on two connections. Each upload's parts go ahead of the uploads
  // not yet started, and its completion ahead of everything: so no more uploads are open at
  // once than there are connections (a batch in phases would open all eight first).
  Server s;
  REQUIRE(s.Connect(s.Options())->CreateBucket("seq").ok());
  TransferOptions o = SmallParts(s, 2);
  int most_open = 0;
  absl::Status listed;
  o.progress = [&](uint64_t, uint64_t) {
    auto open = s.f.Run([&] { return s.f.st().ListUploads("seq", {}); });
    if (!open.ok()) {
      listed = open.status();
      return;
    }
    most_open = std::max(most_open, static_cast<int>(open->uploads.size()));
  };
  auto t = Transfer::Create(o);
  REQUIRE(t.ok());
  std::vector<std::string> data;
  for (uint32_t i = 0; i < 8; ++i) data.push_back(testing::RandomBytes((5 << 20) + 100, i + 7));
  std::vector<PutItem> items;
  for (size_t i = 0; i < data.size(); ++i) items.push_back({StrCat("obj", i), data[i]});
  std::vector<absl::StatusOr<std::string>> etags = (*t)->PutMany("seq", items);
  for (size_t i = 0; i < etags.size(); ++i) {
    INFO(i);
    REQUIRE(etags[i].ok());
    CHECK(etags[i]->substr(etags[i]->size() - 2) == "-2");
  }
  REQUIRE(listed.ok());
  CHECK(most_open >= 1);
  CHECK(most_open <= 2);
  auto after = s.f.Run([&] { return s.f.st().ListUploads("seq", {}); });
  REQUIRE(after.ok());
  CHECK(after->uploads.empty());
  std::string back((5 << 20) + 100, '\0');
  REQUIRE((*t)->Get("seq", "obj5", 0, absl::MakeSpan(back)).ok());
  CHECK(back == data[5]);
}

TEST_CASE("s3 transfer: each item gets its own error", "[s3][transfer]") {
  Server s;
  REQUIRE(s.Connect(s.Options())->CreateBucket("bkt").ok());
  auto t = Transfer::Create(SmallParts(s, 2));
  REQUIRE(t.ok());
  const std::string small = "small";
  const std::string big = testing::RandomBytes((6 << 20) + 1, 3);
  // No such bucket: the small PUT and the multipart upload's start both say so.
  auto r = (*t)->PutMany("nobucket", {{"a", small}, {"b", big}});
  CHECK(ErrorCodeOf(r[0].status()) == "NoSuchBucket");
  CHECK(ErrorCodeOf(r[1].status()) == "NoSuchBucket");
  REQUIRE((*t)->Put("bkt", "there", big).ok());

  std::string buf(100, '\0');
  std::string past(10, '\0');
  std::vector<absl::Status> got = (*t)->GetMany(
      "bkt", {{"absent", 0, absl::MakeSpan(buf)},
            {"there", big.size() - 5, absl::MakeSpan(past)},  // 5 bytes short
            {"there", 0, absl::MakeSpan(buf)}});
  CHECK(ErrorCodeOf(got[0]) == "NoSuchKey");
  CHECK(absl::IsOutOfRange(got[1]));
  CHECK(got[2].ok());
  CHECK(buf == big.substr(0, 100));
  // Nothing of a failed batch lingers as an upload: the bucket holds only what succeeded.
  auto page = (*(*t)->control())->ListObjectsV2("bkt", {});
  REQUIRE(page.ok());
  REQUIRE(page->objects.size() == 1);
  CHECK(page->objects[0].key == "there");
}

TEST_CASE("s3 transfer: reads checked against their CRC-64 as they land", "[s3][transfer]") {
  Server s;
  REQUIRE(s.Connect(s.Options())->CreateBucket("bkt").ok());
  auto t = Transfer::Create(SmallParts(s, 3));
  REQUIRE(t.ok());
  const std::string big = testing::RandomBytes((12 << 20) + 5, 9);  // three pieces of 5 MiB
  REQUIRE((*t)->Put("bkt", "big", big).ok());
  REQUIRE((*t)->Put("bkt", "empty", "").ok());
  const uint64_t whole = Crc64(big.data(), big.size());
  const uint64_t tail = Crc64(big.data() + 7, 100);

  std::string a(big.size(), '\0'), b(100, '\0'), c(big.size(), '\0'), d(100, '\0'), e;
  std::vector<GetItem> reads = {{"big", 0, absl::MakeSpan(a), whole},
                                {"big", 7, absl::MakeSpan(b), tail},
                                {"big", 0, absl::MakeSpan(c), whole ^ 1},  // not what is stored
                                {"big", 8, absl::MakeSpan(d), tail},       // other bytes
                                {"empty", 0, absl::MakeSpan(e), 0}};
  std::vector<absl::Status> got = (*t)->GetMany("bkt", reads);
  CHECK(got[0].ok());
  CHECK(a == big);
  CHECK(got[1].ok());
  CHECK(absl::IsDataLoss(got[2]));
  CHECK(absl::StrContains(got[2].message(), "CRC-64"));
  CHECK(absl::IsDataLoss(got[3]));
  CHECK(got[4].ok());  // the CRC-64 of nothing is 0
  // A read that fails is reported as such, not as a checksum mismatch.
  std::string short_buf(10, '\0');
  got = (*t)->GetMany("bkt", {{"big", big.size() - 5, absl::MakeSpan(short_buf), 0}});
  CHECK(absl::IsOutOfRange(got[0]));
}

TEST_CASE("s3 transfer: bad options, and a server that is gone", "[s3][transfer]") {
  TransferOptions bad;
  bad.connections = 0;
  CHECK(absl::IsInvalidArgument(Transfer::Create(bad).status()));
  bad.connections = 2;
  bad.part_size = 1 << 20;
  CHECK(absl::IsInvalidArgument(Transfer::Create(bad).status()));

  auto s = std::make_unique<Server>();
  REQUIRE(s->Connect(s->Options())->CreateBucket("bkt").ok());
  TransferOptions o = SmallParts(*s, 2);
  o.retries = 2;
  auto t = Transfer::Create(o);
  REQUIRE(t.ok());
  REQUIRE((*t)->Put("bkt", "k", "v").ok());
  const std::string endpoint = s->server->address();
  s.reset();  // the server stops: every try fails to connect
  auto r = (*t)->PutMany("bkt", {{"k1", "a"}, {"k2", "b"}});
  CHECK(absl::IsUnavailable(r[0].status()));
  CHECK(absl::IsUnavailable(r[1].status()));
  CHECK((*t)->counters().retries == 4);  // two more tries of each item

  TransferOptions gone;
  gone.client.endpoint = endpoint;
  CHECK(absl::IsUnavailable(Transfer::Create(gone).status()));
}

TEST_CASE("s3 transfer: a forked child's copy refuses work and goes quietly", "[s3][transfer]") {
  Server s;
  auto t = Transfer::Create(SmallParts(s, 2));
  REQUIRE(t.ok());
  REQUIRE((*t)->control().ok());
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child: no worker threads here. Its batches fail at once, and destroying the copy
    // neither joins the parent's threads nor touches its locks.
    auto r = (*t)->PutMany("bkt", {{"k", "v"}});
    const bool refused = absl::IsFailedPrecondition(r[0].status()) &&
                         absl::IsFailedPrecondition((*t)->control().status());
    t->reset();
    _exit(refused ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // The parent's transfer still works.
  REQUIRE(s.Connect(s.Options())->CreateBucket("bkt").ok());
  CHECK((*t)->Put("bkt", "after-fork", "v").ok());
}

}  // namespace
}  // namespace openlake::s3

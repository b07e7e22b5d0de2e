// The drive's commit journal: steps logged together share one write and fdatasync; steps that
// were durable but never applied (a crash between the two) come back at the next open, the last
// step of each object deciding and a bucket's trash voiding what came before it there; once
// replayed they are never replayed again; and after file switches what the journal holds is the
// newest stretch of steps.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "store/journal.h"
#include "store/store_test_util.h"

namespace openlake::testing {
namespace {

using store::DriveJournal;
using store::pb::JournalEntry;

JournalEntry Step(JournalEntry::Op op, const std::string& bucket, const std::string& key,
                  const std::string& meta = "") {
  JournalEntry e;
  e.set_op(op);
  e.set_bucket(bucket);
  e.set_key(key);
  e.set_meta(meta);
  return e;
}

// Logs every step at once on reactor 0; with `apply`, each step is marked applied once
// durable, else left as a crash would leave it (durable, never applied).
absl::Status LogAll(io::Runtime& rt, DriveJournal& j, std::vector<JournalEntry> steps) {
  return io::BlockOn(rt, 0, [&]() -> io::Task<absl::Status> {
    std::vector<io::Task<absl::Status>> all;
    for (JournalEntry& step : steps) {
      all.push_back([](DriveJournal* journal, JournalEntry e) -> io::Task<absl::Status> {
        DriveJournal::Applying applying;
        const absl::Status s = co_await journal->Log(std::move(e), &applying);
        co_return s;
      }(&j, std::move(step)));
    }
    std::vector<absl::Status> results = co_await io::WhenAll(std::move(all));
    for (const absl::Status& s : results) OL_CO_RETURN_IF_ERROR(s);
    co_return absl::OkStatus();
  });
}

struct Replay {
  std::vector<JournalEntry> applied;
  DriveJournal::ApplyFn fn() {
    return [this](const JournalEntry& e) {
      applied.push_back(e);
      return absl::OkStatus();
    };
  }
};

// A drive folder, its backend and a one-reactor runtime to log from.
struct Drive {
  TempDir dir;
  std::unique_ptr<store::FileBackend> fs = store::NewLocalFileBackend(dir.path());
  std::unique_ptr<io::Runtime> rt;
  Drive() {
    io::RuntimeOptions ro;
    ro.cpus = {0};
    ro.pin = false;
    auto r = io::Runtime::Create(ro);
    REQUIRE(r.ok());
    rt = std::move(*r);
    REQUIRE(rt->Start().ok());
  }
  ~Drive() { rt->Stop(); }
  absl::StatusOr<std::unique_ptr<DriveJournal>> Open(
      Replay* replay, uint64_t file_bytes = DriveJournal::kFileBytes) {
    return DriveJournal::Open(fs.get(), replay->fn(), file_bytes);
  }
};

TEST_CASE("journal: durable steps never applied come back at open, last step per object",
          "[store][journal]") {
  Drive d;
  Replay first;
  auto j = d.Open(&first);
  REQUIRE(j.ok());
  CHECK(first.applied.empty());

  std::vector<JournalEntry> steps;
  for (int i = 0; i < 10; ++i) {
    steps.push_back(Step(JournalEntry::PUT_META, "b", "k" + std::to_string(i), "v1"));
  }
  steps.push_back(Step(JournalEntry::PUT_META, "gone", "x", "v1"));
  REQUIRE(LogAll(*d.rt, **j, steps).ok());
  // Logged in one turn of the loop: they went down together.
  CHECK((*j)->stats().entries == 11);
  CHECK((*j)->stats().batches < 11);

  REQUIRE(LogAll(*d.rt, **j, {Step(JournalEntry::PUT_META, "b", "k0", "v2"),
                            Step(JournalEntry::REMOVE, "b", "k1"),
                            Step(JournalEntry::DROP_BUCKET, "gone", "")})
              .ok());
  j->reset();  // the "crash": nothing was applied

  Replay second;
  j = d.Open(&second);
  REQUIRE(j.ok());
  CHECK((*j)->stats().replayed == 11);
  std::map<std::string, JournalEntry> by_key;
  uint64_t last_seq = 0;
  int drops = 0;
  for (const JournalEntry& e : second.applied) {
    CHECK(e.seq() > last_seq);  // in the order they were logged
    last_seq = e.seq();
    if (e.op() == JournalEntry::DROP_BUCKET) {
      // The drop itself is applied (a pack forgets the bucket's records at it) ...
      CHECK(e.bucket() == "gone");
      ++drops;
      continue;
    }
    CHECK(e.bucket() == "b");  // ... and the trashed bucket's earlier step is void
    by_key[e.key()] = e;
  }
  CHECK(drops == 1);
  REQUIRE(by_key.size() == 10);
  CHECK(by_key["k0"].meta() == "v2");
  CHECK(by_key["k1"].op() == JournalEntry::REMOVE);
  for (int i = 2; i < 10; ++i) CHECK(by_key["k" + std::to_string(i)].meta() == "v1");

  // Replayed once, then gone; numbering goes on above what was there.
  j->reset();
  Replay third;
  j = d.Open(&third);
  REQUIRE(j.ok());
  CHECK(third.applied.empty());
  REQUIRE(LogAll(*d.rt, **j, {Step(JournalEntry::PUT_META, "b", "late", "v3")}).ok());
  j->reset();
  Replay fourth;
  j = d.Open(&fourth);
  REQUIRE(j.ok());
  REQUIRE(fourth.applied.size() == 1);
  CHECK(fourth.applied[0].key() == "late");
  CHECK(fourth.applied[0].seq() > last_seq);
  j->reset();
}

TEST_CASE("journal: after file switches it holds the newest stretch of steps",
          "[store][journal]") {
  Drive d;
  Replay none;
  // Files of 1 MiB; 16 KiB steps, rounds of 16 applied as they go: ~5 files' worth.
  auto j = d.Open(&none, 1 << 20);
  REQUIRE(j.ok());
  const std::string meta(16 << 10, 'm');
  const int rounds = 20, per_round = 16;
  for (int r = 0; r < rounds; ++r) {
    std::vector<JournalEntry> steps;
    for (int i = 0; i < per_round; ++i) {
      steps.push_back(Step(JournalEntry::PUT_META, "b", std::to_string(r * per_round + i), meta));
    }
    REQUIRE(LogAll(*d.rt, **j, steps).ok());
  }
  CHECK((*j)->stats().switches >= 3);
  j->reset();

  Replay replay;
  j = d.Open(&replay, 1 << 20);
  REQUIRE(j.ok());
  const int total = rounds * per_round;
  REQUIRE(!replay.applied.empty());
  CHECK(replay.applied.size() < static_cast<size_t>(total));
  // A stretch ending with the last step, with no gap.
  const int first = std::stoi(replay.applied.front().key());
  for (size_t i = 0; i < replay.applied.size(); ++i) {
    CHECK(replay.applied[i].key() == std::to_string(first + static_cast<int>(i)));
    CHECK(replay.applied[i].meta() == meta);
  }
  CHECK(std::stoi(replay.applied.back().key()) == total - 1);
  j->reset();
}

}  // namespace
}  // namespace openlake::testing

// Membership: liveness from probe answers and misses, and the live set readers see.
#include "openlake/cluster/membership.h"

#include <catch2/catch.hpp>

using namespace openlake;
using cluster::Liveness;
using cluster::Membership;

namespace {

std::vector<cluster::Member> Three() {
  return {{3, "127.0.0.1:9403"}, {1, "127.0.0.1:9401"}, {2, "127.0.0.1:9402"}};
}

const cluster::MemberState& StateOf(const std::vector<cluster::MemberState>& all, uint32_t id) {
  for (const auto& s : all) {
    if (s.member.id == id) return s;
  }
  FAIL("no member " << id);
  return all.front();
}

}  // namespace

TEST_CASE("Membership: only this node is live until peers answer", "[cluster]") {
  Membership m(2, Three(), {});
  auto live = m.live();
  REQUIRE(live->members.size() == 1);
  CHECK(live->members[0].id == 2);
  CHECK(live->Contains(2));
  CHECK_FALSE(live->Contains(1));
  const auto peers = m.Peers();
  REQUIRE(peers.size() == 2);
  CHECK(peers[0].id == 1);
  CHECK(peers[1].id == 3);
  CHECK(StateOf(m.Snapshot(), 1).liveness == Liveness::kUnknown);
  CHECK(StateOf(m.Snapshot(), 2).self);
}

TEST_CASE("Membership: up at the first answer, down after the configured misses in a row",
          "[cluster]") {
  Membership m(1, Three(), {.down_after_misses = 3});
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  const uint64_t e0 = m.live()->epoch;
  CHECK(m.OnAnswer(3, t0));
  CHECK_FALSE(m.OnAnswer(3, t0 + absl::Seconds(1)));  // already up: no change
  auto live = m.live();
  CHECK(live->epoch == e0 + 1);
  REQUIRE(live->members.size() == 2);
  CHECK(live->members[0].id == 1);
  CHECK(live->members[1].id == 3);
  CHECK(live->Find(3)->rpc_addr == "127.0.0.1:9403");

  const absl::Status why = absl::DeadlineExceededError("no answer in 500ms");
  CHECK_FALSE(m.OnMiss(3, t0 + absl::Seconds(2), why));
  CHECK_FALSE(m.OnMiss(3, t0 + absl::Seconds(3), why));
  // An answer between misses starts the count again.
  CHECK_FALSE(m.OnAnswer(3, t0 + absl::Seconds(4)));
  CHECK_FALSE(m.OnMiss(3, t0 + absl::Seconds(5), why));
  CHECK_FALSE(m.OnMiss(3, t0 + absl::Seconds(6), why));
  CHECK(m.live()->Contains(3));
  CHECK(m.OnMiss(3, t0 + absl::Seconds(7), why));
  CHECK_FALSE(m.live()->Contains(3));
  CHECK(m.live()->epoch == e0 + 2);
  const auto s = StateOf(m.Snapshot(), 3);
  CHECK(s.liveness == Liveness::kDown);
  CHECK(s.missed == 3);
  CHECK(s.since == t0 + absl::Seconds(7));
  CHECK(s.last_answer == t0 + absl::Seconds(4));
  CHECK(s.transitions == 1);
  CHECK(s.last_error.find("no answer") != std::string::npos);
  // Further misses change nothing; an answer brings it back.
  CHECK_FALSE(m.OnMiss(3, t0 + absl::Seconds(8), why));
  CHECK(m.OnAnswer(3, t0 + absl::Seconds(9)));
  CHECK(m.live()->Contains(3));
  CHECK(StateOf(m.Snapshot(), 3).transitions == 2);
  CHECK(m.live()->epoch == e0 + 3);
}

TEST_CASE("Membership: a peer never heard from is down at its first miss, without a new epoch",
          "[cluster]") {
  Membership m(1, Three(), {});
  const uint64_t e0 = m.live()->epoch;
  CHECK_FALSE(m.OnMiss(2, absl::Now(), absl::UnavailableError("connection refused")));
  CHECK(StateOf(m.Snapshot(), 2).liveness == Liveness::kDown);
  CHECK(m.live()->epoch == e0);
  CHECK(m.live_count() == 1);
}

TEST_CASE("Membership: this node and strangers are not probed into or out of the set",
          "[cluster]") {
  Membership m(1, Three(), {});
  CHECK_FALSE(m.OnMiss(1, absl::Now(), absl::UnavailableError("x")));
  CHECK_FALSE(m.OnAnswer(1, absl::Now()));
  CHECK_FALSE(m.OnAnswer(99, absl::Now()));
  CHECK_FALSE(m.OnMiss(99, absl::Now(), absl::UnavailableError("x")));
  CHECK(m.live()->Contains(1));
  CHECK(m.live_count() == 1);
}

TEST_CASE("Membership: a reader's live set stays as it was when the membership changes",
          "[cluster]") {
  Membership m(1, Three(), {});
  m.OnAnswer(2, absl::Now());
  auto before = m.live();
  m.OnAnswer(3, absl::Now());
  CHECK(before->members.size() == 2);
  CHECK(m.live()->members.size() == 3);
  CHECK(m.live()->epoch > before->epoch);
}

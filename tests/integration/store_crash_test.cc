// Crash safety of the object engine: a child process (store_crash_child) writes objects,
// overwrites large and small ones (small ones' records are packed), deletes and completes
// multipart uploads, and is killed with SIGKILL at random moments, round after round on the
// same drives. Afterwards every acknowledged object must read
// back exactly, and nothing partial or mixed may be visible: each key holds the last
// acknowledged state or that of an operation begun after it, whole.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "integration/crash_corpus.h"

extern char** environ;

namespace openlake {
namespace {

using testing::CrashBody;
using testing::CrashOp;

struct Op {
  CrashOp op;
  uint32_t seed;
  bool acked = false;
};

// What each key saw, in order, over every round.
using History = std::map<std::string, std::vector<Op>>;

// Runs one child until `kill_after` has passed (or it dies), then SIGKILLs it; returns how many
// operations it acknowledged.
int RunChild(const std::string& child, uint32_t seed, const std::vector<std::string>& drives,
             std::chrono::milliseconds kill_after, History& history) {
  int out[2];
  REQUIRE(pipe2(out, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  std::vector<std::string> args = {child, std::to_string(seed)};
  args.insert(args.end(), drives.begin(), drives.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  REQUIRE(posix_spawn(&pid, child.c_str(), &fa, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);

  const auto deadline = std::chrono::steady_clock::now() + kill_after;
  std::string buf;
  int acked = 0;
  bool killed = false;
  auto consume = [&] {
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      std::istringstream line(buf.substr(0, nl));
      buf.erase(0, nl + 1);
      std::string tag, key;
      int op = 0;
      uint32_t s = 0;
      line >> tag;
      if (tag == "B") {
        line >> op >> key >> s;
        history[key].push_back(Op{static_cast<CrashOp>(op), s});
      } else if (tag == "A" || tag == "F") {
        line >> key >> s;
        auto& ops = history[key];
        REQUIRE(!ops.empty());
        REQUIRE(ops.back().seed == s);
        if (tag == "A") {
          ops.back().acked = true;
          ++acked;
        } else {
          FAIL("the child's write failed: " << line.str());
        }
      }
    }
  };
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 && !killed) {
      kill(pid, SIGKILL);
      killed = true;
    }
    pollfd p{out[0], POLLIN, 0};
    poll(&p, 1, killed ? 1000 : static_cast<int>(std::max<int64_t>(1, left.count())));
    char tmp[4096];
    const ssize_t n = read(out[0], tmp, sizeof(tmp));
    if (n > 0) {
      buf.append(tmp, static_cast<size_t>(n));
      consume();
    } else if (n == 0) {
      break;  // the child is gone (killed, or it died on its own)
    }
  }
  close(out[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  if (!killed) FAIL("the crash child exited by itself, status " << status);
  CHECK(WIFSIGNALED(status));
  return acked;
}

// The states a key may be in: after its last acknowledged operation (absent before any), or
// after any operation begun later. -1 stands for "no object".
std::set<int64_t> Acceptable(const std::vector<Op>& ops, std::map<int64_t, CrashOp>& kinds) {
  std::set<int64_t> ok;
  size_t from = 0;
  ok.insert(-1);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].acked) {
      ok.clear();
      from = i + 1;
      ok.insert(ops[i].op == CrashOp::kDelete ? -1 : static_cast<int64_t>(ops[i].seed));
    }
  }
  for (size_t i = from; i < ops.size(); ++i) {
    ok.insert(ops[i].op == CrashOp::kDelete ? -1 : static_cast<int64_t>(ops[i].seed));
  }
  for (const auto& o : ops) kinds[o.seed] = o.op;
  return ok;
}

void Verify(testing::StoreFixture& f, const History& history) {
  size_t acked_objects = 0;
  for (const auto& [key, ops] : history) {
    INFO("key " << key);
    std::map<int64_t, CrashOp> kinds;
    const std::set<int64_t> ok = Acceptable(ops, kinds);
    auto got = f.Get("crash", key);
    if (!got.ok()) {
      INFO(got.status().ToString());
      REQUIRE(absl::IsNotFound(got.status()));
      CHECK(ok.count(-1) == 1);
      continue;
    }
    bool matched = false;
    for (int64_t s : ok) {
      if (s >= 0 && CrashBody(kinds[s], static_cast<uint32_t>(s)) == *got) matched = true;
    }
    CHECK(matched);  // never a partial, mixed or unknown body
    if (matched && ok.size() == 1) ++acked_objects;
  }
  // Listing shows exactly the keys that read back.
  std::set<std::string> listed;
  store::ListOptions lo;
  lo.max_keys = 1000;
  while (true) {
    auto l = f.List("crash", lo);
    REQUIRE(l.ok());
    for (const auto& o : l->objects) listed.insert(o.key);
    if (!l->truncated) break;
    lo.marker = l->next_marker;
  }
  for (const auto& k : listed) {
    INFO("listed " << k);
    CHECK(history.count(k) == 1);
    CHECK(f.Stat("crash", k).ok());
  }
  INFO("acknowledged and settled objects: " << acked_objects);
  CHECK(acked_objects > 0);
}

TEST_CASE("SIGKILL during puts, deletes and multipart completes loses nothing acknowledged",
          "[store][crash]") {
  const char* child = std::getenv("STORE_CRASH_CHILD");
  REQUIRE(child != nullptr);
  testing::StoreFixture f(4, 4, 2, 64 << 10, /*faulty=*/false);
  std::vector<std::string> drives;
  for (int i = 0; i < 4; ++i) drives.push_back(f.drive_path(i));

  std::random_device rd;
  const uint32_t base = rd() % 1000;
  std::mt19937 rng(base);
  INFO("base seed " << base);
  History history;
  int acked = 0;
  for (uint32_t round = 0; round < 12; ++round) {
    const auto after = std::chrono::milliseconds(60 + rng() % 400);
    acked += RunChild(child, base * 100 + round, drives, after, history);
  }
  size_t in_flight = 0;  // operations a kill interrupted
  for (const auto& [key, ops] : history) {
    for (const auto& o : ops) in_flight += o.acked ? 0 : 1;
  }
  INFO("operations acknowledged: " << acked << ", interrupted: " << in_flight);
  CHECK(acked > 10);
  CHECK(in_flight > 3);

  // The store as a restarted daemon finds it: everything acknowledged is there, exactly.
  f.options() = testing::CrashStoreOptions(drives);
  f.options().purge_trash = false;
  REQUIRE(f.Open().ok());
  Verify(f, history);
  // A full heal reconciles drives a crash left behind the others; nothing fails to rebuild.
  auto h = f.Heal("crash");
  REQUIRE(h.ok());
  CHECK(h->objects_failed == 0);
  Verify(f, history);
}

}  // namespace
}  // namespace openlake

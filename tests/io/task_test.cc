#include "openlake/io/task.h"

#include <fcntl.h>

#include <cstring>
#include <string>

#include <catch2/catch.hpp>

#include "io/test_util.h"

#include "openlake/io/buffer.h"
#include "openlake/io/file.h"

namespace io = openlake::io;
using openlake::testing::StartRuntime;
using openlake::testing::TempDir;

namespace {

io::Task<int> Leaf(int x) { co_return x * 2; }

io::Task<int> Sum(int n) {
  int total = 0;
  for (int i = 0; i < n; ++i) total += co_await Leaf(i);
  co_return total;
}

io::Task<absl::Status> WriteThenRead(const io::File& f, std::string* out) {
  io::Reactor& r = *io::Reactor::Current();
  io::AlignedBuffer buf(4096);
  std::memset(buf.data(), 'x', buf.size());
  std::memcpy(buf.data(), "hello", 5);
  int32_t n = co_await io::Op([&](io::Completion* c) { f.Write(r, buf.data(), 4096, 0, c); });
  if (n != 4096) co_return absl::InternalError("short write");
  n = co_await io::Op([&](io::Completion* c) { f.Sync(r, true, c); });
  if (n != 0) co_return absl::InternalError("fsync");
  io::AlignedBuffer back(4096);
  n = co_await io::Op([&](io::Completion* c) { f.Read(r, back.data(), 4096, 0, c); });
  if (n != 4096) co_return absl::InternalError("short read");
  out->assign(reinterpret_cast<const char*>(back.data()), 5);
  co_return absl::OkStatus();
}

}  // namespace

TEST_CASE("tasks nest and return values", "[io][task]") {
  auto rt = StartRuntime(1);
  REQUIRE(rt);
  absl::StatusOr<int> v = io::BlockOn(*rt, 0, [] {
    return []() -> io::Task<absl::StatusOr<int>> { co_return co_await Sum(10); }();
  });
  REQUIRE(v.ok());
  CHECK(*v == 90);
}

TEST_CASE("a long loop of synchronously finishing awaits does not grow the stack",
          "[io][task]") {
  auto rt = StartRuntime(1);
  REQUIRE(rt);
  // Two million nested resumptions would overflow an 8 MiB stack without symmetric transfer.
  absl::StatusOr<int> v = io::BlockOn(*rt, 0, [] {
    return []() -> io::Task<absl::StatusOr<int>> {
      int64_t total = 0;
      for (int i = 0; i < 2'000'000; ++i) total += co_await Leaf(1);
      co_return static_cast<int>(total / 2);
    }();
  });
  REQUIRE(v.ok());
  CHECK(*v == 2'000'000);
}

TEST_CASE("Op awaits reactor file I/O", "[io][task]") {
  TempDir dir;
  auto rt = StartRuntime(1);
  REQUIRE(rt);
  auto f = io::File::Open(dir.File("f"), O_RDWR | O_CREAT, 0600);
  REQUIRE(f.ok());
  std::string got;
  absl::Status s = io::BlockOn(*rt, 0, [&] { return WriteThenRead(*f, &got); });
  REQUIRE(s.ok());
  CHECK(got == "hello");
}

TEST_CASE("IoBatch waits for every operation and keeps each result", "[io][task]") {
  TempDir dir;
  auto rt = StartRuntime(1);
  REQUIRE(rt);
  constexpr int kFiles = 6;
  std::vector<io::File> files;
  for (int i = 0; i < kFiles; ++i) {
    auto f = io::File::Open(dir.File("f" + std::to_string(i)), O_RDWR | O_CREAT, 0600);
    REQUIRE(f.ok());
    files.push_back(*std::move(f));
  }
  std::vector<io::AlignedBuffer> bufs;
  for (int i = 0; i < kFiles; ++i) {
    bufs.emplace_back(8192);
    std::memset(bufs.back().data(), 'a' + i, 8192);
  }
  std::vector<int32_t> results;
  absl::Status s = io::BlockOn(*rt, 0, [&]() -> io::Task<absl::Status> {
    io::Reactor& r = *io::Reactor::Current();
    io::IoBatch batch(kFiles + 1);
    for (int i = 0; i < kFiles; ++i) {
      batch.Add([&](io::Completion* c) { files[i].Write(r, bufs[i].data(), 8192, 0, c); });
    }
    // One that fails: a read from a closed descriptor.
    batch.Add([&](io::Completion* c) { r.Read(-1, bufs[0].data(), 1, 0, c); });
    co_await batch;
    for (size_t i = 0; i < batch.size(); ++i) results.push_back(batch.result(i));
    co_return absl::OkStatus();
  });
  REQUIRE(s.ok());
  REQUIRE(results.size() == kFiles + 1);
  for (int i = 0; i < kFiles; ++i) CHECK(results[i] == 8192);
  CHECK(results.back() == -EBADF);
  for (int i = 0; i < kFiles; ++i) {
    char c = 0;
    REQUIRE(files[i].PreadAll(&c, 1, 4000).ok());
    CHECK(c == 'a' + i);
  }
}

TEST_CASE("an empty IoBatch does not suspend", "[io][task]") {
  auto rt = StartRuntime(1);
  REQUIRE(rt);
  absl::Status s = io::BlockOn(*rt, 0, []() -> io::Task<absl::Status> {
    io::IoBatch batch(0);
    co_await batch;
    co_return absl::OkStatus();
  });
  CHECK(s.ok());
}

TEST_CASE("WhenAll runs tasks concurrently and keeps their order", "[io][task]") {
  auto rt = StartRuntime(1);
  REQUIRE(rt);
  std::vector<int> order;
  absl::StatusOr<std::vector<int>> v = io::BlockOn(*rt, 0, [&] {
    return [](std::vector<int>* trace) -> io::Task<absl::StatusOr<std::vector<int>>> {
      std::vector<io::Task<int>> tasks;
      for (int i = 0; i < 4; ++i) {
        tasks.push_back([](int id, std::vector<int>* t) -> io::Task<int> {
          // The later ones sleep less, so they finish first.
          co_await io::Sleep{absl::Milliseconds(4 * (4 - id))};
          t->push_back(id);
          co_return id * 10;
        }(i, trace));
      }
      // And one that never suspends.
      tasks.push_back(Leaf(21));
      co_return co_await io::WhenAll(std::move(tasks));
    }(&order);
  });
  REQUIRE(v.ok());
  CHECK(*v == std::vector<int>{0, 10, 20, 30, 42});
  CHECK(order == std::vector<int>{3, 2, 1, 0});
}

TEST_CASE("Spawn runs a detached task to its end; Yield lets others run", "[io][task]") {
  auto rt = StartRuntime(1);
  REQUIRE(rt);
  std::vector<std::string> trace;
  absl::Status s = io::BlockOn(*rt, 0, [&]() -> io::Task<absl::Status> {
    io::Spawn([](std::vector<std::string>* t) -> io::Task<void> {
      t->push_back("spawned-start");
      co_await io::Yield{};
      t->push_back("spawned-end");
    }(&trace));
    trace.push_back("parent");
    co_await io::Yield{};
    co_await io::Yield{};
    trace.push_back("parent-end");
    co_return absl::OkStatus();
  });
  REQUIRE(s.ok());
  CHECK(trace == std::vector<std::string>{"spawned-start", "parent", "spawned-end",
                                          "parent-end"});
}

TEST_CASE("BlockOn on a stopped runtime is Unavailable", "[io][task]") {
  auto rt = StartRuntime(1);
  REQUIRE(rt);
  rt->Stop();
  absl::Status s = io::BlockOn(*rt, 0, []() -> io::Task<absl::Status> {
    co_return absl::OkStatus();
  });
  CHECK(absl::IsUnavailable(s));
}

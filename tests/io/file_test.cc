#include "openlake/io/file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>

#include <catch2/catch.hpp>

#include "io/test_util.h"

#include "openlake/io/buffer.h"

using openlake::io::AlignedBuffer;
using openlake::io::File;
using openlake::io::Reactor;
using openlake::testing::StartRuntime;
using openlake::testing::TempDir;

namespace {
// Runs one asynchronous I/O on reactor 0 and returns its result.
int32_t RunIo(openlake::io::Runtime& rt,
              std::function<void(Reactor&, openlake::io::Completion*)> op) {
  std::promise<int32_t> p;
  rt.Post(0, [&] {
    Reactor& r = *Reactor::Current();
    op(r, r.Callback([&p](int32_t res) { p.set_value(res); }));
  });
  return p.get_future().get();
}
}  // namespace

TEST_CASE("aligned I/O goes O_DIRECT, unaligned falls back to buffered", "[io][file]") {
  TempDir dir;
  REQUIRE(!dir.path().empty());
  auto rt = StartRuntime(1);
  REQUIRE(rt);
  auto f = File::Open(dir.File("data"), O_RDWR | O_CREAT, 0600);
  REQUIRE(f.ok());
  REQUIRE(f->direct_fd() >= 0);  // /var/tmp is disk-backed here
  const uint32_t align = f->direct_alignment();
  CHECK((align == 512 || align == 4096));

  AlignedBuffer wbuf(64 << 10);
  for (size_t i = 0; i < wbuf.size(); ++i) wbuf.data()[i] = std::byte(i * 7 + 3);
  CHECK(f->CanDirect(wbuf.data(), wbuf.size(), 0));
  CHECK(!f->CanDirect(wbuf.data() + 1, 100, 0));
  CHECK(!f->CanDirect(wbuf.data(), wbuf.size(), 3));

  const int32_t w = RunIo(*rt, [&](Reactor& r, auto* c) {
    f->Write(r, wbuf.data(), static_cast<uint32_t>(wbuf.size()), 0, c);
  });
  REQUIRE(w == static_cast<int32_t>(wbuf.size()));
  CHECK(RunIo(*rt, [&](Reactor& r, auto* c) { f->Sync(r, false, c); }) == 0);

  // Aligned read (direct).
  AlignedBuffer rbuf(64 << 10);
  REQUIRE(RunIo(*rt, [&](Reactor& r, auto* c) {
            f->Read(r, rbuf.data(), static_cast<uint32_t>(rbuf.size()), 0, c);
          }) == static_cast<int32_t>(rbuf.size()));
  CHECK(std::memcmp(rbuf.data(), wbuf.data(), rbuf.size()) == 0);

  // Unaligned read (buffered) of an odd range sees the same bytes.
  std::vector<char> odd(1001);
  REQUIRE(RunIo(*rt, [&](Reactor& r, auto* c) { f->Read(r, odd.data(), 1001, 12345, c); }) == 1001);
  CHECK(std::memcmp(odd.data(), wbuf.data() + 12345, 1001) == 0);

  // Unaligned write then aligned (direct) read: the kernel keeps them coherent.
  const char msg[] = "hello, page cache";
  REQUIRE(RunIo(*rt, [&](Reactor& r, auto* c) { f->Write(r, msg, sizeof(msg), 4096 + 5, c); }) ==
          sizeof(msg));
  REQUIRE(RunIo(*rt, [&](Reactor& r, auto* c) { f->Read(r, rbuf.data(), 4096, 4096, c); }) == 4096);
  CHECK(std::memcmp(rbuf.data() + 5, msg, sizeof(msg)) == 0);

  CHECK(f->Size().value() == 64 << 10);
  CHECK(f->PreadAll(odd.data(), 10, (64 << 10) - 5).code() == absl::StatusCode::kOutOfRange);
}

TEST_CASE("AtomicWriteFileSync replaces a file whole and leaves no temporaries", "[io][file]") {
  TempDir dir;
  const std::string path = dir.File("meta");
  REQUIRE(openlake::io::AtomicWriteFileSync(path, std::string(100000, 'a'), 0640).ok());
  REQUIRE(openlake::io::AtomicWriteFileSync(path, "version two", 0640).ok());
  std::ifstream in(path);
  std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(got == "version two");
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++files;
  }
  CHECK(files == 1);
  CHECK((std::filesystem::status(path).permissions() & std::filesystem::perms::all) ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
         std::filesystem::perms::group_read));

  // A folder that does not exist: an error, nothing created.
  CHECK(openlake::io::AtomicWriteFileSync(dir.File("missing/x"), "data", 0600).code() ==
        absl::StatusCode::kNotFound);
  CHECK_FALSE(std::filesystem::exists(dir.File("missing")));
}

#include "kv/slab.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <catch2/catch.hpp>

#include "kv/layout.h"

using openlake::kv::SlabMapping;
using openlake::kv::ValidateSlabHeader;
namespace layout = openlake::kv::layout;

TEST_CASE("a new slab is an owner-only, size-sealed memfd with a valid header", "[kv][slab]") {
  auto s = SlabMapping::Create(64ull << 20, 4ull << 20);
  REQUIRE(s.ok());
  const layout::SlabHeader& h = (*s)->header();
  CHECK(h.magic == layout::kSlabMagic);
  CHECK(h.version == layout::kSlabVersion);
  CHECK(h.segments_offset == 2u << 20);
  CHECK(h.segment_count == 15);  // (64 - 2) / 4
  CHECK(h.total_bytes == (2u << 20) + 15 * (4u << 20));
  CHECK(h.owner_pid == static_cast<uint32_t>(getpid()));
  CHECK(h.instance_id != 0);
  struct stat st;
  REQUIRE(fstat((*s)->fd(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  // Nobody holding the descriptor can shrink or grow the slab.
  CHECK(ftruncate((*s)->fd(), 4096) != 0);
  CHECK(ftruncate((*s)->fd(), 1ull << 30) != 0);
  CHECK(ValidateSlabHeader(h, (*s)->size()).ok());
}

TEST_CASE("a client maps the same memory through the passed descriptor", "[kv][slab]") {
  auto s = *SlabMapping::Create(32ull << 20, 1ull << 20);
  auto c = SlabMapping::Attach(dup(s->fd()));
  REQUIRE(c.ok());
  CHECK((*c)->header().instance_id == s->header().instance_id);
  auto* a = static_cast<char*>(s->base()) + (5u << 20);
  auto* b = static_cast<char*>((*c)->base()) + (5u << 20);
  std::strcpy(a, "shared");
  CHECK(std::strcmp(b, "shared") == 0);
}

TEST_CASE("header validation rejects corrupt or foreign slabs", "[kv][slab]") {
  auto s = *SlabMapping::Create(32ull << 20, 1ull << 20);
  layout::SlabHeader h;
  std::memcpy(&h, &s->header(), sizeof(h));
  const uint64_t size = s->size();
  auto bad = [&](auto mutate) {
    layout::SlabHeader x = h;
    mutate(x);
    return ValidateSlabHeader(x, size);
  };
  CHECK(bad([](auto& x) { x.magic ^= 1; }).code() == absl::StatusCode::kInvalidArgument);
  CHECK(bad([](auto& x) { x.version = 99; }).code() == absl::StatusCode::kFailedPrecondition);
  CHECK(!bad([](auto& x) { x.total_bytes += 4096; }).ok());
  CHECK(!bad([](auto& x) { x.segment_count += 1; }).ok());
  CHECK(!bad([](auto& x) { x.segment_count = 0xffffffff; }).ok());
  CHECK(!bad([](auto& x) { x.segments_offset = 4096; }).ok());
  CHECK(!bad([](auto& x) { x.segments_offset = ~0ull - (1ull << 21) + 1; }).ok());
  CHECK(!bad([](auto& x) { x.segment_bytes = 0; }).ok());
  CHECK(!bad([](auto& x) { x.header_bytes = 12; }).ok());
  CHECK(!ValidateSlabHeader(h, 100).ok());
  // A descriptor that is not a slab.
  int fd = memfd_create("not-a-slab", MFD_CLOEXEC);
  REQUIRE(ftruncate(fd, 8192) == 0);
  CHECK(!SlabMapping::Attach(fd).ok());
}

TEST_CASE("slab geometry rules", "[kv][slab]") {
  CHECK(!SlabMapping::Create(1ull << 20, 1ull << 20).ok());  // no room for one segment
  CHECK(!SlabMapping::Create(64ull << 20, 1000).ok());       // unaligned segment size
  CHECK(layout::SlotBytesFor(100) == 128);
  CHECK(layout::SlotBytesFor(4096) == 4096);
  CHECK(layout::SlotBytesFor(65537) == 69632);
  CHECK(layout::SlotsPerSegment(1 << 20, 4096) == 252);
  CHECK(layout::SlotsPerSegment(64 << 20, 2 << 20) == 31);
  CHECK(layout::SlotsPerSegment(1 << 20, 2 << 20) == 0);
}

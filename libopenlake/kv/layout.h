// The shared-memory slab: plain-old-data structs at fixed offsets inside one memfd that the
// daemon creates and passes to clients over its Unix socket. Specified in prose in
// docs/kv-pool.md ("Slab format"); change the two together and bump kSlabVersion.
//
// Offsets, never pointers: each process maps the slab at its own address.
//
//   0                      SlabHeader (one 4 KiB page)
//   segments_offset        segment 0 (segment_bytes)
//   + i × segment_bytes    segment i
//
// A segment holds slots of one size (one size class). Its first bytes are a SegmentHeader and
// an array of SlotHeaders (one per slot), rounded up to 4 KiB; slot j's bytes start at
// data_offset + j × slot_bytes from the segment's start.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace openlake::kv::layout {

inline constexpr uint64_t kSlabMagic = 0x31424c53564b4c4fULL;  // "OLKVSLB1", little-endian
inline constexpr uint32_t kSlabVersion = 1;
inline constexpr uint32_t kSegmentMagic = 0x47534c4fU;  // "OLSG"
inline constexpr uint64_t kPage = 4096;
inline constexpr uint64_t kSegmentAlign = 2ull << 20;  // segment 0 starts on a 2 MiB boundary

struct SlabHeader {
  uint64_t magic;            // kSlabMagic
  uint32_t version;          // kSlabVersion
  uint32_t header_bytes;     // sizeof(SlabHeader) region: kPage
  uint64_t total_bytes;      // size of the whole slab (the memfd)
  uint64_t segment_bytes;    // size of every segment
  uint64_t segments_offset;  // offset of segment 0, a multiple of kSegmentAlign
  uint32_t segment_count;
  uint32_t owner_pid;    // the daemon that created it
  uint64_t instance_id;  // random per daemon start; clients check it on attach
  uint64_t created_unix_ms;
  uint8_t reserved[4096 - 64];
};
static_assert(sizeof(SlabHeader) == kPage);
static_assert(offsetof(SlabHeader, instance_id) == 48);

struct SegmentHeader {
  uint32_t magic;  // kSegmentMagic when formatted, 0 when the segment is unused
  uint32_t slot_count;
  uint64_t slot_bytes;   // size of every slot in this segment
  uint64_t data_offset;  // from the segment's start to slot 0, a multiple of kPage
  // Bumped each time the daemon (re)formats the segment for a size class.
  std::atomic<uint64_t> format_count;
  uint8_t reserved[32];
};
static_assert(sizeof(SegmentHeader) == 64);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

enum SlotState : uint8_t { kSlotFree = 0, kSlotReserved = 1, kSlotCommitted = 2 };

// Written only by the daemon. Clients read `generation` (acquire) after copying a block out:
// equal to the generation Lookup returned means the slot was not handed to anyone else while
// they copied. The other fields mirror the daemon's index for tools and debugging.
struct SlotHeader {
  std::atomic<uint64_t> generation;  // +1 every time the slot is reserved
  uint64_t checksum;                 // CRC-64 of the block, as the writer committed it
  uint32_t length;                   // block bytes
  uint32_t namespace_id;
  uint8_t state;  // SlotState
  uint8_t key_len;
  uint8_t reserved[6];
  uint8_t key[32];
};
static_assert(sizeof(SlotHeader) == 64);

inline SlabHeader* Header(void* base) { return static_cast<SlabHeader*>(base); }

inline std::byte* SegmentBase(void* base, const SlabHeader& h, uint32_t segment) {
  return static_cast<std::byte*>(base) + h.segments_offset + uint64_t{segment} * h.segment_bytes;
}

// Bytes of header area for a segment of `slots` slots.
inline uint64_t SegmentHeaderBytes(uint64_t slots) {
  return (sizeof(SegmentHeader) + slots * sizeof(SlotHeader) + kPage - 1) / kPage * kPage;
}

// Most slots of `slot_bytes` that fit in a segment of `segment_bytes` (0 when none fits).
inline uint32_t SlotsPerSegment(uint64_t segment_bytes, uint64_t slot_bytes) {
  uint64_t n = segment_bytes / slot_bytes;
  while (n > 0 && SegmentHeaderBytes(n) + n * slot_bytes > segment_bytes) --n;
  return static_cast<uint32_t>(n);
}

// Slot size for a block: 4 KiB multiples from 4 KiB up (O_DIRECT and DMA friendly), 64-byte
// multiples below.
inline uint64_t SlotBytesFor(uint64_t block_bytes) {
  const uint64_t align = block_bytes >= kPage ? kPage : 64;
  return (block_bytes + align - 1) / align * align;
}

}  // namespace openlake::kv::layout

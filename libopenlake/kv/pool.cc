#include "kv/pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "common/random.h"

#include "openlake/log.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::kv {

using layout::SlotHeader;

Pool::Pool(void* slab, PoolOptions options)
    : options_(options), base_(slab), header_(layout::Header(slab)) {
  segments_.resize(header_->segment_count);
  for (uint32_t i = header_->segment_count; i-- > 0;) free_segments_.push_back(i);
  if (options_.evict_sample == 0) options_.evict_sample = 1;
  RandomBytes(&scrub_state_, sizeof(scrub_state_));
}

inline Pool::SlotMeta* Pool::Meta(uint64_t slot) {
  const uint32_t seg = SegOf(slot);
  const uint32_t idx = IdxOf(slot);
  if (seg >= segments_.size() || idx >= segments_[seg].slots.size()) return nullptr;
  return &segments_[seg].slots[idx];
}

const Pool::SlotMeta* Pool::Meta(uint64_t slot) const {
  return const_cast<Pool*>(this)->Meta(slot);
}

SlotHeader* Pool::Shm(uint64_t slot) {
  std::byte* seg = layout::SegmentBase(base_, *header_, SegOf(slot));
  return reinterpret_cast<SlotHeader*>(seg + sizeof(layout::SegmentHeader)) + IdxOf(slot);
}

inline uint64_t Pool::OffsetOf(uint64_t slot) const {
  const Segment& s = segments_[SegOf(slot)];
  return s.data_offset + uint64_t{IdxOf(slot)} * s.slot_bytes;
}

// ---- Namespaces ------------------------------------------------------------------------------

absl::StatusOr<Namespace> Pool::OpenNamespace(std::string_view name, const LayoutFingerprint& fp,
                                              uint32_t block_bytes, Caller caller) {
  if (name.empty() || name.size() > 256) {
    return absl::InvalidArgumentError("namespace name must be 1..256 bytes");
  }
  if (block_bytes < kMinBlockBytes) {
    return absl::InvalidArgumentError(
        StrCat("block size ", block_bytes, " is below the minimum of ", kMinBlockBytes));
  }
  const uint64_t slot_bytes = layout::SlotBytesFor(block_bytes);
  if (layout::SlotsPerSegment(header_->segment_bytes, slot_bytes) == 0) {
    return absl::InvalidArgumentError(StrCat("block size ", block_bytes,
                                             " does not fit a slab segment of ",
                                             header_->segment_bytes, " bytes"));
  }
  if (auto it = ns_by_name_.find(std::string(name)); it != ns_by_name_.end()) {
    const NamespaceState& st = namespaces_.at(it->second);
    if (st.fp != fp) {
      return absl::FailedPreconditionError(
          StrCat("namespace '", name, "' exists with another layout fingerprint (", fp.Diff(st.fp),
                 "); a different model or layout must use its own namespace"));
    }
    if (st.ns.block_bytes != block_bytes) {
      return absl::FailedPreconditionError(StrCat("namespace '", name, "' has blocks of ",
                                                  st.ns.block_bytes, " bytes, not ", block_bytes));
    }
    return st.ns;
  }
  NamespaceState st;
  st.ns.id = next_ns_id_++;
  st.ns.digest = fp.Digest();
  st.ns.name = std::string(name);
  st.ns.block_bytes = block_bytes;
  st.ns.slot_bytes = slot_bytes;
  st.fp = fp;
  st.cls = ClassFor(slot_bytes);
  st.owner = caller.admin ? options_.default_owner : caller.uid;
  ns_by_name_.emplace(st.ns.name, st.ns.id);
  Namespace out = st.ns;
  namespaces_.emplace(out.id, std::move(st));
  return out;
}

absl::StatusOr<Namespace> Pool::FindNamespace(std::string_view name,
                                              std::string* fingerprint) const {
  auto it = ns_by_name_.find(std::string(name));
  if (it == ns_by_name_.end()) {
    return absl::NotFoundError(StrCat("no namespace named '", name, "'"));
  }
  const NamespaceState& st = namespaces_.at(it->second);
  if (fingerprint != nullptr) *fingerprint = st.fp.Describe();
  return st.ns;
}

absl::StatusOr<Pool::NamespaceState*> Pool::Check(NsRef ref) {
  auto it = namespaces_.find(ref.id);
  if (it == namespaces_.end()) {
    return absl::NotFoundError(StrCat("no namespace with id ", ref.id, "; open it first"));
  }
  if (it->second.ns.digest != ref.digest) {
    return absl::FailedPreconditionError(
        StrCat("layout fingerprint mismatch for namespace '", it->second.ns.name,
               "': the request's digest ", absl::Hex(ref.digest), " is not the namespace's ",
               absl::Hex(it->second.ns.digest), " (", it->second.fp.Describe(), ")"));
  }
  return &it->second;
}

absl::Status Pool::MayWrite(NsRef ref, Caller caller) const {
  OL_ASSIGN_OR_RETURN(const NamespaceState* ns, Check(ref));
  if (caller.admin || caller.uid == ns->owner) return absl::OkStatus();
  return absl::PermissionDeniedError(StrCat("namespace '", ns->ns.name, "' belongs to uid ",
                                            ns->owner, "; uid ", caller.uid,
                                            " may read it but not change it"));
}

absl::StatusOr<const Pool::NamespaceState*> Pool::Check(NsRef ref) const {
  OL_ASSIGN_OR_RETURN(NamespaceState * st, const_cast<Pool*>(this)->Check(ref));
  return st;
}

int32_t Pool::ClassFor(uint64_t slot_bytes) {
  for (size_t i = 0; i < classes_.size(); ++i) {
    if (classes_[i].slot_bytes == slot_bytes) return static_cast<int32_t>(i);
  }
  SizeClass c;
  c.slot_bytes = slot_bytes;
  c.slots_per_segment = layout::SlotsPerSegment(header_->segment_bytes, slot_bytes);
  classes_.push_back(std::move(c));
  return static_cast<int32_t>(classes_.size() - 1);
}

// ---- Segments and slots ------------------------------------------------------------------------

void Pool::FormatSegment(uint32_t seg, int32_t cls) {
  SizeClass& c = classes_[cls];
  Segment& s = segments_[seg];
  s.cls = cls;
  s.slot_count = c.slots_per_segment;
  s.slot_bytes = c.slot_bytes;
  const uint64_t seg_off = header_->segments_offset + uint64_t{seg} * header_->segment_bytes;
  s.data_offset = seg_off + layout::SegmentHeaderBytes(s.slot_count);
  // Generations continue past every earlier format, so a stale (slot, generation) pair from a
  // reader whose lease lapsed never matches again.
  uint64_t gen_base = 0;
  for (const SlotMeta& old : s.slots) gen_base = std::max(gen_base, old.generation + 1);
  s.slots.assign(s.slot_count, SlotMeta{});
  s.free.clear();
  for (uint32_t i = s.slot_count; i-- > 0;) s.free.push_back(i);
  s.busy = 0;
  s.stamp = 0;
  s.resident = true;
  auto* sh = reinterpret_cast<layout::SegmentHeader*>(layout::SegmentBase(base_, *header_, seg));
  sh->magic = layout::kSegmentMagic;
  sh->slot_count = s.slot_count;
  sh->slot_bytes = s.slot_bytes;
  sh->data_offset = s.data_offset - seg_off;
  sh->format_count.fetch_add(1, std::memory_order_release);
  auto* slots = reinterpret_cast<SlotHeader*>(sh + 1);
  for (uint32_t i = 0; i < s.slot_count; ++i) {
    s.slots[i].generation = gen_base;
    slots[i].generation.store(gen_base, std::memory_order_relaxed);
    slots[i].state = layout::kSlotFree;
    slots[i].key_len = 0;
  }
  c.segments.push_back(seg);
  c.with_free.push_back(seg);
  s.listed = true;
}

void Pool::ReleaseSegment(uint32_t seg) {
  Segment& s = segments_[seg];
  SizeClass& c = classes_[s.cls];
  const auto pos = std::find(c.segments.begin(), c.segments.end(), seg) - c.segments.begin();
  c.segments.erase(c.segments.begin() + pos);
  // Keep the clock hand on the slot it was about to look at.
  if (c.hand_seg > static_cast<size_t>(pos)) {
    --c.hand_seg;
  } else if (c.hand_seg == static_cast<size_t>(pos)) {
    c.hand_idx = 0;
  }
  s.cls = -1;
  s.free.clear();
  s.listed = false;
  s.freed_ns = last_now_ns_;
  reinterpret_cast<layout::SegmentHeader*>(layout::SegmentBase(base_, *header_, seg))->magic = 0;
  free_segments_.push_back(seg);
}

size_t Pool::TrimFreeSegments(int64_t now_ns) {
  size_t trimmed = 0;
  for (uint32_t seg : free_segments_) {
    Segment& s = segments_[seg];
    if (!s.resident || now_ns - s.freed_ns < options_.trim_after_ns) continue;
    // The pool emptied (a Reset, a burst that ended): give the memory back rather than hold the
    // high-water mark. A reader whose pin lapsed now sees zeroes and a generation of 0, which
    // fail its checks.
    madvise(layout::SegmentBase(base_, *header_, seg), header_->segment_bytes, MADV_REMOVE);
    s.resident = false;
    ++trimmed;
  }
  return trimmed;
}

uint64_t Pool::Obtainable(int32_t cls) const {
  const SizeClass& c = classes_[cls];
  uint64_t n = c.evictable + uint64_t{c.slots_per_segment} * free_segments_.size();
  for (uint32_t seg : c.segments) n += segments_[seg].free.size();
  for (const Segment& s : segments_) {
    if (s.cls >= 0 && s.cls != cls && s.busy == 0) n += c.slots_per_segment;
  }
  return n;
}

uint64_t Pool::PopFree(int32_t cls) {
  SizeClass& c = classes_[cls];
  while (!c.with_free.empty()) {
    const uint32_t seg = c.with_free.back();
    Segment& s = segments_[seg];
    if (s.cls != cls || s.free.empty()) {
      c.with_free.pop_back();
      if (s.cls == cls) s.listed = false;
      continue;
    }
    const uint32_t idx = s.free.back();
    s.free.pop_back();
    return SlotId(seg, idx);
  }
  return kNil;
}

uint64_t Pool::AcquireSlot(int32_t cls) {
  // Each step that frees room guarantees the next pass finds a free slot or a free segment.
  for (int pass = 0; pass < 4; ++pass) {
    // 1. A free slot in a segment of this class.
    if (uint64_t slot = PopFree(cls); slot != kNil) return slot;
    // 2. A free segment (the most recently freed: its pages are likeliest still resident).
    if (!free_segments_.empty()) {
      const uint32_t seg = free_segments_.back();
      free_segments_.pop_back();
      FormatSegment(seg, cls);
      continue;
    }
    // 3. Evict within the class; 4. reclaim the coldest wholly evictable segment of another.
    if (!EvictOne(cls) && !ReclaimSegment(cls)) return kNil;
  }
  return kNil;
}

bool Pool::EvictOne(int32_t cls) {
  SizeClass& c = classes_[cls];
  if (c.evictable == 0 || c.segments.empty()) return false;
  // The clock hand walks the class's slots in order; of the next `evict_sample` candidates it
  // passes, the oldest goes, the deepest among equally old. At most one full turn: evictable > 0
  // guarantees a candidate.
  uint64_t victim = kNil;
  const SlotMeta* best = nullptr;
  uint32_t found = 0;
  const uint64_t limit = uint64_t{c.slots_per_segment} * c.segments.size();
  for (uint64_t scanned = 0; scanned < limit && found < options_.evict_sample;) {
    if (c.hand_seg >= c.segments.size()) {
      c.hand_seg = 0;
      c.hand_idx = 0;
    }
    const uint32_t seg = c.segments[c.hand_seg];
    Segment& s = segments_[seg];
    if (c.hand_idx >= s.slot_count) {
      ++c.hand_seg;
      c.hand_idx = 0;
      continue;
    }
    const uint32_t idx = c.hand_idx++;
    ++scanned;
    const SlotMeta& m = s.slots[idx];
    if (m.state != State::kCommitted || m.pins != 0) continue;
    ++found;
    // Oldest first; among equally old, one the disk holds (nothing is lost), then the deepest.
    if (best == nullptr || m.stamp < best->stamp ||
        (m.stamp == best->stamp && (m.clean != best->clean ? m.clean : m.depth > best->depth))) {
      best = &m;
      victim = SlotId(seg, idx);
    }
  }
  if (victim == kNil) return false;
  ++counters_.evictions;
  if (options_.spill && !Meta(victim)->clean) ++counters_.spill_drops;
  Unbind(victim);  // unpinned, so the slot is free now
  return true;
}

bool Pool::ReclaimSegment(int32_t cls) {
  int64_t best = -1;
  for (uint32_t i = 0; i < segments_.size(); ++i) {
    const Segment& s = segments_[i];
    if (s.cls < 0 || s.cls == cls || s.busy != 0) continue;
    if (best < 0 || s.stamp < segments_[best].stamp) best = i;
  }
  if (best < 0) return false;
  const auto seg = static_cast<uint32_t>(best);
  Segment& s = segments_[seg];
  for (uint32_t i = 0; i < s.slot_count && s.cls >= 0; ++i) {
    if (s.slots[i].state == State::kCommitted) {
      ++counters_.evictions;
      if (options_.spill && !s.slots[i].clean) ++counters_.spill_drops;
      Unbind(SlotId(seg, i));  // the last one releases the segment to free_segments_
    }
  }
  OL_CHECK(s.cls == -1) << "reclaimed segment " << seg << " still assigned";
  return true;
}

void Pool::FreeSlot(uint64_t slot) {
  SlotMeta* m = Meta(slot);
  m->state = State::kFree;
  m->pins = 0;
  m->session = 0;
  Shm(slot)->state = layout::kSlotFree;
  Segment& s = segments_[SegOf(slot)];
  s.free.push_back(IdxOf(slot));
  if (s.free.size() == s.slot_count) {
    ReleaseSegment(SegOf(slot));
    return;
  }
  if (!s.listed) {
    classes_[s.cls].with_free.push_back(SegOf(slot));
    s.listed = true;
  }
}

void Pool::Unbind(uint64_t slot) {
  SlotMeta* m = Meta(slot);
  OL_DCHECK(m->state == State::kCommitted);
  index_.erase(IndexKey{m->ns, m->key});
  if (auto it = namespaces_.find(m->ns); it != namespaces_.end()) --it->second.blocks;
  --counters_.committed_blocks;
  if (options_.spill && !m->clean) --dirty_count_;
  Shm(slot)->state = layout::kSlotFree;
  if (m->pins > 0) {
    m->state = State::kOrphan;  // readers keep it until they release
  } else {
    --classes_[segments_[SegOf(slot)].cls].evictable;
    FreeSlot(slot);
  }
}

inline void Pool::Touch(SlotMeta* m, uint64_t slot, int64_t stamp) {
  m->stamp = stamp;
  Segment& s = segments_[SegOf(slot)];
  if (stamp > s.stamp) s.stamp = stamp;
}

inline void Pool::Pin(uint64_t slot) {
  SlotMeta* m = Meta(slot);
  if (m->pins++ == 0) {
    ++pinned_;
    Segment& s = segments_[SegOf(slot)];
    ++s.busy;
    if (m->state == State::kCommitted) --classes_[s.cls].evictable;
  }
}

inline void Pool::Unpin(uint64_t slot) {
  SlotMeta* m = Meta(slot);
  OL_DCHECK(m->pins > 0);
  if (--m->pins > 0) return;
  --pinned_;
  Segment& s = segments_[SegOf(slot)];
  --s.busy;
  if (m->state == State::kCommitted) {
    ++classes_[s.cls].evictable;
  } else if (m->state == State::kOrphan) {
    FreeSlot(slot);
  }
}

void Pool::EndPins(Session& sess, PinBatch& batch) {
  (void)sess;
  for (uint64_t slot : batch.slots) Unpin(slot);
}

void Pool::EndReservation(Session& sess, uint64_t slot) {
  sess.reserved_bytes -= segments_[SegOf(slot)].slot_bytes;
  --reserved_;
  --segments_[SegOf(slot)].busy;
  FreeSlot(slot);
}

void Pool::Scrub(uint64_t slot) {
  // splitmix64: a stale block's first word becomes 8 bytes nobody without the slab has seen. A
  // CRC-64 catches every change within 64 bits, so the old checksum no longer matches.
  scrub_state_ += 0x9e3779b97f4a7c15ULL;
  uint64_t z = scrub_state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  std::memcpy(static_cast<std::byte*>(base_) + OffsetOf(slot), &z, sizeof(z));
}

// ---- Operations ---------------------------------------------------------------------------------

absl::StatusOr<std::vector<SlotGrant>> Pool::Reserve(uint64_t session, NsRef ref, uint32_t count,
                                                     bool allow_partial, int64_t now_ns) {
  OL_ASSIGN_OR_RETURN(NamespaceState * ns, Check(ref));
  if (count == 0) return std::vector<SlotGrant>{};
  const uint64_t max_slots = uint64_t{classes_[ns->cls].slots_per_segment} * header_->segment_count;
  if (count > max_slots && allow_partial) count = static_cast<uint32_t>(max_slots);
  if (count > max_slots) {
    return absl::InvalidArgumentError(StrCat("cannot reserve ", count,
                                             " slots: the slab holds at most ", max_slots,
                                             " blocks of this size"));
  }
  last_now_ns_ = now_ns;
  Session& sess = sessions_[session];
  if (options_.max_reserved_bytes_per_session > 0 && session != kInternalSession) {
    const uint64_t cap = options_.max_reserved_bytes_per_session;
    const uint64_t room =
        sess.reserved_bytes < cap ? (cap - sess.reserved_bytes) / ns->ns.slot_bytes : 0;
    if (count > room && allow_partial && room > 0) count = static_cast<uint32_t>(room);
    if (count > room) {
      ++counters_.reserve_failures;
      return absl::ResourceExhaustedError(
          StrCat("this client may hold at most ", cap, " bytes of the KV pool reserved (",
                 sess.reserved_bytes, " held now; ", count, " slots of ", ns->ns.slot_bytes,
                 " bytes asked): commit or release first, or reserve in smaller batches"));
    }
  }
  // All or nothing: find out first whether `count` can be had, so a refusal evicts nothing.
  if (!allow_partial && Obtainable(ns->cls) < count) {
    ExpireLeases(now_ns);
    if (Obtainable(ns->cls) < count) {
      ++counters_.reserve_failures;
      return absl::ResourceExhaustedError(StrCat(
          "KV pool full: ", Obtainable(ns->cls), " of ", count, " slots of ", ns->ns.slot_bytes,
          " bytes could be had; every other slot is pinned by readers or reserved by writers"));
    }
  }
  std::vector<uint64_t> got;
  got.reserve(count);
  bool swept = false;
  while (got.size() < count) {
    const uint64_t slot = AcquireSlot(ns->cls);
    if (slot != kNil) {
      got.push_back(slot);
      // Mark it at once so eviction and reclaim below cannot take it back.
      SlotMeta* m = Meta(slot);
      m->state = State::kReserved;
      ++segments_[SegOf(slot)].busy;
      continue;
    }
    if (!swept && ExpireLeases(now_ns) > 0) {
      swept = true;
      continue;
    }
    break;
  }
  if (got.size() < count && (!allow_partial || got.empty())) {
    for (uint64_t slot : got) {
      --segments_[SegOf(slot)].busy;
      FreeSlot(slot);
    }
    ++counters_.reserve_failures;
    return absl::ResourceExhaustedError(StrCat(
        "KV pool full: ", got.size(), " of ", count, " slots of ", ns->ns.slot_bytes,
        " bytes could be had; every other slot is pinned by readers or reserved by writers"));
  }
  std::vector<SlotGrant> out;
  out.reserve(got.size());
  const int64_t deadline = now_ns + options_.lease_ns;
  for (uint64_t slot : got) {
    SlotMeta* m = Meta(slot);
    m->ns = ns->ns.id;
    m->session = session;
    m->deadline_ns = deadline;
    m->pins = 0;
    m->clean = false;
    m->key = BlockKey();
    ++m->generation;
    SlotHeader* h = Shm(slot);
    h->state = layout::kSlotReserved;
    h->namespace_id = ns->ns.id;
    // Release: a reader that sees the new generation sees the slot as no longer theirs.
    h->generation.store(m->generation, std::memory_order_release);
    Scrub(slot);
    sess.reservations.insert(slot);
    sess.reserved_bytes += segments_[SegOf(slot)].slot_bytes;
    ++reserved_;
    out.push_back(SlotGrant{slot, OffsetOf(slot), m->generation});
  }
  return out;
}

void Pool::Bind(uint64_t session, NamespaceState* ns, const CommitEntry& e, int64_t stamp,
                bool clean) {
  Session& sess = sessions_[session];
  auto [it, inserted] = index_.try_emplace(IndexKey{ns->ns.id, e.key}, e.slot);
  if (!inserted) {
    const uint64_t old = it->second;
    Unbind(old);  // erases the index entry: insert again
    index_.emplace(IndexKey{ns->ns.id, e.key}, e.slot);
  }
  SlotMeta* m = Meta(e.slot);
  m->state = State::kCommitted;
  m->key = e.key;
  m->checksum = e.checksum;
  m->depth = e.depth;
  m->session = 0;
  m->clean = clean;
  Touch(m, e.slot, stamp);
  SlotHeader* h = Shm(e.slot);
  h->checksum = e.checksum;
  h->length = ns->ns.block_bytes;
  h->namespace_id = ns->ns.id;
  h->key_len = static_cast<uint8_t>(e.key.size());
  std::memcpy(h->key, e.key.bytes().data(), e.key.size());
  h->state = layout::kSlotCommitted;
  sess.reservations.erase(e.slot);
  --reserved_;
  Segment& s = segments_[SegOf(e.slot)];
  sess.reserved_bytes -= s.slot_bytes;
  --s.busy;
  ++classes_[s.cls].evictable;
  ++ns->blocks;
  ++counters_.committed_blocks;
  if (options_.spill && !clean) {
    ++dirty_count_;
    dirty_.emplace_back(e.slot, m->generation);
    // Entries of blocks since removed or overwritten leave only when the spiller passes them;
    // when nobody spills for a while (spill off until shutdown), drop them here, amortised.
    if (dirty_.size() > 4 * dirty_count_ + 4096) {
      std::erase_if(dirty_, [this](const std::pair<uint64_t, uint64_t>& d) {
        const SlotMeta* sm = Meta(d.first);
        return sm == nullptr || sm->state != State::kCommitted || sm->generation != d.second ||
               sm->clean;
      });
    }
  }
}

absl::Status Pool::Commit(uint64_t session, NsRef ref, absl::Span<const CommitEntry> entries,
                          int64_t now_ns) {
  OL_ASSIGN_OR_RETURN(NamespaceState * ns, Check(ref));
  // Validate everything first: the batch becomes visible whole or not at all.
  absl::flat_hash_set<uint64_t> seen;
  absl::flat_hash_set<std::string_view> seen_keys;
  for (size_t i = 0; i < entries.size(); ++i) {
    const CommitEntry& e = entries[i];
    const SlotMeta* m = Meta(e.slot);
    if (m == nullptr || m->state != State::kReserved || m->session != session) {
      return absl::FailedPreconditionError(
          StrCat("commit entry ", i, ": slot ", absl::Hex(e.slot),
                 " is not reserved by this client (its reservation may have expired or been "
                 "released); nothing in this batch was committed"));
    }
    if (m->ns != ns->ns.id) {
      return absl::FailedPreconditionError(StrCat("commit entry ", i, ": slot ", absl::Hex(e.slot),
                                                  " was reserved for another namespace"));
    }
    if (m->deadline_ns <= now_ns) {
      return absl::FailedPreconditionError(StrCat("commit entry ", i, ": the reservation of slot ",
                                                  absl::Hex(e.slot),
                                                  " expired; nothing in this batch was committed"));
    }
    if (e.key.empty()) {
      return absl::InvalidArgumentError(StrCat("commit entry ", i, ": empty key"));
    }
    if (!seen.insert(e.slot).second) {
      return absl::InvalidArgumentError(
          StrCat("commit entry ", i, ": slot ", absl::Hex(e.slot), " appears twice in the batch"));
    }
    if (!seen_keys.insert(e.key.bytes()).second) {
      return absl::InvalidArgumentError(
          StrCat("commit entry ", i, ": its key appears twice in the batch"));
    }
  }
  last_now_ns_ = now_ns;
  const int64_t stamp = Stamp(now_ns);
  for (const CommitEntry& e : entries) {
    Bind(session, ns, e, stamp, /*clean=*/false);
    ++counters_.commits;
    counters_.bytes_in += ns->ns.block_bytes;
  }
  return absl::OkStatus();
}

absl::StatusOr<Pins> Pool::Lookup(uint64_t session, NsRef ref, absl::Span<const BlockKey> keys,
                                  int64_t now_ns, bool count) {
  OL_ASSIGN_OR_RETURN(NamespaceState * ns, Check(ref));
  last_now_ns_ = now_ns;
  if (count) {
    ++counters_.lookups;
    counters_.lookup_keys += keys.size();
  }
  Pins out;
  // Sized for every key and cut to the hits at the end: no capacity checks per key.
  out.hits.resize(keys.size());
  const int64_t stamp = Stamp(now_ns);
  PinBatch batch;
  batch.deadline_ns = now_ns + options_.lease_ns;
  batch.slots.resize(keys.size());
  size_t n = 0;
  // An index far larger than the cache (a full pool of small blocks) misses in it on every
  // probe: then prefetch a few keys ahead. A smaller one is cache-resident, where prefetching
  // only hashes every key twice.
  constexpr size_t kAhead = 8;
  const bool prefetch = index_.size() > kPrefetchAbove;
  if (prefetch) {
    for (size_t i = 0; i < std::min(kAhead, keys.size()); ++i) {
      index_.prefetch(IndexKey{ns->ns.id, keys[i]});
    }
  }
  const IndexKeyHash hash;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (prefetch && i + kAhead < keys.size()) {
      index_.prefetch(IndexKey{ns->ns.id, keys[i + kAhead]});
    }
    const IndexKey k{ns->ns.id, keys[i]};
    auto it = index_.find(k, hash(k));
    if (it == index_.end()) break;
    const uint64_t slot = it->second;
    SlotMeta* m = Meta(slot);
    Pin(slot);
    Touch(m, slot, stamp);
    batch.slots[n] = slot;
    out.hits[n] = SlotHit{slot, OffsetOf(slot), m->generation, m->checksum};
    ++n;
  }
  out.hits.resize(n);
  batch.slots.resize(n);
  if (count) {
    counters_.hits += out.hits.size();
    counters_.misses += keys.size() - out.hits.size();
    counters_.bytes_out += out.hits.size() * uint64_t{ns->ns.block_bytes};
  }
  if (!out.hits.empty()) {
    out.batch = next_pin_batch_++;
    sessions_[session].pins.emplace(out.batch, std::move(batch));
  }
  return out;
}

absl::Status Pool::Release(uint64_t session, absl::Span<const uint64_t> pin_batches,
                           absl::Span<const uint64_t> reserved) {
  auto sit = sessions_.find(session);
  size_t unknown = 0;
  for (uint64_t slot : reserved) {
    if (sit == sessions_.end() || sit->second.reservations.erase(slot) == 0) {
      ++unknown;
      continue;
    }
    EndReservation(sit->second, slot);
  }
  for (uint64_t id : pin_batches) {
    if (sit == sessions_.end()) {
      ++unknown;
      continue;
    }
    auto pit = sit->second.pins.find(id);
    if (pit == sit->second.pins.end()) {
      ++unknown;
      continue;
    }
    EndPins(sit->second, pit->second);
    sit->second.pins.erase(pit);
  }
  if (unknown > 0) {
    return absl::InvalidArgumentError(
        StrCat(unknown,
               " released pin batches or reservations were not held by this client "
               "(already released, or their lease expired); the others were released"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ExistsResult> Pool::Exists(NsRef ref, absl::Span<const BlockKey> keys) const {
  OL_ASSIGN_OR_RETURN(const NamespaceState* ns, Check(ref));
  ExistsResult r;
  r.present.resize(keys.size());
  bool prefix = true;
  for (size_t i = 0; i < keys.size(); ++i) {
    r.present[i] = index_.contains(IndexKey{ns->ns.id, keys[i]});
    if (prefix && r.present[i]) {
      ++r.prefix;
    } else {
      prefix = false;
    }
  }
  return r;
}

absl::Status Pool::Reset(NsRef ref) {
  OL_ASSIGN_OR_RETURN(NamespaceState * ns, Check(ref));
  std::vector<uint64_t> victims;
  for (const auto& [k, slot] : index_) {
    if (k.ns == ns->ns.id) victims.push_back(slot);
  }
  for (uint64_t slot : victims) Unbind(slot);
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> Pool::Remove(NsRef ref, absl::Span<const BlockKey> keys) {
  OL_ASSIGN_OR_RETURN(NamespaceState * ns, Check(ref));
  uint32_t removed = 0;
  for (const BlockKey& k : keys) {
    auto it = index_.find(IndexKey{ns->ns.id, k});
    if (it == index_.end()) continue;
    Unbind(it->second);
    ++removed;
  }
  return removed;
}

void Pool::CloseSession(uint64_t session) {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return;
  Session sess = std::move(it->second);
  sessions_.erase(it);
  for (uint64_t slot : sess.reservations) EndReservation(sess, slot);
  for (auto& [id, batch] : sess.pins) EndPins(sess, batch);
}

size_t Pool::ExpireLeases(int64_t now_ns) {
  size_t ended = 0;
  std::vector<uint64_t> lapsed;
  for (auto& [id, sess] : sessions_) {
    lapsed.clear();
    for (const auto& [batch_id, batch] : sess.pins) {
      if (batch.deadline_ns <= now_ns) lapsed.push_back(batch_id);
    }
    for (uint64_t batch_id : lapsed) {
      auto pit = sess.pins.find(batch_id);
      counters_.expired_pins += pit->second.slots.size();
      ended += pit->second.slots.size();
      EndPins(sess, pit->second);
      sess.pins.erase(pit);
    }
    lapsed.clear();
    for (uint64_t slot : sess.reservations) {
      if (Meta(slot)->deadline_ns <= now_ns) lapsed.push_back(slot);
    }
    for (uint64_t slot : lapsed) {
      sess.reservations.erase(slot);
      EndReservation(sess, slot);
      ++counters_.expired_reservations;
      ++ended;
    }
  }
  return ended;
}

// ---- The disk tier's side ----------------------------------------------------------------------

size_t Pool::TakeSpill(size_t max_blocks, uint64_t max_bytes, std::vector<SpillBlock>* out) {
  size_t taken = 0;
  uint64_t bytes = 0;
  while (!dirty_.empty() && taken < max_blocks) {
    const auto [slot, gen] = dirty_.front();
    const SlotMeta* m = Meta(slot);
    if (m == nullptr || m->state != State::kCommitted || m->generation != gen || m->clean ||
        spill_pins_.contains(slot)) {
      dirty_.pop_front();  // stale: removed, overwritten, cleaned or already being written
      continue;
    }
    const uint64_t slot_bytes = segments_[SegOf(slot)].slot_bytes;
    if (taken > 0 && bytes + slot_bytes > max_bytes) break;
    dirty_.pop_front();
    Pin(slot);
    ++spill_pins_[slot];
    const NamespaceState& ns = namespaces_.at(m->ns);
    SpillBlock b;
    b.slot = slot;
    b.generation = gen;
    b.offset = OffsetOf(slot);
    b.slot_bytes = slot_bytes;
    b.ns = m->ns;
    b.block_bytes = ns.ns.block_bytes;
    b.depth = m->depth;
    b.checksum = m->checksum;
    b.key = m->key;
    out->push_back(b);
    ++taken;
    bytes += slot_bytes;
  }
  return taken;
}

bool Pool::SpillCurrent(uint64_t slot, uint64_t generation) const {
  const SlotMeta* m = Meta(slot);
  return m != nullptr && m->state == State::kCommitted && m->generation == generation;
}

void Pool::EndSpill(uint64_t slot, uint64_t generation, bool stored) {
  auto it = spill_pins_.find(slot);
  if (it == spill_pins_.end()) return;
  if (--it->second == 0) spill_pins_.erase(it);
  SlotMeta* m = Meta(slot);
  if (m->state == State::kCommitted && m->generation == generation && !m->clean) {
    if (stored) {
      m->clean = true;
      --dirty_count_;
    } else {
      dirty_.emplace_back(slot, generation);
    }
  }
  Unpin(slot);
}

bool Pool::MarkClean(uint32_t ns, const BlockKey& key, uint64_t checksum) {
  auto it = index_.find(IndexKey{ns, key});
  if (it == index_.end()) return false;
  SlotMeta* m = Meta(it->second);
  if (m->checksum != checksum) return false;
  if (!m->clean && options_.spill) --dirty_count_;
  m->clean = true;
  return true;
}

absl::StatusOr<uint32_t> Pool::Promote(uint64_t session, NsRef ref,
                                       absl::Span<const CommitEntry> entries, int64_t now_ns) {
  OL_ASSIGN_OR_RETURN(NamespaceState * ns, Check(ref));
  last_now_ns_ = now_ns;
  const int64_t stamp = Stamp(now_ns);
  uint32_t bound = 0;
  auto sit = sessions_.find(session);
  for (const CommitEntry& e : entries) {
    const SlotMeta* m = Meta(e.slot);
    if (sit == sessions_.end() || m == nullptr || m->state != State::kReserved ||
        m->session != session || !sit->second.reservations.contains(e.slot)) {
      continue;  // its reservation lapsed meanwhile
    }
    if (index_.contains(IndexKey{ns->ns.id, e.key})) {
      // A writer committed the key while it was read back: theirs stays.
      sit->second.reservations.erase(e.slot);
      EndReservation(sit->second, e.slot);
      continue;
    }
    Bind(session, ns, e, stamp, /*clean=*/true);
    ++bound;
  }
  return bound;
}

void Pool::CountTierHits(uint64_t n, uint32_t block_bytes) {
  n = std::min(n, counters_.misses);
  counters_.hits += n;
  counters_.misses -= n;
  counters_.bytes_out += n * block_bytes;
}

uint32_t Pool::OwnerOf(uint32_t id) const {
  auto it = namespaces_.find(id);
  return it == namespaces_.end() ? 0 : it->second.owner;
}

uint32_t Pool::BlockBytesOf(uint32_t id) const {
  auto it = namespaces_.find(id);
  return it == namespaces_.end() ? 0 : it->second.ns.block_bytes;
}

const Namespace* Pool::NamespaceOf(uint32_t id) const {
  auto it = namespaces_.find(id);
  return it == namespaces_.end() ? nullptr : &it->second.ns;
}

PoolStats Pool::Stats() const {
  PoolStats s = counters_;
  s.capacity_bytes = header_->total_bytes;
  s.segment_bytes = header_->segment_bytes;
  s.segments_total = header_->segment_count;
  s.segments_used = static_cast<uint32_t>(header_->segment_count - free_segments_.size());
  s.reserved_slots = reserved_;
  s.pinned_slots = pinned_;
  s.dirty_blocks = dirty_count_;
  s.namespaces = namespaces_.size();
  s.sessions = sessions_.size();
  s.used_bytes = 0;
  for (const auto& [id, ns] : namespaces_) {
    s.used_bytes += ns.blocks * ns.ns.slot_bytes;
    s.per_namespace.push_back(
        NamespaceStats{ns.ns.name, ns.ns.id, ns.ns.block_bytes, ns.blocks, ns.fp.Describe()});
  }
  std::sort(s.per_namespace.begin(), s.per_namespace.end(),
            [](const NamespaceStats& a, const NamespaceStats& b) { return a.id < b.id; });
  return s;
}

absl::Status Pool::CheckInvariants() const {
  uint64_t committed = 0, reserved = 0, pinned = 0, dirty = 0;
  std::vector<uint64_t> evictable(classes_.size(), 0);
  size_t assigned = 0;
  for (uint32_t si = 0; si < segments_.size(); ++si) {
    const Segment& s = segments_[si];
    if (s.cls < 0) continue;
    ++assigned;
    uint32_t busy = 0, free_slots = 0;
    for (uint32_t i = 0; i < s.slot_count; ++i) {
      const SlotMeta& m = s.slots[i];
      const uint64_t id = SlotId(si, i);
      switch (m.state) {
        case State::kFree:
          ++free_slots;
          if (m.pins != 0) return absl::InternalError("free slot pinned");
          break;
        case State::kReserved:
          ++reserved;
          ++busy;
          if (m.pins != 0) return absl::InternalError("reserved slot pinned");
          break;
        case State::kCommitted: {
          ++committed;
          if (options_.spill && !m.clean) ++dirty;
          auto it = index_.find(IndexKey{m.ns, m.key});
          if (it == index_.end() || it->second != id) {
            return absl::InternalError("committed slot missing from the index");
          }
          if (m.pins > 0) {
            ++pinned;
            ++busy;
          } else {
            ++evictable[s.cls];
          }
          break;
        }
        case State::kOrphan:
          if (m.pins == 0) return absl::InternalError("orphan slot without pins");
          ++pinned;
          ++busy;
          break;
      }
    }
    if (busy != s.busy) return absl::InternalError(StrCat("segment ", si, " busy count off"));
    if (free_slots != s.free.size()) {
      return absl::InternalError(StrCat("segment ", si, " free list has ", s.free.size(),
                                        " entries for ", free_slots, " free slots"));
    }
    if (free_slots == s.slot_count) {
      return absl::InternalError(StrCat("segment ", si, " is empty but still assigned"));
    }
  }
  if (assigned + free_segments_.size() != segments_.size()) {
    return absl::InternalError("segments lost or duplicated");
  }
  if (committed != index_.size()) return absl::InternalError("index size != committed slots");
  if (dirty != dirty_count_) return absl::InternalError("dirty block count off");
  if (reserved != reserved_ || pinned != pinned_) {
    return absl::InternalError("reserved or pinned counters off");
  }
  for (size_t c = 0; c < classes_.size(); ++c) {
    if (evictable[c] != classes_[c].evictable) {
      return absl::InternalError(StrCat("class ", c, " counts ", classes_[c].evictable,
                                        " evictable slots, the segments hold ", evictable[c]));
    }
  }
  // Every pin is accounted for by exactly the pin batches that hold it.
  absl::flat_hash_map<uint64_t, uint32_t> pins;
  for (const auto& [sid, sess] : sessions_) {
    for (const auto& [bid, batch] : sess.pins) {
      for (uint64_t slot : batch.slots) ++pins[slot];
    }
    uint64_t bytes = 0;
    for (uint64_t slot : sess.reservations) {
      const SlotMeta* m = Meta(slot);
      if (m == nullptr || m->state != State::kReserved || m->session != sid) {
        return absl::InternalError("a session holds a reservation that is not its own");
      }
      bytes += segments_[SegOf(slot)].slot_bytes;
    }
    if (bytes != sess.reserved_bytes) {
      return absl::InternalError("a session's reserved bytes differ from its reservations");
    }
  }
  for (const auto& [slot, n] : spill_pins_) pins[slot] += n;
  for (const auto& [slot, n] : pins) {
    if (Meta(slot)->pins != n) return absl::InternalError("pin counts differ from pin batches");
  }
  uint64_t ns_blocks = 0;
  for (const auto& [id, ns] : namespaces_) ns_blocks += ns.blocks;
  if (ns_blocks != committed) return absl::InternalError("namespace block counts off");
  return absl::OkStatus();
}

}  // namespace openlake::kv

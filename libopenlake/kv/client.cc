#include "openlake/kv/client.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>

#include "kv/layout.h"
#include "kv/slab.h"
#include "kv/wire.h"

#include "openlake/checksum.h"
#include "openlake/log.h"
#include "openlake/net/rpc.h"
#include "openlake/status.h"
#include "openlake/strings.h"

namespace openlake::kv {

class Client::Impl {
 public:
  std::unique_ptr<net::RpcClient> rpc;
  std::unique_ptr<SlabMapping> slab;
  wire::AttachResponse attach;
  ClientOptions options;

  template <typename Resp>
  absl::StatusOr<Resp> Call(wire::Method m, const google::protobuf::MessageLite& req) {
    OL_ASSIGN_OR_RETURN(net::RpcClient::Sent sent, Send(m, req));
    return Finish<Resp>(sent);
  }
  // Call in two halves (RpcClient::Send and Wait).
  absl::StatusOr<net::RpcClient::Sent> Send(wire::Method m,
                                            const google::protobuf::MessageLite& req) {
    // Serialised straight into the request frame, after room for its header.
    const size_t size = req.ByteSizeLong();
    std::string frame(net::RpcClient::kHeadroom + size, '\0');
    req.SerializeWithCachedSizesToArray(
        reinterpret_cast<uint8_t*>(frame.data() + net::RpcClient::kHeadroom));
    return rpc->Send(m, std::move(frame), options.call_timeout);
  }
  template <typename Resp>
  absl::StatusOr<Resp> Finish(const net::RpcClient::Sent& sent) {
    OL_ASSIGN_OR_RETURN(net::RpcClient::Response r, rpc->Wait(sent));
    if (r.fd >= 0) close(r.fd);
    Resp resp;
    OL_RETURN_IF_ERROR(wire::Parse(r.payload, &resp));
    return resp;
  }

  // Lookup in two halves, so that Get copies one part of its keys while the daemon finds (and
  // reads back from disk) the next.
  absl::StatusOr<net::RpcClient::Sent> SendLookup(const Namespace& ns,
                                                  absl::Span<const BlockKey> keys,
                                                  const GetOptions& get) {
    wire::LookupRequest req;
    SetRef(ns, req.mutable_ns());
    uint32_t key_len = 0;
    OL_RETURN_IF_ERROR(wire::PackKeys(keys.data(), keys.size(), req.mutable_keys(), &key_len));
    req.set_key_len(key_len);
    // With the slab mapped, the offsets and generations are read from it instead.
    req.set_compact(slab != nullptr);
    req.set_local_only(!options.cluster);
    if (!get.chain_head.empty()) req.set_head(std::string(get.chain_head.bytes()));
    return Send(wire::kLookup, req);
  }
  absl::StatusOr<Pins> FinishLookup(const net::RpcClient::Sent& sent, size_t key_count) {
    OL_ASSIGN_OR_RETURN(auto resp, Finish<wire::LookupResponse>(sent));
    const int n = resp.slots_size();
    // A compact answer (asked for with the slab mapped; a daemon that predates it answers in
    // full) has neither offsets nor generations.
    const bool compact =
        slab != nullptr && n > 0 && resp.offsets_size() == 0 && resp.generations_size() == 0;
    if ((!compact && (resp.offsets_size() != n || resp.generations_size() != n)) ||
        resp.checksums_size() != n || static_cast<size_t>(n) > key_count) {
      return absl::InternalError("malformed Lookup answer");
    }
    Pins out;
    out.batch = resp.pin_batch();
    out.from_disk = resp.from_disk();
    out.from_peers = resp.from_peers();
    out.hits.resize(static_cast<size_t>(n));
    const uint64_t* slots = resp.slots().data();
    const uint64_t* checksums = resp.checksums().data();
    if (compact) {
      for (int i = 0; i < n; ++i) {
        SlotHit& h = out.hits[i];
        h.slot = slots[i];
        h.checksum = checksums[i];
        if (!SlotInSlab(slots[i], &h.offset, &h.generation)) {
          // Unusable; its pins end with their lease.
          return absl::InternalError(
              StrCat("malformed Lookup answer: slot ", slots[i], " is not in the slab"));
        }
      }
      return out;
    }
    const uint64_t* offsets = resp.offsets().data();
    const uint64_t* generations = resp.generations().data();
    for (int i = 0; i < n; ++i) {
      out.hits[i] = SlotHit{slots[i], offsets[i], generations[i], checksums[i]};
    }
    return out;
  }

  // A pinned slot's block offset (from the slab's start) and generation, read from its segment
  // and slot headers; false when the slot is not in the slab.
  bool SlotInSlab(uint64_t slot, uint64_t* offset, uint64_t* generation) const {
    const layout::SegmentHeader* sh = SegmentOf(slot);
    if (sh == nullptr) return false;
    const auto idx = static_cast<uint32_t>(slot);
    *offset = static_cast<uint64_t>(reinterpret_cast<const std::byte*>(sh) -
                                    static_cast<const std::byte*>(slab->base())) +
              sh->data_offset + uint64_t{idx} * sh->slot_bytes;
    *generation = reinterpret_cast<const layout::SlotHeader*>(sh + 1)[idx].generation.load(
        std::memory_order_acquire);
    return true;
  }

  absl::Status NeedSlab() const {
    if (slab) return absl::OkStatus();
    return absl::FailedPreconditionError(
        "this client has not mapped the KV slab (it is not on the daemon's host, or connected "
        "without its Unix socket); only control calls are possible");
  }

  static void SetRef(const Namespace& ns, wire::NsRef* out) {
    out->set_id(ns.id);
    out->set_digest(ns.digest);
  }

  // The header of a slot's segment in the mapped slab; null when the slot is not in it.
  const layout::SegmentHeader* SegmentOf(uint64_t slot) const {
    const layout::SlabHeader& h = slab->header();
    const auto seg = static_cast<uint32_t>(slot >> 32);
    if (seg >= h.segment_count) return nullptr;
    const auto* sh =
        reinterpret_cast<const layout::SegmentHeader*>(layout::SegmentBase(slab->base(), h, seg));
    if (static_cast<uint32_t>(slot) >= sh->slot_count) return nullptr;
    return sh;
  }

  const layout::SlotHeader* SlotHeaderOf(uint64_t slot) const {
    const layout::SegmentHeader* sh = SegmentOf(slot);
    if (sh == nullptr) return nullptr;
    return reinterpret_cast<const layout::SlotHeader*>(sh + 1) + static_cast<uint32_t>(slot);
  }

  // Offset and length of a block inside the mapped slab, bounds-checked.
  absl::StatusOr<std::byte*> BlockAt(uint64_t offset, uint64_t len) const {
    if (offset > slab->size() || len > slab->size() - offset) {
      return absl::InternalError(StrCat("daemon answered an offset outside the slab: ", offset));
    }
    return static_cast<std::byte*>(slab->base()) + offset;
  }
};

namespace {

// How Get splits its keys: parts of about kPartBytes, the Lookups of up to `in_flight` parts
// outstanding at once (together at most an eighth of the slab, or kMaxAskedBytes), so the
// daemon's disk reads stay as deep as one Lookup of the whole Get would make them.
struct GetParts {
  static constexpr uint64_t kPartBytes = 4 << 20;
  static constexpr uint64_t kMaxAskedBytes = 64 << 20;
  size_t keys = 1;       // keys per part
  size_t in_flight = 1;  // parts asked for ahead of the copy

  static GetParts For(size_t count, uint32_t block_bytes, uint64_t slab_bytes) {
    const uint64_t block = std::max<uint32_t>(block_bytes, 1);
    GetParts p;
    p.keys = static_cast<size_t>(std::max<uint64_t>(1, kPartBytes / block));
    if (count <= p.keys * 2) {  // too small to gain: one Lookup, as before
      p.keys = count;
      return p;
    }
    const uint64_t asked = std::min(kMaxAskedBytes, slab_bytes / 8);
    p.in_flight = static_cast<size_t>(std::max<uint64_t>(2, asked / (p.keys * block)));
    return p;
  }
};

absl::StatusOr<std::unique_ptr<net::RpcClient>> Dial(std::string_view address,
                                                     const ClientOptions& o) {
  OL_ASSIGN_OR_RETURN(io::SocketAddress addr, io::SocketAddress::Parse(address));
  net::RpcClientOptions ro;
  ro.secret = o.secret;
  ro.connect_timeout = o.connect_timeout;
  ro.call_timeout = o.call_timeout;
  ro.spin = o.spin;
  return net::RpcClient::Connect(addr, ro);
}

// Attach over `rpc`; returns the answer and, if one came, the slab descriptor.
absl::StatusOr<std::pair<wire::AttachResponse, int>> AttachOver(net::RpcClient& rpc, bool want,
                                                                absl::Duration timeout) {
  wire::AttachRequest req;
  req.set_want_slab(want);
  std::string payload;
  req.SerializeToString(&payload);
  OL_ASSIGN_OR_RETURN(net::RpcClient::Response r, rpc.Call(wire::kAttach, payload, timeout));
  wire::AttachResponse resp;
  if (absl::Status st = wire::Parse(r.payload, &resp); !st.ok()) {
    if (r.fd >= 0) close(r.fd);
    return st;
  }
  return std::make_pair(std::move(resp), r.fd);
}

// A Namespace from an OpenNamespace or FindNamespace answer.
template <typename Resp>
Namespace NamespaceFrom(std::string_view name, const Resp& resp) {
  Namespace ns;
  ns.id = resp.id();
  ns.digest = resp.digest();
  ns.name = std::string(name);
  ns.block_bytes = resp.block_bytes();
  ns.slot_bytes = resp.slot_bytes();
  return ns;
}

}  // namespace

Client::Client(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)),
      lease_(absl::Milliseconds(static_cast<int64_t>(impl_->attach.lease_ms()))) {}

Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(std::string_view address,
                                                        ClientOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  const bool is_unix = address.substr(0, 5) == "unix:";
  OL_ASSIGN_OR_RETURN(impl->rpc, Dial(address, options));
  OL_ASSIGN_OR_RETURN(auto first,
                      AttachOver(*impl->rpc, is_unix && options.map_slab, options.call_timeout));
  impl->attach = first.first;
  int fd = first.second;

  if (!is_unix && options.map_slab && !impl->attach.unix_socket().empty()) {
    // The daemon has a Unix socket: if we can reach it, and it is the same daemon (same slab
    // instance), move there and take the slab.
    auto local = Dial(StrCat("unix:", impl->attach.unix_socket()), options);
    if (local.ok()) {
      auto second = AttachOver(**local, true, options.call_timeout);
      if (second.ok() && second->first.instance_id() == impl->attach.instance_id()) {
        impl->rpc = std::move(*local);
        impl->attach = second->first;
        fd = second->second;
      } else if (second.ok() && second->second >= 0) {
        close(second->second);
      }
    }
  }
  if (fd >= 0) {
    OL_ASSIGN_OR_RETURN(impl->slab, SlabMapping::Attach(fd));
    if (impl->slab->header().instance_id != impl->attach.instance_id()) {
      return absl::InternalError("the slab passed by the daemon is not the one it announced");
    }
  }
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

std::byte* Client::slab_base() const {
  return impl_->slab ? static_cast<std::byte*>(impl_->slab->base()) : nullptr;
}
uint64_t Client::slab_bytes() const { return impl_->slab ? impl_->slab->size() : 0; }
uint64_t Client::slab_segments_offset() const {
  return impl_->slab ? impl_->slab->header().segments_offset : 0;
}
uint64_t Client::slab_segment_bytes() const {
  return impl_->slab ? impl_->slab->header().segment_bytes : 0;
}
const std::string& Client::server_version() const { return impl_->attach.version(); }

absl::StatusOr<Namespace> Client::OpenNamespace(std::string_view name, const LayoutFingerprint& fp,
                                                uint32_t block_bytes) {
  wire::OpenNamespaceRequest req;
  req.set_name(std::string(name));
  wire::ToWire(fp, req.mutable_fingerprint());
  req.set_block_bytes(block_bytes);
  OL_ASSIGN_OR_RETURN(auto resp,
                      impl_->Call<wire::OpenNamespaceResponse>(wire::kOpenNamespace, req));
  Namespace ns = NamespaceFrom(name, resp);
  if (ns.digest != fp.Digest()) {
    return absl::InternalError("daemon computed another fingerprint digest (version skew?)");
  }
  return ns;
}

absl::StatusOr<Namespace> Client::FindNamespace(std::string_view name) {
  wire::FindNamespaceRequest req;
  req.set_name(std::string(name));
  OL_ASSIGN_OR_RETURN(auto resp,
                      impl_->Call<wire::FindNamespaceResponse>(wire::kFindNamespace, req));
  return NamespaceFrom(name, resp);
}

absl::StatusOr<std::vector<SlotGrant>> Client::Reserve(const Namespace& ns, uint32_t count,
                                                       bool allow_partial) {
  wire::ReserveRequest req;
  Impl::SetRef(ns, req.mutable_ns());
  req.set_count(count);
  req.set_allow_partial(allow_partial);
  OL_ASSIGN_OR_RETURN(auto resp, impl_->Call<wire::ReserveResponse>(wire::kReserve, req));
  if (resp.offsets_size() != resp.slots_size() || resp.generations_size() != resp.slots_size() ||
      static_cast<uint32_t>(resp.slots_size()) > count) {
    return absl::InternalError("malformed Reserve answer");
  }
  std::vector<SlotGrant> out(static_cast<size_t>(resp.slots_size()));
  for (int i = 0; i < resp.slots_size(); ++i) {
    out[i] = SlotGrant{resp.slots(i), resp.offsets(i), resp.generations(i)};
  }
  return out;
}

absl::Status Client::Commit(const Namespace& ns, absl::Span<const CommitEntry> entries) {
  wire::CommitRequest req;
  Impl::SetRef(ns, req.mutable_ns());
  std::vector<BlockKey> keys;
  keys.reserve(entries.size());
  for (const CommitEntry& e : entries) {
    keys.push_back(e.key);
    req.add_slots(e.slot);
    req.add_checksums(e.checksum);
    req.add_depths(e.depth);
  }
  uint32_t key_len = 0;
  OL_RETURN_IF_ERROR(wire::PackKeys(keys.data(), keys.size(), req.mutable_keys(), &key_len));
  req.set_key_len(key_len);
  return impl_->Call<wire::CommitResponse>(wire::kCommit, req).status();
}

absl::StatusOr<Pins> Client::Lookup(const Namespace& ns, absl::Span<const BlockKey> keys,
                                    const GetOptions& options) {
  OL_ASSIGN_OR_RETURN(net::RpcClient::Sent sent, impl_->SendLookup(ns, keys, options));
  return impl_->FinishLookup(sent, keys.size());
}

absl::Status Client::Release(absl::Span<const uint64_t> pin_batches,
                             absl::Span<const uint64_t> reserved, bool wait) {
  if (pin_batches.empty() && reserved.empty()) return absl::OkStatus();
  wire::ReleaseRequest req;
  req.mutable_pin_batches()->Add(pin_batches.begin(), pin_batches.end());
  req.mutable_reserved()->Add(reserved.begin(), reserved.end());
  if (!wait) {
    std::string payload;
    req.SerializeToString(&payload);
    return impl_->rpc->Notify(wire::kRelease, payload);
  }
  return impl_->Call<wire::ReleaseResponse>(wire::kRelease, req).status();
}

bool Client::StillValid(const SlotHit& hit) const {
  if (!impl_->slab) return false;
  const layout::SlotHeader* h = impl_->SlotHeaderOf(hit.slot);
  // Seqlock reader: the fence keeps the copy's loads before the generation load, which pairs
  // with the daemon's release store when it hands the slot to a new writer.
  std::atomic_thread_fence(std::memory_order_acquire);
  return h != nullptr && h->generation.load(std::memory_order_relaxed) == hit.generation;
}

absl::StatusOr<PutResult> Client::Put(const Namespace& ns, absl::Span<const BlockKey> keys,
                                      absl::Span<const std::vector<ConstPiece>> blocks,
                                      const PutOptions& options) {
  OL_RETURN_IF_ERROR(impl_->NeedSlab());
  if (keys.size() != blocks.size()) {
    return absl::InvalidArgumentError(
        StrCat("Put: ", keys.size(), " keys but ", blocks.size(), " blocks"));
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    size_t total = 0;
    for (const ConstPiece& p : blocks[i]) total += p.len;
    if (total != ns.block_bytes) {
      return absl::InvalidArgumentError(StrCat("Put: block ", i, " has ", total,
                                               " bytes; namespace '", ns.name, "' stores ",
                                               ns.block_bytes));
    }
  }
  // In rounds of at most this client's share of the pool (the server's cap on what one client
  // holds reserved, KvServiceOptions::max_reserved_percent): each round is written and
  // committed, ending its reservations, before the next. A round cut short means the pool is
  // full; the put ends there with the prefix stored.
  const uint64_t cap = impl_->attach.max_reserved_bytes();
  const size_t per_round = cap == 0 ? keys.size() : std::max<size_t>(1, cap / ns.slot_bytes);
  size_t stored = 0;
  while (stored < keys.size()) {
    const size_t ask = std::min(per_round, keys.size() - stored);
    auto reserved = Reserve(ns, static_cast<uint32_t>(ask), /*allow_partial=*/true);
    if (!reserved.ok()) {
      if (stored > 0 && absl::IsResourceExhausted(reserved.status())) break;
      return reserved.status();
    }
    const std::vector<SlotGrant>& grants = *reserved;
    OL_RETURN_IF_ERROR(PutRound(ns, keys.subspan(stored, grants.size()),
                                blocks.subspan(stored, grants.size()), grants,
                                options.first_depth + static_cast<uint32_t>(stored)));
    stored += grants.size();
    if (grants.size() < ask) break;
  }
  return PutResult{stored};
}

absl::Status Client::PutRound(const Namespace& ns, absl::Span<const BlockKey> keys,
                              absl::Span<const std::vector<ConstPiece>> blocks,
                              absl::Span<const SlotGrant> grants, uint32_t first_depth) {
  std::vector<CommitEntry> entries(grants.size());
  std::vector<uint64_t> reserved;
  for (size_t i = 0; i < grants.size(); ++i) {
    auto dst = impl_->BlockAt(grants[i].offset, ns.block_bytes);
    if (!dst.ok()) {
      for (const SlotGrant& g : grants) reserved.push_back(g.slot);
      (void)Release({}, reserved);
      return dst.status();
    }
    std::byte* d = *dst;
    uint64_t crc = 0;
    for (const ConstPiece& p : blocks[i]) {
      crc = CopyWithCrc64(d, p.data, p.len, crc);
      d += p.len;
    }
    entries[i] = CommitEntry{grants[i].slot, keys[i], crc, first_depth + static_cast<uint32_t>(i)};
  }
  if (absl::Status st = Commit(ns, entries); !st.ok()) {
    for (const SlotGrant& g : grants) reserved.push_back(g.slot);
    (void)Release({}, reserved, /*wait=*/false);
    return st;
  }
  return absl::OkStatus();
}

absl::StatusOr<PutResult> Client::Put(const Namespace& ns, absl::Span<const BlockKey> keys,
                                      absl::Span<const void* const> blocks,
                                      const PutOptions& options) {
  std::vector<std::vector<ConstPiece>> pieces(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) pieces[i] = {ConstPiece{blocks[i], ns.block_bytes}};
  return Put(ns, keys, pieces, options);
}

absl::StatusOr<GetResult> Client::Get(const Namespace& ns, absl::Span<const BlockKey> keys,
                                      absl::Span<const std::vector<Piece>> blocks,
                                      const GetOptions& options) {
  OL_RETURN_IF_ERROR(impl_->NeedSlab());
  if (keys.size() != blocks.size()) {
    return absl::InvalidArgumentError(
        StrCat("Get: ", keys.size(), " keys but ", blocks.size(), " buffers"));
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    size_t total = 0;
    for (const Piece& p : blocks[i]) total += p.len;
    if (total != ns.block_bytes) {
      return absl::InvalidArgumentError(StrCat("Get: buffer ", i, " has ", total,
                                               " bytes; namespace '", ns.name, "' stores ",
                                               ns.block_bytes));
    }
  }
  GetResult result;
  result.state.assign(keys.size(), BlockState::kMissing);
  if (keys.empty()) return result;
  GetOptions head = options;
  if (head.chain_head.empty()) head.chain_head = keys[0];
  // A large Get is looked up in parts, the next parts' Lookups sent before this part is copied:
  // the daemon finds (and reads back from disk) the next parts while this one is copied out.
  // Parts are copied in the order their answers come (a disk read may hold one back while
  // later ones are ready), and the result is settled in key order, as one Lookup's would be.
  const GetParts plan = GetParts::For(keys.size(), ns.block_bytes, impl_->slab->size());
  struct Part {
    size_t from = 0;
    size_t count = 0;
    net::RpcClient::Sent sent;
    bool answered = false;
    absl::StatusOr<Pins> pins;
  };
  std::vector<Part> parts;  // every part asked for, in key order
  size_t settled = 0;       // parts [0, settled) are answered and accounted in key order
  size_t next = 0;          // first key not asked for yet
  bool asking = true;       // false once a Lookup could not be sent
  bool missing = false;     // a settled part failed or stopped short: the keys after it are not
                            // asked for or served
  absl::Status failed;      // the first Lookup that failed (or could not be sent)
  size_t failed_at = 0;     // the first key of its part
  auto ask = [&]() -> absl::Status {
    while (asking && !missing && next < keys.size() && parts.size() - settled < plan.in_flight) {
      const size_t count = std::min(plan.keys, keys.size() - next);
      // Every part names the chain's head: a later part starts mid-chain.
      absl::StatusOr<net::RpcClient::Sent> sent =
          impl_->SendLookup(ns, keys.subspan(next, count), head);
      if (!sent.ok()) {
        asking = false;
        return sent.status();
      }
      parts.push_back(Part{next, count, *sent, false, absl::UnknownError("not answered")});
      next += count;
    }
    return absl::OkStatus();
  };
  // Copies a part's hits into their buffers, each verified (kLoaded or kCorrupt).
  auto copy = [&](const Part& part) {
    const std::vector<SlotHit>& hits = part.pins->hits;
    for (size_t h = 0; h < hits.size(); ++h) {
      const size_t i = part.from + h;
      auto src = impl_->BlockAt(hits[h].offset, ns.block_bytes);
      if (!src.ok()) {
        result.state[i] = BlockState::kCorrupt;
        continue;
      }
      const std::byte* s = *src;
      uint64_t crc = 0;
      for (const Piece& p : blocks[i]) {
        crc = CopyWithCrc64(p.data, s, p.len, crc);
        s += p.len;
      }
      const bool ok = crc == hits[h].checksum && StillValid(hits[h]);
      result.state[i] = ok ? BlockState::kLoaded : BlockState::kCorrupt;
      if (!ok) {
        OL_LOG_EVERY_N_SEC(kWarning, 5) << "KV block " << i << " of namespace '" << ns.name
                                        << "' failed verification; not served";
      }
    }
  };
  if (absl::Status st = ask(); !st.ok()) {
    if (parts.empty()) return st;
    failed = st;
    failed_at = next;
  }
  std::vector<uint64_t> pinned;  // the parts' pin batches, released in one request at the end
  std::vector<net::RpcClient::Sent> waiting;
  std::vector<size_t> waiting_part;
  while (settled < parts.size()) {
    waiting.clear();
    waiting_part.clear();
    for (size_t k = settled; k < parts.size(); ++k) {
      if (parts[k].answered) continue;
      waiting.push_back(parts[k].sent);
      waiting_part.push_back(k);
    }
    const size_t any = waiting.size() == 1 ? 0 : impl_->rpc->WaitAny(waiting);
    Part& part = parts[waiting_part[any]];
    part.pins = impl_->FinishLookup(part.sent, part.count);
    part.answered = true;
    if (part.pins.ok()) {
      if (part.pins->batch != 0) pinned.push_back(part.pins->batch);
      if (!missing) copy(part);  // after a settled miss it would never be served
    }
    while (settled < parts.size() && parts[settled].answered) {
      const Part& p = parts[settled++];
      if (missing) continue;
      if (!p.pins.ok()) {
        if (failed.ok()) {
          failed = p.pins.status();
          failed_at = p.from;
        }
        missing = true;
      } else if (p.pins->hits.size() < p.count) {
        missing = true;
      }
    }
    if (absl::Status st = ask(); !st.ok() && failed.ok()) {
      failed = st;
      failed_at = next;
    }
  }
  // Served: the hits up to the first part that failed or stopped short (or the last asked
  // for); a block copied after that is not served. The loaded prefix ends at the first block
  // that is not kLoaded.
  size_t served = 0;
  for (const Part& p : parts) {
    if (!p.pins.ok()) break;
    served = p.from + p.pins->hits.size();
    if (p.pins->hits.size() < p.count) break;
  }
  std::fill(result.state.begin() + served, result.state.end(), BlockState::kMissing);
  while (result.loaded < served && result.state[result.loaded] == BlockState::kLoaded) {
    ++result.loaded;
  }
  // The answer is read by the next call; releasing never delays this one.
  if (absl::Status st = Release(pinned, {}, /*wait=*/false); !st.ok()) {
    OL_LOG_EVERY_N_SEC(kWarning, 5) << "releasing KV pins: " << st.message();
  }
  if (!failed.ok()) {
    // The first part's Lookup failing fails the Get, as one Lookup would; a later part's ends
    // the loaded prefix there (what was copied before it stays good).
    if (failed_at == 0) return failed;
    OL_LOG_EVERY_N_SEC(kWarning, 5)
        << "KV Get: a later part's Lookup failed, " << result.loaded << " of " << keys.size()
        << " blocks loaded: " << failed.message();
  }
  return result;
}

absl::StatusOr<GetResult> Client::Get(const Namespace& ns, absl::Span<const BlockKey> keys,
                                      absl::Span<void* const> blocks, const GetOptions& options) {
  std::vector<std::vector<Piece>> pieces(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) pieces[i] = {Piece{blocks[i], ns.block_bytes}};
  return Get(ns, keys, pieces, options);
}

absl::StatusOr<ExistsResult> Client::Exists(const Namespace& ns, absl::Span<const BlockKey> keys,
                                            const GetOptions& options) {
  wire::ExistsRequest req;
  Impl::SetRef(ns, req.mutable_ns());
  uint32_t key_len = 0;
  OL_RETURN_IF_ERROR(wire::PackKeys(keys.data(), keys.size(), req.mutable_keys(), &key_len));
  req.set_key_len(key_len);
  req.set_local_only(!impl_->options.cluster);
  if (!options.chain_head.empty()) req.set_head(std::string(options.chain_head.bytes()));
  OL_ASSIGN_OR_RETURN(auto resp, impl_->Call<wire::ExistsResponse>(wire::kExists, req));
  if (resp.present().size() != keys.size()) return absl::InternalError("malformed Exists answer");
  ExistsResult r;
  r.prefix = resp.prefix();
  r.on_peers = std::min<size_t>(resp.on_peers(), r.prefix);
  r.present.resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) r.present[i] = resp.present()[i] != 0;
  return r;
}

absl::StatusOr<uint32_t> Client::Remove(const Namespace& ns, absl::Span<const BlockKey> keys) {
  wire::RemoveRequest req;
  Impl::SetRef(ns, req.mutable_ns());
  uint32_t key_len = 0;
  OL_RETURN_IF_ERROR(wire::PackKeys(keys.data(), keys.size(), req.mutable_keys(), &key_len));
  req.set_key_len(key_len);
  OL_ASSIGN_OR_RETURN(auto resp, impl_->Call<wire::RemoveResponse>(wire::kRemove, req));
  return resp.removed();
}

absl::Status Client::Reset(const Namespace& ns) {
  wire::ResetRequest req;
  Impl::SetRef(ns, req.mutable_ns());
  return impl_->Call<wire::ResetResponse>(wire::kReset, req).status();
}

absl::StatusOr<PoolStats> Client::Stats() {
  OL_ASSIGN_OR_RETURN(auto resp,
                      impl_->Call<wire::StatsResponse>(wire::kStats, wire::StatsRequest()));
  return wire::FromWire(resp);
}

}  // namespace openlake::kv

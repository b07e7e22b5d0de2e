// The C API over kv::Client (openlake/c/openlake.h): argument checks, conversions, and every
// body run under capi::Guard so that nothing but an int code crosses into C.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "c/errors.h"

#include "openlake/c/openlake.h"
#include "openlake/checksum.h"
#include "openlake/kv/client.h"
#include "openlake/strings.h"
#include "openlake/version.h"

struct openlake_client {
  std::unique_ptr<openlake::kv::Client> client;
};

struct openlake_namespace {
  openlake::kv::Namespace ns;
};

namespace openlake::capi {
namespace {

// Whether a caller's struct of `struct_size` bytes includes `member` (at `offset`, `size` bytes).
bool Has(size_t struct_size, size_t offset, size_t size) { return offset + size <= struct_size; }
#define OL_C_HAS(ptr, type, member) \
  Has((ptr)->struct_size, offsetof(type, member), sizeof(((type*)nullptr)->member))

std::string_view Str(const char* s) { return s == nullptr ? std::string_view() : s; }

// keys[0..count) as BlockKeys; false (with the error recorded) on a bad key.
bool ToKeys(const openlake_key* keys, size_t count, std::vector<kv::BlockKey>* out, int* code) {
  if (count > 0 && keys == nullptr) {
    *code = BadArgument("keys is NULL");
    return false;
  }
  out->reserve(count);
  for (size_t i = 0; i < count; ++i) {
    if (keys[i].len == 0 || keys[i].len > OPENLAKE_MAX_KEY_BYTES) {
      *code = BadArgument(StrCat("key ", i, " has ", keys[i].len, " bytes (1 to ",
                                 OPENLAKE_MAX_KEY_BYTES, ")"));
      return false;
    }
    out->emplace_back(
        std::string_view(reinterpret_cast<const char*>(keys[i].bytes), keys[i].len));
  }
  return true;
}

// The chain's head of a get, exists or lookup, when the caller gave one (NULL: keys[0]).
bool ToHead(const openlake_key* chain_head, kv::GetOptions* o, int* code) {
  if (chain_head == nullptr) return true;
  std::vector<kv::BlockKey> head;
  if (!ToKeys(chain_head, 1, &head, code)) return false;
  o->chain_head = head[0];
  return true;
}

// The common checks of a call on a client and a namespace.
int CheckHandles(const openlake_client* c, const openlake_namespace* ns) {
  if (c == nullptr || !c->client) return BadArgument("client is NULL");
  if (ns == nullptr) return BadArgument("namespace is NULL");
  return OPENLAKE_OK;
}

// Pieces of `count` blocks from the flattened (pieces, piece_counts) form.
template <typename Piece>
int ToPieces(const openlake_iovec* pieces, const size_t* piece_counts, size_t count,
             std::vector<std::vector<Piece>>* out) {
  if (count > 0 && piece_counts == nullptr) return BadArgument("piece_counts is NULL");
  out->resize(count);
  size_t at = 0;
  for (size_t i = 0; i < count; ++i) {
    if (piece_counts[i] > 0 && pieces == nullptr) return BadArgument("pieces is NULL");
    for (size_t j = 0; j < piece_counts[i]; ++j, ++at) {
      if (pieces[at].base == nullptr && pieces[at].len > 0) {
        return BadArgument(StrCat("piece ", j, " of block ", i, " is NULL"));
      }
      (*out)[i].push_back(Piece{pieces[at].base, pieces[at].len});
    }
  }
  return OPENLAKE_OK;
}

int Put(openlake_client* c, const openlake_namespace* ns, const openlake_key* keys,
        const std::vector<std::vector<kv::ConstPiece>>& blocks, uint32_t first_depth,
        size_t* stored) {
  int code = OPENLAKE_OK;
  std::vector<kv::BlockKey> k;
  if (!ToKeys(keys, blocks.size(), &k, &code)) return code;
  if (stored != nullptr) *stored = 0;
  if (k.empty()) return OPENLAKE_OK;
  kv::PutOptions o;
  o.first_depth = first_depth;
  auto r = c->client->Put(ns->ns, k, blocks, o);
  if (!r.ok()) return Fail(r.status());
  if (stored != nullptr) *stored = r->stored;
  return OPENLAKE_OK;
}

int Get(openlake_client* c, const openlake_namespace* ns, const openlake_key* keys,
        const std::vector<std::vector<kv::Piece>>& blocks, const openlake_key* chain_head,
        size_t* loaded, uint8_t* states) {
  int code = OPENLAKE_OK;
  std::vector<kv::BlockKey> k;
  if (!ToKeys(keys, blocks.size(), &k, &code)) return code;
  kv::GetOptions o;
  if (!ToHead(chain_head, &o, &code)) return code;
  if (loaded != nullptr) *loaded = 0;
  if (k.empty()) return OPENLAKE_OK;
  auto r = c->client->Get(ns->ns, k, blocks, o);
  if (!r.ok()) return Fail(r.status());
  if (loaded != nullptr) *loaded = r->loaded;
  if (states != nullptr) {
    for (size_t i = 0; i < k.size(); ++i) states[i] = static_cast<uint8_t>(r->state[i]);
  }
  return OPENLAKE_OK;
}

}  // namespace
}  // namespace openlake::capi

using openlake::StrCat;
using openlake::capi::BadArgument;
using openlake::capi::CheckHandles;
using openlake::capi::Fail;
using openlake::capi::Guard;
using openlake::capi::Has;
using openlake::capi::Str;
using openlake::capi::ToHead;
using openlake::capi::ToKeys;
namespace kv = openlake::kv;

extern "C" {

int openlake_abi_version(void) { return OPENLAKE_ABI_VERSION; }

const char* openlake_version(void) {
  static const std::string v(openlake::Version());
  return v.c_str();
}

void openlake_client_options_init(openlake_client_options* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof(*o));
  o->struct_size = sizeof(*o);
  o->connect_timeout_ms = 5000;
  o->call_timeout_ms = 10000;
  o->map_slab = 1;
  o->cluster = 1;
}

int openlake_connect(const char* address, const openlake_client_options* o,
                     openlake_client** out) {
  return Guard([&] {
    if (out == nullptr) return BadArgument("out is NULL");
    *out = nullptr;
    if (address == nullptr || *address == '\0') return BadArgument("address is empty");
    kv::ClientOptions co;
    if (o != nullptr) {
      if (OL_C_HAS(o, openlake_client_options, secret)) co.secret = std::string(Str(o->secret));
      if (OL_C_HAS(o, openlake_client_options, connect_timeout_ms) && o->connect_timeout_ms > 0) {
        co.connect_timeout = absl::Milliseconds(o->connect_timeout_ms);
      }
      if (OL_C_HAS(o, openlake_client_options, call_timeout_ms) && o->call_timeout_ms > 0) {
        co.call_timeout = absl::Milliseconds(o->call_timeout_ms);
      }
      if (OL_C_HAS(o, openlake_client_options, map_slab)) co.map_slab = o->map_slab != 0;
      if (OL_C_HAS(o, openlake_client_options, cluster)) co.cluster = o->cluster != 0;
    }
    auto c = kv::Client::Connect(address, co);
    if (!c.ok()) return Fail(c.status());
    *out = new openlake_client{*std::move(c)};
    return static_cast<int>(OPENLAKE_OK);
  });
}

void openlake_close(openlake_client* client) { delete client; }

void* openlake_slab_base(const openlake_client* c) {
  return c == nullptr || !c->client ? nullptr : c->client->slab_base();
}

uint64_t openlake_slab_bytes(const openlake_client* c) {
  return c == nullptr || !c->client ? 0 : c->client->slab_bytes();
}

const char* openlake_server_version(const openlake_client* c) {
  return c == nullptr || !c->client ? "" : c->client->server_version().c_str();
}

void openlake_fingerprint_init(openlake_fingerprint* fp) {
  if (fp == nullptr) return;
  std::memset(fp, 0, sizeof(*fp));
  fp->struct_size = sizeof(*fp);
  fp->tp_size = 1;
  fp->pp_size = 1;
}

int openlake_namespace_open(openlake_client* c, const char* name, const openlake_fingerprint* fp,
                            uint32_t block_bytes, openlake_namespace** out) {
  return Guard([&] {
    if (out == nullptr) return BadArgument("out is NULL");
    *out = nullptr;
    if (c == nullptr || !c->client) return BadArgument("client is NULL");
    if (name == nullptr || *name == '\0') return BadArgument("namespace name is empty");
    if (fp == nullptr) return BadArgument("fingerprint is NULL");
    if (fp->struct_size < offsetof(openlake_fingerprint, extra)) {
      return BadArgument(StrCat("fingerprint struct_size ", fp->struct_size,
                                " is too small (call openlake_fingerprint_init)"));
    }
    kv::LayoutFingerprint f;
    f.model = std::string(Str(fp->model));
    f.dtype = std::string(Str(fp->dtype));
    f.layout = std::string(Str(fp->layout));
    f.num_layers = fp->num_layers;
    f.num_kv_heads = fp->num_kv_heads;
    f.head_size = fp->head_size;
    f.block_tokens = fp->block_tokens;
    f.tp_rank = fp->tp_rank;
    f.tp_size = fp->tp_size;
    f.pp_rank = fp->pp_rank;
    f.pp_size = fp->pp_size;
    if (OL_C_HAS(fp, openlake_fingerprint, extra)) f.extra = std::string(Str(fp->extra));
    auto ns = c->client->OpenNamespace(name, f, block_bytes);
    if (!ns.ok()) return Fail(ns.status());
    *out = new openlake_namespace{*std::move(ns)};
    return static_cast<int>(OPENLAKE_OK);
  });
}

int openlake_namespace_find(openlake_client* c, const char* name, openlake_namespace** out) {
  return Guard([&] {
    if (out == nullptr) return BadArgument("out is NULL");
    *out = nullptr;
    if (c == nullptr || !c->client) return BadArgument("client is NULL");
    if (name == nullptr || *name == '\0') return BadArgument("namespace name is empty");
    auto ns = c->client->FindNamespace(name);
    if (!ns.ok()) return Fail(ns.status());
    *out = new openlake_namespace{*std::move(ns)};
    return static_cast<int>(OPENLAKE_OK);
  });
}

void openlake_namespace_free(openlake_namespace* ns) { delete ns; }

uint32_t openlake_namespace_block_bytes(const openlake_namespace* ns) {
  return ns == nullptr ? 0 : ns->ns.block_bytes;
}

const char* openlake_namespace_name(const openlake_namespace* ns) {
  return ns == nullptr ? "" : ns->ns.name.c_str();
}

int openlake_put(openlake_client* c, const openlake_namespace* ns, const openlake_key* keys,
                 const void* const* blocks, size_t count, uint32_t first_depth, size_t* stored) {
  return Guard([&] {
    if (int code = CheckHandles(c, ns); code != OPENLAKE_OK) return code;
    if (count > 0 && blocks == nullptr) return BadArgument("blocks is NULL");
    std::vector<std::vector<kv::ConstPiece>> pieces(count);
    for (size_t i = 0; i < count; ++i) {
      if (blocks[i] == nullptr) return BadArgument(StrCat("block ", i, " is NULL"));
      pieces[i] = {kv::ConstPiece{blocks[i], ns->ns.block_bytes}};
    }
    return openlake::capi::Put(c, ns, keys, pieces, first_depth, stored);
  });
}

int openlake_putv(openlake_client* c, const openlake_namespace* ns, const openlake_key* keys,
                  const openlake_iovec* pieces, const size_t* piece_counts, size_t count,
                  uint32_t first_depth, size_t* stored) {
  return Guard([&] {
    if (int code = CheckHandles(c, ns); code != OPENLAKE_OK) return code;
    std::vector<std::vector<kv::ConstPiece>> blocks;
    if (int code = openlake::capi::ToPieces(pieces, piece_counts, count, &blocks);
        code != OPENLAKE_OK) {
      return code;
    }
    return openlake::capi::Put(c, ns, keys, blocks, first_depth, stored);
  });
}

int openlake_get(openlake_client* c, const openlake_namespace* ns, const openlake_key* keys,
                 void* const* blocks, size_t count, const openlake_key* chain_head,
                 size_t* loaded, uint8_t* states) {
  return Guard([&] {
    if (int code = CheckHandles(c, ns); code != OPENLAKE_OK) return code;
    if (count > 0 && blocks == nullptr) return BadArgument("blocks is NULL");
    std::vector<std::vector<kv::Piece>> pieces(count);
    for (size_t i = 0; i < count; ++i) {
      if (blocks[i] == nullptr) return BadArgument(StrCat("block ", i, " is NULL"));
      pieces[i] = {kv::Piece{blocks[i], ns->ns.block_bytes}};
    }
    return openlake::capi::Get(c, ns, keys, pieces, chain_head, loaded, states);
  });
}

int openlake_getv(openlake_client* c, const openlake_namespace* ns, const openlake_key* keys,
                  const openlake_iovec* pieces, const size_t* piece_counts, size_t count,
                  const openlake_key* chain_head, size_t* loaded, uint8_t* states) {
  return Guard([&] {
    if (int code = CheckHandles(c, ns); code != OPENLAKE_OK) return code;
    std::vector<std::vector<kv::Piece>> blocks;
    if (int code = openlake::capi::ToPieces(pieces, piece_counts, count, &blocks);
        code != OPENLAKE_OK) {
      return code;
    }
    return openlake::capi::Get(c, ns, keys, blocks, chain_head, loaded, states);
  });
}

int openlake_exists(openlake_client* c, const openlake_namespace* ns, const openlake_key* keys,
                    size_t count, const openlake_key* chain_head, size_t* prefix,
                    uint8_t* present) {
  return Guard([&] {
    if (int code = CheckHandles(c, ns); code != OPENLAKE_OK) return code;
    int code = OPENLAKE_OK;
    std::vector<kv::BlockKey> k;
    if (!ToKeys(keys, count, &k, &code)) return code;
    kv::GetOptions o;
    if (!ToHead(chain_head, &o, &code)) return code;
    if (prefix != nullptr) *prefix = 0;
    if (k.empty()) return static_cast<int>(OPENLAKE_OK);
    auto r = c->client->Exists(ns->ns, k, o);
    if (!r.ok()) return Fail(r.status());
    if (prefix != nullptr) *prefix = r->prefix;
    if (present != nullptr) {
      for (size_t i = 0; i < k.size(); ++i) present[i] = r->present[i] ? 1 : 0;
    }
    return static_cast<int>(OPENLAKE_OK);
  });
}

int openlake_remove(openlake_client* c, const openlake_namespace* ns, const openlake_key* keys,
                    size_t count, uint32_t* removed) {
  return Guard([&] {
    if (int code = CheckHandles(c, ns); code != OPENLAKE_OK) return code;
    int code = OPENLAKE_OK;
    std::vector<kv::BlockKey> k;
    if (!ToKeys(keys, count, &k, &code)) return code;
    if (removed != nullptr) *removed = 0;
    if (k.empty()) return static_cast<int>(OPENLAKE_OK);
    auto r = c->client->Remove(ns->ns, k);
    if (!r.ok()) return Fail(r.status());
    if (removed != nullptr) *removed = *r;
    return static_cast<int>(OPENLAKE_OK);
  });
}

int openlake_reset(openlake_client* c, const openlake_namespace* ns) {
  return Guard([&] {
    if (int code = CheckHandles(c, ns); code != OPENLAKE_OK) return code;
    return Fail(c->client->Reset(ns->ns));
  });
}

int openlake_reserve(openlake_client* c, const openlake_namespace* ns, uint32_t count,
                     int allow_partial, openlake_slot* slots, size_t* granted) {
  return Guard([&] {
    if (int code = CheckHandles(c, ns); code != OPENLAKE_OK) return code;
    if (granted != nullptr) *granted = 0;
    if (count == 0) return static_cast<int>(OPENLAKE_OK);
    if (slots == nullptr) return BadArgument("slots is NULL");
    auto r = c->client->Reserve(ns->ns, count, allow_partial != 0);
    if (!r.ok()) return Fail(r.status());
    for (size_t i = 0; i < r->size(); ++i) {
      slots[i] = openlake_slot{(*r)[i].slot, (*r)[i].offset, (*r)[i].generation, 0};
    }
    if (granted != nullptr) *granted = r->size();
    return static_cast<int>(OPENLAKE_OK);
  });
}

int openlake_commit(openlake_client* c, const openlake_namespace* ns,
                    const openlake_commit_entry* entries, size_t count) {
  return Guard([&] {
    if (int code = CheckHandles(c, ns); code != OPENLAKE_OK) return code;
    if (count == 0) return static_cast<int>(OPENLAKE_OK);
    if (entries == nullptr) return BadArgument("entries is NULL");
    std::vector<kv::CommitEntry> e(count);
    for (size_t i = 0; i < count; ++i) {
      int code = OPENLAKE_OK;
      std::vector<kv::BlockKey> key;
      if (!ToKeys(&entries[i].key, 1, &key, &code)) return code;
      e[i] = kv::CommitEntry{entries[i].slot, key[0], entries[i].checksum, entries[i].depth};
    }
    return Fail(c->client->Commit(ns->ns, e));
  });
}

int openlake_lookup(openlake_client* c, const openlake_namespace* ns, const openlake_key* keys,
                    size_t count, const openlake_key* chain_head, openlake_slot* hits,
                    size_t* found, uint64_t* pin_batch) {
  return Guard([&] {
    if (int code = CheckHandles(c, ns); code != OPENLAKE_OK) return code;
    if (found == nullptr || pin_batch == nullptr) return BadArgument("found or pin_batch is NULL");
    *found = 0;
    *pin_batch = 0;
    int code = OPENLAKE_OK;
    std::vector<kv::BlockKey> k;
    if (!ToKeys(keys, count, &k, &code)) return code;
    if (k.empty()) return static_cast<int>(OPENLAKE_OK);
    if (hits == nullptr) return BadArgument("hits is NULL");
    kv::GetOptions o;
    if (!ToHead(chain_head, &o, &code)) return code;
    auto r = c->client->Lookup(ns->ns, k, o);
    if (!r.ok()) return Fail(r.status());
    for (size_t i = 0; i < r->hits.size() && i < count; ++i) {
      const kv::SlotHit& h = r->hits[i];
      hits[i] = openlake_slot{h.slot, h.offset, h.generation, h.checksum};
    }
    *found = std::min(r->hits.size(), count);
    *pin_batch = r->batch;
    return static_cast<int>(OPENLAKE_OK);
  });
}

int openlake_still_valid(const openlake_client* c, const openlake_slot* hit) {
  if (c == nullptr || !c->client || hit == nullptr) return 0;
  return c->client->StillValid(kv::SlotHit{hit->slot, hit->offset, hit->generation,
                                           hit->checksum})
             ? 1
             : 0;
}

int openlake_release(openlake_client* c, const uint64_t* pin_batches, size_t batch_count,
                     const uint64_t* reserved_slots, size_t slot_count) {
  return Guard([&] {
    if (c == nullptr || !c->client) return BadArgument("client is NULL");
    if ((batch_count > 0 && pin_batches == nullptr) ||
        (slot_count > 0 && reserved_slots == nullptr)) {
      return BadArgument("pin_batches or reserved_slots is NULL");
    }
    if (batch_count == 0 && slot_count == 0) return static_cast<int>(OPENLAKE_OK);
    return Fail(c->client->Release(absl::MakeConstSpan(pin_batches, batch_count),
                                   absl::MakeConstSpan(reserved_slots, slot_count)));
  });
}

uint64_t openlake_crc64(const void* data, size_t len, uint64_t crc) {
  if (data == nullptr) return crc;
  return openlake::Crc64(data, len, crc);
}

int openlake_stats(openlake_client* c, openlake_pool_stats* out) {
  return Guard([&] {
    if (c == nullptr || !c->client) return BadArgument("client is NULL");
    if (out == nullptr) return BadArgument("stats is NULL");
    auto r = c->client->Stats();
    if (!r.ok()) return Fail(r.status());
    // Copied field by field into the part of the caller's struct it knows.
    openlake_pool_stats s;
    std::memset(&s, 0, sizeof(s));
    s.capacity_bytes = r->capacity_bytes;
    s.used_bytes = r->used_bytes;
    s.committed_blocks = r->committed_blocks;
    s.reserved_slots = r->reserved_slots;
    s.pinned_slots = r->pinned_slots;
    s.namespaces = r->namespaces;
    s.sessions = r->sessions;
    s.lookups = r->lookups;
    s.lookup_keys = r->lookup_keys;
    s.hits = r->hits;
    s.misses = r->misses;
    s.commits = r->commits;
    s.evictions = r->evictions;
    s.bytes_in = r->bytes_in;
    s.bytes_out = r->bytes_out;
    s.disk_capacity_bytes = r->disk_capacity_bytes;
    s.disk_used_bytes = r->disk_used_bytes;
    s.disk_blocks = r->disk_blocks;
    s.disk_hits = r->disk_hits;
    s.cluster_nodes = r->cluster_nodes;
    s.remote_hits = r->remote_hits;
    const size_t n = std::min(out->struct_size, sizeof(s));
    if (n <= sizeof(size_t)) return BadArgument("stats struct_size is too small");
    s.struct_size = out->struct_size;
    std::memcpy(out, &s, n);
    return static_cast<int>(OPENLAKE_OK);
  });
}

}  // extern "C"

/* File: openlake/c/openlake.h
 *
 * The KV pool's client as a plain C API, for engines that are not written in C++ (or that must
 * not depend on libopenlake's C++ ABI): opaque handles, int error codes, no C++ types. Every
 * function is exported from libopenlake.so.1 under the symbol version OPENLAKE_1; a later
 * release only adds functions (under a new version node) and never changes these.
 *
 *   openlake_client* c;
 *   openlake_namespace* ns;
 *   openlake_fingerprint fp;
 *   openlake_fingerprint_init(&fp);
 *   fp.model = "meta-llama/Llama-3.1-8B"; fp.dtype = "bfloat16"; fp.layout = "NHD";
 *   fp.num_layers = 32; fp.num_kv_heads = 8; fp.head_size = 128; fp.block_tokens = 16;
 *   if (openlake_connect("127.0.0.1:9400", NULL, &c) != OPENLAKE_OK)
 *     fprintf(stderr, "%s\n", openlake_last_error());
 *   openlake_namespace_open(c, "llama-8b/tp0", &fp, block_bytes, &ns);
 *   openlake_put(c, ns, keys, blocks, n, 0, &stored);
 *   openlake_get(c, ns, keys, buffers, n, NULL, &loaded, NULL);
 *   openlake_namespace_free(ns);
 *   openlake_close(c);
 *
 * Errors: each call returns OPENLAKE_OK (0) or one of the positive codes below;
 * openlake_strerror names a code, openlake_last_error gives the failed call's own message
 * (per thread, until the next failing call in that thread). No call aborts, throws or exits
 * on bad input: a NULL handle, a NULL array with a count, a key longer than 32 bytes or a
 * block of the wrong size is OPENLAKE_ERR_INVALID_ARGUMENT.
 *
 * Threads: a client may be used from several threads at once (calls are serialised on its
 * one connection, copies run in parallel); each call blocks until the daemon answers.
 *
 * Structs that may grow (options, fingerprint, stats) start with struct_size: set by the
 * *_init function (or to sizeof by the caller), it tells the library which fields the caller
 * knows, so a program built against this header keeps working with a later library.
 */
#ifndef OPENLAKE_C_OPENLAKE_H_
#define OPENLAKE_C_OPENLAKE_H_

#include <stddef.h>
#include <stdint.h>

#if defined(OPENLAKE_BUILDING_LIBRARY)
#define OPENLAKE_API __attribute__((visibility("default")))
#else
#define OPENLAKE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes (the soname's number). */
#define OPENLAKE_ABI_VERSION 1
/* Longest key: an engine's block hash (vLLM's is 32 bytes). */
#define OPENLAKE_MAX_KEY_BYTES 32

/* ---- Errors ---------------------------------------------------------------------------- */

enum openlake_error {
  OPENLAKE_OK = 0,
  OPENLAKE_ERR_INVALID_ARGUMENT = 1, /* bad handle, size, key or count */
  OPENLAKE_ERR_NOT_FOUND = 2,        /* no such namespace */
  OPENLAKE_ERR_ALREADY_EXISTS = 3,
  OPENLAKE_ERR_MISMATCH = 4,     /* the namespace exists with another fingerprint or block
                                    size, or a handle is stale (failed precondition) */
  OPENLAKE_ERR_POOL_FULL = 5,    /* no slot free: every other one is pinned or reserved */
  OPENLAKE_ERR_UNAVAILABLE = 6,  /* the daemon cannot be reached or went away (retry) */
  OPENLAKE_ERR_TIMEOUT = 7,      /* the daemon did not answer within the call timeout */
  OPENLAKE_ERR_PERMISSION = 8,   /* wrong or missing secret */
  OPENLAKE_ERR_DATA_LOSS = 9,    /* bytes failed their checksum */
  OPENLAKE_ERR_UNSUPPORTED = 10, /* the daemon or this client cannot do it (e.g. no slab) */
  OPENLAKE_ERR_NO_MEMORY = 11,
  OPENLAKE_ERR_INTERNAL = 12
};

/* A static, never-NULL name of `code` ("invalid argument", ...; "unknown error" otherwise). */
OPENLAKE_API const char* openlake_strerror(int code);
/* The message of the last call that failed in this thread ("" when none has). Valid until the
 * next call into the library from this thread. */
OPENLAKE_API const char* openlake_last_error(void);

/* OPENLAKE_ABI_VERSION of the library loaded, and its release ("0.1.0"). */
OPENLAKE_API int openlake_abi_version(void);
OPENLAKE_API const char* openlake_version(void);

/* ---- Connecting -------------------------------------------------------------------------- */

typedef struct openlake_client openlake_client;

typedef struct openlake_client_options {
  size_t struct_size;          /* sizeof(openlake_client_options) */
  const char* secret;          /* the daemon's rpc_secret beyond loopback; NULL or "" for none */
  uint32_t connect_timeout_ms; /* default 5000 */
  uint32_t call_timeout_ms;    /* default 10000 */
  int map_slab;                /* 1 (default): map the local daemon's slab; 0: control only */
  int cluster;                 /* 1 (default): misses may be served from the other nodes */
} openlake_client_options;

OPENLAKE_API void openlake_client_options_init(openlake_client_options* options);

/* "host:port" (TCP, moving to the daemon's Unix socket and slab when on the same host) or
 * "unix:/path". `options` may be NULL for the defaults. */
OPENLAKE_API int openlake_connect(const char* address, const openlake_client_options* options,
                                  openlake_client** out);
/* Closes the connection (NULL is a no-op). Pins and reservations it held are released. */
OPENLAKE_API void openlake_close(openlake_client* client);

/* The mapped slab (NULL and 0 without one: a remote daemon, or map_slab 0). */
OPENLAKE_API void* openlake_slab_base(const openlake_client* client);
OPENLAKE_API uint64_t openlake_slab_bytes(const openlake_client* client);
/* The daemon's release, as it told this client. */
OPENLAKE_API const char* openlake_server_version(const openlake_client* client);

/* ---- Namespaces -------------------------------------------------------------------------- */

/* How the engine lays a block out. Opening an existing namespace with other values (or another
 * block size) is OPENLAKE_ERR_MISMATCH, naming the fields that differ. Strings may be NULL
 * (taken as ""). */
typedef struct openlake_fingerprint {
  size_t struct_size; /* sizeof(openlake_fingerprint) */
  const char* model;
  const char* dtype;
  const char* layout; /* e.g. "NHD", "HND", "MLA" */
  uint32_t num_layers;
  uint32_t num_kv_heads;
  uint32_t head_size;
  uint32_t block_tokens;
  uint32_t tp_rank;
  uint32_t tp_size; /* default 1 */
  uint32_t pp_rank;
  uint32_t pp_size; /* default 1 */
  const char* extra;
} openlake_fingerprint;

OPENLAKE_API void openlake_fingerprint_init(openlake_fingerprint* fp);

typedef struct openlake_namespace openlake_namespace;

/* Creates the namespace or opens the existing one with the same fingerprint and block size. */
OPENLAKE_API int openlake_namespace_open(openlake_client* client, const char* name,
                                         const openlake_fingerprint* fp, uint32_t block_bytes,
                                         openlake_namespace** out);
/* The existing namespace `name`, for callers that only ask what exists (openlake_exists,
 * openlake_stats); OPENLAKE_ERR_NOT_FOUND when there is none. */
OPENLAKE_API int openlake_namespace_find(openlake_client* client, const char* name,
                                         openlake_namespace** out);
/* A namespace handle is plain data: it may outlive its client and be used with another client
 * of the same daemon. NULL is a no-op. */
OPENLAKE_API void openlake_namespace_free(openlake_namespace* ns);
OPENLAKE_API uint32_t openlake_namespace_block_bytes(const openlake_namespace* ns);
OPENLAKE_API const char* openlake_namespace_name(const openlake_namespace* ns);

/* ---- Blocks ------------------------------------------------------------------------------ */

/* A key: the engine's block hash, 1 to 32 bytes. */
typedef struct openlake_key {
  uint32_t len;
  uint8_t bytes[OPENLAKE_MAX_KEY_BYTES];
} openlake_key;

/* One piece of a block: a block is the concatenation of its pieces (e.g. one per layer). */
typedef struct openlake_iovec {
  void* base;
  size_t len;
} openlake_iovec;

/* The state of each key after a get. */
enum openlake_block_state {
  OPENLAKE_BLOCK_LOADED = 0,  /* copied, checksum verified */
  OPENLAKE_BLOCK_MISSING = 1, /* not in the pool, or after the first key that was not loaded */
  OPENLAKE_BLOCK_CORRUPT = 2  /* found, but its bytes failed the checksum */
};

/* Stores blocks[i] (block_bytes each) under keys[i]. keys[0] is block `first_depth` of its chain
 * (0: the first block of a prompt); eviction takes a chain's tail before its head. When the
 * pool has room for only part, the leading *stored keys are stored and the call succeeds; none
 * at all is OPENLAKE_ERR_POOL_FULL. */
OPENLAKE_API int openlake_put(openlake_client* client, const openlake_namespace* ns,
                              const openlake_key* keys, const void* const* blocks, size_t count,
                              uint32_t first_depth, size_t* stored);
/* The same with each block in pieces: pieces[] holds piece_counts[0] pieces of block 0, then
 * piece_counts[1] of block 1, ...; each block's pieces add up to block_bytes. */
OPENLAKE_API int openlake_putv(openlake_client* client, const openlake_namespace* ns,
                               const openlake_key* keys, const openlake_iovec* pieces,
                               const size_t* piece_counts, size_t count, uint32_t first_depth,
                               size_t* stored);

/* Loads the longest run of leading keys present into blocks[i] and sets *loaded to its length.
 * `chain_head`: the first key of the chain, when keys[0] is not it (NULL otherwise; in a
 * cluster a chain's owners are found by its head). `states` (NULL, or room for `count`)
 * receives an openlake_block_state per key. A miss is not an error. */
OPENLAKE_API int openlake_get(openlake_client* client, const openlake_namespace* ns,
                              const openlake_key* keys, void* const* blocks, size_t count,
                              const openlake_key* chain_head, size_t* loaded, uint8_t* states);
OPENLAKE_API int openlake_getv(openlake_client* client, const openlake_namespace* ns,
                               const openlake_key* keys, const openlake_iovec* pieces,
                               const size_t* piece_counts, size_t count,
                               const openlake_key* chain_head, size_t* loaded, uint8_t* states);

/* How many leading keys are present (without pinning them: for schedulers). `present` (NULL,
 * or room for `count`) receives 1 or 0 per key. */
OPENLAKE_API int openlake_exists(openlake_client* client, const openlake_namespace* ns,
                                 const openlake_key* keys, size_t count,
                                 const openlake_key* chain_head, size_t* prefix,
                                 uint8_t* present);

/* Drops these keys' blocks (*removed: how many were present), or every block of `ns`. */
OPENLAKE_API int openlake_remove(openlake_client* client, const openlake_namespace* ns,
                                 const openlake_key* keys, size_t count, uint32_t* removed);
OPENLAKE_API int openlake_reset(openlake_client* client, const openlake_namespace* ns);

/* ---- Low level: engines that move the bytes themselves (e.g. by DMA from the slab) -------- */

/* A reserved slot, or a pinned hit: `offset` is from openlake_slab_base(). */
typedef struct openlake_slot {
  uint64_t slot;
  uint64_t offset;
  uint64_t generation;
  uint64_t checksum; /* a hit's CRC-64 as its writer committed it; 0 for a reservation */
} openlake_slot;

typedef struct openlake_commit_entry {
  uint64_t slot;     /* a reserved slot, written */
  openlake_key key;
  uint64_t checksum; /* openlake_crc64 of its block_bytes bytes */
  uint32_t depth;    /* its position in its chain */
} openlake_commit_entry;

/* Reserves up to `count` slots into slots[0..count) (*granted of them). Without allow_partial,
 * fewer than `count` free is OPENLAKE_ERR_POOL_FULL. Unused reservations go back with
 * openlake_release; a reservation neither committed nor released expires with its lease. */
OPENLAKE_API int openlake_reserve(openlake_client* client, const openlake_namespace* ns,
                                  uint32_t count, int allow_partial, openlake_slot* slots,
                                  size_t* granted);
/* Makes written reservations visible under their keys. */
OPENLAKE_API int openlake_commit(openlake_client* client, const openlake_namespace* ns,
                                 const openlake_commit_entry* entries, size_t count);
/* Pins the leading hits into hits[0..*found) as one pin batch (*pin_batch; 0 when nothing was
 * found). Read them from the slab, check openlake_still_valid after copying, then release. */
OPENLAKE_API int openlake_lookup(openlake_client* client, const openlake_namespace* ns,
                                 const openlake_key* keys, size_t count,
                                 const openlake_key* chain_head, openlake_slot* hits,
                                 size_t* found, uint64_t* pin_batch);
/* 1 while `hit`'s slot has not been handed to another writer since the lookup, else 0. */
OPENLAKE_API int openlake_still_valid(const openlake_client* client, const openlake_slot* hit);
/* Releases pin batches and unused reservations (openlake_slot.slot values). */
OPENLAKE_API int openlake_release(openlake_client* client, const uint64_t* pin_batches,
                                  size_t batch_count, const uint64_t* reserved_slots,
                                  size_t slot_count);

/* CRC-64/XZ of [data, data + len), continuing from `crc` (0 to start): the checksum commit
 * entries carry. */
OPENLAKE_API uint64_t openlake_crc64(const void* data, size_t len, uint64_t crc);

/* ---- Statistics -------------------------------------------------------------------------- */

typedef struct openlake_pool_stats {
  size_t struct_size; /* sizeof(openlake_pool_stats) */
  uint64_t capacity_bytes;
  uint64_t used_bytes;
  uint64_t committed_blocks;
  uint64_t reserved_slots;
  uint64_t pinned_slots;
  uint64_t namespaces;
  uint64_t sessions;
  uint64_t lookups;
  uint64_t lookup_keys;
  uint64_t hits;
  uint64_t misses;
  uint64_t commits;
  uint64_t evictions;
  uint64_t bytes_in;
  uint64_t bytes_out;
  uint64_t disk_capacity_bytes;
  uint64_t disk_used_bytes;
  uint64_t disk_blocks;
  uint64_t disk_hits;
  uint64_t cluster_nodes;
  uint64_t remote_hits;
} openlake_pool_stats;

/* Fills the fields of `stats` that its struct_size covers (set struct_size first). */
OPENLAKE_API int openlake_stats(openlake_client* client, openlake_pool_stats* stats);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* OPENLAKE_C_OPENLAKE_H_ */

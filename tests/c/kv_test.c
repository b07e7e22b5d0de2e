/* The C API (openlake/c/openlake.h) against a real openlaked, compiled as C11:
 *   test_c_kv ADDRESS CLOSED_ADDRESS
 * ADDRESS is the daemon's KV address; CLOSED_ADDRESS a loopback port nothing listens on.
 * Prints one line per check and exits 1 at the first failure. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "openlake/c/openlake.h"

#define BLOCK 4096
#define N 16

static int checks;

#define CHECK(cond)                                                                     \
  do {                                                                                  \
    ++checks;                                                                           \
    if (!(cond)) {                                                                      \
      fprintf(stderr, "FAILED %s:%d: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              openlake_last_error());                                                   \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

#define CHECK_OK(call) CHECK((call) == OPENLAKE_OK)

static openlake_key key_of(const char* prefix, int i) {
  openlake_key k;
  memset(&k, 0, sizeof(k));
  k.len = (uint32_t)snprintf((char*)k.bytes, sizeof(k.bytes), "%s-%d", prefix, i);
  return k;
}

/* Bytes of block `i` of writer `w`: every byte depends on both. */
static void fill(uint8_t* buf, size_t len, int w, int i) {
  uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(w * 1000003 + i + 1);
  for (size_t j = 0; j < len; ++j) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    buf[j] = (uint8_t)x;
  }
}

static void fingerprint(openlake_fingerprint* fp, const char* dtype) {
  openlake_fingerprint_init(fp);
  fp->model = "c-abi/tiny";
  fp->dtype = dtype;
  fp->layout = "NHD";
  fp->num_layers = 2;
  fp->num_kv_heads = 4;
  fp->head_size = 128;
  fp->block_tokens = 2;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s ADDRESS CLOSED_ADDRESS\n", argv[0]);
    return 2;
  }
  static uint8_t in[N][BLOCK], out[N][BLOCK];
  const void* blocks[N];
  void* buffers[N];
  openlake_key keys[N + 1];
  for (int i = 0; i < N; ++i) {
    fill(in[i], BLOCK, 1, i);
    blocks[i] = in[i];
    buffers[i] = out[i];
    keys[i] = key_of("c", i);
  }
  keys[N] = key_of("never-stored", 0);

  /* Version and errors. */
  CHECK(openlake_abi_version() == OPENLAKE_ABI_VERSION);
  CHECK(strlen(openlake_version()) > 0);
  for (int code = 0; code <= OPENLAKE_ERR_INTERNAL; ++code) {
    CHECK(strcmp(openlake_strerror(code), "unknown error") != 0);
  }
  CHECK(strcmp(openlake_strerror(99), "unknown error") == 0);

  /* Connecting: bad arguments, a closed port, then the daemon. */
  openlake_client* c = NULL;
  CHECK(openlake_connect(argv[1], NULL, NULL) == OPENLAKE_ERR_INVALID_ARGUMENT);
  CHECK(openlake_connect("", NULL, &c) == OPENLAKE_ERR_INVALID_ARGUMENT && c == NULL);
  openlake_client_options o;
  openlake_client_options_init(&o);
  o.connect_timeout_ms = 2000;
  int rc = openlake_connect(argv[2], &o, &c);
  CHECK(rc == OPENLAKE_ERR_UNAVAILABLE || rc == OPENLAKE_ERR_TIMEOUT);
  CHECK(c == NULL && strlen(openlake_last_error()) > 0);
  CHECK_OK(openlake_connect(argv[1], &o, &c));
  CHECK(c != NULL && openlake_slab_base(c) != NULL && openlake_slab_bytes(c) > 0);
  CHECK(strlen(openlake_server_version(c)) > 0);

  /* Namespaces: create, find, refuse another layout under the same name. */
  openlake_fingerprint fp, other;
  fingerprint(&fp, "bfloat16");
  fingerprint(&other, "float16");
  openlake_namespace* ns = NULL;
  openlake_namespace* found = NULL;
  openlake_namespace* wrong = NULL;
  CHECK(openlake_namespace_find(c, "c-abi/none", &found) == OPENLAKE_ERR_NOT_FOUND);
  CHECK_OK(openlake_namespace_open(c, "c-abi/tp0", &fp, BLOCK, &ns));
  CHECK(openlake_namespace_block_bytes(ns) == BLOCK);
  CHECK(strcmp(openlake_namespace_name(ns), "c-abi/tp0") == 0);
  CHECK(openlake_namespace_open(c, "c-abi/tp0", &other, BLOCK, &wrong) == OPENLAKE_ERR_MISMATCH);
  CHECK(wrong == NULL && strstr(openlake_last_error(), "dtype") != NULL);
  CHECK_OK(openlake_namespace_find(c, "c-abi/tp0", &found));
  CHECK(openlake_namespace_block_bytes(found) == BLOCK);

  /* Put, exists, get. */
  size_t stored = 0, loaded = 0, prefix = 0;
  uint8_t states[N + 1], present[N + 1];
  CHECK_OK(openlake_put(c, ns, keys, blocks, N, 0, &stored));
  CHECK(stored == N);
  CHECK_OK(openlake_exists(c, found, keys, N + 1, NULL, &prefix, present));
  CHECK(prefix == N && present[0] == 1 && present[N - 1] == 1 && present[N] == 0);
  CHECK_OK(openlake_get(c, ns, keys, buffers, N, NULL, &loaded, states));
  CHECK(loaded == N);
  for (int i = 0; i < N; ++i) CHECK(states[i] == OPENLAKE_BLOCK_LOADED);
  CHECK(memcmp(in, out, sizeof(in)) == 0);

  /* A load that starts after blocks the engine holds names the chain's head. */
  memset(out, 0, sizeof(out));
  CHECK_OK(openlake_get(c, ns, keys + 4, buffers, 4, &keys[0], &loaded, NULL));
  CHECK(loaded == 4 && memcmp(in[4], out[0], BLOCK) == 0 && memcmp(in[7], out[3], BLOCK) == 0);

  /* A hole ends the loaded prefix. */
  uint32_t removed = 0;
  CHECK_OK(openlake_remove(c, ns, &keys[5], 1, &removed));
  CHECK(removed == 1);
  CHECK_OK(openlake_get(c, ns, keys, buffers, N, NULL, &loaded, states));
  CHECK(loaded == 5 && states[4] == OPENLAKE_BLOCK_LOADED && states[5] == OPENLAKE_BLOCK_MISSING);
  CHECK_OK(openlake_exists(c, ns, keys, N, NULL, &prefix, NULL));
  CHECK(prefix == 5);

  /* Blocks in pieces (one per "layer"): 1000 + 3096 bytes in, 3 pieces out. */
  openlake_key vkeys[4];
  openlake_iovec vin[8], vout[12];
  size_t in_counts[4], out_counts[4];
  static uint8_t vbuf[4][BLOCK];
  for (int i = 0; i < 4; ++i) {
    vkeys[i] = key_of("v", i);
    vin[2 * i] = (openlake_iovec){in[i], 1000};
    vin[2 * i + 1] = (openlake_iovec){in[i] + 1000, BLOCK - 1000};
    in_counts[i] = 2;
    vout[3 * i] = (openlake_iovec){vbuf[i], 10};
    vout[3 * i + 1] = (openlake_iovec){vbuf[i] + 10, 4000};
    vout[3 * i + 2] = (openlake_iovec){vbuf[i] + 4010, BLOCK - 4010};
    out_counts[i] = 3;
  }
  CHECK_OK(openlake_putv(c, ns, vkeys, vin, in_counts, 4, 0, &stored));
  CHECK(stored == 4);
  CHECK_OK(openlake_getv(c, ns, vkeys, vout, out_counts, 4, NULL, &loaded, NULL));
  CHECK(loaded == 4 && memcmp(vbuf, in, sizeof(vbuf)) == 0);

  /* Low level: reserve, write into the slab, commit with a CRC-64, look up, read, release. */
  openlake_slot slots[2], hits[2];
  size_t granted = 0;
  CHECK_OK(openlake_reserve(c, ns, 2, 0, slots, &granted));
  CHECK(granted == 2);
  uint8_t* slab = (uint8_t*)openlake_slab_base(c);
  openlake_commit_entry entries[2];
  openlake_key lkeys[2];
  for (int i = 0; i < 2; ++i) {
    lkeys[i] = key_of("low", i);
    fill(slab + slots[i].offset, BLOCK, 2, i);
    entries[i].slot = slots[i].slot;
    entries[i].key = lkeys[i];
    entries[i].checksum = openlake_crc64(slab + slots[i].offset, BLOCK, 0);
    entries[i].depth = (uint32_t)i;
  }
  CHECK_OK(openlake_commit(c, ns, entries, 2));
  size_t nhits = 0;
  uint64_t batch = 0;
  CHECK_OK(openlake_lookup(c, ns, lkeys, 2, NULL, hits, &nhits, &batch));
  CHECK(nhits == 2 && batch != 0);
  for (int i = 0; i < 2; ++i) {
    uint8_t want[BLOCK];
    fill(want, BLOCK, 2, i);
    CHECK(hits[i].checksum == entries[i].checksum);
    CHECK(memcmp(slab + hits[i].offset, want, BLOCK) == 0);
    CHECK(openlake_still_valid(c, &hits[i]) == 1);
  }
  CHECK_OK(openlake_release(c, &batch, 1, NULL, 0));
  /* A reservation not used goes back. */
  CHECK_OK(openlake_reserve(c, ns, 1, 1, slots, &granted));
  CHECK(granted == 1);
  CHECK_OK(openlake_release(c, NULL, 0, &slots[0].slot, 1));

  /* Bad input: a precise error, nothing stored, the daemon unharmed. */
  openlake_key bad = key_of("x", 0);
  bad.len = 0;
  CHECK(openlake_put(c, ns, &bad, blocks, 1, 0, &stored) == OPENLAKE_ERR_INVALID_ARGUMENT);
  bad.len = OPENLAKE_MAX_KEY_BYTES + 1;
  CHECK(openlake_exists(c, ns, &bad, 1, NULL, &prefix, NULL) == OPENLAKE_ERR_INVALID_ARGUMENT);
  CHECK(strstr(openlake_last_error(), "33 bytes") != NULL);
  const void* null_block[1] = {NULL};
  CHECK(openlake_put(c, ns, keys, null_block, 1, 0, &stored) == OPENLAKE_ERR_INVALID_ARGUMENT);
  CHECK(openlake_put(c, NULL, keys, blocks, 1, 0, &stored) == OPENLAKE_ERR_INVALID_ARGUMENT);
  CHECK(openlake_get(NULL, ns, keys, buffers, 1, NULL, &loaded, NULL) ==
        OPENLAKE_ERR_INVALID_ARGUMENT);
  size_t short_counts[1] = {1}; /* 1000 bytes where 4096 are stored */
  CHECK(openlake_putv(c, ns, vkeys, vin, short_counts, 1, 0, &stored) ==
        OPENLAKE_ERR_INVALID_ARGUMENT);
  CHECK(openlake_lookup(c, ns, keys, 1, NULL, hits, NULL, &batch) ==
        OPENLAKE_ERR_INVALID_ARGUMENT);
  CHECK(openlake_still_valid(NULL, &hits[0]) == 0);
  CHECK_OK(openlake_exists(c, ns, keys, 5, NULL, &prefix, NULL));
  CHECK(prefix == 5);

  /* Stats, with the full struct and with one that stops early (an older caller). */
  openlake_pool_stats st;
  memset(&st, 0xff, sizeof(st));
  st.struct_size = sizeof(st);
  CHECK_OK(openlake_stats(c, &st));
  CHECK(st.capacity_bytes > 0 && st.committed_blocks >= N - 1 + 4 + 2 && st.namespaces >= 1);
  CHECK(st.hits > 0 && st.cluster_nodes <= 1);
  openlake_pool_stats early;
  memset(&early, 0xee, sizeof(early));
  early.struct_size = offsetof(openlake_pool_stats, committed_blocks);
  CHECK_OK(openlake_stats(c, &early));
  CHECK(early.capacity_bytes == st.capacity_bytes);
  CHECK(early.committed_blocks == 0xeeeeeeeeeeeeeeeeull);

  /* Reset empties the namespace; a second client sees the same pool. */
  openlake_client* c2 = NULL;
  CHECK_OK(openlake_connect(argv[1], NULL, &c2));
  CHECK_OK(openlake_reset(c2, found));
  CHECK_OK(openlake_exists(c, ns, keys, 5, NULL, &prefix, NULL));
  CHECK(prefix == 0);
  CHECK_OK(openlake_get(c, ns, keys, buffers, 1, NULL, &loaded, states));
  CHECK(loaded == 0 && states[0] == OPENLAKE_BLOCK_MISSING);

  openlake_namespace_free(found);
  openlake_namespace_free(ns);
  openlake_namespace_free(NULL);
  openlake_close(c2);
  openlake_close(c);
  openlake_close(NULL);
  printf("C API: %d checks passed\n", checks);
  return 0;
}

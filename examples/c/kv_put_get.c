/* The KV pool from C: store a prompt's blocks, find how many are there, load them back.
 *
 *   cc -std=c11 kv_put_get.c $(pkg-config --cflags --libs openlake) -o kv_put_get
 *   ./kv_put_get 127.0.0.1:9400
 *
 * An engine does the same with its own block hashes as keys and its KV blocks as buffers
 * (openlake_putv/openlake_getv take a block in pieces, e.g. one per layer). Copy freely. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openlake/c/openlake.h>

#define BLOCKS 8
#define BLOCK_BYTES (64 * 1024)

static int fail(const char* what, int code) {
  fprintf(stderr, "%s: %s: %s\n", what, openlake_strerror(code), openlake_last_error());
  return 1;
}

int main(int argc, char** argv) {
  const char* address = argc > 1 ? argv[1] : "127.0.0.1:9400";
  openlake_client* client = NULL;
  int rc = openlake_connect(address, NULL, &client);
  if (rc != OPENLAKE_OK) return fail("connect", rc);

  /* The namespace pins down how a block is laid out: two engines share blocks only when every
   * field agrees. */
  openlake_fingerprint fp;
  openlake_fingerprint_init(&fp);
  fp.model = "example/tiny";
  fp.dtype = "float16";
  fp.layout = "NHD";
  fp.num_layers = 4;
  fp.num_kv_heads = 8;
  fp.head_size = 128;
  fp.block_tokens = 8;
  openlake_namespace* ns = NULL;
  rc = openlake_namespace_open(client, "example/tiny/tp0", &fp, BLOCK_BYTES, &ns);
  if (rc != OPENLAKE_OK) return fail("open namespace", rc);

  /* Keys are the engine's block hashes (here: made up), chained along the prompt. */
  openlake_key keys[BLOCKS];
  uint8_t* data = malloc((size_t)BLOCKS * BLOCK_BYTES);
  uint8_t* back = malloc((size_t)BLOCKS * BLOCK_BYTES);
  const void* blocks[BLOCKS];
  void* buffers[BLOCKS];
  if (data == NULL || back == NULL) return 1;
  for (int i = 0; i < BLOCKS; ++i) {
    memset(&keys[i], 0, sizeof(keys[i]));
    keys[i].len = (uint32_t)snprintf((char*)keys[i].bytes, OPENLAKE_MAX_KEY_BYTES,
                                     "prompt-42/block-%d", i);
    memset(data + (size_t)i * BLOCK_BYTES, 'a' + i, BLOCK_BYTES);
    blocks[i] = data + (size_t)i * BLOCK_BYTES;
    buffers[i] = back + (size_t)i * BLOCK_BYTES;
  }

  size_t stored = 0, prefix = 0, loaded = 0;
  rc = openlake_put(client, ns, keys, blocks, BLOCKS, 0, &stored);
  if (rc != OPENLAKE_OK) return fail("put", rc);
  rc = openlake_exists(client, ns, keys, BLOCKS, NULL, &prefix, NULL);
  if (rc != OPENLAKE_OK) return fail("exists", rc);
  rc = openlake_get(client, ns, keys, buffers, BLOCKS, NULL, &loaded, NULL);
  if (rc != OPENLAKE_OK) return fail("get", rc);
  printf("stored %zu blocks, %zu present, %zu loaded, %s\n", stored, prefix, loaded,
         memcmp(data, back, loaded * BLOCK_BYTES) == 0 ? "bytes equal" : "BYTES DIFFER");

  free(data);
  free(back);
  openlake_namespace_free(ns);
  openlake_close(client);
  return loaded == BLOCKS ? 0 : 1;
}

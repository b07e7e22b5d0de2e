#!/usr/bin/env python3
"""sglang_bench: SGLang HiCache page backup and prefetch through OpenLakeHiCacheStorage.

A host KV pool in SGLang's page_first MHA layout (Llama-3-8B shape per TP rank of 8: 32 layers,
1 KV head, head size 128, bfloat16, 64-token pages: 1 MiB a page, K and V 512 KiB each) backs
up `--pages` pages with batch_set_v1 and prefetches them into other host slots with
batch_exists + batch_get_v1, in SGLang's batches of at most 128 pages, as its backup and
prefetch threads do. Baseline in the same run: one core's copy (torch) of the same pages'
bytes, out of the pool and back in. Every prefetched page is compared with what was backed up.

    python3 bench/sglang_bench.py --json            # starts its own openlaked
The bar is the KV pool's (>= 0.8 of memcpy, /work/shared/PERF.md): the backend adds a Python
call per batch to the C++ client's put and get.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BATCH = 128  # SGLang's most pages per storage call


class PageFirstPool:
    """The part of SGLang's MHA host pool (page_first layout) a storage backend uses."""

    def __init__(self, torch, pages: int, page_size: int, layers: int, heads: int, dim: int):
        self.layout, self.page_size, self.layer_num = "page_first", page_size, layers
        self.head_num, self.head_dim, self.dtype = heads, dim, torch.bfloat16
        self.size = pages * page_size
        self.kv_buffer = torch.empty((2, self.size, layers, heads, dim), dtype=self.dtype)
        self.kv_buffer.view(torch.int16).random_(-30000, 30000)
        self._it = 2

    def get_size_per_token(self) -> int:
        return self.head_dim * self.head_num * self.layer_num * self._it * 2

    def get_page_buffer_meta(self, indices):
        base = self.kv_buffer.data_ptr()
        per_token = self.layer_num * self.head_num * self.head_dim * self._it
        v_offset = self.size * per_token
        ptrs, sizes = [], []
        for s in indices[::self.page_size].tolist():
            ptrs += [base + s * per_token, base + s * per_token + v_offset]
            sizes += [self.page_size * per_token] * 2
        return ptrs, sizes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="a smoke run")
    ap.add_argument("--openlaked", default=str(ROOT / "build/tools/openlaked/openlaked"))
    ap.add_argument("--pages", type=int, default=256, help="pages backed up and prefetched")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "build/bindings/python"))
    import torch

    torch.set_num_threads(1)
    from openlake_client.local_daemon import LocalDaemon
    from openlake_client.sglang import HiCacheStorageConfig, OpenLakeHiCacheStorage

    if args.quick:
        args.pages, args.rounds = 16, 1
    layers, heads, dim, page_size = 32, 1, 128, 64
    pool = PageFirstPool(torch, 2 * args.pages, page_size, layers, heads, dim)
    page_bytes = pool.get_size_per_token() * page_size
    src = torch.arange(args.pages * page_size, dtype=torch.int64)
    dst = src + args.pages * page_size
    total = args.pages * page_bytes
    with tempfile.TemporaryDirectory(prefix="openlake-sglangbench-") as tmp:
        gib = 2 * total / 2**30 + 0.25
        daemon = LocalDaemon(args.openlaked, Path(tmp), gib, slab_settings="segment_mb = 64\n")
        try:
            cfg = HiCacheStorageConfig(
                tp_rank=0, tp_size=8, pp_rank=0, pp_size=1, attn_cp_rank=0, attn_cp_size=1,
                is_mla_model=False, enable_storage_metrics=False, is_page_first_layout=True,
                model_name="bench/llama-3-8b", extra_config={"openlake_nodes": [daemon.address]})
            backend = OpenLakeHiCacheStorage(cfg, {})
            backend.register_mem_pool_host(pool)
            ours, mem = [], []
            half = args.pages * page_size
            scratch = torch.zeros_like(pool.kv_buffer[:, :half])  # touched before it is timed
            for r in range(args.rounds + 1):  # round 0 warms up
                keys = [f"{r:08x}{i:056x}" for i in range(args.pages)]
                t0 = time.perf_counter()
                for i in range(0, args.pages, BATCH):
                    ids = src[i * page_size:(i + BATCH) * page_size]
                    assert all(backend.batch_set_v1(keys[i:i + BATCH], ids))
                for i in range(0, args.pages, BATCH):
                    assert backend.batch_exists(keys[i:i + BATCH]) == len(keys[i:i + BATCH])
                    ids = dst[i * page_size:(i + BATCH) * page_size]
                    assert all(backend.batch_get_v1(keys[i:i + BATCH], ids))
                t1 = time.perf_counter()
                bits = pool.kv_buffer.view(torch.int16)  # random bits: NaNs compare unequal
                if not torch.equal(bits[:, :half], bits[:, half:]):
                    raise SystemExit("sglang_bench: prefetched pages differ from the backed up")
                pool.kv_buffer[:, half:].zero_()
                t2 = time.perf_counter()
                for plane in range(2):  # K, V: one contiguous run each, out and back in
                    scratch[plane].copy_(pool.kv_buffer[plane, :half])
                    pool.kv_buffer[plane, half:].copy_(scratch[plane])
                t3 = time.perf_counter()
                if r > 0:
                    ours.append(t1 - t0)
                    mem.append(t3 - t2)
                backend.clear()
            backend.close()
        finally:
            daemon.stop()
    ours_gbps = 2 * total / statistics.median(ours) / 1e9
    mem_gbps = 2 * total / statistics.median(mem) / 1e9
    print(f"{args.pages} pages of {page_bytes >> 10} KiB (2 pieces each), batches of {BATCH}: "
          f"backup+prefetch {ours_gbps:.2f} GB/s, one core's copy {mem_gbps:.2f} GB/s, "
          f"ratio {ours_gbps / mem_gbps:.2f} (bar 0.8)")
    if args.json:
        print(json.dumps({"bench": "sglang_hicache", "page_bytes": page_bytes,
                          "pages": args.pages, "ours_GBps": round(ours_gbps, 3),
                          "memcpy_GBps": round(mem_gbps, 3),
                          "ratio": round(ours_gbps / mem_gbps, 3), "bar": 0.8}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""connector_bench: the vLLM connector's worker path on a host-memory KV cache.

A worker instance of OpenLakeConnector with per-layer KV tensors in host memory (FlashInfer's
(blocks, 2, 16, 8, 128) bfloat16 layout, `--layers` layers: 64 KiB per layer per block) saves
and loads `--blocks` scattered blocks a step exactly as vLLM drives it (bind_connector_metadata,
wait_for_save / start_load_kv, clear_connector_metadata), through the memcpy engine (the C++
client copies and checksums each block's per-layer pieces). In the same run: the same blocks
through the bare client (put/get with the same pieces: what the connector adds), and one core's
memmove of the same pieces into a buffer and out into the target blocks (the KV bar, >= 0.8,
/work/shared/PERF.md). Loaded blocks are compared with the saved ones.

    /usr/bin/python3 bench/connector_bench.py --json     # starts its own openlaked
"""

import argparse
import ctypes
import json
import os
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def config(address: str, layers: int):
    ns = types.SimpleNamespace
    model = ns(model="bench/llama-shape", served_model_name=None, dtype="bfloat16",
               use_mla=False, get_num_kv_heads=lambda pc=None: 8, get_head_size=lambda: 128,
               get_num_layers=lambda pc=None: layers)
    return ns(
        kv_transfer_config=ns(kv_connector="OpenLakeConnector", kv_role="kv_both",
                              kv_connector_extra_config={"openlake_nodes": [address],
                                                         "openlake_async_save": False},
                              engine_id="bench", is_kv_producer=True, is_kv_consumer=True),
        cache_config=ns(block_size=16, cache_dtype="auto", enable_prefix_caching=False,
                        prefix_caching_hash_algo="sha256", hash_block_size=None),
        model_config=model,
        parallel_config=ns(tensor_parallel_size=1, pipeline_parallel_size=1, rank=0),
        scheduler_config=ns(max_num_batched_tokens=8192))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="a smoke run")
    ap.add_argument("--openlaked", default=str(ROOT / "build/tools/openlaked/openlaked"))
    ap.add_argument("--layers", type=int, default=8, help="64 KiB per layer per block")
    ap.add_argument("--blocks", type=int, default=64, help="blocks saved and loaded a step")
    ap.add_argument("--steps", type=int, default=8, help="steps per round")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.path.insert(0, str(ROOT / "build/bindings/python"))
    import torch

    torch.set_num_threads(1)
    from openlake_client.local_daemon import LocalDaemon
    from openlake_client.openlake_connector import (KVConnectorRole, LoadSpec, OpenLakeConnector,
                                                    OpenLakeConnectorMetadata, SaveSpec)

    if args.quick:
        args.layers, args.blocks, args.steps, args.rounds = 2, 16, 2, 1
    gpu_blocks = 2 * args.blocks * args.steps + 8
    with tempfile.TemporaryDirectory(prefix="openlake-connbench-") as tmp:
        block_bytes = args.layers * 64 * 1024
        gib = 3 * args.blocks * args.steps * block_bytes / 2**30 + 0.25
        daemon = LocalDaemon(args.openlaked, Path(tmp), gib, slab_settings="segment_mb = 64\n")
        try:
            cfg = config(daemon.address, args.layers)
            worker = OpenLakeConnector(cfg, KVConnectorRole.WORKER, None)
            kv = {f"model.layers.{i}.self_attn.attn":
                  torch.empty((gpu_blocks, 2, 16, 8, 128), dtype=torch.bfloat16)
                  for i in range(args.layers)}
            for t in kv.values():
                t.view(torch.int16).random_(-30000, 30000)
            worker.register_kv_caches(kv)
            layout, client, ns = worker._layout, worker._client, worker._nss[0]
            assert layout.block_bytes == block_bytes
            g = torch.Generator().manual_seed(1)
            n = args.blocks * args.steps
            order = torch.randperm(gpu_blocks - 8, generator=g).tolist()
            src, dst = order[:n], order[n:2 * n]
            scratch = torch.zeros(n * block_bytes, dtype=torch.uint8)  # touched up front
            src_pieces, dst_pieces = layout.pieces_for(src), layout.pieces_for(dst)
            results = {"connector": [], "client": [], "memcpy": []}
            for r in range(args.rounds + 1):  # round 0 warms up
                keys = [os.urandom(32) for _ in range(n)]
                ckeys = [os.urandom(32) for _ in range(n)]
                t0 = time.perf_counter()
                for s in range(args.steps):
                    lo, hi = s * args.blocks, (s + 1) * args.blocks
                    meta = OpenLakeConnectorMetadata()
                    meta.saves = [SaveSpec("r", keys[lo:hi], src[lo:hi], 0, False)]
                    worker.bind_connector_metadata(meta)
                    worker.wait_for_save()
                    worker.clear_connector_metadata()
                for s in range(args.steps):
                    lo, hi = s * args.blocks, (s + 1) * args.blocks
                    meta = OpenLakeConnectorMetadata()
                    meta.loads = [LoadSpec("r", keys[lo:hi], dst[lo:hi], False)]
                    worker.bind_connector_metadata(meta)
                    worker.start_load_kv(None)
                    worker.wait_for_save()
                    worker.clear_connector_metadata()
                    if worker.get_block_ids_with_load_errors():
                        raise SystemExit("connector_bench: a load failed")
                t1 = time.perf_counter()
                for s in range(args.steps):
                    lo, hi = s * args.blocks, (s + 1) * args.blocks
                    client.put(ns, ckeys[lo:hi], layout.pieces_for(src[lo:hi]), 0)
                for s in range(args.steps):
                    lo, hi = s * args.blocks, (s + 1) * args.blocks
                    loaded, _ = client.get(ns, ckeys[lo:hi], layout.pieces_for(dst[lo:hi]))
                    if loaded != hi - lo:
                        raise SystemExit("connector_bench: a bare get failed")
                t2 = time.perf_counter()
                # One core's memmove of the same pieces into a buffer, and out into the targets.
                at = scratch.data_ptr()
                for pieces in src_pieces:
                    for addr, length in pieces:
                        ctypes.memmove(at, addr, length)
                        at += length
                at = scratch.data_ptr()
                for pieces in dst_pieces:
                    for addr, length in pieces:
                        ctypes.memmove(addr, at, length)
                        at += length
                t3 = time.perf_counter()
                for t in kv.values():
                    if not torch.equal(t[src].view(torch.int16), t[dst].view(torch.int16)):
                        raise SystemExit("connector_bench: loaded blocks differ from saved")
                if r > 0:
                    results["connector"].append(t1 - t0)
                    results["client"].append(t2 - t1)
                    results["memcpy"].append(t3 - t2)
                client.reset(ns)
            worker.shutdown()
        finally:
            daemon.stop()
    moved = 2 * n * block_bytes
    gbps = {k: moved / statistics.median(v) / 1e9 for k, v in results.items()}
    print(f"{args.steps} steps of {args.blocks} blocks of {block_bytes >> 10} KiB "
          f"({args.layers} layers, scattered), saved then loaded: connector {gbps['connector']:.2f} "
          f"GB/s, bare client {gbps['client']:.2f} GB/s, one core's memmove {gbps['memcpy']:.2f} "
          f"GB/s; connector/memcpy {gbps['connector'] / gbps['memcpy']:.2f} (bar 0.8), "
          f"connector/client {gbps['connector'] / gbps['client']:.2f}")
    if args.json:
        print(json.dumps({"bench": "connector_host", "block_bytes": block_bytes,
                          "blocks_per_step": args.blocks,
                          "connector_GBps": round(gbps["connector"], 3),
                          "client_GBps": round(gbps["client"], 3),
                          "memcpy_GBps": round(gbps["memcpy"], 3),
                          "ratio": round(gbps["connector"] / gbps["memcpy"], 3),
                          "connector_over_client": round(gbps["connector"] / gbps["client"], 3),
                          "bar": 0.8}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

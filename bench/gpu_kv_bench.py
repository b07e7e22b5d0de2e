#!/usr/bin/env python3
"""gpu_kv_bench: KV save and load between the pool and a vLLM-layout GPU KV cache.

Llama-3-8B shape: 32 layers, 8 KV heads, head size 128, 16-token blocks, bfloat16, FlashInfer /
blocks-first layout (num_blocks, 2, 16, 8, 128) per layer: 64 KiB per layer per block, 2 MiB per
block. Each step saves (then loads) `--blocks` scattered blocks through the connector's copy
engine (openlake_client.torch_mover.TorchMover, the code path OpenLakeConnector uses on a GPU),
once per crossing path: "dma" (one DMA copy per run of back-to-back slab slots), "kernel" (one
index kernel over mapped host memory per step and direction) and "auto" (the connector's
default, choosing per step). In the same run torch's own pinned-memory copies of the same bytes
are measured: one large copy, and the same bytes in 2 MiB pieces.

    python3 bench/gpu_kv_bench.py --json            # starts its own openlaked
Exits 77 (skip) when no CUDA device is visible. PERF.md's bar: save and load >= 45 GB/s.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def gbps(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e9 if seconds > 0 else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--openlaked", default=str(ROOT / "build/tools/openlaked/openlaked"))
    ap.add_argument("--target", help="use a running daemon instead")
    ap.add_argument("--blocks", type=int, default=512, help="blocks per step (2 MiB each)")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--gpu-blocks", type=int, default=4096, help="KV cache size in blocks")
    ap.add_argument("--crc-threads", type=int, default=12)
    ap.add_argument("--paths", default="auto,dma,kernel", help="crossing paths to measure")
    ap.add_argument("--profile", action="store_true",
                    help="one more pass of the auto path, timed stage by stage")
    args = ap.parse_args()
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.path.insert(0, str(ROOT / "build/bindings/python"))

    import torch

    if not torch.cuda.is_available():
        print("gpu_kv_bench: no CUDA device visible: skipped")
        return 77
    if args.quick:
        args.blocks, args.steps, args.gpu_blocks = 64, 2, 512
    import openlake_client as ol
    from openlake_client.layout import plan_layout
    from openlake_client.local_daemon import LocalDaemon
    from openlake_client.torch_mover import TorchMover

    layers, heads, head, bs = 32, 8, 128, 16
    dev = torch.device("cuda")
    kv = {f"model.layers.{i}.self_attn.attn":
          torch.randn(args.gpu_blocks, 2, bs, heads, head, device=dev).to(torch.bfloat16)
          for i in range(layers)}
    layout = plan_layout(kv, bs)
    block_bytes = layout.block_bytes
    step_bytes = block_bytes * args.blocks
    paths = [p for p in args.paths.split(",") if p]
    # Room for every step of every path (warm-ups included): each path's saves get fresh slots.
    # A last pass ("evicting", the auto path) then runs on the full pool: every Reserve evicts,
    # and slots come back in whatever order eviction frees them, as in a long-running server.
    fresh_passes = len(paths) + (1 if args.profile else 0)
    pool_gb = step_bytes * (args.steps + 1) * fresh_passes / (1 << 30) + 0.25
    tmp = Path(tempfile.mkdtemp(prefix="openlake-gpu-bench-"))
    proc = None
    try:
        if args.target:
            addr = args.target
        else:
            proc = LocalDaemon(args.openlaked, tmp, pool_gb)
            addr = proc.address
        client = ol.Client(addr)
        ns = client.open_namespace("gpu-bench/llama3-8b", {
            "model": "llama-3-8b-shape", "dtype": "bfloat16", "layout": layout.signature,
            "num_layers": layers, "num_kv_heads": heads, "head_size": head,
            "block_tokens": bs}, block_bytes)
        g = torch.Generator().manual_seed(1)

        def step_ids():
            return torch.randperm(args.gpu_blocks, generator=g)[:args.blocks].tolist()

        movers = []
        register_s = 0.0

        def run_path(path, label=None, profile=None):
            nonlocal register_s
            label = label or path
            mover = TorchMover(layout, client, ns, crc_threads=args.crc_threads, copy_path=path)
            movers.append(mover)
            if len(movers) == 1:  # steady state: every segment registered (once, timed apart)
                t = time.perf_counter()
                mover.register_all()
                register_s = time.perf_counter() - t
            else:
                mover.register_all()  # shares the first one's registrations
            # Warm-up: fills the caching allocator.
            ids = step_ids()
            keys = [f"{label}-warm-{i}".encode() for i in range(args.blocks)]
            mover.save(keys, ids, 0)
            mover.load(keys, ids)
            save_t = load_t = 0.0
            saved = loaded = 0
            mover.profile = profile
            for s in range(args.steps):
                ids = step_ids()
                keys = [f"{label}-s{s}-{i}".encode() for i in range(args.blocks)]
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                saved += mover.save(keys, ids, 0)
                t1 = time.perf_counter()
                target = step_ids()
                expect = {n: t[ids].clone() for n, t in list(kv.items())[:2]}
                torch.cuda.synchronize()
                t2 = time.perf_counter()
                loaded += mover.load(keys, target)
                torch.cuda.synchronize()
                t3 = time.perf_counter()
                save_t += t1 - t0
                load_t += t3 - t2
                for n, t in list(kv.items())[:2]:  # every block of two layers landed exactly
                    if not torch.equal(t[target], expect[n]):
                        raise SystemExit(f"{label}: load produced wrong bytes in layer {n}")
            if saved != args.steps * args.blocks or loaded != saved:
                raise SystemExit(f"{label}: saved {saved}, loaded {loaded} of "
                                 f"{args.steps * args.blocks} blocks (pool too small?)")
            return gbps(saved * block_bytes, save_t), gbps(loaded * block_bytes, load_t)

        measured = {p: run_path(p) for p in paths}
        profiles = {"fresh slots": {}, "full pool": {}}
        if args.profile:
            run_path("auto", "profiled-fresh", profiles["fresh slots"])
        measured["evicting"] = run_path("auto", "evicting")
        if args.profile:
            run_path("auto", "profiled-full", profiles["full pool"])
        for mover in reversed(movers):
            mover.close()

        # Baseline: torch pinned copies of the same bytes.
        host = torch.empty(step_bytes, dtype=torch.uint8).pin_memory()
        devbuf = torch.empty(step_bytes, dtype=torch.uint8, device=dev)
        for _ in range(2):
            devbuf.copy_(host, non_blocking=True)
            host.copy_(devbuf, non_blocking=True)
        torch.cuda.synchronize()

        def timed(fn, reps=args.steps):
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(reps):
                fn()
            torch.cuda.synchronize()
            return (time.perf_counter() - t) / reps

        h2d = timed(lambda: devbuf.copy_(host, non_blocking=True))
        d2h = timed(lambda: host.copy_(devbuf, non_blocking=True))
        piece = 2 << 20

        def pieces_h2d():
            for o in range(0, step_bytes, piece):
                devbuf[o:o + piece].copy_(host[o:o + piece], non_blocking=True)

        h2d_2m = timed(pieces_h2d)
        result = {
            "bench": "gpu_kv", "gpu": torch.cuda.get_device_name(0), "block_bytes": block_bytes,
            "blocks_per_step": args.blocks, "steps": args.steps,
            "save_crc_on_gpu": bool(ol.has_cuda_crc()),
            "slab_register_GBps": round(gbps(int(client.slab_bytes), register_s), 2),
            "torch_h2d_GBps": round(gbps(step_bytes, h2d), 2),
            "torch_d2h_GBps": round(gbps(step_bytes, d2h), 2),
            "torch_h2d_2MiB_pieces_GBps": round(gbps(step_bytes, h2d_2m), 2),
        }
        print(f"GPU {result['gpu']}: {args.steps} steps of {args.blocks} blocks of "
              f"{block_bytes >> 20} MiB; save checksums on the "
              f"{'GPU' if result['save_crc_on_gpu'] else 'host'}")
        print(f"  first use of the slab (CUDA registration, once): "
              f"{result['slab_register_GBps']} GB/s")
        for p, (save, load) in measured.items():
            sfx = "" if p == "auto" else f"_{p}"
            result[f"save{sfx}_GBps"] = round(save, 2)
            result[f"load{sfx}_GBps"] = round(load, 2)
            result[f"save{sfx}_over_torch_d2h"] = round(save / result["torch_d2h_GBps"], 3)
            result[f"load{sfx}_over_torch_h2d"] = round(load / result["torch_h2d_GBps"], 3)
            print(f"  {p:6}: save {save:.2f} GB/s, load {load:.2f} GB/s (bar >= 45)")
        print(f"  torch pinned: H2D {result['torch_h2d_GBps']} GB/s, D2H "
              f"{result['torch_d2h_GBps']} GB/s, H2D in 2 MiB pieces "
              f"{result['torch_h2d_2MiB_pieces_GBps']} GB/s")
        for kind, stages in profiles.items():
            if not stages:
                continue
            print(f"  stages of the auto path, {kind}, ms per step of {step_bytes >> 20} MiB "
                  f"(each ends with a device sync):")
            for name, sec in stages.items():
                print(f"    {name:28} {sec * 1e3 / args.steps:8.2f}")
            result[f"stages_ms_per_step ({kind})"] = {k: round(v * 1e3 / args.steps, 2)
                                                     for k, v in stages.items()}
        if args.json:
            print(json.dumps(result))
        return 0
    finally:
        if proc is not None:
            proc.stop()


if __name__ == "__main__":
    sys.exit(main())

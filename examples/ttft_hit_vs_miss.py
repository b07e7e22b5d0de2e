#!/usr/bin/env python3
"""Time to first token on a miss, and with the prompt's KV loaded from OpenLake.

A transformers Llama model of the Llama-3-8B shape (32 layers, hidden 4096, 32 query heads,
8 KV heads, head size 128, vocabulary 128256) with random bf16 weights (nothing is downloaded).
For each prompt length (8K, 32K and 128K tokens by default):

  miss: prefill the whole prompt; the first token is the argmax of the last logits.
        Its KV is then written, block by block (16 tokens), into a vLLM-layout paged KV cache
        (FlashInfer NHD: (blocks, 2, 16, 8, 128) per layer) and saved to the OpenLake pool
        through the connector's copy engine (openlake_client.torch_mover.TorchMover), each
        block under a chained hash of the tokens up to its end, as vLLM keys blocks.
  hit:  the paged cache is wiped; the timed path then looks up and loads every full block the
        prompt has but its last token (as vLLM does: at least one token is computed) into other
        block ids, rebuilds the model's cache from the pages, and prefills only the remaining
        tokens. The loaded KV is then compared byte for byte with what the miss computed.
        The rebuild is one gather per layer into a buffer with room for the tail, and the tail's
        attention reads each KV head once (examples/ttft_tail.py); --compare also times the
        plain path (a DynamicCache of contiguous copies, transformers' sdpa attention), and
        --profile prints the top CUDA kernels of one more tail prefill of the longest prompt.

With --remote sm|tcp the prompt's KV comes from a peer: two openlaked form one cluster pool
(UCX over shared memory, or over TCP on lo); the miss saves through node A's daemon, and the
timed hit looks up through node B's, which pulls every block from A's slab into its own
(docs/kv-pool.md, "Pulling") before it crosses to the GPU as any hit does. The time to first
token then includes the pull; chunks are smaller (--chunk-blocks 128) so that each pull ends
within the daemon's pull deadline on slow links.

Prints both times and their ratio per length (`--json` for one JSON object). Needs a CUDA GPU
with room for the model (16 GB) and about three copies of the longest prompt's KV (16 GiB each
at 128K); exits 77 where no GPU is visible. Starts its own openlaked (two with --remote) unless
--target is given.

    python3 examples/ttft_hit_vs_miss.py [--tokens 8192,32768,131072] [--json]
                                         [--compare] [--profile] [--remote sm|tcp]
"""

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

from ttft_tail import layer_kv, preallocated_cache, rebuild_layer, tail_attention

ROOT = Path(__file__).resolve().parents[1]
BLOCK = 16
# UCX between the two daemons of --remote.
TRANSPORTS = {"sm": {"UCX_TLS": "sm,self"},
              "tcp": {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "lo"}}


def block_keys(tokens, n_blocks):
    """vLLM-style chained block hashes: block i's key covers every token up to its end."""
    keys, parent = [], b"openlake-ttft-example"
    for i in range(n_blocks):
        h = hashlib.sha256(parent)
        h.update(b"".join(t.to_bytes(4, "little") for t in tokens[i * BLOCK:(i + 1) * BLOCK]))
        parent = h.digest()
        keys.append(parent)
    return keys


def print_profile(torch, prof, rows=15):
    """The top kernels of a torch.profiler run by self CUDA time."""
    averages = prof.key_averages()
    for key in ("self_device_time_total", "self_cuda_time_total"):
        try:
            print(averages.table(sort_by=key, row_limit=rows), flush=True)
            return
        except (AttributeError, KeyError, ValueError):
            continue


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", default="8192,32768,131072")
    ap.add_argument("--layers", type=int, default=32, help="fewer for a quick run")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--openlaked", default=str(ROOT / "build/tools/openlaked/openlaked"))
    ap.add_argument("--target", help="use a running daemon instead")
    ap.add_argument("--crc-threads", type=int, default=12)
    ap.add_argument("--chunk-blocks", type=int,
                    help="blocks per save/load call (default 1024; 128 with --remote)")
    ap.add_argument("--compare", action="store_true",
                    help="also time the plain rebuild and attention on the same loaded pages")
    ap.add_argument("--profile", action="store_true",
                    help="profile one more tail prefill of the longest prompt (top 15 kernels)")
    ap.add_argument("--remote", choices=sorted(TRANSPORTS),
                    help="pull the hit from a second daemon over UCX (sm or tcp on lo)")
    args = ap.parse_args()
    if args.remote and args.target:
        ap.error("--remote starts its own two daemons; it does not take --target")
    if args.chunk_blocks is None:
        args.chunk_blocks = 128 if args.remote else 1024
    sys.path.insert(0, str(ROOT / "build/bindings/python"))

    import torch

    if not torch.cuda.is_available():
        print("ttft_hit_vs_miss: no CUDA device visible: skipped")
        return 77
    from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

    import openlake_client as ol
    from openlake_client.layout import plan_layout
    from openlake_client.local_daemon import LocalDaemon, local_cluster
    from openlake_client.torch_mover import TorchMover

    lengths = [int(x) for x in args.tokens.split(",") if x]
    layers, kv_heads, head = args.layers, 8, 128
    dev = torch.device("cuda")
    config = LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                         num_hidden_layers=layers, num_attention_heads=32,
                         num_key_value_heads=kv_heads, head_dim=head,
                         max_position_embeddings=max(lengths) + 1024, tie_word_embeddings=False)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    t = time.perf_counter()
    with dev:
        model = LlamaForCausalLM(config)
    model.eval()
    torch.set_default_dtype(torch.float32)
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters, "
          f"random bf16 weights, built in {time.perf_counter() - t:.1f} s", flush=True)

    # The paged KV cache, vLLM's FlashInfer NHD layout, sized for the longest prompt.
    num_blocks = max(lengths) // BLOCK + 1
    pages = {f"model.layers.{i}.self_attn.attn":
             torch.zeros(num_blocks, 2, BLOCK, kv_heads, head, dtype=torch.bfloat16, device=dev)
             for i in range(layers)}
    page_list = list(pages.values())
    layout = plan_layout(pages, BLOCK)
    block_bytes = layout.block_bytes
    pool_gb = sum(n // BLOCK for n in lengths) * block_bytes / (1 << 30) * 1.1 + 1
    tmp = Path(tempfile.mkdtemp(prefix="openlake-ttft-"))
    procs = []
    results = []
    try:
        if args.target:
            addrs = [args.target]
        elif args.remote:
            procs = local_cluster(args.openlaked, tmp, 2, pool_gb, env=TRANSPORTS[args.remote])
            addrs = [d.address for d in procs]
        else:
            procs = [LocalDaemon(args.openlaked, tmp, pool_gb)]
            addrs = [procs[0].address]
        fingerprint = {
            "model": "llama-3-8b-shape-random", "dtype": "bfloat16", "layout": layout.signature,
            "num_layers": layers, "num_kv_heads": kv_heads, "head_size": head,
            "block_tokens": BLOCK}
        # movers[0] saves; movers[-1] loads (node B's daemon with --remote, the same otherwise).
        movers = []
        for addr in addrs:
            client = ol.Client(addr)
            ns = client.open_namespace("examples/ttft/llama-3-8b-shape", fingerprint,
                                       block_bytes)
            movers.append(TorchMover(layout, client, ns, crc_threads=args.crc_threads))
            t = time.perf_counter()
            movers[-1].register_all()  # what openlake_pin_slab = "eager" does when vLLM starts
            print(f"pool at {addr}: {pool_gb:.1f} GB slab registered with CUDA in "
                  f"{time.perf_counter() - t:.1f} s", flush=True)
        mover, loader = movers[0], movers[-1]
        loader_client = ol.Client(addrs[-1], map_slab=False)
        loader_ns = loader_client.find_namespace("examples/ttft/llama-3-8b-shape")

        def on_peers(keys):
            return int(loader_client.exists(loader_ns, keys, detail=True)[2])

        def sync_time():
            torch.cuda.synchronize()
            return time.perf_counter()

        @torch.inference_mode()
        def prefill(ids, cache=None):
            out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
            return out.logits[0, -1].float(), out.past_key_values

        @torch.inference_mode()
        def rebuild(idx, full, n_tokens):
            """The model's cache from the pages: one gather per layer into buffers with room
            for the tail, which the prefill then fills in place."""
            bufs = [rebuild_layer(torch, page_list[i], idx, BLOCK, n_tokens)
                    for i in range(layers)]
            return preallocated_cache(DynamicCache, bufs, full * BLOCK)

        @torch.inference_mode()
        def rebuild_plain(idx, full):
            """The plain rebuild (--compare): gather, contiguous K and V, DynamicCache."""
            cache = DynamicCache()
            for i in range(layers):
                kv = page_list[i].index_select(0, idx)  # (full, 2, 16, H, D)
                k = kv[:, 0].reshape(full * BLOCK, kv_heads, head).permute(1, 0, 2)
                v = kv[:, 1].reshape(full * BLOCK, kv_heads, head).permute(1, 0, 2)
                cache.update(k.unsqueeze(0).contiguous(), v.unsqueeze(0).contiguous(), i)
            return cache

        def run(n_tokens, report=True):
            g = torch.Generator().manual_seed(n_tokens)
            tokens = torch.randint(0, config.vocab_size, (n_tokens,), generator=g).tolist()
            ids = torch.tensor([tokens], device=dev)
            full = (n_tokens - 1) // BLOCK  # blocks a hit may load: one token is always computed
            keys = block_keys(tokens, full)

            # Miss: the whole prefill.
            t0 = sync_time()
            miss_logits, miss_cache = prefill(ids)
            t1 = sync_time()
            # Store: KV → pages (block b holds tokens [16b, 16b+16)) → the pool.
            with torch.inference_mode():
                for i in range(layers):
                    k, v = layer_kv(miss_cache, i)
                    for kind, x in ((0, k), (1, v)):
                        page_list[i][:full, kind] = (x[0, :, :full * BLOCK].permute(1, 0, 2)
                                                     .reshape(full, BLOCK, kv_heads, head))
            stored = 0
            for s in range(0, full, args.chunk_blocks):
                e = min(full, s + args.chunk_blocks)
                stored += mover.save(keys[s:e], list(range(s, e)), s)
            t2 = sync_time()
            if stored != full:
                raise SystemExit(f"{n_tokens}: stored {stored} of {full} blocks (pool full?)")
            for p in page_list:  # nothing of the miss stays in the pages
                p.zero_()
            if args.remote:  # node B learns where the chain is at A's next announcement (~1 s)
                deadline = time.time() + 20
                while on_peers(keys) != full:
                    if time.time() > deadline:
                        raise SystemExit(f"{n_tokens}: node B does not see the chain at A")
                    time.sleep(0.1)
                pulled_before = loader_client.stats()["pulled_blocks"]

            # Hit: load into other block ids, rebuild the model's cache, prefill the tail.
            target = torch.randperm(num_blocks, generator=g)[:full].tolist()
            t3 = sync_time()
            loaded = 0
            for s in range(0, full, args.chunk_blocks):
                e = min(full, s + args.chunk_blocks)
                # A chunk after the first names the chain's head (how a peer finds it).
                loaded += loader.load(keys[s:e], target[s:e], keys[0] if s else None)
            t4 = sync_time()
            if loaded != full:
                raise SystemExit(f"{n_tokens}: loaded {loaded} of {full} blocks")
            idx = torch.tensor(target, device=dev)
            cache = rebuild(idx, full, n_tokens)
            t5 = sync_time()
            with tail_attention(torch):
                hit_logits, hit_cache = prefill(ids[:, full * BLOCK:], cache)
            t6 = sync_time()

            # The loaded KV is exactly what the miss computed.
            for i in range(layers):
                mk, mv = layer_kv(miss_cache, i)
                hk, hv = layer_kv(hit_cache, i)
                n = full * BLOCK
                if not (torch.equal(mk[:, :, :n], hk[:, :, :n])
                        and torch.equal(mv[:, :, :n], hv[:, :, :n])):
                    raise SystemExit(f"{n_tokens}: layer {i}: loaded KV differs from the miss's")
            miss_s, hit_s = t1 - t0, t6 - t3
            r = {"tokens": n_tokens, "blocks_loaded": full,
                 "kv_bytes_loaded": full * block_bytes,
                 "ttft_miss_s": round(miss_s, 4), "ttft_hit_s": round(hit_s, 4),
                 "speedup": round(miss_s / hit_s, 1),
                 "hit_load_s": round(t4 - t3, 4),
                 "hit_load_GBps": round(full * block_bytes / (t4 - t3) / 1e9, 1),
                 "hit_rebuild_s": round(t5 - t4, 4), "hit_prefill_s": round(t6 - t5, 4),
                 "store_s": round(t2 - t1, 4),
                 "remote": args.remote or "",
                 "pulled_blocks": (loader_client.stats()["pulled_blocks"] - pulled_before
                                   if args.remote else 0),
                 "first_token_miss": int(miss_logits.argmax()),
                 "first_token_hit": int(hit_logits.argmax()),
                 "max_logit_diff": round(float((miss_logits - hit_logits).abs().max()), 4)}
            del hit_cache, cache
            torch.cuda.empty_cache()
            if args.compare:  # the plain path, on the same pages
                t7 = sync_time()
                cache = rebuild_plain(idx, full)
                t8 = sync_time()
                plain_logits, _ = prefill(ids[:, full * BLOCK:], cache)
                t9 = sync_time()
                r.update({"plain_rebuild_s": round(t8 - t7, 4),
                          "plain_prefill_s": round(t9 - t8, 4),
                          "first_token_plain": int(plain_logits.argmax())})
                del cache
                torch.cuda.empty_cache()
            if args.profile and report and n_tokens == max(lengths):
                from torch.profiler import ProfilerActivity, profile

                cache = rebuild(idx, full, n_tokens)
                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    with tail_attention(torch):
                        prefill(ids[:, full * BLOCK:], cache)
                    torch.cuda.synchronize()
                print(f"profile: tail prefill of {n_tokens - full * BLOCK} tokens after "
                      f"{full * BLOCK} cached", flush=True)
                print_profile(torch, prof)
                del cache
                torch.cuda.empty_cache()
            del miss_cache
            if report:
                results.append(r)
                where = f" (pulled {r['pulled_blocks']} blocks over {args.remote})" \
                    if args.remote else ""
                print(f"{n_tokens:>7} tokens{where}: TTFT miss {miss_s:.3f} s, hit {hit_s:.3f} s "
                      f"({r['speedup']}x; load {r['hit_load_s']} s at {r['hit_load_GBps']} GB/s, "
                      f"rebuild {r['hit_rebuild_s']} s, tail prefill {r['hit_prefill_s']} s); "
                      f"first token {r['first_token_miss']} / {r['first_token_hit']}", flush=True)
                if args.compare:
                    print(f"{'':>7}         plain path: rebuild {r['plain_rebuild_s']} s, tail "
                          f"prefill {r['plain_prefill_s']} s, first token "
                          f"{r['first_token_plain']}", flush=True)

        run(1024, report=False)  # warm-up: kernels chosen, the pool's first segments registered
        for n in lengths:
            run(n)
        for m in movers:
            m.close()
        loader_client.close()
        if args.json:
            print(json.dumps({"example": "ttft_hit_vs_miss", "gpu": torch.cuda.get_device_name(0),
                              "layers": layers, "remote": args.remote or "",
                              "results": results}))
        return 0
    finally:
        for d in procs:
            d.stop()


if __name__ == "__main__":
    sys.exit(main())

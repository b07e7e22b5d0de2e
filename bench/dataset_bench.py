#!/usr/bin/env python3
"""dataset_bench: many small objects (4-256 KiB) read at random through openlake_client.dataset.

`--objects` objects of sizes drawn from 4, 16, 64 and 256 KiB are written to an openlaked (its
own, started on free loopback ports over four drive folders under --dir, RS(2+2)) and the same
bytes as files to a local folder on the same file system. Then both are read in one shuffled
order: through ObjectDataset.get_batch (`--batch` objects per parallel fetch, `--connections`
connections) and with a Python thread pool of as many threads reading the files. Page caches
are dropped before each read (a data set larger than memory), unless --warm. Prints objects/s
and MB/s of each and their ratio.

    python3 bench/dataset_bench.py --json
"""

import argparse
import json
import random
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from checkpoint_bench import drop_cache  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="a smoke run (200 objects)")
    ap.add_argument("--objects", type=int, default=4000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--warm", action="store_true", help="keep the page caches (a data set "
                    "that fits in memory)")
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--openlaked", default=str(ROOT / "build/tools/openlaked/openlaked"))
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "build/bindings/python"))
    from openlake_client.dataset import ObjectDataset, S3Config
    from openlake_client.local_store import LocalStore

    if args.quick:
        args.objects = 200
    rng = random.Random(1)
    sizes = [rng.choice([4, 16, 64, 256]) << 10 for _ in range(args.objects)]
    total = sum(sizes)
    with tempfile.TemporaryDirectory(prefix="openlake-databench-", dir=args.dir) as tmp:
        tmp = Path(tmp)
        store = LocalStore(args.openlaked, tmp / "store", drives=4)
        try:
            t = store.transfer(connections=args.connections)
            t.create_bucket("train")
            local = tmp / "local"
            local.mkdir()
            items = []
            for i, n in enumerate(sizes):
                data = rng.randbytes(n)
                (local / f"{i:06d}.bin").write_bytes(data)
                items.append((f"shard/{i:06d}.bin", data))
                if len(items) == 256 or i == len(sizes) - 1:
                    t.put_many("train", items)
                    items = []
            cfg = S3Config(store.endpoint, store.access_key, store.secret_key,
                           connections=args.connections)
            ds = ObjectDataset("s3://train/shard/", cfg)
            order = list(range(len(ds)))
            rng.shuffle(order)

            if not args.warm:
                drop_cache(tmp / "store")
            t0 = time.perf_counter()
            got = 0
            for at in range(0, len(order), args.batch):
                got += sum(len(b) for b in ds.get_batch(order[at:at + args.batch]))
            ours_s = time.perf_counter() - t0
            assert got == total

            files = sorted(local.iterdir())
            if not args.warm:
                drop_cache(local)

            def read(i: int) -> int:
                return len(files[i].read_bytes())

            t0 = time.perf_counter()
            with ThreadPoolExecutor(args.connections) as pool:
                got = sum(pool.map(read, order))
            local_s = time.perf_counter() - t0
            assert got == total
        finally:
            store.stop()
    out = {"bench": "dataset_small_objects", "objects": args.objects, "bytes": total,
           "cache": "warm" if args.warm else "dropped",
           "ours_objects_per_s": round(args.objects / ours_s),
           "local_objects_per_s": round(args.objects / local_s),
           "ours_MBps": round(total / ours_s / 1e6, 1),
           "local_MBps": round(total / local_s / 1e6, 1),
           "ratio": round(local_s / ours_s, 3)}
    print(f"{args.objects} objects of 4-256 KiB ({total / 2**20:.0f} MiB), random order: "
          f"openlake {out['ours_objects_per_s']}/s ({out['ours_MBps']} MB/s, batches of "
          f"{args.batch}), local files with {args.connections} threads "
          f"{out['local_objects_per_s']}/s ({out['local_MBps']} MB/s): ratio {out['ratio']} "
          f"(page cache {out['cache']})")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

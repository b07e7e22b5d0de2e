#!/usr/bin/env python3
"""checkpoint_bench: PyTorch checkpoint save and load through openlake_client.checkpoint.

A state dict of `--gib` GiB (100 large float32 tensors and 200 small ones of 4-256 KiB, random
bits) is saved to and loaded from an openlaked (its own, started on free loopback ports over
four drive folders under --dir, RS(2+2); or --endpoint's) with the writer and reader of
torch's distributed-checkpoint API (the load twice: into live tensors, as a restore into the
model's own state dict does, and into tensors never touched), then with async_save twice (the time until training may
resume: the first save allocates its snapshot, the second refills it).
Baselines in the same run, on the same file system: torch.save to a local file, fsynced (the
store fsyncs every shard before it answers), and torch.load of it; and boto3's upload_file and
download_file (s3transfer's threads) of that same file to the same endpoint. Page caches of the
files involved are dropped before every read. And the disk itself: fio's sequential O_DIRECT
writes (fsynced) and reads of 1 MiB, one file per drive folder (the disk's best rate). Each is
measured `--tries` times (2), the sides taking turns, each try to new objects and files, and
the best try of each counts. On this VM a first try is often several times slower than the
next (the disk's rate drifts from minute to minute, the first writes after a large delete are
the slowest, and the kernel's first access to any page of a process's memory costs ~5 us: this
VM is a PVM guest), so one try each would let the order decide. For the same
reason the load into live tensors loads into the same tensors in every try, as torch.load's
later tries land in the memory its earlier ones freed.

    python3 bench/checkpoint_bench.py --json          # ~3.5 min; 2 GiB, needs ~9 GiB of RAM
Bars (/work/shared/PERF.md): save and load >= 0.8 of torch.save/torch.load; >= 2x boto3.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def drop_cache(path: Path) -> None:
    """Writes back and evicts the page cache of every file under `path` (or of the file)."""
    # os.walk skips what vanishes meanwhile (a running store empties its trash).
    files = [path] if path.is_file() else [Path(d) / f for d, _, fs in os.walk(path) for f in fs]
    for p in files:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def make_state(torch, total_bytes: int):
    g = torch.Generator().manual_seed(1)
    state = {}
    small_sizes = [4 << 10, 16 << 10, 64 << 10, 256 << 10]
    small_total = 0
    for i in range(200):
        n = small_sizes[i % 4] // 4
        state[f"layers.{i // 2}.norm{i % 2}"] = torch.randint(-2**31, 2**31 - 1, (n,),
                                                              dtype=torch.int32,
                                                              generator=g).view(torch.float32)
        small_total += n * 4
    large = max(1 << 20, (total_bytes - small_total) // 100) // 4
    for i in range(100):
        state[f"layers.{i}.weight"] = torch.randint(-2**31, 2**31 - 1, (large,),
                                                    dtype=torch.int32,
                                                    generator=g).view(torch.float32)
    return state


def nbytes(state) -> int:
    return sum(t.numel() * t.element_size() for t in state.values())


def fio_pass(folders, name: str, write: bool, per_file: int):
    """fio's aggregate bytes/s over one sequential O_DIRECT pass (1 MiB, 4 in flight) of a file
    `name` in each folder (written fsynced, or read back); None where fio is missing."""
    cmd = ["fio", "--ioengine=io_uring", "--direct=1", "--bs=1m", "--iodepth=4",
           f"--rw={'write' if write else 'read'}", f"--size={per_file}", "--end_fsync=1",
           "--group_reporting", "--output-format=json"]
    for i, d in enumerate(folders):
        cmd += [f"--name=d{i}", f"--filename={Path(d) / name}"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    job = json.loads(out)["jobs"][0]["write" if write else "read"]
    return job["bw_bytes"] or None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="a smoke run (64 MiB)")
    ap.add_argument("--gib", type=float, default=2.0, help="state dict size")
    ap.add_argument("--dir", default="/var/tmp", help="where the drives and local files go")
    ap.add_argument("--openlaked", default=str(ROOT / "build/tools/openlaked/openlaked"))
    ap.add_argument("--endpoint", help="an S3 endpoint host:port instead of a private daemon")
    ap.add_argument("--access-key", default=os.environ.get("AWS_ACCESS_KEY_ID", ""))
    ap.add_argument("--secret-key", default=os.environ.get("AWS_SECRET_ACCESS_KEY", ""))
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--tries", type=int, default=2,
                    help="times each save and load is measured, alternating sides; the best counts")
    args = ap.parse_args()
    if args.tries < 1:
        ap.error("--tries must be at least 1")
    sys.path.insert(0, str(ROOT / "build/bindings/python"))
    import torch
    from openlake_client import checkpoint
    from openlake_client.local_store import LocalStore

    if args.quick:
        args.gib = 1 / 16
    state = make_state(torch, int(args.gib * 2**30))
    size = nbytes(state)
    gb = size / 1e9
    out = {"bench": "checkpoint", "state_bytes": size, "tensors": len(state)}
    with tempfile.TemporaryDirectory(prefix="openlake-ckptbench-", dir=args.dir) as tmp:
        tmp = Path(tmp)
        daemon = None
        if args.endpoint:
            endpoint, access, secret = args.endpoint, args.access_key, args.secret_key
        else:
            daemon = LocalStore(args.openlaked, tmp / "store", drives=4)
            endpoint, access, secret = daemon.endpoint, daemon.access_key, daemon.secret_key
        try:
            store = checkpoint.Store(endpoint, access, secret, connections=args.connections)
            store.transfer.create_bucket("ckptbench")
            times = {k: [] for k in ("save", "load", "load_fresh", "torch_save", "torch_load",
                                     "boto3_up", "boto3_down")}
            disk = {"write": [], "read": []}  # fio's bytes/s per try
            disk_dirs = [tmp / f"disk{i}" for i in range(4)]
            for d in disk_dirs:
                d.mkdir()
            # The model's own tensors, which a restore loads into: the same ones in every try.
            live = {k: torch.zeros_like(v) for k, v in state.items()}

            def timed(name, f):
                t0 = time.perf_counter()
                f()
                times[name].append(time.perf_counter() - t0)

            def check(dest):
                if not all(torch.equal(dest[k].view(torch.int32), v.view(torch.int32))
                           for k, v in state.items()):
                    raise SystemExit("checkpoint_bench: the loaded state differs from the saved one")

            def save_to_file(path):
                with open(path, "wb") as f:
                    torch.save(state, f)
                    f.flush()
                    os.fsync(f.fileno())

            def ol_load(url, dest, name):
                if daemon:
                    drop_cache(tmp / "store")
                timed(name, lambda: checkpoint.load_into(dest, url, store))
                check(dest)

            def fio(i, write):
                # As much as the store writes for the state (twice it), over four files.
                rate = fio_pass(disk_dirs, f"fio-{i}.bin", write, -(-2 * size // 4 // 2**20) << 20)
                if rate:
                    disk["write" if write else "read"].append(rate)

            # Each try saves with both, then loads with both, each time to new objects and files
            # (nothing is overwritten or deleted before the end, so no try pays for freeing an
            # earlier one's blocks). The best try of each is kept: the tries alternate, so a
            # disk that is slower at one moment slows both sides alike.
            for i in range(args.tries):
                url = f"s3://ckptbench/run/try-{i}"
                local = tmp / f"state-{i}.pt"
                timed("save", lambda: checkpoint.save(state, url, store))
                timed("torch_save", lambda: save_to_file(local))
                fio(i, True)
                # A restore loads in place, into the model's own tensors (memory the job has
                # used): that is load_GBps, into `live`, cleared first. Into tensors just
                # allocated and never touched, each page also costs its first fault (torch.load
                # pays that for everything it allocates).
                ol_load(url, {k: torch.empty_like(v) for k, v in state.items()}, "load_fresh")
                for t in live.values():
                    t.zero_()
                ol_load(url, live, "load")
                fio(i, False)
                drop_cache(local)
                loaded = []
                timed("torch_load", lambda: loaded.append(torch.load(local)))
                loaded.clear()

            # Async saves as a training loop makes them: the first allocates its snapshot, the
            # next ones refill it (reuse=): their resume time is the steady state.
            first = checkpoint.async_save(state, "s3://ckptbench/run/step-2", store)
            first.wait()
            t0 = time.perf_counter()
            handle = checkpoint.async_save(state, "s3://ckptbench/run/step-3", store, reuse=first)
            handle.wait()
            async_total_s = time.perf_counter() - t0

            try:
                import boto3
                from botocore.config import Config
            except ImportError:
                boto3 = None
            if boto3 is not None:
                s3 = boto3.session.Session().client(
                    "s3", endpoint_url=f"http://{endpoint}", region_name="us-east-1",
                    aws_access_key_id=access, aws_secret_access_key=secret,
                    config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"))
                local = tmp / "state-0.pt"
                for i in range(args.tries):
                    drop_cache(local)
                    timed("boto3_up",
                          lambda: s3.upload_file(str(local), "ckptbench", f"boto3/state-{i}.pt"))
                    if daemon:
                        drop_cache(tmp / "store")
                    back = tmp / f"back-{i}.pt"
                    timed("boto3_down",
                          lambda: s3.download_file("ckptbench", f"boto3/state-{i}.pt", str(back)))
        finally:
            if daemon:
                daemon.stop()
    best = {k: min(v) for k, v in times.items() if v}
    save_s, load_s, load_fresh_s = best["save"], best["load"], best["load_fresh"]
    torch_save_s, torch_load_s = best["torch_save"], best["torch_load"]
    boto_up_s, boto_down_s = best.get("boto3_up"), best.get("boto3_down")
    file_gb = size / 1e9  # torch.save's file is the state plus a little pickle
    out.update({
        "tries": args.tries,
        "save_GBps": round(gb / save_s, 3), "load_GBps": round(gb / load_s, 3),
        "load_fresh_GBps": round(gb / load_fresh_s, 3),
        "torch_save_GBps": round(gb / torch_save_s, 3),
        "torch_load_GBps": round(gb / torch_load_s, 3),
        "boto3_upload_GBps": round(file_gb / boto_up_s, 3) if boto_up_s else None,
        "boto3_download_GBps": round(file_gb / boto_down_s, 3) if boto_down_s else None,
        "save_over_torch": round(torch_save_s / save_s, 3),
        "load_over_torch": round(torch_load_s / load_s, 3),
        "async_resume_s": round(handle.resume_seconds, 3),
        "async_first_resume_s": round(first.resume_seconds, 3),
        "async_total_s": round(async_total_s, 3),
        "seconds_per_try": {k: [round(x, 3) for x in v] for k, v in times.items() if v},
    })
    if not args.endpoint:
        # The private daemon's RS(2+2) writes (k+m)/k = 2 bytes for each byte saved, all to the
        # one disk that torch.save writes its file to: the disk's work per second, compared.
        out["store_bytes_per_byte"] = 2.0
        out["disk_save_over_torch"] = round(2.0 * torch_save_s / save_s, 3)
        if disk["write"] and disk["read"]:
            # What the disk does with the store's pattern, at its best try: a save writes two
            # bytes per byte, a load reads one (the data shards).
            fio_w, fio_r = max(disk["write"]), max(disk["read"])
            out["fio_write_GBps"] = round(fio_w / 1e9, 3)
            out["fio_read_GBps"] = round(fio_r / 1e9, 3)
            out["save_disk_over_fio"] = round(2.0 * size / save_s / fio_w, 3)
            out["load_over_fio"] = round(size / load_s / fio_r, 3)
            out["disk_GBps_per_try"] = {k: [round(x / 1e9, 3) for x in v] for k, v in disk.items()}
    if boto_up_s:
        out["save_over_boto3"] = round(boto_up_s / save_s, 3)
        out["load_over_boto3"] = round(boto_down_s / load_s, 3)
    print(f"state dict: {len(state)} tensors, {size / 2**30:.2f} GiB")
    print(f"openlake save {out['save_GBps']} GB/s, load {out['load_GBps']} GB/s "
          f"({out['load_fresh_GBps']} GB/s into untouched memory); "
          f"torch.save (fsynced) {out['torch_save_GBps']} GB/s, torch.load "
          f"{out['torch_load_GBps']} GB/s: save {out['save_over_torch']}, load "
          f"{out['load_over_torch']} of torch (bar 0.8)")
    if "disk_save_over_torch" in out:
        print(f"bytes to the disk per second while saving (RS(2+2) writes each byte twice): "
              f"{out['disk_save_over_torch']} of torch.save's")
    if "fio_write_GBps" in out:
        print(f"the disk (fio, sequential O_DIRECT 1 MiB over the four folders): writes "
              f"{out['fio_write_GBps']} GB/s, reads {out['fio_read_GBps']} GB/s; the save "
              f"writes at {out['save_disk_over_fio']} of that, the load reads at "
              f"{out['load_over_fio']}")
    if boto_up_s:
        print(f"boto3 upload_file {out['boto3_upload_GBps']} GB/s, download_file "
              f"{out['boto3_download_GBps']} GB/s: save {out['save_over_boto3']}x, load "
              f"{out['load_over_boto3']}x boto3 (bar 2)")
    else:
        print("boto3 is not installed (Debian: python3-boto3): no boto3 baseline")
    print(f"async save: training resumes after {out['async_resume_s']} s with the snapshot "
          f"memory reused ({out['async_first_resume_s']} s for the first save, which allocates "
          f"it); the whole save {out['async_total_s']} s")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

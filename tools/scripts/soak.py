#!/usr/bin/python3
"""Soak test of one openlaked (docs/soak.md): mixed S3 and KV load with faults, for a bounded
time, then a check that nothing acknowledged was lost.

The daemon serves S3 over four drive folders (RS 2+2) and the KV pool. Load: two S3 writers
(PUTs of 0 B to 3 MiB, some multipart uploads, deletes; the stored set is capped), one S3
reader that checks every byte it gets back, and a KV client in a child process that puts
blocks and reads them back, checking every byte. Faults, in turn, every --fault-interval
seconds:
  clients  the KV client and an S3 client in the middle of a 24 MiB upload are killed (-9);
  away     a drive folder is moved away for a while, then moved back;
  replace  a drive folder is deleted (an empty replacement); the healer rebuilds it;
  kill9    the daemon is killed (-9) and started again.
Drive faults touch one drive at a time and wait for the healer before the next, so that with
two parity shards no fault may cost data. Acknowledged means: the S3 call returned success. At
the end the daemon is restarted once more and every acknowledged object is read back whole
(and every acknowledged delete must be gone). The KV pool is a cache: a miss after a restart is
allowed; wrong bytes never are. Exit status 0 when nothing was lost, nothing read back wrong,
and the daemon never died of its own accord.
"""

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ACCESS_KEY = "soakaccesskey"
SECRET_KEY = "soak-secret-key-0123456789"
BUCKET = "soak"
MAX_OBJECTS = 1500  # past this the writers delete as often as they put


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.c = {}

    def add(self, name, n=1):
        with self.lock:
            self.c[name] = self.c.get(name, 0) + n

    def get(self, name):
        with self.lock:
            return self.c.get(name, 0)


class Daemon:
    def __init__(self, binary: str, root: Path):
        self.binary = binary
        self.root = root
        self.drives = [root / "data" / f"d{i}" for i in range(4)]
        self.s3_port, self.rpc_port, self.admin_port = free_port(), free_port(), free_port()
        (root / "sock").mkdir(parents=True, exist_ok=True)
        self.socket = root / "sock" / "kv.sock"
        self.config = root / "openlaked.toml"
        self.config.write_text("\n".join([
            'mode = "storage"',
            f's3_addr = "127.0.0.1:{self.s3_port}"',
            f'rpc_addr = "127.0.0.1:{self.rpc_port}"',
            f'admin_addr = "127.0.0.1:{self.admin_port}"',
            f'kv_socket = "{self.socket}"',
            "data_dirs = [" + ", ".join(f'"{d}"' for d in self.drives) + "]",
            "set_drive_count = 4",
            "default_parity_count = 2",
            "heal_interval_secs = 1",
            "[[credentials]]",
            f'access_key = "{ACCESS_KEY}"',
            f'secret_key = "{SECRET_KEY}"',
            "[kv_slab]",
            "capacity_gb = 0.25",
            "segment_mb = 4",
            "reserve_ttl_secs = 10",
        ]) + "\n")
        self.proc = None
        self.log = open(root / "openlaked.log", "ab")
        self.expected_exit = False

    def start(self, timeout=60):
        self.expected_exit = False
        self.proc = subprocess.Popen([self.binary, "--config", str(self.config)],
                                     stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"openlaked exited with {self.proc.returncode} at start")
            if self.ready():
                return
            time.sleep(0.1)
        raise RuntimeError("openlaked did not become ready")

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.admin_port}/health/ready", timeout=2) as r:
                return r.status == 200
        except Exception:
            return False

    def metric(self, name: str) -> float:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}/metrics",
                                        timeout=5) as r:
                text = r.read().decode()
        except Exception:
            return -1
        total = 0.0
        for m in re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M):
            total += float(m.group(1))
        return total

    def socket_address(self) -> str:
        return f"unix:{self.socket}"

    def kill9(self):
        self.expected_exit = True
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> int:
        self.expected_exit = True
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def died_unexpectedly(self) -> bool:
        return (self.proc is not None and not self.expected_exit
                and self.proc.poll() is not None)


def s3_client(port):
    import boto3
    from botocore.config import Config
    return boto3.client(
        "s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
        config=Config(retries={"max_attempts": 1}, connect_timeout=5, read_timeout=30,
                      s3={"addressing_style": "path"}))


class Store:
    """What the S3 side was told: objects acknowledged (key → md5), deletes acknowledged."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked = {}
        self.deleted = set()

    def pick(self, rng):
        with self.lock:
            if not self.acked:
                return None, None
            key = rng.choice(list(self.acked))
            return key, self.acked[key]


def object_data(rng) -> bytes:
    r = rng.random()
    if r < 0.1:
        n = 0
    elif r < 0.5:
        n = rng.randint(1, 4096)
    elif r < 0.9:
        n = rng.randint(64 << 10, 300 << 10)
    else:
        n = rng.randint(1 << 20, 3 << 20)
    return rng.randbytes(n)


def writer(idx, args, daemon, store, counters, stop):
    rng = random.Random(args.seed * 100 + idx)
    s3 = s3_client(daemon.s3_port)
    n = 0
    while not stop.is_set():
        n += 1
        with store.lock:
            count = len(store.acked)
        try:
            if count > MAX_OBJECTS or (count > 50 and rng.random() < 0.1):
                key, _ = store.pick(rng)
                if key is None:
                    continue
                with store.lock:  # in flight: neither present nor gone until acknowledged
                    if store.acked.pop(key, None) is None:
                        continue
                s3.delete_object(Bucket=BUCKET, Key=key)
                with store.lock:
                    store.deleted.add(key)
                counters.add("s3_deletes_acked")
                continue
            key = f"w{idx}/{n:07d}"
            if rng.random() < 0.03:
                parts = [rng.randbytes(5 << 20), rng.randbytes(rng.randint(1, 1 << 20))]
                up = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
                done = []
                for i, p in enumerate(parts, 1):
                    r = s3.upload_part(Bucket=BUCKET, Key=key, UploadId=up, PartNumber=i, Body=p)
                    done.append({"PartNumber": i, "ETag": r["ETag"]})
                s3.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=up,
                                             MultipartUpload={"Parts": done})
                data = b"".join(parts)
                counters.add("s3_multipart_acked")
            else:
                data = object_data(rng)
                s3.put_object(Bucket=BUCKET, Key=key, Body=data)
            with store.lock:
                store.acked[key] = hashlib.md5(data).hexdigest()
            counters.add("s3_puts_acked")
            counters.add("s3_bytes_acked", len(data))
        except Exception as e:  # refused while the daemon restarts, 503 below write quorum
            counters.add("s3_write_errors")
            counters.add(f"s3_error:{type(e).__name__}")
            time.sleep(0.2)


def read_object(s3, key, md5):
    """ "ok", "missing" (NoSuchKey), "wrong" (other bytes) or "error" (not answered)."""
    from botocore.exceptions import ClientError
    try:
        got = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    except ClientError as e:
        code = e.response.get("Error", {}).get("Code", "")
        return "missing" if code in ("NoSuchKey", "404") else "error"
    except Exception:
        return "error"
    if hashlib.md5(got).hexdigest() != md5:
        print(f"soak: WRONG BYTES {key}: {len(got)} bytes, md5 differs", flush=True)
        return "wrong"
    return "ok"


def count_read(key, result, counters, verified_name):
    if result == "ok":
        counters.add(verified_name)
    elif result == "missing":
        counters.add("LOST")
        print(f"soak: LOST {key}: acknowledged, now missing", flush=True)
    elif result == "wrong":
        counters.add("WRONG_BYTES")
    else:
        counters.add("s3_read_errors")


def reader(args, daemon, store, counters, stop):
    rng = random.Random(args.seed * 100 + 99)
    s3 = s3_client(daemon.s3_port)
    while not stop.is_set():
        key, md5 = store.pick(rng)
        if key is None:
            time.sleep(0.1)
            continue
        result = read_object(s3, key, md5)
        if result == "missing":
            with store.lock:  # deleted meanwhile by a writer: not a loss
                if key not in store.acked:
                    continue
        count_read(key, result, counters, "s3_gets_verified")


KV_CHILD = r"""
import ctypes, hashlib, json, os, random, sys, time
import openlake_client as ol
addr, seed = sys.argv[1], int(sys.argv[2])
FP = {"model": "soak", "dtype": "float16", "layout": "NHD", "num_layers": 2,
      "num_kv_heads": 2, "head_size": 64, "block_tokens": 16}
B = 16384
def block(key):
    return (hashlib.sha256(key).digest() * (B // 32))
rng = random.Random(seed)
c = ol.Client(addr)
ns = c.open_namespace("soak/tp0", FP, B)
stats = {"kv_puts": 0, "kv_blocks_put": 0, "kv_hits": 0, "kv_misses": 0, "kv_wrong": 0}
last = time.monotonic()
while True:
    chain = rng.randrange(400)
    keys = [hashlib.sha256(f"{chain}/{i}".encode()).digest() for i in range(rng.randint(1, 16))]
    if rng.random() < 0.5:
        bufs = [ctypes.create_string_buffer(block(k), B) for k in keys]
        n = c.put(ns, keys, [[(ctypes.addressof(b), B)] for b in bufs])
        stats["kv_puts"] += 1
        stats["kv_blocks_put"] += n
    else:
        out = [ctypes.create_string_buffer(B) for _ in keys]
        loaded, states = c.get(ns, keys, [[(ctypes.addressof(o), B)] for o in out])
        for k, o, s in zip(keys, out, states):
            if s == ol.LOADED:
                if o.raw != block(k):
                    stats["kv_wrong"] += 1
                stats["kv_hits"] += 1
            else:
                stats["kv_misses"] += 1
    if time.monotonic() - last > 1:
        print(json.dumps(stats), flush=True)
        last = time.monotonic()
"""


class KvClient:
    """The KV load, in a child process (so that it can be killed -9)."""

    def __init__(self, daemon, counters, seed):
        self.daemon, self.counters, self.seed = daemon, counters, seed
        self.proc = None
        self.reader = None
        self.totals = {}
        self.lock = threading.Lock()
        self.control = threading.Lock()  # start and kill come from two threads

    def start(self):
        with self.control:
            if self.running():
                return
            self._start()

    def _start(self):
        self.seed += 1
        self.proc = subprocess.Popen(
            [sys.executable, "-c", KV_CHILD, str(self.daemon.socket_address()), str(self.seed)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        proc = self.proc

        def pump():
            last = {}
            for line in proc.stdout:
                try:
                    last = json.loads(line)
                except ValueError:
                    continue
                with self.lock:
                    self.current = last
            with self.lock:  # this child's last report joins the totals
                for k, v in last.items():
                    self.totals[k] = self.totals.get(k, 0) + v
                self.current = {}
        self.current = {}
        self.reader = threading.Thread(target=pump, daemon=True)
        self.reader.start()

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        with self.control:
            if self.proc is not None:
                self.proc.kill()
                self.proc.wait()
                self.reader.join(5)

    def stats(self):
        with self.lock:
            out = dict(self.totals)
            for k, v in self.current.items():
                out[k] = out.get(k, 0) + v
        return out


def killed_upload(daemon, counters):
    """An S3 client killed in the middle of a 24 MiB upload."""
    code = ("import os, sys; sys.path.insert(0, %r); import soak; "
            "c = soak.s3_client(%d); body = os.urandom(24 << 20); print('go', flush=True); "
            "c.put_object(Bucket=%r, Key='killed/upload', Body=body)") % (
                str(Path(__file__).parent), daemon.s3_port, BUCKET)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    p.stdout.readline()  # the body is ready and the upload starts: kill it part-way
    time.sleep(random.uniform(0.05, 0.5))
    p.kill()
    p.wait()
    counters.add("fault_s3_client_killed")


def wait_healed(daemon, seconds=30):
    """Until the healer's queue is empty and every drive is online, or `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if daemon.metric("openlake_store_heal_queue") == 0 and daemon.ready():
            return True
        time.sleep(1)
    return False


def faults(args, daemon, kv, counters, stop):
    rng = random.Random(args.seed * 7)
    kinds = ["clients", "away", "kill9", "replace"]
    turn = 0
    while not stop.wait(args.fault_interval):
        kind = kinds[turn % len(kinds)]
        turn += 1
        drive = daemon.drives[rng.randrange(4)]
        if kind == "clients":
            kv.kill()
            killed_upload(daemon, counters)
            kv.start()
            counters.add("fault_kv_client_killed")
        elif kind == "away":
            away = drive.with_name(drive.name + ".away")
            try:
                os.rename(drive, away)
            except OSError:
                continue
            stop.wait(min(15, args.fault_interval / 2))
            # The healer may have made a new, empty folder meanwhile (and may make it again
            # at any moment): the drive that comes back replaces it (what it got in between is
            # healed again).
            for _ in range(100):
                shutil.rmtree(drive, ignore_errors=True)
                try:
                    os.rename(away, drive)
                    break
                except OSError:
                    time.sleep(0.01)
            else:
                raise RuntimeError(f"could not move {away} back")
            counters.add("fault_drive_away_back")
            wait_healed(daemon)
        elif kind == "replace":
            shutil.rmtree(drive, ignore_errors=True)
            counters.add("fault_drive_replaced")
            time.sleep(3)
            if not wait_healed(daemon, 60):
                counters.add("heal_slow")
        else:
            kv.kill()
            daemon.kill9()
            counters.add("fault_daemon_kill9")
            t0 = time.monotonic()
            daemon.start()
            counters.add("restart_ms_total", int((time.monotonic() - t0) * 1000))
            kv.start()
        print(f"soak: {time.strftime('%H:%M:%S')} fault {kind} "
              f"(objects {len(STORE.acked)}, lost {counters.get('LOST')})", flush=True)


STORE = Store()


def watch(args, t_start, daemon, kv, fault_thread, stop) -> int:
    """Until the time is up: restarts a daemon that died by itself (counted, returned) and a
    KV client that ended; raises when the fault thread has stopped."""
    crashed = 0
    while time.monotonic() - t_start < args.seconds:
        time.sleep(1)
        if daemon.died_unexpectedly():
            crashed += 1
            print(f"soak: openlaked died by itself (status {daemon.proc.returncode})", flush=True)
            daemon.start()
        if not fault_thread.is_alive():
            raise RuntimeError("the fault thread stopped (its error is above): no valid soak")
        if not kv.running() and not stop.is_set() and daemon.ready():
            kv.start()  # a client that stopped (its daemon restarted under it) starts anew
    return crashed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=1800)
    ap.add_argument("--fault-interval", type=float, default=40)
    ap.add_argument("--openlaked", default="build/tools/openlaked/openlaked")
    ap.add_argument("--dir", default="")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    root = Path(args.dir or tempfile.mkdtemp(prefix="openlake-soak-", dir="/var/tmp"))
    daemon = Daemon(os.path.abspath(args.openlaked), root)
    counters = Counters()
    t_start = time.monotonic()
    daemon.start()
    s3_client(daemon.s3_port).create_bucket(Bucket=BUCKET)
    kv = KvClient(daemon, counters, args.seed * 1000)
    kv.start()

    stop = threading.Event()
    threads = [threading.Thread(target=writer, args=(i, args, daemon, STORE, counters, stop))
               for i in range(2)]
    threads.append(threading.Thread(target=reader, args=(args, daemon, STORE, counters, stop)))
    fault_thread = threading.Thread(target=faults, args=(args, daemon, kv, counters, stop))
    for t in threads + [fault_thread]:
        t.start()
    try:
        crashed = watch(args, t_start, daemon, kv, fault_thread, stop)
    except BaseException:
        stop.set()  # the load threads end, and the daemon and the KV client with them
        kv.kill()
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.kill9()
        raise
    stop.set()
    fault_thread.join()
    for t in threads:
        t.join()
    kv.kill()

    # Every drive back and healed, a clean restart, then every acknowledged write checked.
    wait_healed(daemon, 120)
    rc = daemon.stop()
    if rc != 0:
        print(f"soak: openlaked stopped with status {rc}", flush=True)
        crashed += 1
    daemon.start()
    wait_healed(daemon, 120)
    s3 = s3_client(daemon.s3_port)
    for key, md5 in sorted(STORE.acked.items()):
        result = read_object(s3, key, md5)
        if result == "error":  # one retry: the first read after a restart may meet a cold drive
            result = read_object(s3, key, md5)
        count_read(key, result, counters, "s3_final_verified")
    from botocore.exceptions import ClientError
    for key in sorted(STORE.deleted):
        try:
            s3.head_object(Bucket=BUCKET, Key=key)
            counters.add("DELETE_UNDONE")
            print(f"soak: {key} was deleted (acknowledged) but is back", flush=True)
        except ClientError:
            pass
    daemon.stop()

    kvs = kv.stats()
    c = counters.c
    summary = {
        "seconds": int(time.monotonic() - t_start),
        "s3_puts_acked": c.get("s3_puts_acked", 0),
        "s3_multipart_acked": c.get("s3_multipart_acked", 0),
        "s3_gib_acked": round(c.get("s3_bytes_acked", 0) / 2**30, 2),
        "s3_deletes_acked": c.get("s3_deletes_acked", 0),
        "s3_gets_verified": c.get("s3_gets_verified", 0),
        "s3_write_errors": c.get("s3_write_errors", 0),
        "s3_read_errors": c.get("s3_read_errors", 0),
        "objects_at_end": len(STORE.acked),
        "objects_verified_at_end": c.get("s3_final_verified", 0),
        "kv_puts": kvs.get("kv_puts", 0),
        "kv_blocks_put": kvs.get("kv_blocks_put", 0),
        "kv_block_hits_verified": kvs.get("kv_hits", 0),
        "kv_block_misses": kvs.get("kv_misses", 0),
        "s3_errors_by_kind": {k[9:]: v for k, v in c.items() if k.startswith("s3_error:")},
        "faults": {k[6:]: v for k, v in c.items() if k.startswith("fault_")},
        "mean_restart_ms": (c.get("restart_ms_total", 0) // max(1, c.get("fault_daemon_kill9", 0))),
        "lost": c.get("LOST", 0),
        "wrong_bytes": c.get("WRONG_BYTES", 0) + kvs.get("kv_wrong", 0),
        "deletes_undone": c.get("DELETE_UNDONE", 0),
        "daemon_died_by_itself": crashed,
    }
    print("soak: summary " + json.dumps(summary, indent=1), flush=True)
    (root / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    ok = (summary["lost"] == 0 and summary["wrong_bytes"] == 0 and
          summary["deletes_undone"] == 0 and crashed == 0 and
          summary["objects_verified_at_end"] == summary["objects_at_end"])
    if ok and not args.dir:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"soak: kept {root}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

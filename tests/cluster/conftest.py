"""Fixtures for the cluster tests: several real openlaked processes on 127.0.0.1 ports forming
one object store (each its own drive folders, all in one [[nodes]] list), driven by boto3 and
the aws CLI through every node's S3 endpoint. A node may also listen on another address and run
in a network namespace of its own (test_partitions.py), with the RPC secret on every link.

Run by meson (`meson test -C build cluster`), which sets OPENLAKED; by hand:
    OPENLAKED=build/tools/openlaked/openlaked /usr/bin/python3 -m pytest -q tests/cluster
"""

import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REGION = "us-east-1"
ACCESS_KEY = "OLCLUSTERTESTKEY0001"
SECRET_KEY = "cluster-secret-key-0123456789abcdefghijkl"
START_TIMEOUT = 60


def openlaked_path() -> str:
    path = os.environ.get("OPENLAKED") or str(HERE.parents[1] / "build/tools/openlaked/openlaked")
    if not os.access(path, os.X_OK):
        pytest.exit(f"openlaked not found at {path}; build first or set OPENLAKED", returncode=2)
    return path


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def free_ports(n):
    """n distinct free TCP ports on 127.0.0.1 (bound at once, then released)."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Node:
    """One openlaked of the cluster: its own config, drive folders, S3 and RPC ports."""

    def __init__(self, cluster, node_id, rpc_port, s3_port, admin_port, host="127.0.0.1",
                 argv_prefix=()):
        self.cluster = cluster
        self.id = node_id
        self.host = host                      # its RPC and S3 listen here
        self.argv_prefix = list(argv_prefix)  # e.g. ["ip", "netns", "exec", ns]
        self.root = cluster.root / f"node{node_id}"
        self.root.mkdir(parents=True, exist_ok=True)
        self.drives = [self.root / f"d{i}" for i in range(cluster.drives_per_node)]
        for d in self.drives:
            d.mkdir(exist_ok=True)
        self.rpc_port = rpc_port
        self.s3_port = s3_port
        self.admin_port = admin_port
        self.config = self.root / "openlaked.toml"
        self.log = self.root / "openlaked.log"
        self.out = self.root / "stdout.log"
        self.proc = None

    def write_config(self):
        c = self.cluster
        lines = [
            'mode = "storage"',
            f"self_id = {self.id}",
            f'rpc_addr = "{self.host}:{self.rpc_port}"',
            f's3_addr = "{self.host}:{self.s3_port}"',
            f'admin_addr = "127.0.0.1:{self.admin_port}"',  # its own namespace's loopback
            f'region = "{REGION}"',
            "data_dirs = [" + ", ".join(f'"{d}"' for d in self.drives) + "]",
            f"set_drive_count = {c.set_drive_count}",
            f"default_parity_count = {c.parity}",
            "heal_interval_secs = 1",
            "cluster_boot_timeout_secs = 60",
            "[[credentials]]",
            f'access_key = "{ACCESS_KEY}"',
            f'secret_key = "{SECRET_KEY}"',
        ]
        if c.rpc_secret:
            lines.insert(0, f'rpc_secret = "{c.rpc_secret}"')
        for n in c.nodes:
            lines += ["[[nodes]]", f"id = {n.id}", f'rpc_addr = "{n.host}:{n.rpc_port}"',
                      f"disk_count = {c.drives_per_node}"]
        self.config.write_text("\n".join(lines) + "\n")

    def launch(self):
        self.write_config()
        self.log_file = open(self.log, "ab")
        self.out_file = open(self.out, "wb")
        self.proc = subprocess.Popen(self.argv_prefix +
                                     [openlaked_path(), "--config", str(self.config)],
                                     stdout=self.out_file, stderr=self.log_file,
                                     preexec_fn=_die_with_parent)

    def wait_ready(self, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.out.read_text(errors="replace")
            if re.search(r"S3: http://[0-9.]+:\d+ ", text):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(f"node {self.id} did not start:\n{self.out.read_text()}\n"
                           f"{self.log.read_text()}")

    @property
    def endpoint(self):
        return f"http://{self.host}:{self.s3_port}"

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        """SIGKILL: no goodbye to anyone."""
        if self.alive():
            self.proc.kill()
            self.proc.wait()
        self._close_files()

    def stop(self):
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._close_files()

    def _close_files(self):
        for f in ("log_file", "out_file"):
            if hasattr(self, f):
                getattr(self, f).close()
                delattr(self, f)

    def metrics(self):
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}/metrics",
                                    timeout=5) as r:
            return r.read().decode()

    def client(self, **config):
        import boto3
        from botocore.config import Config
        cfg = {"retries": {"max_attempts": 1}, "connect_timeout": 5, "read_timeout": 60,
               "s3": {"addressing_style": "path"}, "signature_version": "s3v4"}
        cfg.update(config)
        return boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, region_name=REGION,
            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
            config=Config(**cfg))


class Cluster:
    """`hosts` and `argv_prefixes`: per node, where it listens and what its command line starts
    with (default 127.0.0.1, nothing); `rpc_secret` is needed beyond loopback."""

    def __init__(self, root: Path, nodes=3, drives_per_node=2, set_drive_count=6, parity=2,
                 hosts=None, argv_prefixes=None, rpc_secret=None):
        self.root = root
        self.drives_per_node = drives_per_node
        self.set_drive_count = set_drive_count
        self.parity = parity
        self.rpc_secret = rpc_secret
        hosts = hosts or ["127.0.0.1"] * nodes
        argv_prefixes = argv_prefixes or [()] * nodes
        ports = free_ports(3 * nodes)
        self.nodes = [Node(self, i + 1, ports[3 * i], ports[3 * i + 1], ports[3 * i + 2],
                           hosts[i], argv_prefixes[i])
                      for i in range(nodes)]

    def start(self):
        # All at once: each waits for the others, and node 1 formats the blank cluster.
        for n in self.nodes:
            n.launch()
        for n in self.nodes:
            n.wait_ready()
        return self

    def restart(self, node):
        node.launch()
        node.wait_ready()

    def stop(self):
        for n in self.nodes:
            n.stop()

    def logs(self):
        return "\n".join(f"--- node {n.id}\n{n.log.read_text(errors='replace')[-4000:]}"
                         for n in self.nodes)


def boto3_or_skip():
    try:
        import boto3  # noqa: F401
    except ImportError:
        pytest.skip("boto3 is not installed (Debian: python3-boto3)", allow_module_level=True)


def start_cluster(tmp_path_factory, **layout):
    """A started cluster; tried again on fresh ports when a port was taken meanwhile (the
    ports are chosen free, then bound by the daemons a moment later)."""
    for attempt in range(3):
        root = tmp_path_factory.mktemp("cluster")
        c = Cluster(root, **layout)
        try:
            return c.start()
        except RuntimeError:
            logs = c.logs()
            c.stop()
            if attempt == 2 or "Address already in use" not in logs + "".join(
                    n.out.read_text(errors="replace") for n in c.nodes):
                raise
    raise AssertionError("unreachable")


@pytest.fixture
def cluster(tmp_path_factory):
    boto3_or_skip()
    c = start_cluster(tmp_path_factory)
    yield c
    c.stop()
    shutil.rmtree(c.root, ignore_errors=True)


class Writer(threading.Thread):
    """PUTs objects through one node until stopped, recording each acknowledged one."""

    def __init__(self, node, bucket, prefix, size=50_000):
        super().__init__(daemon=True)
        self.client = node.client()
        self.bucket = bucket
        self.prefix = prefix
        self.size = size
        self.acked = {}
        self.errors = 0
        self.stop_flag = threading.Event()

    def run(self):
        i = 0
        while not self.stop_flag.is_set() and i < 400:
            key = f"{self.prefix}/{i}"
            body = os.urandom(self.size + i)
            try:
                self.client.put_object(Bucket=self.bucket, Key=key, Body=body)
                self.acked[key] = body
            except Exception:  # a node dying mid-request: not acknowledged, not checked
                self.errors += 1
                time.sleep(0.05)
            i += 1


def holds(drive, bucket, key):
    """Whether a drive folder holds the object's record: its key's folder (an object with shard
    files, or a record written through a peer's drive service), or a record in the drive's pack
    (a small object written by the node's own engine; docs/object-store.md, "Packed
    records"). The pack's PUT_META records carry op 1, the bucket and the key, in that order."""
    if (drive / bucket / key).exists():
        return True
    pack = drive / ".openlake.sys" / "pack"
    if not pack.is_dir():
        return False
    b, k = bucket.encode(), key.encode()
    needle = b"\x10\x01\x1a" + bytes([len(b)]) + b + b"\x22" + bytes([len(k)]) + k
    return any(needle in p.read_bytes() for p in pack.iterdir())


def wait_until(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def read_all(node, bucket, objects):
    """Every object of `objects` (key: body) reads back byte-exact through `node`."""
    s3 = node.client()
    for key, body in objects.items():
        got = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert got == body, f"{key} through node {node.id}"

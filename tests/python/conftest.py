"""Fixtures for the Python tests: a real openlaked per test, on loopback.

Run by meson (`meson test --suite integration`), which sets OPENLAKED and PYTHONPATH; by hand:
    PYTHONPATH=build/bindings/python OPENLAKED=build/tools/openlaked/openlaked \\
        python3 -m pytest tests/python
"""

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# Block hashes must agree across processes (the connector refuses to start otherwise).
os.environ.setdefault("PYTHONHASHSEED", "0")


def _openlaked() -> str:
    path = os.environ.get("OPENLAKED") or str(HERE.parents[1] / "build/tools/openlaked/openlaked")
    if not os.access(path, os.X_OK):
        pytest.exit(f"openlaked not found at {path}; build first or set OPENLAKED", returncode=2)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Daemon:
    def __init__(self, tmp: Path, capacity_gb: float = 0.25, segment_mb: int = 4):
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.socket = tmp / "sock" / "kv.sock"
        cfg = tmp / "openlake.toml"
        cfg.write_text(
            f'mode = "kv"\nrpc_addr = "{self.address}"\nkv_socket = "{self.socket}"\n'
            f"[kv_slab]\ncapacity_gb = {capacity_gb}\nsegment_mb = {segment_mb}\n"
            "reserve_ttl_secs = 60\n")
        self.log = tmp / "openlaked.log"
        self.proc = subprocess.Popen([_openlaked(), "--config", str(cfg)],
                                     stdout=open(self.log, "w"), stderr=subprocess.STDOUT,
                                     preexec_fn=_die_with_parent)
        deadline = time.time() + 20
        while time.time() < deadline:
            if "KV pool:" in self.log.read_text():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError(f"openlaked did not start:\n{self.log.read_text()}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path)
    yield d
    assert d.stop() == 0, d.log.read_text()


@pytest.fixture
def openlaked_path():
    return _openlaked()

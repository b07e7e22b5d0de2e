"""A private openlaked on loopback, for examples, benchmarks and tests.

    with LocalDaemon("build/tools/openlaked/openlaked", folder, capacity_gb=4) as d:
        client = openlake_client.Client(d.address)

The daemon gets its own config, Unix socket and log in `folder`, a free 127.0.0.1 port (or the
`host` and `port` given: a cluster's nodes need theirs known before any starts), and is stopped
(SIGTERM, then SIGKILL after `stop_timeout` seconds) when the block ends. `env` adds variables
(UCX_TLS, ...) to its environment; `argv_prefix` runs it under another command (`ip netns exec
NAME`).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalDaemon:
    def __init__(self, openlaked: str, folder: Path, capacity_gb: float,
                 slab_settings: str = "", start_timeout: float = 20.0,
                 stop_timeout: float = 60.0,
                 preexec_fn: Optional[Callable[[], Any]] = None,
                 top_settings: str = "", host: str = "127.0.0.1", port: Optional[int] = None,
                 env: Optional[Dict[str, str]] = None, argv_prefix: Sequence[str] = ()) -> None:
        folder = Path(folder)
        (folder / "sock").mkdir(parents=True, exist_ok=True)
        self.port = port if port is not None else free_port()
        self.address = f"{host}:{self.port}"
        self.socket = folder / "sock" / "kv.sock"
        self.log = folder / "openlaked.log"
        self._stop_timeout = stop_timeout
        cfg = folder / "openlake.toml"
        cfg.write_text(f'mode = "kv"\nrpc_addr = "{self.address}"\nkv_socket = "{self.socket}"\n'
                       f"{top_settings}\n[kv_slab]\ncapacity_gb = {capacity_gb}\n{slab_settings}")
        self.proc = subprocess.Popen([*argv_prefix, openlaked, "--config", str(cfg)],
                                     stdout=open(self.log, "w"), stderr=subprocess.STDOUT,
                                     preexec_fn=preexec_fn, env={**os.environ, **(env or {})})
        deadline = time.time() + start_timeout
        while time.time() < deadline:
            if "KV pool:" in self.log.read_text():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"openlaked did not start:\n{self.log.read_text()}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=self._stop_timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self) -> "LocalDaemon":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

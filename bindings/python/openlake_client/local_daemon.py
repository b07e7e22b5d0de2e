"""A private openlaked on loopback, for examples, benchmarks and tests.

    with LocalDaemon("build/tools/openlaked/openlaked", folder, capacity_gb=4) as d:
        client = openlake_client.Client(d.address)

The daemon gets its own config, Unix socket and log in `folder`, a free 127.0.0.1 port (or the
`host` and `port` given: a cluster's nodes need theirs known before any starts), and is stopped
(SIGTERM, then SIGKILL after `stop_timeout` seconds) when the block ends. `env` adds variables
(UCX_TLS, ...) to its environment; `argv_prefix` runs it under another command (`ip netns exec
NAME`).

Several such daemons with the same [[nodes]] form one cluster KV pool on this host (UCX over TCP
on lo or over shared memory), as examples and benchmarks use it:

    nodes = local_cluster(openlaked, folder, 2, capacity_gb=4,
                          env={"UCX_TLS": "sm,self"})
    ...
    for d in nodes: d.stop()
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence


_given_ports: set = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now and this process has not
    handed out before. Drawn below the kernel's ephemeral range (32768-60999 on Debian): the
    kernel's pick for port 0 may come again for the next caller, or for a listener UCX opens in
    a daemon started earlier, before the daemon meant to get that port binds it."""
    rng = random.Random(os.getpid() * 7919 + len(_given_ports))
    for _ in range(1000):
        port = rng.randint(20000, 32000)
        if port in _given_ports:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given_ports.add(port)
        return port
    raise RuntimeError("no free loopback port between 20000 and 32000")


class DaemonProcess:
    """An openlaked child process: waits for its start, stops it (SIGTERM, then SIGKILL after
    `stop_timeout` seconds), and is a context manager that stops it at the block's end."""

    def _start(self, argv: Sequence[str], log: Path, started: Callable[[str], bool],
               start_timeout: float, stop_timeout: float,
               preexec_fn: Optional[Callable[[], Any]], env: Optional[Dict[str, str]]) -> None:
        self.log = log
        self._stop_timeout = stop_timeout
        self.proc = subprocess.Popen(list(argv), stdout=open(log, "w"), stderr=subprocess.STDOUT,
                                     preexec_fn=preexec_fn, env={**os.environ, **(env or {})})
        deadline = time.time() + start_timeout
        while time.time() < deadline:
            if started(log.read_text(errors="replace")):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"openlaked did not start:\n{log.read_text(errors='replace')}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=self._stop_timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class LocalDaemon(DaemonProcess):
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
        cfg = folder / "openlake.toml"
        cfg.write_text(f'mode = "kv"\nrpc_addr = "{self.address}"\nkv_socket = "{self.socket}"\n'
                       f"{top_settings}\n[kv_slab]\ncapacity_gb = {capacity_gb}\n{slab_settings}")
        self._start([*argv_prefix, openlaked, "--config", str(cfg)], folder / "openlaked.log",
                    lambda text: "KV pool:" in text, start_timeout, stop_timeout, preexec_fn, env)


def nodes_table(addresses: Sequence[str]) -> str:
    """The [[nodes]] tables of a cluster whose node i listens on addresses[i]."""
    return "".join(f'[[nodes]]\nid = {i}\nrpc_addr = "{a}"\n' for i, a in enumerate(addresses))


def wait_cluster_up(daemons: Sequence[LocalDaemon], secret: str = "",
                    timeout: float = 20.0) -> None:
    """Waits until every daemon sees all the others up (node status); raises RuntimeError with
    their logs when that takes longer than `timeout` seconds."""
    from . import OpenLakeError, node_status

    deadline = time.time() + timeout
    for d in daemons:
        while True:
            try:
                st = node_status(d.address, secret, 2.0)
                if len(st["peers"]) + 1 == len(daemons) and all(p["state"] == "up"
                                                                 for p in st["peers"]):
                    break
            except OpenLakeError:
                pass
            if time.time() > deadline:
                logs = "\n".join(f"---- {x.address}\n{x.log.read_text()}" for x in daemons)
                raise RuntimeError(f"{d.address} does not see every node up\n{logs}")
            time.sleep(0.1)


def start_nodes(n: int, make: Callable[[int, str, str, str, int], LocalDaemon],
                hosts: Optional[Sequence[str]] = None, secret: str = "") -> List[LocalDaemon]:
    """n daemons forming one cluster pool: make(i, top_settings, nodes_tables, host, port)
    starts node i (hosts[i], default 127.0.0.1, on a free port) with the top-level settings
    and [[nodes]] tables it must have. Returns once each sees all the others up; stops them
    all again if any fails."""
    hosts = list(hosts or ["127.0.0.1"] * n)
    ports = [free_port() for _ in range(n)]
    table = nodes_table([f"{h}:{p}" for h, p in zip(hosts, ports)])
    daemons: List[LocalDaemon] = []
    try:
        for i in range(n):
            top = f'self_id = {i}\nadmin_addr = "off"\n'
            if secret:
                top += f'rpc_secret = "{secret}"\n'
            daemons.append(make(i, top, table, hosts[i], ports[i]))
        wait_cluster_up(daemons, secret)
    except BaseException:
        for d in daemons:
            d.stop()
        raise
    return daemons


def local_cluster(openlaked: str, folder: Path, n: int, capacity_gb: float,
                  env: Optional[Dict[str, str]] = None, secret: str = "",
                  slab_settings: str = "", cores: Optional[Sequence[Sequence[int]]] = None,
                  **daemon_args: Any) -> List[LocalDaemon]:
    """n daemons on 127.0.0.1 forming one cluster pool (node i in folder/n<i>, on cores[i] when
    given), started and seen up by each other."""
    def make(i: int, top: str, table: str, host: str, port: int) -> LocalDaemon:
        if cores:
            top += f"cores = [{', '.join(str(c) for c in cores[i])}]\n"
        return LocalDaemon(openlaked, Path(folder) / f"n{i}", capacity_gb,
                           slab_settings=slab_settings + "\n" + table, top_settings=top,
                           host=host, port=port, env=env, **daemon_args)

    return start_nodes(n, make, secret=secret)

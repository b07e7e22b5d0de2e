"""Several real openlaked forming one KV pool ([[nodes]] on every node), for the cluster tests.

    nodes = start_cluster(tmp_path, 3, env={"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "lo"})
    ...
    stop_cluster(nodes)
"""

import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import openlake_client as ol
from openlake_client.local_daemon import free_port
from conftest import Daemon


def nodes_table(addresses: Sequence[str]) -> str:
    return "".join(f'[[nodes]]\nid = {i}\nrpc_addr = "{a}"\n' for i, a in enumerate(addresses))


def start_cluster(tmp: Path, n: int, env: Dict[str, str], hosts: Optional[Sequence[str]] = None,
                  secret: str = "", per_node: Optional[List[Dict[str, Any]]] = None,
                  tables: Optional[List[str]] = None, **common: Any) -> List[Daemon]:
    """Starts n daemons (node i on hosts[i], default 127.0.0.1) and waits until each sees all
    the others up. per_node[i] adds Daemon arguments for node i (env, argv_prefix, ...)."""
    hosts = list(hosts or ["127.0.0.1"] * n)
    ports = [free_port() for _ in range(n)]
    addresses = [f"{h}:{p}" for h, p in zip(hosts, ports)]
    table = nodes_table(addresses)
    daemons: List[Daemon] = []
    try:
        for i in range(n):
            top = f"self_id = {i}\nadmin_addr = \"off\"\n"
            if secret:
                top += f'rpc_secret = "{secret}"\n'
            extra = dict(per_node[i]) if per_node else {}
            node_env = {**env, **extra.pop("env", {})}
            daemons.append(Daemon(tmp / f"n{i}", top=top,
                                  tables=(tables[i] if tables else "") + table,
                                  host=hosts[i], port=ports[i], env=node_env,
                                  **{**common, **extra}))
        wait_all_up(daemons, secret)
    except BaseException:
        stop_cluster(daemons)
        raise
    return daemons


def wait_all_up(daemons: Sequence[Daemon], secret: str = "", timeout: float = 20.0) -> None:
    deadline = time.time() + timeout
    for d in daemons:
        while True:
            try:
                st = ol.node_status(d.address, secret, 2.0)
                if len(st["peers"]) + 1 == len(daemons) and all(p["state"] == "up"
                                                                 for p in st["peers"]):
                    break
            except ol.OpenLakeError:
                pass
            if time.time() > deadline:
                logs = "\n".join(f"---- {x.address}\n{x.log.read_text()}" for x in daemons)
                raise AssertionError(f"{d.address} does not see every node up\n{logs}")
            time.sleep(0.1)


def stop_cluster(daemons: Sequence[Daemon]) -> List[int]:
    return [d.stop() for d in daemons]


def wait_until(fn, timeout: float = 15.0, every: float = 0.1) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if fn():
            return True
        time.sleep(every)
    return False

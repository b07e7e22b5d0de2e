"""Several real openlaked forming one KV pool ([[nodes]] on every node), for the cluster tests.

    nodes = start_cluster(tmp_path, 3, env={"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "lo"})
    ...
    stop_cluster(nodes)
"""

import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from openlake_client.local_daemon import start_nodes, wait_cluster_up
from conftest import Daemon


def start_cluster(tmp: Path, n: int, env: Dict[str, str], hosts: Optional[Sequence[str]] = None,
                  secret: str = "", per_node: Optional[List[Dict[str, Any]]] = None,
                  tables: Optional[List[str]] = None, **common: Any) -> List[Daemon]:
    """Starts n daemons (node i on hosts[i], default 127.0.0.1) and waits until each sees all
    the others up. per_node[i] adds Daemon arguments for node i (env, argv_prefix, ...)."""
    def make(i: int, top: str, table: str, host: str, port: int) -> Daemon:
        extra = dict(per_node[i]) if per_node else {}
        node_env = {**env, **extra.pop("env", {})}
        return Daemon(tmp / f"n{i}", top=top, tables=(tables[i] if tables else "") + table,
                      host=host, port=port, env=node_env, **{**common, **extra})

    try:
        return start_nodes(n, make, hosts, secret)
    except RuntimeError as e:  # a node not seen up: its logs are in the message
        raise AssertionError(str(e)) from None


def wait_all_up(daemons: Sequence[Daemon], secret: str = "", timeout: float = 20.0) -> None:
    try:
        wait_cluster_up(daemons, secret, timeout)
    except RuntimeError as e:
        raise AssertionError(str(e)) from None


def stop_cluster(daemons: Sequence[Daemon]) -> List[int]:
    return [d.stop() for d in daemons]


def wait_until(fn, timeout: float = 15.0, every: float = 0.1) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if fn():
            return True
        time.sleep(every)
    return False

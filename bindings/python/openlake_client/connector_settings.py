"""The vLLM connector's settings (kv_connector_extra_config) and the check of openlake_nodes
and openlake_device against the cluster the local daemon has configured."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Dict, List, Optional

import openlake_client


# ---- Settings -------------------------------------------------------------------------------

# An RDMA device as UCX and rdma-core name it: "mlx5_0", "mlx5_ib0", "rxe0", with an optional port.
_RDMA_DEVICE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,62}(:[0-9]{1,3})?")

@dataclasses.dataclass
class Settings:
    """kv_connector_extra_config keys (each documented in docs/vllm.md)."""

    nodes: List[str]
    device: str = "local"         # "local": this host's daemon only; "ucx" or an RDMA device:
                                  # its cluster too (docs/vllm.md, "Several nodes")
    namespace: Optional[str] = None
    secret: str = ""
    timeout_s: float = 5.0
    async_save: bool = True
    async_load: bool = False
    lookup: str = "sync"          # "sync" or "async"
    save_decode: bool = True
    min_load_blocks: int = 1
    copy_engine: str = "auto"     # "auto", "memcpy" (host memory) or "torch"
    crc_threads: int = 4
    copy_path: str = "auto"       # torch engine: "auto", "dma" (runs of slots) or "kernel"
    pin_slab: str = "lazy"        # GPU: register slab segments with CUDA on first use, or "eager"
    event_medium: str = "OPENLAKE"  # the medium of the KV events announcing stored blocks
    layerwise: bool = False       # sync loads copy layer by layer, each waited for by its layer

    @property
    def cluster(self) -> bool:
        """Whether lookups may be served from the other nodes of the local daemon's cluster."""
        return self.device != "local"

    @staticmethod
    def from_extra(extra: Dict[str, Any]) -> "Settings":
        nodes = extra.get("openlake_nodes", ["127.0.0.1:9400"])
        if isinstance(nodes, str):
            nodes = [nodes]
        if not nodes:
            raise ValueError("OpenLakeConnector: openlake_nodes is empty")
        s = Settings(nodes=[str(n) for n in nodes])
        s.device = str(extra.get("openlake_device", "local"))
        s.namespace = extra.get("openlake_namespace")
        s.secret = str(extra.get("openlake_secret", ""))
        s.timeout_s = float(extra.get("openlake_timeout_s", 5.0))
        s.async_save = bool(extra.get("openlake_async_save", True))
        s.async_load = bool(extra.get("openlake_async_load", False))
        s.lookup = str(extra.get("openlake_lookup", "sync"))
        s.save_decode = bool(extra.get("openlake_save_decode", True))
        s.min_load_blocks = max(1, int(extra.get("openlake_min_load_blocks", 1)))
        s.copy_engine = str(extra.get("openlake_copy_engine", "auto"))
        s.crc_threads = max(1, int(extra.get("openlake_crc_threads", 4)))
        s.copy_path = str(extra.get("openlake_copy_path", "auto"))
        s.pin_slab = str(extra.get("openlake_pin_slab", "lazy"))
        s.event_medium = str(extra.get("openlake_event_medium", "OPENLAKE"))
        s.layerwise = bool(extra.get("openlake_layerwise", False))
        if s.device not in ("local", "ucx") and not _RDMA_DEVICE.fullmatch(s.device):
            raise ValueError(f"OpenLakeConnector: openlake_device must be 'local', 'ucx' or an "
                             f"RDMA device name such as 'mlx5_0', not {s.device!r}")
        if s.lookup not in ("sync", "async"):
            raise ValueError("OpenLakeConnector: openlake_lookup must be 'sync' or 'async'")
        if s.copy_engine not in ("auto", "memcpy", "torch"):
            raise ValueError("OpenLakeConnector: openlake_copy_engine must be auto, memcpy or torch")
        if s.copy_path not in ("auto", "dma", "kernel"):
            raise ValueError("OpenLakeConnector: openlake_copy_path must be auto, dma or kernel")
        if s.pin_slab not in ("lazy", "eager"):
            raise ValueError("OpenLakeConnector: openlake_pin_slab must be lazy or eager")
        return s


def cluster_mismatches(settings: Settings) -> List[str]:
    """Where openlake_nodes and openlake_device disagree with the cluster that this host's
    daemon (openlake_nodes[0]) has configured: one line per difference, none when they agree.

    The daemons' [[nodes]] decide who serves whom; the connector never remaps keys itself, so a
    list that differs only earns a warning."""
    nodes = settings.nodes
    if settings.device == "local":
        if len(nodes) > 1:
            return [f"openlake_device 'local' uses only this host's daemon ({nodes[0]}); the "
                    f"other {len(nodes) - 1} entries of openlake_nodes are not asked (use 'ucx' "
                    "or an RDMA device name for the cluster pool)"]
        return []
    try:
        st = openlake_client.node_status(nodes[0], settings.secret, settings.timeout_s)
    except openlake_client.OpenLakeError as e:
        return [f"cannot ask the daemon at {nodes[0]} for its cluster ({e}); lookups will "
                "still go to it"]
    out = []
    peers = {p["rpc_addr"] for p in st["peers"]}
    if not peers:
        out.append(f"the daemon at {nodes[0]} is not in a cluster (its [[nodes]] lists only "
                   f"itself): openlake_device {settings.device!r} reaches no other node")
    else:
        listed = set(nodes[1:])
        missing = sorted(peers - listed)
        extra = sorted(listed - peers)
        if missing or extra:
            out.append(f"openlake_nodes {nodes} differs from the [[nodes]] of the daemon at "
                       f"{nodes[0]} (peers {sorted(peers)}): the daemons' list decides"
                       + (f"; not listed here: {missing}" if missing else "")
                       + (f"; unknown to the daemon: {extra}" if extra else ""))
        down = sorted(p["rpc_addr"] for p in st["peers"] if p["state"] != "up")
        if down:
            out.append(f"the daemon at {nodes[0]} sees these peers down: {down}")
        if not st["kv_ucx"]:
            out.append(f"the daemon at {nodes[0]} was built without UCX: it cannot pull blocks "
                       "from its peers")
    if settings.device != "ucx" and st["kv_ucx"]:
        devices = [d.split(":")[0] for d in st["kv_ucx_devices"].split(",") if d]
        want = settings.device.split(":")[0]
        if not devices:
            out.append(f"openlake_device {settings.device!r}: the daemon at {nodes[0]} lets UCX "
                       "choose its devices; set [rdma] backend = \"ucx\" and dev_name = "
                       f"\"{settings.device}\" in its config to use this one")
        elif want not in devices:
            out.append(f"openlake_device {settings.device!r}: the daemon at {nodes[0]} reaches "
                       f"its peers through {st['kv_ucx_devices']!r}")
    return out

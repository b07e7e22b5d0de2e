"""How the vLLM connector's workers move block bytes: the memcpy mover for KV caches in host
memory (the C++ client copies and checksums each block's pieces), and the choice between it and
the torch mover (torch_mover.py) for GPU caches."""

from __future__ import annotations

from typing import Any, List, Optional

import openlake_client
from openlake_client.connector_settings import Settings
from openlake_client.layout import BlockLayout


# ---- Moving bytes ---------------------------------------------------------------------------

def _make_mover(layout: BlockLayout, client: Any, ns: Any, settings: Settings) -> Any:
    engine = settings.copy_engine
    if engine == "auto":
        engine = "memcpy" if layout.device == "cpu" else "torch"
    if engine == "memcpy":
        if layout.device != "cpu":
            raise ValueError("openlake_copy_engine='memcpy' needs the KV cache in host memory")
        return MemcpyMover(layout, client, ns)
    from openlake_client.torch_mover import TorchMover  # imports torch, only on workers
    mover = TorchMover(layout, client, ns, crc_threads=settings.crc_threads,
                       copy_path=settings.copy_path)
    if settings.pin_slab == "eager":
        mover.register_all()
    return mover


class MemcpyMover:
    """KV caches in host memory: the C++ client copies (and checksums) block pieces directly."""

    name = "memcpy"

    def __init__(self, layout: BlockLayout, client: Any, ns: Any) -> None:
        self._layout, self._client, self._ns = layout, client, ns

    def save(self, keys: List[bytes], block_ids: List[int], first_depth: int) -> int:
        if not keys:
            return 0
        try:
            return int(self._client.put(self._ns, keys, self._layout.pieces_for(block_ids), first_depth))
        except openlake_client.PoolFullError:
            return 0

    def load(self, keys: List[bytes], block_ids: List[int], head: Optional[bytes] = None) -> int:
        if not keys:
            return 0
        loaded, _ = self._client.get(self._ns, keys, self._layout.pieces_for(block_ids), head)
        return int(loaded)

    def close(self) -> None:
        return

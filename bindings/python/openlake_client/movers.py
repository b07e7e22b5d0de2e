"""How the vLLM connector's workers move block bytes: the memcpy mover for KV caches in host
memory (the C++ client copies and checksums each block's pieces), and the choice between it and
the torch mover (torch_mover.py) for GPU caches."""

from __future__ import annotations

import ctypes
import dataclasses
from typing import Any, List, Optional, Tuple

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

    # ---- Layer by layer (openlake_layerwise): the copy of layer i + 1 overlaps the forward
    # of layer i. The blocks are pinned first; each layer's ranges are copied out of the slab
    # for every block; the whole blocks are verified (CRC-64 of the slab bytes, and the slot
    # not handed to another writer meanwhile) once every layer is in, and released.

    def begin_layers(self, keys: List[bytes], block_ids: List[int],
                     head: Optional[bytes] = None) -> "LayerLoad":
        batch, hits = self._client.lookup(self._ns, keys, head) if keys else (0, [])
        return LayerLoad(batch, list(hits), list(block_ids[:len(hits)]))

    def copy_layer(self, job: "LayerLoad", index: int) -> None:
        base = self._client.slab_address
        at = self._layout.layer_offsets()[index]
        for (_, offset, _, _), block in zip(job.hits, job.block_ids):
            src = base + offset + at
            for dst, n in self._layout.layer_pieces(block, index):
                ctypes.memmove(dst, src, n)
                src += n

    def finish_layers(self, job: "LayerLoad") -> int:
        """Blocks of the leading run that verified; the pins released."""
        loaded = 0
        base = self._client.slab_address
        try:
            for slot, offset, generation, checksum in job.hits:
                crc = openlake_client.crc64_at(base + offset, self._layout.block_bytes)
                if crc != checksum or not self._client.still_valid(slot, generation):
                    break
                loaded += 1
        finally:
            if job.batch:
                self._client.release([job.batch])
        return loaded

    def close(self) -> None:
        return


@dataclasses.dataclass
class LayerLoad:
    """A load in progress, layer by layer: the pin batch, the hits (slot, offset, generation,
    checksum) and the blocks of the KV cache they go to."""

    batch: int
    hits: List[Tuple[int, int, int, int]]
    block_ids: List[int]

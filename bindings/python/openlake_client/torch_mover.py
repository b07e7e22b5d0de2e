"""Moving KV blocks between torch tensors (GPU or host) and the pool's shared slab.

Used by the connector when the KV cache is on a GPU (and, for tests, on the host). A step's
blocks move in batches, never one copy call per layer and block:

  save:  per (layer, byte range) one gather (index_select) of every block of the step into a
         staging buffer laid out as OpenLake blocks; then ONE index_copy_ writes every staged
         block into its reserved slot, the slab seen as rows of R bytes (4 KiB for blocks of
         4 KiB and more); CRC-64 of the slots on `crc_threads` host threads; one Commit.
  load:  one Lookup (pins the hits); CRC-64 of the slots, verified against what was committed;
         ONE index_select reads every verified slot into staging; per (layer, byte range) one
         scatter (index_copy_) into the KV cache; the generation re-checked; one Release.

On a GPU the slab's segments are registered with CUDA as mapped, page-locked memory (a segment
at a time, as blocks land in it, so a large slab costs nothing until used) and the slab is seen
by the GPU through a CUDA tensor aliasing that memory: the row copy is one kernel that reads or
writes host memory over PCIe directly. Where that alias cannot be made, each block crosses in
one cudaMemcpy instead (logged once).
"""

from __future__ import annotations

import logging
import math
from typing import Any, List, Set, Tuple

import openlake_client

logger = logging.getLogger("openlake_client.torch_mover")

_CUDA_HOST_REGISTER_PORTABLE = 1
_CUDA_HOST_REGISTER_MAPPED = 2
_CUDA_ERROR_ALREADY_REGISTERED = 712


def _can_widen(t: Any) -> bool:
    """True when these bytes can be seen as 8-byte elements (fewer, wider accesses)."""
    return (t.dim() >= 1 and t.shape[-1] % 8 == 0 and t.stride(-1) == 1
            and t.storage_offset() % 8 == 0 and all(st % 8 == 0 for st in t.stride()[:-1]))


def _untyped_storage(t: Any) -> Any:
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage()  # torch >= 2.0
    return t.storage().untyped()  # torch 1.13


class _CudaArray:
    """Describes device-addressable memory to torch (__cuda_array_interface__, version 3)."""

    def __init__(self, address: int, nbytes: int):
        self.__cuda_array_interface__ = {
            "shape": (nbytes,), "typestr": "|u1", "data": (address, False), "version": 3,
            "strides": None}


class TorchMover:
    name = "torch"

    def __init__(self, layout: Any, client: Any, ns: Any, crc_threads: int = 4) -> None:
        import torch

        self._torch = torch
        self._layout = layout
        self._client = client
        self._ns = ns
        self._crc_threads = crc_threads
        self._device = torch.device(layout.device)
        self._cuda = self._device.type == "cuda"
        self._bb = int(layout.block_bytes)
        self._slab_addr = int(client.slab_address)
        self._seg_off = int(client.slab_segments_offset)
        self._seg_bytes = int(client.slab_segment_bytes)
        self._registered: Set[int] = set()
        # Slots start on 4 KiB boundaries for blocks of 4 KiB and more (64 bytes below): rows of
        # that size (or less, to divide the block) address every slot of the slab.
        self._row = math.gcd(4096 if self._bb >= 4096 else 64, self._bb)
        # The slab as host memory (a view, no copy), for per-block fallback copies.
        self._slab_host = torch.frombuffer(client.slab_view(), dtype=torch.uint8)
        self._slab_rows = None  # the segments area as (rows, R), on the KV cache's device
        if self._cuda:
            self._slab_rows = self._cuda_alias()
        else:
            area = self._slab_host[self._seg_off:]
            self._slab_rows = area[:area.numel() // self._row * self._row].view(-1, self._row)
        self._rows_wide = self._row % 8 == 0
        if self._slab_rows is not None and self._rows_wide:
            self._slab_rows = self._slab_rows.view(torch.int64)

        # One 2-D view per (layer, byte range of a kernel block): row k = kernel block k.
        # Columns of the staging buffer follow OpenLake block order (layout.pieces).
        # (view, kernel offset j, column, length, widened to int64)
        self._ranges: List[Tuple[Any, int, int, int, bool]] = []
        col = 0
        for plan in layout.layers:
            t = layout.tensors[plan.name]
            t = t[0] if isinstance(t, (list, tuple)) else t
            storage = _untyped_storage(t)
            whole = torch.empty(0, dtype=torch.uint8, device=self._device)
            whole.set_(storage, 0, (storage.nbytes(),), (1,))
            start = plan.base - storage.data_ptr()
            for j in range(layout.ratio):
                for off, n in plan.runs:
                    view = whole.as_strided((plan.num_kernel_blocks, n), (plan.block_stride, 1),
                                            start + off)
                    # Widened only when the KV side and the staging columns both allow it.
                    wide = _can_widen(view) and col % 8 == 0 and self._bb % 8 == 0
                    self._ranges.append((view.view(torch.int64) if wide else view, j, col, n, wide))
                    col += n
        if col != self._bb:
            raise ValueError(f"torch copy plan covers {col} bytes of a {self._bb}-byte block")

    # ---- Slab memory -----------------------------------------------------------------------

    def _seg_addr(self, seg: int) -> int:
        return self._slab_addr + self._seg_off + seg * self._seg_bytes

    def _register(self, seg: int) -> None:
        cudart = self._torch.cuda.cudart()
        rc = cudart.cudaHostRegister(self._seg_addr(seg), self._seg_bytes,
                                     _CUDA_HOST_REGISTER_PORTABLE | _CUDA_HOST_REGISTER_MAPPED)
        code = int(getattr(rc, "value", rc))
        if code not in (0, _CUDA_ERROR_ALREADY_REGISTERED):
            raise RuntimeError(f"cudaHostRegister of KV slab segment {seg} failed (CUDA error {code})")
        self._registered.add(seg)

    def _cuda_alias(self) -> Any:
        """A CUDA uint8 tensor over the slab's segments (mapped host memory), or None."""
        try:
            self._register(0)
            nbytes = int(self._client.slab_bytes) - self._seg_off
            nbytes -= nbytes % self._row
            # With unified addressing the device address of mapped, registered host memory is
            # its host address.
            alias = self._torch.as_tensor(_CudaArray(self._seg_addr(0), nbytes), device=self._device)
            return alias.view(-1, self._row)
        except Exception as e:  # no UVA, an old torch, ...: fall back to per-block copies
            logger.warning("OpenLake: the GPU cannot address the slab directly (%s); each block "
                           "will cross PCIe in a copy of its own", e)
            return None

    def _pin(self, offsets: List[int]) -> None:
        """Registers with CUDA the slab segments these slots lie in (once each)."""
        if not self._cuda:
            return
        for off in offsets:
            seg = (off - self._seg_off) // self._seg_bytes
            if seg not in self._registered:
                self._register(seg)

    def close(self) -> None:
        self._slab_rows = None
        if self._cuda:
            cudart = self._torch.cuda.cudart()
            for seg in sorted(self._registered):
                cudart.cudaHostUnregister(self._seg_addr(seg))
        self._registered.clear()

    def _sync(self) -> None:
        if self._cuda:
            self._torch.cuda.current_stream(self._device).synchronize()

    def _rows(self, offsets: List[int]) -> Any:
        """Row indexes (into the segments area) of these slots, block after block."""
        torch = self._torch
        per = self._bb // self._row
        first = torch.tensor([(off - self._seg_off) // self._row for off in offsets],
                             dtype=torch.long, device=self._device)
        return (first.unsqueeze(1) + torch.arange(per, device=self._device)).reshape(-1)

    def _kernel_index(self, block_ids: List[int], j: int) -> Any:
        r = self._layout.ratio
        return self._torch.tensor([b * r + j for b in block_ids], dtype=self._torch.long,
                                  device=self._device)

    # ---- Save: KV cache → slab --------------------------------------------------------------

    def save(self, keys: List[bytes], block_ids: List[int], first_depth: int) -> int:
        torch = self._torch
        if not keys:
            return 0
        try:
            grants = self._client.reserve(self._ns, len(keys), True)
        except openlake_client.PoolFullError:
            return 0
        m = len(grants)
        ids = block_ids[:m]
        offsets = [int(g[1]) for g in grants]
        staging = torch.empty((m, self._bb), dtype=torch.uint8, device=self._device)
        index = [self._kernel_index(ids, j) for j in range(self._layout.ratio)]
        for view, j, col, n, wide in self._ranges:
            dst = staging[:, col:col + n]
            (dst.view(torch.int64) if wide else dst)[:] = view.index_select(0, index[j])
        self._pin(offsets)
        if self._slab_rows is not None:
            rows = staging.view(-1, self._row)
            self._slab_rows.index_copy_(0, self._rows(offsets),
                                        rows.view(torch.int64) if self._rows_wide else rows)
        else:
            for i, off in enumerate(offsets):
                self._slab_host[off:off + self._bb].copy_(staging[i], non_blocking=True)
        self._sync()
        crcs = openlake_client.crc64_many([(self._slab_addr + off, self._bb) for off in offsets],
                                          self._crc_threads)
        entries = [(int(g[0]), keys[i], int(crcs[i]), first_depth + i) for i, g in enumerate(grants)]
        try:
            self._client.commit(self._ns, entries)
        except openlake_client.OpenLakeError:
            self._client.release([], [int(g[0]) for g in grants], False)
            raise
        return m

    # ---- Load: slab → KV cache ----------------------------------------------------------------

    def load(self, keys: List[bytes], block_ids: List[int]) -> int:
        torch = self._torch
        if not keys:
            return 0
        batch, hits = self._client.lookup(self._ns, keys)
        try:
            if not hits:
                return 0
            crcs = openlake_client.crc64_many(
                [(self._slab_addr + int(h[1]), self._bb) for h in hits], self._crc_threads)
            good = 0
            while good < len(hits) and int(crcs[good]) == int(hits[good][3]):
                good += 1
            if good == 0:
                return 0
            ids = block_ids[:good]
            offsets = [int(h[1]) for h in hits[:good]]
            self._pin(offsets)
            if self._slab_rows is not None:
                rows = self._slab_rows.index_select(0, self._rows(offsets))
                staging = rows.view(torch.uint8).view(good, self._bb)
            else:
                staging = torch.empty((good, self._bb), dtype=torch.uint8, device=self._device)
                for i, off in enumerate(offsets):
                    staging[i].copy_(self._slab_host[off:off + self._bb], non_blocking=True)
            index = [self._kernel_index(ids, j) for j in range(self._layout.ratio)]
            for view, j, col, n, wide in self._ranges:
                src = staging[:, col:col + n]
                view.index_copy_(0, index[j], src.view(torch.int64) if wide else src)
            self._sync()
            # A slot handed to a writer while we copied (our pin's lease lapsed) is not served.
            for i in range(good):
                if not self._client.still_valid(int(hits[i][0]), int(hits[i][2])):
                    return i
            return good
        finally:
            if batch:
                self._client.release([batch], [], False)

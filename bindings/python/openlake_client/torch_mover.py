"""Moving KV blocks between torch tensors (GPU or host) and the pool's shared slab.

Used by the connector when the KV cache is on a GPU (and, for tests, on the host). A step's
blocks move in batches, never one copy call per layer and block:

  save:  per (layer, byte range) one gather (index_select) of every block of the step into a
         staging buffer laid out as OpenLake blocks; one copy per block from the staging buffer
         into its reserved slot (pinned slab memory, so a GPU copies it by DMA); CRC-64 of the
         slots on `crc_threads` host threads; one Commit.
  load:  one Lookup (pins the hits); CRC-64 of the slots, verified against what was committed;
         one copy per block from the slab into staging; per (layer, byte range) one scatter
         (index_copy_) into the KV cache; the generation re-checked after copying; one Release.

On a GPU the slab is registered with CUDA (page-locked) a segment at a time, as blocks land in it,
so a large slab costs nothing until used.
"""

from __future__ import annotations

from typing import Any, List, Set, Tuple

import openlake_client


def _untyped_storage(t: Any) -> Any:
    if hasattr(t, "untyped_storage"):
        return t.untyped_storage()  # torch >= 2.0
    return t.storage().untyped()  # torch 1.13


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
        # The whole slab as a host uint8 tensor: a view, no copy.
        self._slab = torch.frombuffer(client.slab_view(), dtype=torch.uint8)
        self._slab_addr = int(client.slab_address)
        self._seg_off = int(client.slab_segments_offset)
        self._seg_bytes = int(client.slab_segment_bytes)
        self._registered: Set[int] = set()
        self._bb = int(layout.block_bytes)
        # One 2-D byte view per (layer, byte range of a kernel block): row k = kernel block k.
        # Columns of the staging buffer follow OpenLake block order (layout.pieces).
        self._ranges: List[Tuple[Any, int, int, int]] = []  # (view, kernel offset j, col, len)
        self._storages = []
        col = 0
        for plan in layout.layers:
            storage = _untyped_storage(self._find_tensor(plan))
            self._storages.append(storage)
            whole = torch.empty(0, dtype=torch.uint8, device=self._device)
            whole.set_(storage, 0, (storage.nbytes(),), (1,))
            start = plan.base - storage.data_ptr()
            for j in range(layout.ratio):
                for off, n in plan.runs:
                    view = whole.as_strided((plan.num_kernel_blocks, n), (plan.block_stride, 1),
                                            start + off)
                    self._ranges.append((view, j, col, n))
                    col += n
        if col != self._bb:
            raise ValueError(f"torch copy plan covers {col} bytes of a {self._bb}-byte block")

    def _find_tensor(self, plan: Any) -> Any:
        t = self._layout.tensors[plan.name]
        return t[0] if isinstance(t, (list, tuple)) else t

    def close(self) -> None:
        if self._cuda:
            cudart = self._torch.cuda.cudart()
            for seg in sorted(self._registered):
                cudart.cudaHostUnregister(self._seg_addr(seg))
        self._registered.clear()

    # ---- Slab memory -----------------------------------------------------------------------

    def _seg_addr(self, seg: int) -> int:
        return self._slab_addr + self._seg_off + seg * self._seg_bytes

    def _pin(self, offsets: List[int]) -> None:
        """Registers with CUDA the slab segments these slots lie in (once each)."""
        if not self._cuda:
            return
        cudart = self._torch.cuda.cudart()
        for off in offsets:
            seg = (off - self._seg_off) // self._seg_bytes
            if seg in self._registered:
                continue
            rc = cudart.cudaHostRegister(self._seg_addr(seg), self._seg_bytes, 0)
            code = int(rc.value) if hasattr(rc, "value") else int(rc)
            if code not in (0, 712):  # 712: already registered
                raise RuntimeError(f"cudaHostRegister of a KV slab segment failed (error {code})")
            self._registered.add(seg)

    def _sync(self) -> None:
        if self._cuda:
            self._torch.cuda.current_stream(self._device).synchronize()

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
        staging = torch.empty((m, self._bb), dtype=torch.uint8, device=self._device)
        index = [self._kernel_index(ids, j) for j in range(self._layout.ratio)]
        for view, j, col, n in self._ranges:
            staging[:, col:col + n].copy_(view.index_select(0, index[j]))
        offsets = [int(g[1]) for g in grants]
        self._pin(offsets)
        for i, off in enumerate(offsets):
            self._slab[off:off + self._bb].copy_(staging[i], non_blocking=self._cuda)
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
            staging = torch.empty((good, self._bb), dtype=torch.uint8, device=self._device)
            for i, off in enumerate(offsets):
                staging[i].copy_(self._slab[off:off + self._bb], non_blocking=self._cuda)
            index = [self._kernel_index(ids, j) for j in range(self._layout.ratio)]
            for view, j, col, n in self._ranges:
                view.index_copy_(0, index[j], staging[:, col:col + n])
            self._sync()
            # A slot handed to a writer while we copied (our pin's lease lapsed) is not served.
            for i in range(good):
                if not self._client.still_valid(int(hits[i][0]), int(hits[i][2])):
                    return i
            return good
        finally:
            if batch:
                self._client.release([batch], [], False)

"""Moving KV blocks between torch tensors (GPU or host) and the pool's shared slab.

Used by the connector when the KV cache is on a GPU (and, for tests, on the host). A step's
blocks move in batches, never one copy call per layer and block:

  save:  per (layer, byte range) one gather (index_select) of every block of the step into a
         staging buffer laid out as OpenLake blocks; then the staged blocks cross to their
         reserved slots (below) while they are checksummed; one Commit. With the KV cache on a
         GPU and a module built with the GPU checksum (openlake_client.has_cuda_crc()), one
         kernel on a side stream computes the CRC-64 of every staged block once the gather is
         done, overlapping the crossing, and the step's m checksums come to the host in one
         copy of 8·m bytes: the host never reads the slab. Otherwise the crossing runs in up to
         8 chunks, and each chunk is checksummed in the slab (on `crc_threads` host threads)
         as soon as it has landed, while the next ones still cross.
  load:  one Lookup (pins the hits); the slots cross into staging while the host checksums
         them (both only read the slab); the prefix whose CRC-64 matches what was committed is
         then scattered, per (layer, byte range) one index_copy_, into the KV cache (a corrupt
         block and those after it never reach it); the generation re-checked; one Release.

The crossing between staging and the slab takes one of two paths (`copy_path`):
  "dma":    slots that lie back to back in the slab (what one Reserve usually hands out) form
            runs, and each run crosses in ONE copy (cudaMemcpyAsync, DMA at PCIe speed);
  "kernel": ONE index_copy_ / index_select over the whole step, the slab seen as rows of R
            bytes (4 KiB for blocks of 4 KiB and more) through a CUDA tensor aliasing the
            mapped host memory: one kernel reads or writes host memory over PCIe directly,
            however scattered the slots are.
"auto" saves through the DMA runs however many there are (on an H200, DMA copies of single 2 MiB
blocks still wrote the slab faster than the kernel's PCIe stores), and loads through them when
there are few (at most one per 8 blocks), through the kernel otherwise (its reads of scattered
slots beat many small DMA copies). On a GPU the slab's segments are registered with CUDA as
mapped, page-locked memory: a segment at a time, as blocks land in it, so a large slab costs
nothing until used but the first use of a segment pays for locking its pages (a few GB/s);
`register_all` (the connector's openlake_pin_slab = "eager") pays that once, up front, for the
whole slab. Where the alias cannot be made, the runs are used whatever their number (logged
once).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any, Dict, List, Optional, Set, Tuple

import openlake_client

logger = logging.getLogger("openlake_client.torch_mover")

_CUDA_HOST_REGISTER_PORTABLE = 1
_CUDA_HOST_REGISTER_MAPPED = 2
# Slab segments registered with CUDA by this process, with how many movers use each: CUDA refuses
# a second registration of the same range (and the failed call would poison the next kernel
# launch's error check), so movers share registrations.
_REGISTERED: Dict[int, int] = {}
_REGISTERED_LOCK = threading.Lock()
_CHUNKS = 8  # a save's crossing is checksummed in this many pieces, overlapping the copies


class _nothing:
    """A context manager that does nothing (host tensors: no stream to enter)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


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

    def __init__(self, layout: Any, client: Any, ns: Any, crc_threads: int = 4,
                 copy_path: str = "auto") -> None:
        import torch

        if copy_path not in ("auto", "dma", "kernel"):
            raise ValueError(f"copy_path must be auto, dma or kernel, not {copy_path!r}")
        self._copy_path = copy_path
        # Seconds per stage, summed over calls, when set to a dict (bench/gpu_kv_bench.py
        # --profile): each stage then ends with a device synchronisation.
        self.profile: Any = None
        self._t = 0.0

        self._torch = torch
        self._layout = layout
        self._client = client
        self._ns = ns
        self._crc_threads = crc_threads
        self._device = torch.device(layout.device)
        self._cuda = self._device.type == "cuda"
        # Saves checksum the staged blocks on the GPU, on a stream of their own, when they can.
        self._gpu_crc = self._cuda and openlake_client.has_cuda_crc()
        self._crc_stream = torch.cuda.Stream(self._device) if self._gpu_crc else None
        self._bb = int(layout.block_bytes)
        self._slab_addr = int(client.slab_address)
        self._seg_off = int(client.slab_segments_offset)
        self._seg_bytes = int(client.slab_segment_bytes)
        self._registered: Set[int] = set()
        # Slots start on 4 KiB boundaries for blocks of 4 KiB and more (64 bytes below): rows of
        # that size (or less, to divide the block) address every slot of the slab.
        self._row = math.gcd(4096 if self._bb >= 4096 else 64, self._bb)
        # The slab as host memory (a view, no copy), for the DMA runs.
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
        # Per layer (of layout.layers): its slice of self._ranges and its columns.
        self._layer_ranges: List[Tuple[int, int, int, int]] = []
        for plan in layout.layers:
            first_range, first_col = len(self._ranges), col
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
            self._layer_ranges.append((first_range, len(self._ranges), first_col, col))
        # Layer-by-layer loads: the copies run on a stream of their own, one event per layer.
        self._layer_stream = torch.cuda.Stream(self._device) if self._cuda else None
        self._layer_events: Dict[int, Any] = {}
        if col != self._bb:
            raise ValueError(f"torch copy plan covers {col} bytes of a {self._bb}-byte block")

    # ---- Slab memory -----------------------------------------------------------------------

    def _seg_addr(self, seg: int) -> int:
        return self._slab_addr + self._seg_off + seg * self._seg_bytes

    def _register(self, seg: int) -> None:
        addr = self._seg_addr(seg)
        with _REGISTERED_LOCK:
            if addr not in _REGISTERED:
                cudart = self._torch.cuda.cudart()
                rc = cudart.cudaHostRegister(addr, self._seg_bytes,
                                             _CUDA_HOST_REGISTER_PORTABLE | _CUDA_HOST_REGISTER_MAPPED)
                code = int(getattr(rc, "value", rc))
                if code != 0:
                    if hasattr(cudart, "cudaGetLastError"):
                        cudart.cudaGetLastError()  # clear it: torch checks it after each launch
                    raise RuntimeError(f"cudaHostRegister of KV slab segment {seg} failed "
                                       f"(CUDA error {code})")
                _REGISTERED[addr] = 0
            _REGISTERED[addr] += 1
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
            logger.warning("OpenLake: the GPU cannot address the slab directly (%s); blocks will "
                           "cross PCIe in one DMA copy per run of back-to-back slots", e)
            return None

    def register_all(self) -> None:
        """Registers every segment of the slab with CUDA now (openlake_pin_slab = "eager"):
        pays, once and up front, what lazy registration pays the first time a segment is used
        (the pages are faulted in and locked)."""
        if not self._cuda:
            return
        for seg in range((int(self._client.slab_bytes) - self._seg_off) // self._seg_bytes):
            if seg not in self._registered:
                self._register(seg)

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
            with _REGISTERED_LOCK:
                for seg in sorted(self._registered):
                    addr = self._seg_addr(seg)
                    _REGISTERED[addr] -= 1
                    if _REGISTERED[addr] == 0:
                        del _REGISTERED[addr]
                        cudart.cudaHostUnregister(addr)
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

    def _runs(self, offsets: List[int]) -> List[Tuple[int, int, int]]:
        """(first block, count, slab offset) of each run of back-to-back slots."""
        runs: List[Tuple[int, int, int]] = []
        for i, off in enumerate(offsets):
            if runs and runs[-1][2] + runs[-1][1] * self._bb == off:
                first, n, start = runs[-1]
                runs[-1] = (first, n + 1, start)
            else:
                runs.append((i, 1, off))
        return runs

    def _use_runs(self, runs: List[Tuple[int, int, int]], blocks: int, to_slab: bool) -> bool:
        if self._slab_rows is None or self._copy_path == "dma":
            return True
        if self._copy_path == "kernel":
            return False
        return to_slab or len(runs) <= max(1, blocks // 8)

    def _kernel_index(self, block_ids: List[int], j: int) -> Any:
        r = self._layout.ratio
        return self._torch.tensor([b * r + j for b in block_ids], dtype=self._torch.long,
                                  device=self._device)

    # ---- The crossing, in chunks --------------------------------------------------------------

    def _chunks(self, blocks: int) -> List[Tuple[int, int]]:
        """Up to _CHUNKS block ranges of a step: checksums of one overlap the crossing of the next."""
        n = max(1, min(_CHUNKS, blocks))
        bounds = [blocks * i // n for i in range(n + 1)]
        return [(bounds[i], bounds[i + 1]) for i in range(n) if bounds[i] < bounds[i + 1]]

    def _cross(self, staging: Any, offsets: List[int], to_slab: bool,
               chunks: List[Tuple[int, int]]) -> List[Any]:
        """Queues the copies between staging rows and these slots, chunk after chunk; returns
        one CUDA event per chunk (recorded after its copies), or None per chunk on the host."""
        torch = self._torch
        runs = self._runs(offsets)
        use_runs = self._use_runs(runs, len(offsets), to_slab)
        events = []
        for lo, hi in chunks:
            if use_runs:
                for first, n, off in runs:
                    a, b = max(first, lo), min(first + n, hi)
                    if a >= b:
                        continue
                    start = off + (a - first) * self._bb
                    slab = self._slab_host[start:start + (b - a) * self._bb].view(b - a, self._bb)
                    if to_slab:
                        slab.copy_(staging[a:b], non_blocking=True)
                    else:
                        staging[a:b].copy_(slab, non_blocking=True)
            else:
                rows = self._rows(offsets[lo:hi])
                part = staging[lo:hi].view(-1, self._row)
                part = part.view(torch.int64) if self._rows_wide else part
                if to_slab:
                    self._slab_rows.index_copy_(0, rows, part)
                else:
                    torch.index_select(self._slab_rows, 0, rows, out=part)
            if self._cuda:
                ev = torch.cuda.Event()
                ev.record(torch.cuda.current_stream(self._device))
                events.append(ev)
            else:
                events.append(None)
        return events

    def _crc(self, offsets: List[int]) -> List[int]:
        t = time.perf_counter()
        out = [int(c) for c in openlake_client.crc64_many(
            [(self._slab_addr + off, self._bb) for off in offsets], self._crc_threads)]
        if self.profile is not None:
            self.profile["crc (inside the others)"] = (
                self.profile.get("crc (inside the others)", 0.0) + time.perf_counter() - t)
        return out

    def _crc_staged(self, staging: Any) -> Tuple[Any, Any, Any]:
        """Queues the CRC-64 of each staging row on the GPU, on the checksum stream, once the
        current stream (the gather) is past this point; the results cross to pinned host
        memory. Returns (host results, event recorded after them, timing events or None)."""
        torch = self._torch
        m = staging.shape[0]
        gathered = torch.cuda.Event()
        gathered.record(torch.cuda.current_stream(self._device))
        timing = None
        with torch.cuda.stream(self._crc_stream):
            self._crc_stream.wait_event(gathered)
            out = torch.empty(m, dtype=torch.int64, device=self._device)
            host = torch.empty(m, dtype=torch.int64, pin_memory=True)
            if self.profile is not None:
                timing = tuple(torch.cuda.Event(enable_timing=True) for _ in range(2))
                timing[0].record(self._crc_stream)
            openlake_client.crc64_rows_device(staging.data_ptr(), self._bb, m, out.data_ptr(),
                                              self._crc_stream.cuda_stream)
            if timing is not None:
                timing[1].record(self._crc_stream)
            host.copy_(out, non_blocking=True)
            done = torch.cuda.Event()
            done.record(self._crc_stream)
        # The staging buffer is read on the checksum stream too: the allocator must not hand it
        # out again before that stream is done with it.
        staging.record_stream(self._crc_stream)
        return host, done, timing

    def _stage(self, name: Any) -> None:
        """Profiling only: charges the time since the last stage to `name` (None: starts)."""
        if self.profile is None:
            return
        self._sync()
        now = time.perf_counter()
        if name is not None:
            self.profile[name] = self.profile.get(name, 0.0) + now - self._t
        self._t = now

    # ---- Save: KV cache → slab --------------------------------------------------------------

    def save(self, keys: List[bytes], block_ids: List[int], first_depth: int) -> int:
        torch = self._torch
        if not keys:
            return 0
        self._stage(None)
        try:
            grants = self._client.reserve(self._ns, len(keys), True)
        except openlake_client.PoolFullError:
            return 0
        self._stage("save: reserve")
        m = len(grants)
        ids = block_ids[:m]
        offsets = [int(g[1]) for g in grants]
        staging = torch.empty((m, self._bb), dtype=torch.uint8, device=self._device)
        index = [self._kernel_index(ids, j) for j in range(self._layout.ratio)]
        for view, j, col, n, wide in self._ranges:
            dst = staging[:, col:col + n]
            (dst.view(torch.int64) if wide else dst)[:] = view.index_select(0, index[j])
        self._stage("save: gather")
        self._pin(offsets)
        try:
            crcs = self._cross_and_crc(staging, offsets)
        except Exception:
            self._client.release([], [int(g[0]) for g in grants], False)
            raise
        self._stage("save: cross + crc")
        entries = [(int(g[0]), keys[i], crcs[i], first_depth + i) for i, g in enumerate(grants)]
        try:
            self._client.commit(self._ns, entries)
        except openlake_client.OpenLakeError:
            self._client.release([], [int(g[0]) for g in grants], False)
            raise
        self._stage("save: commit")
        return m

    def _cross_and_crc(self, staging: Any, offsets: List[int]) -> List[int]:
        """Copies the staged blocks to their slots and returns their CRC-64s, once both are
        done (the slots then hold what the checksums cover)."""
        m = len(offsets)
        if self._gpu_crc:
            # The checksums of the staged bytes (exactly what crosses) are computed on the GPU
            # while the copies run; one crossing, not chunks: no host work waits on them.
            host, done, timing = self._crc_staged(staging)
            events = self._cross(staging, offsets, True, [(0, m)])
            done.synchronize()
            for ev in events:
                ev.synchronize()
            if timing is not None:
                self.profile["crc on GPU (inside the others)"] = (
                    self.profile.get("crc on GPU (inside the others)", 0.0)
                    + timing[0].elapsed_time(timing[1]) / 1e3)
            return [c & 0xFFFFFFFFFFFFFFFF for c in host.tolist()]
        chunks = self._chunks(m)
        events = self._cross(staging, offsets, True, chunks)
        # Each chunk is checksummed (in the slab, what readers will verify) as soon as it landed,
        # while the next chunks still cross.
        crcs: List[int] = []
        for (lo, hi), ev in zip(chunks, events):
            if ev is not None:
                ev.synchronize()
            crcs += self._crc(offsets[lo:hi])
        return crcs

    # ---- Load layer by layer (the connector's openlake_layerwise) ------------------------------
    # One Lookup pins the hits; each layer then crosses from the slab (its rows of every block,
    # one index_select through the mapped slab) and is scattered into that layer's KV, on a
    # stream of its own with an event per layer, so the attention of layer i reads its blocks
    # while layer i + 1 crosses; the host checksums the slots meanwhile. finish_layers says how
    # many leading blocks verified (the connector reports the rest, and vLLM recomputes them).

    def begin_layers(self, keys: List[bytes], block_ids: List[int],
                     head: Optional[bytes] = None) -> Any:
        from openlake_client.movers import LayerLoad

        batch, hits = self._client.lookup(self._ns, keys, head) if keys else (0, [])
        job = LayerLoad(batch, list(hits), list(block_ids[:len(hits)]))
        self._layer_events = {}
        if not hits:
            return job
        offsets = [int(h[1]) for h in hits]
        self._pin(offsets)
        job.crcs = None
        if self._slab_rows is None or any((c1 - c0) % self._row or c0 % self._row
                                          for _, _, c0, c1 in self._layer_ranges):
            # No row view of every layer's bytes: the blocks cross whole, then scatter by layer.
            job.staging = self._torch.empty((len(hits), self._bb), dtype=self._torch.uint8,
                                            device=self._device)
            self._cross(job.staging, offsets, False, [(0, len(hits))])
        else:
            job.staging = None
            job.rows = self._rows(offsets).view(len(hits), -1)
        job.index = [self._kernel_index(job.block_ids, j) for j in range(self._layout.ratio)]
        return job

    def copy_layer(self, job: Any, index: int) -> None:
        if not job.hits:
            return
        torch = self._torch
        r0, r1, c0, c1 = self._layer_ranges[index]
        # The target blocks were handed to these requests for this step: nothing queued before
        # writes them, so the copies need not wait for the forward's stream.
        stream = self._layer_stream
        with (torch.cuda.stream(stream) if stream is not None else _nothing()):
            if job.staging is not None:
                part, base = job.staging, 0
            else:
                rows = job.rows[:, c0 // self._row:c1 // self._row].reshape(-1)
                part = torch.empty((len(job.hits), c1 - c0), dtype=torch.uint8,
                                   device=self._device)
                out = part.view(-1, self._row)
                torch.index_select(self._slab_rows, 0, rows,
                                   out=out.view(torch.int64) if self._rows_wide else out)
                base = c0
            for view, j, col, n, wide in self._ranges[r0:r1]:
                src = part[:, col - base:col - base + n]
                view.index_copy_(0, job.index[j], src.view(torch.int64) if wide else src)
            if stream is not None:
                ev = torch.cuda.Event()
                ev.record(stream)
                self._layer_events[index] = ev

    def wait_layer(self, index: int) -> None:
        """Makes the current stream (the forward's) wait for layer `index`'s copies."""
        ev = self._layer_events.get(index)
        if ev is not None:
            self._torch.cuda.current_stream(self._device).wait_event(ev)

    def finish_layers(self, job: Any) -> int:
        try:
            if not job.hits:
                return 0
            crcs = self._crc([int(h[1]) for h in job.hits])
            if self._layer_stream is not None:
                self._layer_stream.synchronize()
            good = 0
            while (good < len(job.hits) and crcs[good] == int(job.hits[good][3])
                   and self._client.still_valid(int(job.hits[good][0]), int(job.hits[good][2]))):
                good += 1
            return good
        finally:
            if job.batch:
                self._client.release([job.batch], [], False)

    # ---- Load: slab → KV cache ----------------------------------------------------------------

    def load(self, keys: List[bytes], block_ids: List[int], head: Optional[bytes] = None) -> int:
        torch = self._torch
        if not keys:
            return 0
        self._stage(None)
        batch, hits = self._client.lookup(self._ns, keys, head)
        self._stage("load: lookup")
        try:
            if not hits:
                return 0
            offsets = [int(h[1]) for h in hits]
            self._pin(offsets)
            # Every hit crosses into staging (not yet into the KV cache) while the host
            # checksums the same slots; only the verified prefix is then scattered.
            staging = torch.empty((len(hits), self._bb), dtype=torch.uint8, device=self._device)
            self._cross(staging, offsets, False, [(0, len(hits))])
            crcs = self._crc(offsets)
            good = 0
            while good < len(hits) and crcs[good] == int(hits[good][3]):
                good += 1
            self._stage("load: cross + crc")
            if good == 0:
                self._sync()  # staging stays alive until its copies are done
                return 0
            ids = block_ids[:good]
            index = [self._kernel_index(ids, j) for j in range(self._layout.ratio)]
            for view, j, col, n, wide in self._ranges:
                src = staging[:good, col:col + n]
                view.index_copy_(0, index[j], src.view(torch.int64) if wide else src)
            self._sync()
            self._stage("load: scatter")
            # A slot handed to a writer while we copied (our pin's lease lapsed) is not served.
            for i in range(good):
                if not self._client.still_valid(int(hits[i][0]), int(hits[i][2])):
                    return i
            return good
        finally:
            if batch:
                self._client.release([batch], [], False)
            self._stage("load: validate + release")

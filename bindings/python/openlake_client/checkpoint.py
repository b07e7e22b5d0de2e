"""PyTorch checkpoints in an OpenLake bucket (docs/checkpoints.md).

A `torch.distributed.checkpoint` StorageWriter and StorageReader (the module is
`torch.distributed._shard.checkpoint` in torch 1.13, `torch.distributed.checkpoint` from 2.0;
both are supported), and `save`/`load` helpers for one process:

    from openlake_client import checkpoint
    store = checkpoint.Store("127.0.0.1:9000", access_key, secret_key)
    checkpoint.save(model.state_dict(), "s3://ckpt/run1/step-100", store)
    state = checkpoint.load("s3://ckpt/run1/step-100", store)       # a new state dict
    checkpoint.load_into(model.state_dict(), "s3://ckpt/run1/step-100", store)  # in place
    handle = checkpoint.async_save(model.state_dict(), "s3://ckpt/run1/step-200", store)
    ...  # training goes on while the checkpoint drains
    handle = checkpoint.async_save(model.state_dict(), "s3://ckpt/run1/step-300", store,
                                   reuse=handle)  # waits for the last one, refills its memory
    handle.wait()

    # Distributed (every rank, as with FileSystemWriter):
    dcp.save_state_dict(state, checkpoint.OpenLakeWriter("s3://ckpt/run1/step-100", store))

Layout under the checkpoint's prefix: `data/<save id>_r<rank>_<n>` objects, then `.metadata`
(torch's pickled Metadata, its storage_data naming each item's object, offset, length, dtype,
shape and CRC-64), written last by the coordinator: a checkpoint is visible only once complete,
and a save interrupted by a kill leaves the previous `.metadata` (and the objects it names,
which carry another save id) untouched. After the new `.metadata` is in place, the objects of
earlier saves under the same prefix are deleted.

Tensors are stored as their raw bytes (C order), not pickled: a tensor of at least
`pack_below` bytes is its own object, sent straight from the tensor's memory; smaller ones and
non-tensor items are packed into one object per rank (one copy). Reads land straight in the
destination tensors when they are contiguous CPU tensors of the stored dtype and shape, and
every read is checked against its size and CRC-64.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import os
import pickle
import threading
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple

import torch

from . import _openlake, progress as _progress

from torch.futures import Future



@contextlib.contextmanager
def _lenient_dataclass_defaults():
    """torch 1.13's sharded-tensor metadata gives a dataclass field an instance of another
    dataclass as its default, which Python 3.11 refuses ("mutable default ... use
    default_factory"), so `torch.distributed._shard` cannot even be imported there (Debian 12's
    python3-torch). torch 2.0 fixed it by making that default a factory; while torch's modules
    load, this does the same for any field Python refuses, and nothing else."""
    original = dataclasses._get_field

    def get_field(cls, name, *rest):
        try:
            return original(cls, name, *rest)
        except ValueError as e:
            f = cls.__dict__.get(name)
            if "mutable default" not in str(e) or not isinstance(f, dataclasses.Field):
                raise
            value = f.default
            f.default = dataclasses.MISSING
            f.default_factory = lambda: copy.deepcopy(value)
            return original(cls, name, *rest)

    dataclasses._get_field = get_field
    try:
        yield
    finally:
        dataclasses._get_field = original


try:  # torch >= 2.0
    import torch.distributed.checkpoint as _dcp
    from torch.distributed.checkpoint.planner import LoadItemType, WriteItemType
    from torch.distributed.checkpoint.storage import WriteResult
except ImportError:  # torch 1.13
    with _lenient_dataclass_defaults():
        import torch.distributed._shard.checkpoint as _dcp
        from torch.distributed._shard.checkpoint.planner import LoadItemType, WriteItemType
        from torch.distributed._shard.checkpoint.storage import WriteResult

# torch's checkpoint module, for calls of one's own (save_state_dict with an OpenLakeWriter
# across ranks): torch.distributed.checkpoint, or on torch 1.13 its _shard predecessor, imported
# with the fix above.
dcp = _dcp
StorageWriter = _dcp.StorageWriter
StorageReader = _dcp.StorageReader

METADATA = ".metadata"


@dataclasses.dataclass
class S3Config:
    """An S3 endpoint (an openlaked's, or any path-style one) and its credentials; cheap to
    pickle into DataLoader workers. Defaults: the endpoint from OPENLAKE_S3_ENDPOINT
    (127.0.0.1:9000), the credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY."""
    endpoint: str = ""
    access_key: str = ""
    secret_key: str = ""
    region: str = "us-east-1"
    connections: int = 8

    def __post_init__(self) -> None:
        self.endpoint = (self.endpoint or os.environ.get("OPENLAKE_S3_ENDPOINT", "127.0.0.1:9000")
                         ).removeprefix("http://")
        self.access_key = self.access_key or os.environ.get("AWS_ACCESS_KEY_ID", "")
        self.secret_key = self.secret_key or os.environ.get("AWS_SECRET_ACCESS_KEY", "")
        if not self.access_key or not self.secret_key:
            raise ValueError("no S3 credentials: pass access_key and secret_key, or set "
                             "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")

    def transfer(self, part_size: int = 16 << 20, retries: int = 3, timeout: float = 30.0):
        return _openlake.S3Transfer(self.endpoint, self.access_key, self.secret_key, self.region,
                                    self.connections, part_size, retries, timeout)


class Store:
    """Where checkpoints go: an S3Config's endpoint and credentials, with the parallel transfer
    used for every request."""

    def __init__(self, endpoint: Optional[str] = None, access_key: Optional[str] = None,
                 secret_key: Optional[str] = None, region: str = "us-east-1",
                 connections: int = 8, part_size: int = 16 << 20, retries: int = 3,
                 timeout: float = 60.0) -> None:
        cfg = S3Config(endpoint or "", access_key or "", secret_key or "", region, connections)
        self.transfer = cfg.transfer(part_size, retries, timeout)


def parse_url(url: str) -> Tuple[str, str]:
    """'s3://bucket/some/prefix' -> ('bucket', 'some/prefix')."""
    if not url.startswith("s3://"):
        raise ValueError(f"a checkpoint URL is s3://bucket/prefix, not {url!r}")
    bucket, _, prefix = url[len("s3://"):].partition("/")
    if not bucket or not prefix.strip("/"):
        raise ValueError(f"a checkpoint URL needs a bucket and a prefix: {url!r}")
    return bucket, prefix.strip("/")


@dataclasses.dataclass
class _Stored:
    """Where one item of the checkpoint lies (Metadata.storage_data's values)."""
    key: str            # the object, relative to the checkpoint's prefix
    offset: int
    length: int
    crc64: int
    dtype: Optional[str] = None        # tensors: e.g. "torch.float32"
    shape: Optional[Tuple[int, ...]] = None


@dataclasses.dataclass
class _RankPlan:
    save_id: str
    rank: int


def _bytes_of(t: torch.Tensor):
    """A writable uint8 numpy view of a contiguous CPU tensor's bytes (no copy)."""
    return t.reshape(-1).view(torch.uint8).numpy()


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name.replace("torch.", ""))


class _AtUrl:
    """What the writer and reader share: where the checkpoint is, and torch 2.x's calls that
    name it."""

    def _locate(self, url: str, store: Store, progress, progress_bar) -> None:
        self.bucket, self.prefix = parse_url(url)
        self.store = store
        self.progress = progress
        self.progress_bar = progress_bar
        self.is_coordinator = False

    def _reporting(self, buffers, desc: str):
        """The progress of one transfer of `buffers`. Left to itself (progress_bar None), only
        the coordinator shows a bar: every rank of a job usually shares one terminal."""
        bar = self.progress_bar
        if bar is None and not self.is_coordinator:
            bar = False
        total = sum(memoryview(b).nbytes for b in buffers)
        return _progress.reporting(total, self.progress, bar, desc)

    def reset(self, checkpoint_id=None) -> None:
        if checkpoint_id is not None:
            self.bucket, self.prefix = parse_url(str(checkpoint_id))

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id) -> bool:
        return str(checkpoint_id).startswith("s3://")

    def prepare_local_plan(self, plan):
        return plan


class OpenLakeWriter(_AtUrl, StorageWriter):
    """Writes a checkpoint under s3://bucket/prefix (see the module's docstring)."""

    def __init__(self, url: str, store: Store, pack_below: int = 1 << 20,
                 progress=None, progress_bar: Optional[bool] = None) -> None:
        super().__init__()
        self._locate(url, store, progress, progress_bar)
        self.pack_below = pack_below

    # torch 1.13 and 2.x name the first call differently.
    def init(self, is_coordinator: bool) -> None:
        self.is_coordinator = is_coordinator

    def set_up_storage_writer(self, is_coordinator: bool) -> None:
        self.is_coordinator = is_coordinator

    def prepare_global_plan(self, plans):
        save_id = uuid.uuid4().hex[:12]
        return [dataclasses.replace(p, storage_data=_RankPlan(save_id, i))
                for i, p in enumerate(plans)]

    def write_data(self, plan, planner) -> Future:
        rp: _RankPlan = plan.storage_data
        pack = bytearray()
        packed: List[Tuple[Any, int, int, Optional[str], Optional[Tuple[int, ...]]]] = []
        own: List[Tuple[Any, str, Any, torch.Tensor]] = []  # keep tensors alive until sent
        for item in plan.items:
            data = planner.resolve_data(item)
            if item.type == WriteItemType.BYTE_IO:
                raw = data.getbuffer() if isinstance(data, io.BytesIO) else bytes(data)
                packed.append((item, len(pack), len(raw), None, None))
                pack += raw
                continue
            t = data.detach().cpu().contiguous()
            view = _bytes_of(t)
            meta = (str(t.dtype), tuple(t.shape))
            if view.nbytes < self.pack_below:
                packed.append((item, len(pack), view.nbytes, *meta))
                pack += memoryview(view).cast("B")  # the one copy
            else:
                own.append((item, f"data/{rp.save_id}_r{rp.rank}_{len(own) + 1}", view, t))
        results = []
        puts = []
        if packed:
            key = f"data/{rp.save_id}_r{rp.rank}_0"
            puts.append((f"{self.prefix}/{key}", pack))
            for item, off, n, dtype, shape in packed:
                crc = _openlake.crc64(memoryview(pack)[off:off + n])
                results.append(WriteResult(index=item.index, size_in_bytes=n,
                                           storage_data=_Stored(key, off, n, crc, dtype, shape)))
        for item, key, view, t in own:
            puts.append((f"{self.prefix}/{key}", view))
            results.append(WriteResult(
                index=item.index, size_in_bytes=view.nbytes,
                storage_data=_Stored(key, 0, view.nbytes, _openlake.crc64(view), str(t.dtype),
                                     tuple(t.shape))))
        with self._reporting((b for _, b in puts), "save") as report:
            self.store.transfer.put_many(self.bucket, puts, progress=report)
        fut: Future = Future()
        fut.set_result(results)
        return fut

    def finish(self, metadata, results) -> None:
        storage = {}
        for rank_results in results:
            for r in rank_results:
                storage[r.index] = r.storage_data
        metadata.storage_data = storage
        body = pickle.dumps(metadata)
        t = self.store.transfer
        # The commit point: from here on the new checkpoint is the one readers see.
        t.put_many(self.bucket, [(f"{self.prefix}/{METADATA}", body)])
        keep = {f"{self.prefix}/{s.key}" for s in storage.values()}
        for key, _, _ in t.list(self.bucket, f"{self.prefix}/data/"):
            if key not in keep:
                t.delete(self.bucket, key)


class OpenLakeReader(_AtUrl, StorageReader):
    """Reads a checkpoint written by OpenLakeWriter."""

    def __init__(self, url: str, store: Store, progress=None,
                 progress_bar: Optional[bool] = None) -> None:
        super().__init__()
        self._locate(url, store, progress, progress_bar)
        self.storage: Dict[Any, _Stored] = {}

    def read_metadata(self):
        t = self.store.transfer
        key = f"{self.prefix}/{METADATA}"
        size, _ = t.head(self.bucket, key)  # NotFoundError: no complete checkpoint here
        buf = bytearray(size)
        t.get_many(self.bucket, [(key, 0, buf)])
        return pickle.loads(bytes(buf))

    def init(self, metadata, is_coordinator: bool) -> None:
        self.storage = metadata.storage_data
        self.is_coordinator = is_coordinator

    def set_up_storage_reader(self, metadata, is_coordinator: bool) -> None:
        self.init(metadata, is_coordinator)

    def prepare_global_plan(self, plans):
        return plans

    def read_data(self, plan, planner) -> Future:
        after = []  # what to do with each read once it is in
        for req in plan.items:
            s: _Stored = self.storage[req.storage_index]
            key = f"{self.prefix}/{s.key}"
            if req.type == LoadItemType.BYTE_IO:
                buf = bytearray(s.length)
                after.append((req, s, buf, None))
                continue
            target = planner.resolve_tensor(req).detach()
            whole = (all(o == 0 for o in req.storage_offsets)
                     and tuple(req.lengths) == tuple(s.shape))
            direct = (whole and target.device.type == "cpu" and target.is_contiguous()
                      and str(target.dtype) == s.dtype and tuple(target.shape) == tuple(s.shape))
            into = target if direct else torch.empty(s.shape, dtype=_dtype(s.dtype))
            view = _bytes_of(into)
            if view.nbytes != s.length:
                raise _openlake.DataLossError(
                    f"{key}: {s.length} bytes stored for a tensor of {view.nbytes}")
            after.append((req, s, view, (target, into, direct)))
        checked = self._fetch([(s, buf) for _, s, buf, _ in after])
        for (req, s, buf, tensor), done in zip(after, checked):
            crc = s.crc64 if done else _openlake.crc64(buf)
            if crc != s.crc64:
                raise _openlake.DataLossError(
                    f"{self.prefix}/{s.key} at {s.offset}: CRC-64 {crc:#x}, stored {s.crc64:#x}")
            if tensor is None:
                planner.load_bytes(req, io.BytesIO(bytes(buf)))
                continue
            target, into, direct = tensor
            if not direct:
                part = into
                for dim, (off, n) in enumerate(zip(req.storage_offsets, req.lengths)):
                    part = part.narrow(dim, off, n)
                target.copy_(part)
            planner.commit_tensor(req, target)
        fut: Future = Future()
        fut.set_result(None)
        return fut

    def _fetch(self, reads) -> list:
        """Fills each (stored item, buffer) in one get_many: an item alone in its object
        straight into its buffer, its CRC-64 checked by the transfer as it lands (while the
        other reads go on); the items of a packed object with one read of their span, then
        copied out (small items: one request instead of one each). Returns, per read, whether
        its CRC-64 was checked."""
        by_key: Dict[str, list] = {}
        for s, buf in reads:
            by_key.setdefault(s.key, []).append((s, buf))
        gets, spans = [], []
        for key, items in by_key.items():
            full = f"{self.prefix}/{key}"
            if len(items) == 1:
                s, buf = items[0]
                gets.append((full, s.offset, buf, s.crc64))
                continue
            lo = min(s.offset for s, _ in items)
            hi = max(s.offset + s.length for s, _ in items)
            staging = bytearray(hi - lo)
            gets.append((full, lo, staging))
            spans.append((lo, staging, items))
        with self._reporting((g[2] for g in gets), "load") as report:
            self.store.transfer.get_many(self.bucket, gets, progress=report)
        for lo, staging, items in spans:
            src = memoryview(staging)
            for s, buf in items:
                if s.length:
                    memoryview(buf).cast("B")[:] = src[s.offset - lo:s.offset - lo + s.length]
        return [len(by_key[s.key]) == 1 for s, _ in reads]


# ---- One process.

def _save_fn():
    return getattr(_dcp, "save_state_dict", None) or _dcp.save


def _load_fn():
    return getattr(_dcp, "load_state_dict", None) or _dcp.load


def _unwrapped(fn, *args, **kwargs):
    """Runs a torch save or load; a failure torch wrapped in its CheckpointException (a
    BaseException that names ranks) is raised as itself: the NotFoundError, DataLossError or
    UnavailableError that caused it."""
    try:
        return fn(*args, **kwargs)
    except _dcp.CheckpointException as e:
        for failure in e.failures.values():
            cause = failure[0] if isinstance(failure, tuple) else failure
            if isinstance(cause, Exception):
                raise cause from None
        raise


def save(state_dict: Dict[str, Any], url: str, store: Store, progress=None,
         progress_bar: Optional[bool] = None) -> None:
    """Saves `state_dict` (tensors, and anything picklable) as the checkpoint at `url`, from
    this process alone. `progress(done_bytes, total_bytes)` hears the upload; `progress_bar`:
    a tqdm bar (None: when stderr is a terminal and tqdm is installed)."""
    writer = OpenLakeWriter(url, store, progress=progress, progress_bar=progress_bar)
    _unwrapped(_save_fn(), state_dict, storage_writer=writer, no_dist=True)


def load_into(state_dict: Dict[str, Any], url: str, store: Store, progress=None,
              progress_bar: Optional[bool] = None) -> None:
    """Loads the checkpoint at `url` into `state_dict`'s tensors, in place (as
    load_state_dict does: keys the state dict lacks are not read). `progress` and
    `progress_bar` as for `save`."""
    reader = OpenLakeReader(url, store, progress=progress, progress_bar=progress_bar)
    _unwrapped(_load_fn(), state_dict, storage_reader=reader, no_dist=True)


def load(url: str, store: Store, progress=None,
         progress_bar: Optional[bool] = None) -> Dict[str, Any]:
    """The checkpoint at `url` as a new state dict of CPU tensors (and the other values it
    holds). Nested state dicts come back flattened only where torch flattened them.
    `progress` and `progress_bar` as for `save`."""
    reader = OpenLakeReader(url, store)  # reads only the metadata
    md = reader.read_metadata()
    state: Dict[str, Any] = {}
    for fqn, m in md.state_dict_metadata.items():
        if hasattr(m, "chunks"):  # TensorStorageMetadata
            state[fqn] = torch.empty(tuple(m.size), dtype=m.properties.dtype)
        else:
            state[fqn] = None  # bytes: filled in by load_bytes
    reader = OpenLakeReader(url, store, progress=progress, progress_bar=progress_bar)
    _unwrapped(_load_fn(), state, storage_reader=reader, no_dist=True)
    return state


# ---- Async save.

def _distributed() -> bool:
    import torch.distributed as dist
    return dist.is_available() and dist.is_initialized()


_CHECKPOINT_GROUP = None


def _checkpoint_group():
    """A gloo group of every rank, for the collectives of background saves (made once; a
    collective itself, so every rank makes it at the same call)."""
    global _CHECKPOINT_GROUP
    if _CHECKPOINT_GROUP is None:
        import torch.distributed as dist
        _CHECKPOINT_GROUP = dist.new_group(backend="gloo")
    return _CHECKPOINT_GROUP


def _snapshot_sharded(obj: Any, pin: bool, old: Any) -> Any:
    """_snapshot of a distributed tensor (its local shards only, no collective), or None when
    `obj` is not one."""
    try:
        from torch.distributed._shard.sharded_tensor import Shard, ShardedTensor
    except ImportError:
        ShardedTensor = None
    if ShardedTensor is not None and isinstance(obj, ShardedTensor):
        before = old.local_shards() if isinstance(old, ShardedTensor) else []
        shards = []
        for i, shard in enumerate(obj.local_shards()):
            prev = before[i].tensor if i < len(before) else None
            shards.append(Shard(_snapshot(shard.tensor, pin, prev), shard.metadata))
        return ShardedTensor._init_from_local_shards_and_global_metadata(
            shards, obj.metadata(), process_group=obj._process_group)
    try:  # torch >= 2.x
        from torch.distributed._tensor import DTensor
    except ImportError:
        return None
    if isinstance(obj, DTensor):
        prev = old.to_local() if isinstance(old, DTensor) else None
        return DTensor.from_local(_snapshot(obj.to_local(), pin, prev), obj.device_mesh,
                                  obj.placements, run_check=False)
    return None


def _snapshot(obj: Any, pin: bool, old: Any = None) -> Any:
    """A copy of a state dict's values that training may not touch: tensors copied into host
    memory (pinned when CUDA is there, so a GPU tensor's copy is one DMA), containers rebuilt,
    anything else deep-copied. A tensor of `old` (an earlier snapshot of the same structure)
    with the same shape and dtype is reused: its pages are already there, and first-touch page
    faults cost more than the copy itself. A rank's shards of a ShardedTensor (or DTensor)
    are copied and wrapped again in the same global layout."""
    sharded = _snapshot_sharded(obj, pin, old)
    if sharded is not None:
        return sharded
    if isinstance(obj, torch.Tensor):
        if (isinstance(old, torch.Tensor) and old.shape == obj.shape and old.dtype == obj.dtype
                and old.is_pinned() == pin):
            out = old
        else:
            out = torch.empty(obj.shape, dtype=obj.dtype, pin_memory=pin)
        out.copy_(obj.detach(), non_blocking=pin and obj.is_cuda)
        return out
    if isinstance(obj, dict):
        prev = old if isinstance(old, dict) else {}
        return type(obj)((k, _snapshot(v, pin, prev.get(k))) for k, v in obj.items())
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        prev = list(old) if isinstance(old, type(obj)) and len(old) == len(obj) else []
        prev += [None] * (len(obj) - len(prev))
        return type(obj)(_snapshot(v, pin, p) for v, p in zip(obj, prev))
    return copy.deepcopy(obj)


class SaveHandle:
    """An async save under way: `wait()` blocks until the checkpoint is complete (its metadata
    written) and raises what the save raised; `done()` says whether it has finished.
    `resume_seconds` is how long async_save held the caller (the snapshot)."""

    def __init__(self, resume_seconds: float, snapshot: Any) -> None:
        self.resume_seconds = resume_seconds
        self.snapshot = snapshot  # what is being written; async_save(reuse=) refills it
        self._done = threading.Event()
        self._error: Optional[BaseException] = None
        self.seconds: Optional[float] = None  # the whole save, once done

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: Optional[float] = None) -> None:
        if not self._done.wait(timeout):
            raise TimeoutError(f"the checkpoint save has not finished within {timeout} s")
        if self._error is not None:
            raise self._error


def async_save(state_dict: Dict[str, Any], url: str, store: Store, progress=None,
               reuse: Optional[SaveHandle] = None,
               progress_bar: Optional[bool] = None, process_group=None) -> SaveHandle:
    """Snapshots `state_dict` and returns at once; the checkpoint is written to `url` in the
    background. Training may change its tensors as soon as this returns. Call `wait()` on the
    handle before relying on the checkpoint, and before the next async_save to the same URL.
    `reuse`: the previous save's handle; its snapshot memory is refilled (after that save has
    finished) instead of allocated anew, which is what makes a loop of saves cheap to resume
    from. `progress` is called from the background; a bar is shown only with
    progress_bar=True (left to itself, a bar drawn behind the caller's back would interleave
    with the training loop's own output).

    With torch.distributed initialized, every rank calls it at the same step, as it would
    save_state_dict: each rank uploads its own items and rank 0 writes the metadata once all
    have, so the checkpoint appears whole or not at all. The collectives this takes run in the
    background too, on `process_group`: by default a gloo group of every rank made for
    checkpoints on the first call, so that they never interleave with the training loop's
    own collectives on its groups."""
    start = time.monotonic()
    distributed = _distributed()
    if distributed and process_group is None:
        process_group = _checkpoint_group()
    old = None
    if reuse is not None:
        reuse._done.wait()  # its buffers are still being sent until then
        old, reuse.snapshot = reuse.snapshot, None
    pin = torch.cuda.is_available()
    snap = _snapshot(state_dict, pin, old)
    if pin:
        torch.cuda.synchronize()
    handle = SaveHandle(time.monotonic() - start, snap)

    def run() -> None:
        try:
            if distributed:
                writer = OpenLakeWriter(url, store, progress=progress,
                                        progress_bar=bool(progress_bar))
                _unwrapped(_save_fn(), snap, storage_writer=writer,
                             process_group=process_group)
            else:
                save(snap, url, store, progress, progress_bar=bool(progress_bar))
        except BaseException as e:  # handed to wait()
            handle._error = e
        finally:
            handle.seconds = time.monotonic() - start
            handle._done.set()

    threading.Thread(target=run, name="openlake-async-save", daemon=True).start()
    return handle

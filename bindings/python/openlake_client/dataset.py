"""Training data from a bucket prefix as torch datasets (docs/checkpoints.md, "Training data").

    from openlake_client.dataset import ObjectDataset, ObjectStream, S3Config
    cfg = S3Config("127.0.0.1:9000", access_key, secret_key)
    ds = ObjectDataset("s3://data/train/", cfg, transform=decode)         # map-style
    stream = ObjectStream("s3://data/train/", cfg, shuffle=True, seed=0)  # iterable
    stream.set_epoch(epoch)
    loader = torch.utils.data.DataLoader(stream, batch_size=None, num_workers=4)

Both list the prefix once (every key, in order) and fetch objects with the parallel transfer
(`S3Transfer`). `ObjectStream` splits the keys between DataLoader workers and distributed ranks
(rank r of w takes every w-th key of a shuffled order, then each worker every n-th of those),
shuffles them the same way on every rank for a given seed and epoch, and fetches `batch` objects
per request batch in a background thread that keeps at most `prefetch` batches ready. Each
process (every DataLoader worker) opens its own connections on first use: a transfer's threads
do not survive a fork.
"""

from __future__ import annotations

import os
import queue
import random
import threading
from typing import Any, Callable, Iterator, List, Optional, Tuple

import torch.utils.data as tud

from .checkpoint import S3Config, parse_url  # noqa: F401  (S3Config: part of this API)


class _PerProcess:
    """An S3Transfer made on first use in each process."""

    def __init__(self, cfg: S3Config) -> None:
        self.cfg = cfg
        self._pid = -1
        self._t = None

    def get(self):
        if self._pid != os.getpid():
            self._t = self.cfg.transfer()
            self._pid = os.getpid()
        return self._t

    def __getstate__(self):
        return {"cfg": self.cfg}

    def __setstate__(self, state):
        self.__init__(state["cfg"])


def _list_prefix(url: str, cfg: S3Config):
    """The bucket, the prefix, the per-process transfer and every (key, size) under the prefix
    in key order (a URL ending in '/' lists that folder only)."""
    bucket, prefix = parse_url(url)
    prefix = prefix + "/" if url.endswith("/") else prefix
    t = _PerProcess(cfg)
    return bucket, prefix, t, [(k, size) for k, size, _ in t.get().list(bucket, prefix)]


def _fetch(t, bucket: str, keys: List[Tuple[str, int]]) -> List[bytearray]:
    bufs = [bytearray(size) for _, size in keys]
    t.get_many(bucket, [(k, 0, b) for (k, _), b in zip(keys, bufs)])
    return bufs


class ObjectDataset(tud.Dataset):
    """Map-style: item i is the i-th object under the prefix in key order, as bytes (or what
    `transform(key, data)` makes of it). `keys` is the list, fixed at construction."""

    def __init__(self, url: str, cfg: S3Config,
                 transform: Optional[Callable[[str, bytearray], Any]] = None) -> None:
        self.bucket, self.prefix, self._t, self.objects = _list_prefix(url, cfg)
        self.keys = [k for k, _ in self.objects]
        self.transform = transform

    def __len__(self) -> int:
        return len(self.objects)

    def __getitem__(self, i: int):
        key, _ = self.objects[i]
        data = _fetch(self._t.get(), self.bucket, [self.objects[i]])[0]
        return self.transform(key, data) if self.transform else data

    def get_batch(self, indices: List[int]) -> list:
        """Several items in one parallel fetch (for a sampler's batch)."""
        chosen = [self.objects[i] for i in indices]
        datas = _fetch(self._t.get(), self.bucket, chosen)
        if not self.transform:
            return datas
        return [self.transform(k, d) for (k, _), d in zip(chosen, datas)]


class ObjectStream(tud.IterableDataset):
    """Iterable: every object under the prefix once per epoch, as (key, bytes) (or what
    `transform(key, data)` makes of it), sharded across ranks and DataLoader workers and
    shuffled per epoch (see the module's docstring)."""

    def __init__(self, url: str, cfg: S3Config, shuffle: bool = True, seed: int = 0,
                 batch: int = 32, prefetch: int = 2, rank: Optional[int] = None,
                 world_size: Optional[int] = None,
                 transform: Optional[Callable[[str, bytearray], Any]] = None) -> None:
        super().__init__()
        self.bucket, self.prefix, self._t, self.objects = _list_prefix(url, cfg)
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0
        self.batch, self.prefetch = max(1, batch), max(1, prefetch)
        self.rank, self.world_size = rank, world_size
        self.transform = transform

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _shard(self) -> List[Tuple[str, int]]:
        order = list(range(len(self.objects)))
        if self.shuffle:
            random.Random(self.seed * 1_000_003 + self.epoch).shuffle(order)
        rank, world = self.rank, self.world_size
        if rank is None or world is None:
            import torch.distributed as dist
            on = dist.is_available() and dist.is_initialized()
            rank, world = (dist.get_rank(), dist.get_world_size()) if on else (0, 1)
        order = order[rank::world]
        info = tud.get_worker_info()
        if info is not None:
            order = order[info.id::info.num_workers]
        return [self.objects[i] for i in order]

    def __len__(self) -> int:
        return len(self._shard())

    def __iter__(self) -> Iterator[Any]:
        mine = self._shard()
        t = self._t.get()
        ready: "queue.Queue" = queue.Queue(self.prefetch)
        stop = threading.Event()

        def offer(item) -> bool:
            """Queues `item` unless the consumer has gone."""
            while not stop.is_set():
                try:
                    ready.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def fetch() -> None:
            try:
                for at in range(0, len(mine), self.batch):
                    chunk = mine[at:at + self.batch]
                    if not offer((chunk, _fetch(t, self.bucket, chunk))):
                        return
                offer(None)
            except BaseException as e:  # handed to the consumer
                offer(e)

        worker = threading.Thread(target=fetch, name="openlake-prefetch", daemon=True)
        worker.start()
        try:
            while True:
                item = ready.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                for (key, _), data in zip(*item):
                    yield self.transform(key, data) if self.transform else (key, data)
        finally:
            stop.set()
            worker.join()

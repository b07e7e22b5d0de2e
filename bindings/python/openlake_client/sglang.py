"""OpenLakeHiCacheStorage: SGLang's HiCache L3 storage backend over an OpenLake KV pool.

    python -m sglang.launch_server --model-path MODEL --enable-hierarchical-cache \\
      --hicache-storage-backend dynamic \\
      --hicache-storage-backend-extra-config '{"backend_name":"openlake",
        "module_path":"openlake_client.sglang","class_name":"OpenLakeHiCacheStorage",
        "interface_v1":1,"openlake_nodes":["127.0.0.1:9400"]}'

SGLang keeps a host-memory copy of its KV pages (the L2 "host pool") and backs pages up to, and
prefetches them from, an L3 store through this class. Each page is one block of the pool: the
page's pieces, as the host pool's get_page_buffer_meta names them (K and V of every layer), are
copied straight between the host pool and the slab, one RPC per batch and phase, checksummed on
the way in and verified on the way out. A page that fails verification is a miss, never wrong
bytes.

Keys: SGLang names a page by a hex SHA-256 of its token prefix; the 32 bytes it encodes are the
block key (any other string is hashed to 32 bytes). Namespaces keep models, ranks and layouts
apart as Mooncake's key scheme does: MHA pages are per TP rank, MLA pages are replicated (every
rank reads what rank 0 wrote), and the host pool's layout and sizes are in the fingerprint.

Written against SGLang's hicache_storage.py (HiCacheStorage, HiCacheStorageConfig,
HiCacheStorageExtraInfo) as of sgl-project/sglang 001067fffe33427bee0ed2f007fb7551a1d76b44;
the older and newer field sets of the config are read with defaults. Importing this module
starts nothing; without SGLang installed a stand-in base with the same names is used (tests).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import openlake_client

try:
    from sglang.srt.mem_cache.hicache_storage import (  # type: ignore
        HiCacheStorage,
        HiCacheStorageConfig,
        HiCacheStorageExtraInfo,
    )

    HAVE_SGLANG = True
except ImportError:  # SGLang absent: a clean-room base with the same names and parameters
    import dataclasses
    from abc import ABC, abstractmethod

    HAVE_SGLANG = False

    @dataclasses.dataclass
    class HiCacheStorageConfig:  # type: ignore[no-redef]
        tp_rank: int
        tp_size: int
        pp_rank: int
        pp_size: int
        attn_cp_rank: int
        attn_cp_size: int
        is_mla_model: bool
        enable_storage_metrics: bool
        is_page_first_layout: bool
        model_name: Optional[str]
        dp_rank: int = 0
        dp_size: int = 1
        tp_lcm_size: Optional[int] = None
        should_split_heads: bool = False
        extra_config: Optional[dict] = None

    @dataclasses.dataclass
    class HiCacheStorageExtraInfo:  # type: ignore[no-redef]
        prefix_keys: Optional[List[str]] = None
        extra_info: Optional[dict] = None

    class HiCacheStorage(ABC):  # type: ignore[no-redef]
        """Stand-in for SGLang's HiCacheStorage when SGLang is not installed."""

        def register_mem_pool_host(self, mem_pool_host: Any) -> None:
            self.mem_pool_host = mem_pool_host

        def batch_get_v1(self, keys: List[str], host_indices: Any,
                         extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
            raise NotImplementedError()

        def batch_set_v1(self, keys: List[str], host_indices: Any,
                         extra_info: Optional[HiCacheStorageExtraInfo] = None) -> List[bool]:
            raise NotImplementedError()

        @abstractmethod
        def get(self, key: str, target_location: Optional[Any] = None,
                target_sizes: Optional[Any] = None) -> Any:
            ...

        @abstractmethod
        def batch_get(self, keys: List[str], target_locations: Optional[Any] = None,
                      target_sizes: Optional[Any] = None) -> Any:
            ...

        @abstractmethod
        def set(self, key: str, value: Optional[Any] = None, target_location: Optional[Any] = None,
                target_sizes: Optional[Any] = None) -> bool:
            ...

        @abstractmethod
        def batch_set(self, keys: List[str], values: Optional[Any] = None,
                      target_locations: Optional[Any] = None,
                      target_sizes: Optional[Any] = None) -> bool:
            ...

        @abstractmethod
        def exists(self, key: str) -> bool:
            ...

        def batch_exists(self, keys: List[str],
                         extra_info: Optional[HiCacheStorageExtraInfo] = None) -> int:
            for i, key in enumerate(keys):
                if not self.exists(key):
                    return i
            return len(keys)

        def clear(self) -> None:
            pass

        def get_stats(self) -> Any:
            return None


logger = logging.getLogger("openlake_client.sglang")


def page_key(key: str) -> bytes:
    """The block key of a SGLang page key: the 32 bytes a 64-digit hex digest encodes, else a
    SHA-256 of the string (stable across processes and hosts)."""
    if len(key) == 64:
        try:
            return bytes.fromhex(key)
        except ValueError:
            pass
    return hashlib.sha256(key.encode("utf-8")).digest()


def _model_tag(model_name: Optional[str]) -> str:
    return "-".join((model_name or "unnamed").split("/"))


def _cfg(config: Any, name: str, default: Any) -> Any:
    value = getattr(config, name, default)
    return default if value is None else value


class OpenLakeHiCacheStorage(HiCacheStorage):
    """HiCache L3 storage in an OpenLake KV pool (see the module docstring).

    extra_config keys: openlake_nodes (list; the first is this host's daemon, default
    127.0.0.1:9400), openlake_secret, openlake_timeout_s (5), openlake_namespace (overrides the
    derived name), openlake_cluster (true: misses may be served by the daemon's cluster)."""

    def __init__(self, storage_config: Any, kwargs: Optional[dict] = None, *args: Any,
                 **kw: Any) -> None:
        self.storage_config = storage_config
        extra = dict(_cfg(storage_config, "extra_config", {}) or {})
        nodes = extra.get("openlake_nodes", ["127.0.0.1:9400"])
        if isinstance(nodes, str):
            nodes = [nodes]
        if not nodes:
            raise ValueError("OpenLakeHiCacheStorage: openlake_nodes is empty")
        self._address = str(nodes[0])
        self._secret = str(extra.get("openlake_secret", ""))
        self._timeout_s = float(extra.get("openlake_timeout_s", 5.0))
        self._cluster = bool(extra.get("openlake_cluster", True))
        self._namespace_override = extra.get("openlake_namespace")
        self._mla = bool(_cfg(storage_config, "is_mla_model", False))
        self._metrics_on = bool(_cfg(storage_config, "enable_storage_metrics", False))
        self._client = openlake_client.Client(self._address, secret=self._secret,
                                              timeout=self._timeout_s, cluster=self._cluster)
        self._ns: Any = None
        self._block_bytes = 0
        self.mem_pool_host: Any = None
        self._lock = threading.Lock()
        self._counters: Dict[str, float] = {
            "exists_calls": 0, "exists_pages": 0, "exists_hits": 0,
            "get_pages": 0, "get_hits": 0, "get_bytes": 0, "get_seconds": 0.0,
            "set_pages": 0, "set_stored": 0, "set_skipped": 0, "set_bytes": 0,
            "set_seconds": 0.0, "errors": 0,
        }
        # For SGLang's StorageMetrics (get_stats): pages and GB/s per call since the last read.
        self._prefetch_pgs: List[int] = []
        self._backup_pgs: List[int] = []
        self._prefetch_bw: List[float] = []
        self._backup_bw: List[float] = []

    # ---- The namespace, from the host pool -----------------------------------------------------

    def namespace_name(self) -> str:
        if self._namespace_override:
            return str(self._namespace_override)
        c = self.storage_config
        # Servers with another host-pool layout store pages in another byte order: they get
        # namespaces of their own, side by side.
        layout = str(getattr(self.mem_pool_host, "layout", "layer_first"))
        name = f"sglang/{_model_tag(_cfg(c, 'model_name', None))}/{layout}"
        if self._mla:
            name += "/mla"  # replicated: one copy for every rank
        else:
            name += f"/tp{_cfg(c, 'tp_rank', 0)}of{_cfg(c, 'tp_size', 1)}"
        if int(_cfg(c, "pp_size", 1)) > 1:
            name += f"/pp{_cfg(c, 'pp_rank', 0)}of{_cfg(c, 'pp_size', 1)}"
        if int(_cfg(c, "attn_cp_size", 1)) > 1:
            name += f"/cp{_cfg(c, 'attn_cp_rank', 0)}of{_cfg(c, 'attn_cp_size', 1)}"
        return name

    def fingerprint(self, pool: Any) -> Dict[str, Any]:
        c = self.storage_config
        layout = str(getattr(pool, "layout", "layer_first"))
        heads = int(getattr(pool, "head_num", 1) or 1)
        dim = int(getattr(pool, "head_dim", 0) or getattr(pool, "kv_cache_dim", 0) or 0)
        return {
            "model": str(_cfg(c, "model_name", "") or ""),
            "dtype": str(getattr(pool, "dtype", "")).replace("torch.", ""),
            "layout": f"sglang-{'mla' if self._mla else 'mha'}-{layout}",
            "num_layers": int(getattr(pool, "layer_num", 0) or 0),
            "num_kv_heads": 1 if self._mla else heads,
            "head_size": dim,
            "block_tokens": int(pool.page_size),
            "tp_rank": 0 if self._mla else int(_cfg(c, "tp_rank", 0)),
            "tp_size": 1 if self._mla else int(_cfg(c, "tp_size", 1)),
            "pp_rank": int(_cfg(c, "pp_rank", 0)),
            "pp_size": int(_cfg(c, "pp_size", 1)),
            "extra": f"sglang-hicache page_bytes={self._page_bytes(pool)}",
        }

    @staticmethod
    def _page_bytes(pool: Any) -> int:
        return int(pool.get_size_per_token()) * int(pool.page_size)

    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        super().register_mem_pool_host(mem_pool_host)
        self.mem_pool_host = mem_pool_host
        self._block_bytes = self._page_bytes(mem_pool_host)
        name = self.namespace_name()
        try:
            self._ns = self._client.open_namespace(name, self.fingerprint(mem_pool_host),
                                                   self._block_bytes)
        except openlake_client.PreconditionError as e:
            raise RuntimeError(
                f"OpenLakeHiCacheStorage: namespace {name!r} exists with another page layout "
                f"({e}); set openlake_namespace in the extra config to keep them apart") from e
        logger.info("OpenLake HiCache: namespace %s, pages of %d bytes, %s layout", name,
                    self._block_bytes, getattr(mem_pool_host, "layout", "layer_first"))

    def _need_pool(self) -> None:
        if self._ns is None:
            raise RuntimeError("OpenLakeHiCacheStorage: register_mem_pool_host was not called")

    # ---- Pages as block pieces -----------------------------------------------------------------

    def _pieces(self, n_pages: int, host_indices: Any) -> List[List[Tuple[int, int]]]:
        """Each page's (address, length) pieces in the host pool, in the pool's order."""
        ptrs, sizes = self.mem_pool_host.get_page_buffer_meta(host_indices)
        if n_pages == 0:
            return []
        per = len(ptrs) // n_pages
        if per == 0 or per * n_pages != len(ptrs) or len(sizes) != len(ptrs):
            raise ValueError(f"OpenLakeHiCacheStorage: {len(ptrs)} buffer pointers for "
                             f"{n_pages} pages")
        out = []
        for p in range(n_pages):
            piece = [(int(ptrs[p * per + j]), int(sizes[p * per + j])) for j in range(per)]
            if sum(length for _, length in piece) != self._block_bytes:
                raise ValueError(f"OpenLakeHiCacheStorage: page {p} has "
                                 f"{sum(length for _, length in piece)} bytes, not "
                                 f"{self._block_bytes}")
            out.append(piece)
        return out

    @staticmethod
    def _head_and_depth(extra_info: Any) -> Tuple[Optional[bytes], int]:
        """The chain's first key and this batch's depth in it, when SGLang passes the ancestors
        (hicache_storage_pass_prefix_keys); else (None, 0)."""
        prefix = getattr(extra_info, "prefix_keys", None) if extra_info is not None else None
        prefix = [k for k in (prefix or ()) if k]
        if not prefix:
            return None, 0
        return page_key(prefix[0]), len(prefix)

    # ---- The zero-copy page path (interface_v1) ------------------------------------------------

    def batch_exists(self, keys: List[str], extra_info: Optional[Any] = None) -> int:
        self._need_pool()
        if not keys:
            return 0
        head, _ = self._head_and_depth(extra_info)
        try:
            prefix, _ = self._client.exists(self._ns, [page_key(k) for k in keys], head=head)
        except openlake_client.OpenLakeError as e:
            logger.warning("OpenLake HiCache exists of %d pages failed: %s", len(keys), e)
            self._count(errors=1)
            return 0
        self._count(exists_calls=1, exists_pages=len(keys), exists_hits=int(prefix))
        return int(prefix)

    def batch_get_v1(self, keys: List[str], host_indices: Any,
                     extra_info: Optional[Any] = None) -> List[bool]:
        self._need_pool()
        if not keys:
            return []
        head, _ = self._head_and_depth(extra_info)
        t0 = time.monotonic()
        try:
            blocks = self._pieces(len(keys), host_indices)
            loaded, _ = self._client.get(self._ns, [page_key(k) for k in keys], blocks, head)
        except Exception as e:  # never into SGLang's prefetch and backup threads
            logger.warning("OpenLake HiCache get of %d pages failed: %s", len(keys), e)
            self._count(errors=1)
            return [False] * len(keys)
        dt = time.monotonic() - t0
        loaded = int(loaded)
        self._count(get_pages=len(keys), get_hits=loaded, get_bytes=loaded * self._block_bytes,
                    get_seconds=dt)
        self._observe(self._prefetch_pgs, self._prefetch_bw, loaded, dt)
        return [i < loaded for i in range(len(keys))]

    def batch_set_v1(self, keys: List[str], host_indices: Any,
                     extra_info: Optional[Any] = None) -> List[bool]:
        self._need_pool()
        if not keys:
            return []
        _, depth = self._head_and_depth(extra_info)
        t0 = time.monotonic()
        ok = [False] * len(keys)
        try:
            blocks = self._pieces(len(keys), host_indices)
            bkeys = [page_key(k) for k in keys]
            # Pages already stored are not written again (another rank, an earlier backup).
            _, present = self._client.exists(self._ns, bkeys)
            stored = 0
            i = 0
            while i < len(keys):
                if present[i]:
                    ok[i] = True
                    i += 1
                    continue
                j = i
                while j < len(keys) and not present[j]:
                    j += 1
                try:
                    n = int(self._client.put(self._ns, bkeys[i:j], blocks[i:j], depth + i))
                except openlake_client.PoolFullError:
                    n = 0
                for t in range(i, i + n):
                    ok[t] = True
                stored += n
                if n < j - i:
                    break  # the pool is full: the rest would not fit either
                i = j
        except Exception as e:  # never into SGLang's prefetch and backup threads
            logger.warning("OpenLake HiCache set of %d pages failed: %s", len(keys), e)
            self._count(errors=1)
            return ok
        dt = time.monotonic() - t0
        skipped = sum(1 for p in present if p)
        self._count(set_pages=len(keys), set_stored=stored, set_skipped=skipped,
                    set_bytes=stored * self._block_bytes, set_seconds=dt)
        self._observe(self._backup_pgs, self._backup_bw, stored, dt)
        return ok

    # ---- The generic path: flat page tensors ---------------------------------------------------

    def _flat_target(self, target: Any) -> Any:
        if target is None:
            target = self.mem_pool_host.get_dummy_flat_data_page()
        nbytes = target.numel() * target.element_size()
        if not target.is_contiguous() or nbytes != self._block_bytes or target.device.type != "cpu":
            raise ValueError(f"OpenLakeHiCacheStorage: a page target must be a contiguous host "
                             f"tensor of {self._block_bytes} bytes, not {nbytes} bytes")
        return target

    def batch_get(self, keys: List[str], target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> List[Any]:
        self._need_pool()
        if not keys:
            return []
        targets = [self._flat_target(target_locations[i] if target_locations else None)
                   for i in range(len(keys))]
        blocks = [[(t.data_ptr(), self._block_bytes)] for t in targets]
        try:
            _, states = self._client.get(self._ns, [page_key(k) for k in keys], blocks)
        except openlake_client.OpenLakeError as e:
            logger.warning("OpenLake HiCache get of %d pages failed: %s", len(keys), e)
            self._count(errors=1)
            return [None] * len(keys)
        hits = [t if s == openlake_client.LOADED else None for t, s in zip(targets, states)]
        self._count(get_pages=len(keys), get_hits=sum(1 for h in hits if h is not None))
        return hits

    def get(self, key: str, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> Any:
        return self.batch_get([key], [target_location] if target_location is not None else None)[0]

    def batch_set(self, keys: List[str], values: Optional[Any] = None,
                  target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> bool:
        self._need_pool()
        if not keys:
            return True
        if values is None or len(values) != len(keys):
            raise ValueError("OpenLakeHiCacheStorage.batch_set needs one page tensor per key")
        pages = [self._flat_target(v) for v in values]
        blocks = [[(p.data_ptr(), self._block_bytes)] for p in pages]
        try:
            stored = int(self._client.put(self._ns, [page_key(k) for k in keys], blocks, 0))
        except openlake_client.PoolFullError:
            stored = 0
        except openlake_client.OpenLakeError as e:
            logger.warning("OpenLake HiCache set of %d pages failed: %s", len(keys), e)
            self._count(errors=1)
            return False
        self._count(set_pages=len(keys), set_stored=stored)
        return stored == len(keys)

    def set(self, key: str, value: Optional[Any] = None, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> bool:
        return self.batch_set([key], [value])

    def exists(self, key: str) -> bool:
        return self.batch_exists([key]) == 1

    # ---- Housekeeping --------------------------------------------------------------------------

    def clear(self) -> bool:
        """Drops every page of this backend's namespace (other models and ranks keep theirs)."""
        if self._ns is None:
            return True
        try:
            self._client.reset(self._ns)
            return True
        except openlake_client.OpenLakeError as e:
            logger.warning("OpenLake HiCache clear failed: %s", e)
            return False

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def stats(self) -> Dict[str, float]:
        """This backend's counters since start: pages asked, found, loaded and stored, bytes and
        seconds per direction, errors."""
        with self._lock:
            return dict(self._counters)

    def get_stats(self) -> Any:
        """SGLang's StorageMetrics (pages and GB/s of each prefetch and backup since the last
        call) when storage metrics are on, else None."""
        if not self._metrics_on:
            return None
        try:
            from sglang.srt.metrics.collector import StorageMetrics  # type: ignore
        except ImportError:
            return None
        with self._lock:
            m = StorageMetrics()
            m.prefetch_pgs.extend(self._prefetch_pgs)
            m.backup_pgs.extend(self._backup_pgs)
            m.prefetch_bandwidth.extend(self._prefetch_bw)
            m.backup_bandwidth.extend(self._backup_bw)
            self._prefetch_pgs, self._backup_pgs = [], []
            self._prefetch_bw, self._backup_bw = [], []
        return m

    def _count(self, **delta: float) -> None:
        with self._lock:
            for k, v in delta.items():
                self._counters[k] += v

    def _observe(self, pages: List[int], bandwidth: List[float], n: int, seconds: float) -> None:
        if not self._metrics_on or n == 0:
            return
        with self._lock:
            pages.append(n)
            bandwidth.append(n * self._block_bytes / max(seconds, 1e-9) / 1e9)

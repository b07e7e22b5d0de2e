"""OpenLakeConnector: vLLM's KV connector (v1 API) over an OpenLake KV pool.

    vllm serve MODEL --kv-transfer-config '{"kv_connector":"OpenLakeConnector",
      "kv_connector_module_path":"openlake_client.openlake_connector","kv_role":"kv_both",
      "kv_connector_extra_config":{"openlake_nodes":["127.0.0.1:9400"],"openlake_device":"local"}}'

Two instances, two processes (VLLM_CONNECTOR.md §1.1): the scheduler instance plans, from a
non-blocking existence query, how many leading tokens of a prompt the pool can supply and which
full blocks to store; it sends those plans to the workers in picklable metadata. Each worker
instance moves whole blocks between its GPU KV cache and the pool, in batches per step, outside
the attention layers (so CUDA graphs stay legal). Every loaded block is verified against its
stored checksum; a missing or corrupt block is reported through get_block_ids_with_load_errors
and never served.

Importing this module imports no vLLM package besides the connector base (a leaf module), and
starts nothing: no thread, socket or CUDA call happens before __init__.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import logging
import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Set, Tuple

import openlake_client
from openlake_client import keys as ol_keys
from openlake_client.layout import BlockLayout, plan_layout

try:  # the leaf module only: its package __init__s would pull in most of vLLM
    from vllm.distributed.kv_transfer.kv_connector.v1.base import (  # type: ignore
        KVConnectorBase_V1,
        KVConnectorMetadata,
        KVConnectorRole,
    )

    HAVE_VLLM = True
except ImportError:  # vLLM absent: a clean-room base with the same names and parameters
    HAVE_VLLM = False

    class KVConnectorRole(enum.Enum):  # type: ignore[no-redef]
        SCHEDULER = 0
        WORKER = 1

    class KVConnectorMetadata:  # type: ignore[no-redef]
        """Base of the per-step metadata the scheduler sends to the workers."""

    class KVConnectorBase_V1:  # type: ignore[no-redef]
        """Stand-in for vllm's KVConnectorBase_V1 when vLLM is not installed."""

        def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None):
            if getattr(vllm_config, "kv_transfer_config", None) is None:
                raise ValueError("kv_transfer_config must be set to use a KV connector")
            self._vllm_config = vllm_config
            self._kv_transfer_config = vllm_config.kv_transfer_config
            self._kv_cache_config = kv_cache_config
            self._role = role
            self._connector_metadata: Optional[KVConnectorMetadata] = None

        @property
        def role(self) -> Any:
            return self._role

        def bind_connector_metadata(self, connector_metadata: KVConnectorMetadata) -> None:
            self._connector_metadata = connector_metadata

        def clear_connector_metadata(self) -> None:
            self._connector_metadata = None

        def _get_connector_metadata(self) -> KVConnectorMetadata:
            assert self._connector_metadata is not None
            return self._connector_metadata

        def has_connector_metadata(self) -> bool:
            return self._connector_metadata is not None

        def register_kv_caches(self, kv_caches: Dict[str, Any]) -> None:
            return

        def handle_preemptions(self, kv_connector_metadata: Any) -> None:
            return

        def get_finished(self, finished_req_ids: Set[str]) -> Tuple[Optional[Set[str]], Optional[Set[str]]]:
            return None, None

        def get_block_ids_with_load_errors(self) -> Set[int]:
            return set()

        def get_kv_connector_stats(self) -> Any:
            return None

        def get_kv_connector_kv_cache_events(self) -> Any:
            return None

        def build_connector_worker_meta(self) -> Any:
            return None

        def shutdown(self) -> None:
            return

        def request_finished(self, request: Any, block_ids: List[int]) -> Tuple[bool, Optional[Dict[str, Any]]]:
            return False, None

        def update_connector_output(self, connector_output: Any) -> None:
            return

        def take_events(self) -> Iterable[Any]:
            return ()

        def reset_cache(self) -> Optional[bool]:
            return None

        @classmethod
        def get_required_kvcache_layout(cls, vllm_config: Any) -> Optional[str]:
            return None

        @classmethod
        def requires_piecewise_for_cudagraph(cls, extra_config: Dict[str, Any]) -> bool:
            return False

        # The abstract methods (vLLM's ABC refuses to instantiate a class that lacks them).
        def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> Tuple[Optional[int], bool]:
            raise NotImplementedError

        def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
            raise NotImplementedError

        def build_connector_meta(self, scheduler_output: Any) -> KVConnectorMetadata:
            raise NotImplementedError

        def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
            raise NotImplementedError

        def wait_for_layer_load(self, layer_name: str) -> None:
            raise NotImplementedError

        def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any) -> None:
            raise NotImplementedError

        def wait_for_save(self) -> None:
            raise NotImplementedError


if TYPE_CHECKING:  # pragma: no cover
    from vllm.config import VllmConfig  # noqa: F401

logger = logging.getLogger("openlake_client.connector")


def _role_name(role: Any) -> str:
    """Roles are compared by name: the enum may come from vLLM or from the stand-in above."""
    name = getattr(role, "name", None)
    if name is None:
        name = {0: "SCHEDULER", 1: "WORKER"}.get(getattr(role, "value", role), str(role))
    return str(name).upper()


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


# ---- Metadata (scheduler → workers; plain data only, pickled across processes) --------------

@dataclasses.dataclass
class LoadSpec:
    req_id: str
    keys: List[bytes]
    block_ids: List[int]
    is_async: bool
    head: Optional[bytes] = None  # the chain's first key, when keys[0] is not it


@dataclasses.dataclass
class SaveSpec:
    req_id: str
    keys: List[bytes]
    block_ids: List[int]
    first_depth: int
    is_async: bool


class OpenLakeConnectorMetadata(KVConnectorMetadata):
    def __init__(self) -> None:
        self.loads: List[LoadSpec] = []
        self.saves: List[SaveSpec] = []
        self.preempted: Set[str] = set()

    def __repr__(self) -> str:
        return (f"OpenLakeConnectorMetadata(loads={len(self.loads)}, saves={len(self.saves)}, "
                f"preempted={sorted(self.preempted)})")


# ---- Scheduler-side per-request state -------------------------------------------------------

@dataclasses.dataclass
class _ReqState:
    request: Any
    block_ids: List[int] = dataclasses.field(default_factory=list)
    stored: int = 0                       # leading blocks already in the pool or planned to be
    # (local tokens, external tokens, load asynchronously) last answered
    lookup: Optional[Tuple[int, int, bool]] = None


def _block_ids_of(blocks: Any) -> List[int]:
    if blocks is None:
        return []
    ids = blocks.get_block_ids() if hasattr(blocks, "get_block_ids") else blocks
    if ids and isinstance(ids[0], (list, tuple)):
        ids = ids[0]  # one list per KV-cache group; group 0 without HMA
    return [int(b) for b in ids]


class OpenLakeConnector(KVConnectorBase_V1):
    """vLLM KV connector storing prompt-prefix KV blocks in an OpenLake pool."""

    def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None):
        params = inspect.signature(KVConnectorBase_V1.__init__).parameters
        if "kv_cache_config" in params:
            super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        else:  # vLLM before the kv_cache_config argument
            super().__init__(vllm_config=vllm_config, role=role)
        self._config = vllm_config
        self._kv_cache_config_arg = kv_cache_config
        ktc = vllm_config.kv_transfer_config
        extra = dict(getattr(ktc, "kv_connector_extra_config", None) or {})
        self._extra = extra
        self._settings = Settings.from_extra(extra)
        cc = vllm_config.cache_config
        ol_keys.require_stable_hashes(cc, extra)
        self._block_size = int(cc.block_size)
        self._hash_group = ol_keys.hash_group(cc)
        kv_role = str(getattr(ktc, "kv_role", "kv_both") or "kv_both")
        self._can_save = kv_role in ("kv_both", "kv_producer")
        self._can_load = kv_role in ("kv_both", "kv_consumer")
        self._role_name = _role_name(role)
        self._client: Optional[openlake_client.Client] = None
        self._cluster_checked = False
        self._closed = False
        self._lock = threading.Lock()
        if self._role_name == "SCHEDULER":
            self._init_scheduler()
        else:
            self._init_worker()

    # ---- Shared -----------------------------------------------------------------------------

    def _connect(self) -> openlake_client.Client:
        if self._client is None:
            self._client = openlake_client.Client(
                self._settings.nodes[0], secret=self._settings.secret,
                map_slab=self._role_name == "WORKER", timeout=self._settings.timeout_s,
                connect_timeout=self._settings.timeout_s, cluster=self._settings.cluster)
            if not self._cluster_checked:
                self._cluster_checked = True
                for line in cluster_mismatches(self._settings):
                    logger.warning("OpenLake: %s", line)
        return self._client

    def shutdown(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        executor = getattr(self, "_executor", None)
        if executor is not None:
            executor.shutdown(wait=True)
        mover = getattr(self, "_mover", None)
        if mover is not None:
            mover.close()
        if self._client is not None:
            self._client.close()
            self._client = None

    # ==== Scheduler side ========================================================================

    def _init_scheduler(self) -> None:
        self._reqs: Dict[str, _ReqState] = {}
        self._pending_loads: List[LoadSpec] = []
        self._async_saving: Set[str] = set()  # requests with async saves not yet done_sending
        self._loading: Set[str] = set()       # requests with async loads not yet done_recving
        self._ns_names = ol_keys.all_namespace_names(self._config, self._extra)
        self._ns_refs: Dict[str, Any] = {}
        self._lookups: Dict[str, Tuple[Tuple[bytes, ...], Future]] = {}
        self._lookup_pool = (ThreadPoolExecutor(max_workers=1, thread_name_prefix="openlake-lookup")
                             if self._settings.lookup == "async" else None)
        self._executor = self._lookup_pool

    def _state(self, request: Any) -> _ReqState:
        rid = request.request_id
        st = self._reqs.get(rid)
        if st is None:
            st = self._reqs[rid] = _ReqState(request=request)
        else:
            st.request = request
        return st

    def _keys(self, request: Any) -> List[bytes]:
        return ol_keys.request_keys(request, self._hash_group)

    def _present_prefix(self, keys: List[bytes]) -> Tuple[int, int]:
        """Leading keys present in every shard's namespace, and how many of them are on this
        host's daemon (the rest are on other nodes of its cluster): (0, 0) when the pool is
        unreachable."""
        if not keys:
            return 0, 0
        try:
            client = self._connect()
            prefix = here = len(keys)
            for name in self._ns_names:
                ns = self._ns_refs.get(name)
                if ns is None:
                    ns = client.find_namespace(name)
                    self._ns_refs[name] = ns
                try:
                    p, _, on_peers = client.exists(ns, keys[:prefix], detail=True)
                except openlake_client.PreconditionError:
                    # The namespace was re-created (another fingerprint): look it up again.
                    self._ns_refs.pop(name, None)
                    raise
                prefix = min(prefix, int(p))
                here = min(here, int(p) - int(on_peers))
                if prefix == 0:
                    break
            return prefix, min(here, prefix)
        except openlake_client.NotFoundError:
            return 0, 0  # a shard never stored anything yet
        except openlake_client.OpenLakeError as e:
            logger.warning("OpenLake lookup failed, treating as a miss: %s", e)
            if isinstance(e, (openlake_client.UnavailableError, openlake_client.DeadlineExceededError)):
                self._drop_client()
            return 0, 0

    def _drop_client(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = None
        self._ns_refs.clear()

    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> Tuple[Optional[int], bool]:
        if not self._can_load:
            return 0, False
        st = self._state(request)
        keys = self._keys(request)
        bs = self._block_size
        local_blocks = num_computed_tokens // bs
        if len(keys) <= local_blocks:
            st.lookup = None
            return 0, False
        found = self._lookup(request.request_id, keys)
        if found is None:
            return None, False  # asked again next step
        present, here = found
        st.stored = max(st.stored, present)
        # Never the whole prompt: at least one token must be computed (vLLM asserts it). Loads
        # are whole blocks, so the last block whose tokens are all before that one.
        max_blocks = max(0, (int(request.num_tokens) - 1) // bs)
        hit_blocks = min(present, max_blocks)
        if hit_blocks - local_blocks < self._settings.min_load_blocks:
            st.lookup = None
            return 0, False
        n = hit_blocks * bs - num_computed_tokens
        # Blocks on other nodes are pulled into this host's daemon first: such a load is always
        # asynchronous, so a slow or dying peer never holds up the engine's step.
        is_async = self._settings.async_load or hit_blocks > here
        st.lookup = (num_computed_tokens, n, is_async)
        return n, is_async

    def _lookup(self, req_id: str, keys: List[bytes]) -> Optional[Tuple[int, int]]:
        """The pool's answer for a request's keys, asked once and kept until the request is
        scheduled or finished: vLLM may ask again for the same request (within a step, or while
        it waits for blocks), and must get the same answer though the pool (or a flaky link to
        a peer) may answer differently meanwhile. Async: asked in the background; None until
        the answer is in."""
        key = tuple(keys)
        pending = self._lookups.get(req_id)
        if pending is None or pending[0] != key:
            if self._lookup_pool is None:
                fut: Future = Future()
                fut.set_result(self._present_prefix(keys))
                self._lookups[req_id] = (key, fut)
                return fut.result()
            self._lookups[req_id] = (key, self._lookup_pool.submit(self._present_prefix, keys))
            return None
        if not pending[1].done():
            return None
        return pending[1].result()

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        st = self._state(request)
        ids = _block_ids_of(blocks)
        if ids:
            st.block_ids = ids
        self._lookups.pop(request.request_id, None)
        if num_external_tokens <= 0 or st.lookup is None:
            return
        num_local, n, is_async = st.lookup
        st.lookup = None
        bs = self._block_size
        start = num_local // bs
        count = min(num_external_tokens, n) // bs
        all_keys = self._keys(request)
        keys = all_keys[start:start + count]
        target = st.block_ids[start:start + count]
        if len(keys) != len(target):
            # Cannot happen with vLLM's scheduler. Still send the load: the worker reports the
            # blocks it cannot fill as load errors, and an async load is still reported done.
            logger.warning("OpenLake: request %s has %d keys for %d target blocks",
                           request.request_id, len(keys), len(target))
            keys = keys[:len(target)]
        head = all_keys[0] if start > 0 else None
        self._pending_loads.append(LoadSpec(request.request_id, keys, target, is_async, head))
        if is_async:
            self._loading.add(request.request_id)

    def build_connector_meta(self, scheduler_output: Any) -> KVConnectorMetadata:
        meta = OpenLakeConnectorMetadata()
        meta.loads, self._pending_loads = self._pending_loads, []
        preempted = set(getattr(scheduler_output, "preempted_req_ids", None) or ())
        meta.preempted = preempted
        for rid in preempted:
            st = self._reqs.get(rid)
            if st is not None:
                st.block_ids = []  # freed; the resumed request brings new ones
                st.lookup = None
                st.stored = 0      # re-learnt from the pool when it is scheduled again
        scheduled = getattr(scheduler_output, "num_scheduled_tokens", None) or {}

        for new in getattr(scheduler_output, "scheduled_new_reqs", None) or []:
            st = self._reqs.get(new.req_id)
            if st is None:
                continue  # never seen by this connector (cannot happen with vLLM's scheduler)
            st.block_ids = _block_ids_of(new.block_ids)
            self._plan_save(meta, st, int(new.num_computed_tokens), int(scheduled.get(new.req_id, 0)))

        cached = getattr(scheduler_output, "scheduled_cached_reqs", None)
        if cached is not None:
            resumed = set(getattr(cached, "resumed_req_ids", None) or ())
            flags = getattr(cached, "resumed_from_preemption", None)
            for i, rid in enumerate(cached.req_ids):
                st = self._reqs.get(rid)
                if st is None:
                    continue
                new_ids = cached.new_block_ids[i] if cached.new_block_ids else None
                is_resumed = rid in resumed or bool(flags and i < len(flags) and flags[i])
                if new_ids is not None:
                    ids = _block_ids_of(new_ids)
                    st.block_ids = ids if is_resumed else st.block_ids + ids
                self._plan_save(meta, st, int(cached.num_computed_tokens[i]), int(scheduled.get(rid, 0)))
        return meta

    def _plan_save(self, meta: OpenLakeConnectorMetadata, st: _ReqState, computed: int,
                   scheduled: int) -> None:
        """Adds the blocks of this request that become full in this step to the saves."""
        if not self._can_save or scheduled <= 0:
            return
        req = st.request
        bs = self._block_size
        if not self._settings.save_decode and computed >= int(getattr(req, "num_prompt_tokens", 0)):
            return
        after = min(computed + scheduled, int(req.num_tokens))
        keys = self._keys(req)
        full = min(after // bs, len(keys), len(st.block_ids))
        if full <= st.stored:
            return
        first = st.stored
        meta.saves.append(SaveSpec(req.request_id, keys[first:full], st.block_ids[first:full],
                                   first, self._settings.async_save))
        st.stored = full
        if self._settings.async_save:
            self._async_saving.add(req.request_id)

    def request_finished(self, request: Any, block_ids: List[int]) -> Tuple[bool, Optional[Dict[str, Any]]]:
        rid = request.request_id
        self._reqs.pop(rid, None)
        self._lookups.pop(rid, None)
        # Async saves may still read this request's blocks: keep them until done_sending.
        return rid in self._async_saving, None

    def update_connector_output(self, connector_output: Any) -> None:
        for rid in getattr(connector_output, "finished_sending", None) or ():
            self._async_saving.discard(rid)
        for rid in getattr(connector_output, "finished_recving", None) or ():
            self._loading.discard(rid)
        invalid = set(getattr(connector_output, "invalid_block_ids", None) or ())
        if invalid:
            # Those blocks will be recomputed; store them again (a missing or corrupt block in
            # the pool is then replaced).
            for st in self._reqs.values():
                for i, b in enumerate(st.block_ids[:st.stored]):
                    if b in invalid:
                        st.stored = i
                        break

    def reset_cache(self) -> Optional[bool]:
        """vLLM's reset_prefix_cache(reset_connector=True): drop every block of our shards."""
        try:
            client = self._connect()
            for name in self._ns_names:
                try:
                    client.reset(client.find_namespace(name))
                except openlake_client.NotFoundError:
                    pass
            self._ns_refs.clear()
            return True
        except openlake_client.OpenLakeError as e:
            logger.warning("OpenLake reset failed: %s", e)
            return False

    # ==== Worker side ===========================================================================

    def _init_worker(self) -> None:
        self._layout: Optional[BlockLayout] = None
        self._ns: Any = None
        self._mover: Any = None
        self._load_errors: Set[int] = set()
        self._pending_saves: Dict[str, int] = {}   # jobs not finished, per request
        self._had_async_save: Set[str] = set()
        self._finished: Set[str] = set()           # ids get_finished has been told about
        self._done_recving: Set[str] = set()
        self._cond = threading.Condition(self._lock)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openlake-xfer")
        r = self._worker_ranks()
        self._tp_rank, self._pp_rank = r
        self._ns_name = ol_keys.namespace_name(self._config, self._extra, r[0], r[1])

    def _worker_ranks(self) -> Tuple[int, int]:
        if HAVE_VLLM:
            try:  # vLLM knows the worker's groups; imported only on a live worker
                from vllm.distributed.parallel_state import (  # type: ignore
                    get_pp_group,
                    get_tensor_model_parallel_rank,
                )
                return int(get_tensor_model_parallel_rank()), int(get_pp_group().rank_in_group)
            except Exception:  # not initialised (tests, tools): fall back to the config
                pass
        r = ol_keys.parallel_ranks(self._config)
        return r["tp_rank"], r["pp_rank"]

    def register_kv_caches(self, kv_caches: Dict[str, Any]) -> None:
        mc = getattr(self._config, "model_config", None)
        heads = head_size = None
        try:
            if mc is not None and hasattr(mc, "get_num_kv_heads"):
                heads = int(mc.get_num_kv_heads(self._config.parallel_config))
            if mc is not None and hasattr(mc, "get_head_size"):
                head_size = int(mc.get_head_size())
        except Exception:
            heads = head_size = None
        layout = plan_layout(kv_caches, self._block_size, heads, head_size)
        fp = ol_keys.fingerprint(self._config, layout, self._tp_rank, self._pp_rank)
        client = self._connect()
        try:
            self._ns = client.open_namespace(self._ns_name, fp, layout.block_bytes)
        except openlake_client.PreconditionError as e:
            raise RuntimeError(
                f"OpenLakeConnector: namespace {self._ns_name!r} in the pool was created by an "
                f"engine with another KV layout ({e}); set "
                "kv_connector_extra_config.openlake_namespace to keep the two apart") from e
        self._layout = layout
        self._mover = _make_mover(layout, client, self._ns, self._settings)
        logger.info("OpenLake: %s; namespace %s, %s copies", layout.describe(), self._ns_name,
                    self._mover.name)

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        if not self.has_connector_metadata():
            return
        meta = self._get_connector_metadata()
        for spec in getattr(meta, "loads", ()):
            if spec.is_async:
                self._executor.submit(self._load_async, spec)
            else:
                self._load(spec)

    def _load(self, spec: LoadSpec) -> None:
        if self._mover is None:
            self._fail_load(spec, 0, "no KV caches registered")
            return
        try:
            loaded = self._mover.load(spec.keys, spec.block_ids[:len(spec.keys)],
                                      getattr(spec, "head", None))
        except openlake_client.OpenLakeError as e:
            logger.warning("OpenLake load of %d blocks for %s failed: %s", len(spec.keys),
                           spec.req_id, e)
            loaded = 0
        if loaded < len(spec.block_ids):
            self._fail_load(spec, loaded, "missing or failed verification")

    def _fail_load(self, spec: LoadSpec, loaded: int, why: str) -> None:
        # The prefix must be contiguous: every block from the first bad one is invalid.
        bad = spec.block_ids[loaded:]
        logger.info("OpenLake: %d of %d blocks of %s not loaded (%s)", len(bad),
                    len(spec.block_ids), spec.req_id, why)
        with self._lock:
            self._load_errors.update(bad)

    def _load_async(self, spec: LoadSpec) -> None:
        try:
            self._load(spec)
        except Exception:  # never lose a request: report it done (with errors) whatever happens
            logger.exception("OpenLake async load for %s failed", spec.req_id)
            with self._lock:
                self._load_errors.update(spec.block_ids)
        finally:
            with self._lock:
                self._done_recving.add(spec.req_id)

    def wait_for_layer_load(self, layer_name: str) -> None:
        return  # loads complete in start_load_kv (or asynchronously, reported by get_finished)

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any) -> None:
        return  # whole blocks are saved after the forward, in wait_for_save

    def wait_for_save(self) -> None:
        if not self.has_connector_metadata():
            return
        meta = self._get_connector_metadata()
        for spec in getattr(meta, "saves", ()):
            if spec.is_async:
                with self._lock:
                    self._pending_saves[spec.req_id] = self._pending_saves.get(spec.req_id, 0) + 1
                    self._had_async_save.add(spec.req_id)
                self._executor.submit(self._save_async, spec)
            else:
                self._save(spec)

    def _save(self, spec: SaveSpec) -> None:
        if self._mover is None:
            return
        try:
            stored = self._mover.save(spec.keys, spec.block_ids, spec.first_depth)
            if stored < len(spec.keys):
                logger.info("OpenLake: pool full, stored %d of %d blocks of %s", stored,
                            len(spec.keys), spec.req_id)
        except openlake_client.OpenLakeError as e:
            logger.warning("OpenLake save of %d blocks for %s failed: %s", len(spec.keys),
                           spec.req_id, e)

    def _save_async(self, spec: SaveSpec) -> None:
        try:
            self._save(spec)
        except Exception:
            logger.exception("OpenLake async save for %s failed", spec.req_id)
        finally:
            with self._cond:
                left = self._pending_saves.get(spec.req_id, 1) - 1
                if left <= 0:
                    self._pending_saves.pop(spec.req_id, None)
                else:
                    self._pending_saves[spec.req_id] = left
                self._cond.notify_all()

    def handle_preemptions(self, kv_connector_metadata: Any) -> None:
        """Before the forward that may reuse a preempted request's blocks: finish its saves."""
        if isinstance(kv_connector_metadata, (set, frozenset, list, tuple)):
            ids = set(kv_connector_metadata)  # the older signature: a set of request ids
        else:
            ids = set(getattr(kv_connector_metadata, "preempted", None) or ())
        if not ids:
            return
        with self._cond:
            self._cond.wait_for(lambda: not any(self._pending_saves.get(r) for r in ids))

    def get_finished(self, finished_req_ids: Set[str]) -> Tuple[Optional[Set[str]], Optional[Set[str]]]:
        with self._lock:
            self._finished.update(finished_req_ids or ())
            done_sending = {r for r in self._finished
                            if r in self._had_async_save and not self._pending_saves.get(r)}
            self._finished -= done_sending
            self._had_async_save -= done_sending
            # Requests that never had an async save need no answer; forget them.
            self._finished = {r for r in self._finished if r in self._had_async_save}
            done_recving, self._done_recving = self._done_recving, set()
        return (done_sending or None), (done_recving or None)

    def get_block_ids_with_load_errors(self) -> Set[int]:
        with self._lock:
            errors, self._load_errors = self._load_errors, set()
        return errors


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

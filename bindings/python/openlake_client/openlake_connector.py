"""OpenLakeConnector: vLLM's KV connector (v1 API) over an OpenLake KV pool.

    vllm serve MODEL --kv-transfer-config '{"kv_connector":"OpenLakeConnector",
      "kv_connector_module_path":"openlake_client.openlake_connector","kv_role":"kv_both",
      "kv_connector_extra_config":{"openlake_nodes":["127.0.0.1:9400"],"openlake_device":"local"}}'

Two instances, two processes (VLLM_CONNECTOR.md §1.1): the scheduler instance plans, from a
non-blocking existence query, how many leading tokens of a prompt the pool can supply and which
full blocks to store; it sends those plans to the workers in picklable metadata. Each worker
instance moves whole blocks between its GPU KV cache and the pool, in batches per step, outside
the attention layers (so CUDA graphs stay legal). Every loaded block is verified against its
stored checksum; a missing or corrupt block is reported (by block id, or by request for a
hybrid model) and never served.

A best-effort cache on vLLM's newest interface (docs/vllm.md lists each method and why): saves
never hold up a preempted request (requires_kv_delivery is False); async saves keep the engine
stepping (has_pending_push_work) and hold only finished requests' blocks, which the scheduler
may wait for instead of preempting (has_pending_block_frees); failed async loads are reported
by request (get_transfer_results); hybrid models (SupportsHMA) store each KV-cache group in a
namespace of its own (connector_groups.py); blocks the pool holds are announced as KV events and
the transfers counted in vLLM's stats and Prometheus metrics (connector_events.py,
connector_stats.py).

Importing this module imports no vLLM package besides the connector base (a leaf module), and
starts nothing: no thread, socket or CUDA call happens before __init__.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import itertools
import logging
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import openlake_client
from openlake_client import keys as ol_keys
from openlake_client.connector_base import (  # noqa: F401  (re-exported)
    BASE_HAS_WORKER_META,
    HAVE_VLLM,
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
    KVConnectorTransferResults,
    KVConnectorWorkerMetadata,
    SupportsHMA,
)
from openlake_client.connector_events import EventLog
from openlake_client.connector_groups import (FULL, STATE, UNSUPPORTED, Group, groups_of,
                                               hit_tokens)
from openlake_client.connector_settings import Settings, cluster_mismatches  # noqa: F401
from openlake_client.layout import BlockLayout, plan_layout, plan_state_layout
from openlake_client.movers import MemcpyMover, _make_mover  # noqa: F401

logger = logging.getLogger("openlake_client.connector")


def _role_name(role: Any) -> str:
    """Roles are compared by name: the enum may come from vLLM or from the stand-in."""
    name = getattr(role, "name", None)
    if name is None:
        name = {0: "SCHEDULER", 1: "WORKER"}.get(getattr(role, "value", role), str(role))
    return str(name).upper()


# ---- Metadata (scheduler → workers; plain data only, pickled across processes) --------------

@dataclasses.dataclass
class LoadSpec:
    req_id: str
    keys: List[bytes]
    block_ids: List[int]
    is_async: bool
    head: Optional[bytes] = None  # the chain's first key, when keys[0] is not it
    group: int = 0                # KV-cache group (hybrid models)


@dataclasses.dataclass
class SaveSpec:
    req_id: str
    keys: List[bytes]
    block_ids: List[int]
    first_depth: int
    is_async: bool
    group: int = 0
    job: int = 0                  # reported back to the scheduler when done (worker metadata)


class OpenLakeConnectorMetadata(KVConnectorMetadata):
    def __init__(self) -> None:
        self.loads: List[LoadSpec] = []
        self.saves: List[SaveSpec] = []
        self.preempted: Set[str] = set()

    def __repr__(self) -> str:
        return (f"OpenLakeConnectorMetadata(loads={len(self.loads)}, saves={len(self.saves)}, "
                f"preempted={sorted(self.preempted)})")


class OpenLakeWorkerMeta(KVConnectorWorkerMetadata):
    """What workers tell the scheduler each step: save jobs done (job → [blocks stored, workers
    that reported]) and the namespaces they store in ((group, tp, pp) → name)."""

    def __init__(self) -> None:
        self.saves: Dict[int, List[int]] = {}
        self.namespaces: Dict[Tuple[int, int, int], str] = {}

    def aggregate(self, other: Any) -> "OpenLakeWorkerMeta":
        for job, (stored, reports) in getattr(other, "saves", {}).items():
            mine = self.saves.get(job)
            self.saves[job] = ([min(mine[0], stored), mine[1] + reports] if mine
                               else [stored, reports])
        self.namespaces.update(getattr(other, "namespaces", {}))
        return self

    def __repr__(self) -> str:
        return f"OpenLakeWorkerMeta(saves={self.saves}, namespaces={self.namespaces})"


# ---- Scheduler-side state ---------------------------------------------------------------------

@dataclasses.dataclass
class _ReqState:
    request: Any
    block_ids: List[List[int]]            # per group
    stored: List[int]                     # per group: leading blocks stored or planned
    # (local tokens, external tokens, load asynchronously) last answered
    lookup: Optional[Tuple[int, int, bool]] = None


@dataclasses.dataclass
class _SaveJob:
    req_id: str
    group: int
    first_depth: int
    keys: List[bytes]
    hashes: List[Any]
    parent: Any
    token_ids: List[int]
    lora_name: Optional[str]
    created: float = dataclasses.field(default_factory=time.monotonic)


_MISSING = object()


def _boundary_offloads(scheduler_output: Any) -> Optional[Dict[str, Any]]:
    """vLLM's hand-off of the Mamba states it committed in this step, {request id: [(group,
    block id, boundary tokens)]}: `kv_connector_block_state.boundary_state_offloads` in newer
    vLLM, `partial_tail_offloads` before. None when this vLLM hands none over (the connector
    then finds the state blocks in the block table)."""
    state = getattr(scheduler_output, "kv_connector_block_state", _MISSING)
    if state is not _MISSING:
        if state is None:
            return {}
        return dict(getattr(state, "boundary_state_offloads", None) or {})
    tail = getattr(scheduler_output, "partial_tail_offloads", _MISSING)
    if tail is not _MISSING:
        return dict(tail or {})
    return None


def _group_ids(blocks: Any, n_groups: int) -> List[List[int]]:
    """Block ids per group from KVCacheBlocks, a tuple of lists, or a flat list (one group)."""
    if blocks is None:
        return [[] for _ in range(n_groups)]
    ids = blocks.get_block_ids() if hasattr(blocks, "get_block_ids") else blocks
    if ids is None:
        return [[] for _ in range(n_groups)]
    if ids and isinstance(ids[0], (list, tuple)):
        out = [[int(b) for b in g] for g in ids]
    else:
        out = [[int(b) for b in ids]]
    return (out + [[] for _ in range(n_groups)])[:n_groups]


class OpenLakeConnector(KVConnectorBase_V1, SupportsHMA):  # type: ignore[misc, valid-type]
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
        self._hash_block = int(self._block_size // ol_keys.hash_group(cc))
        self._groups = groups_of(kv_cache_config, self._block_size,
                                 str(getattr(cc, "mamba_cache_mode", "") or ""))
        kv_role = str(getattr(ktc, "kv_role", "kv_both") or "kv_both")
        self._can_save = kv_role in ("kv_both", "kv_producer")
        self._can_load = kv_role in ("kv_both", "kv_consumer")
        self._role_name = _role_name(role)
        self._client: Optional[openlake_client.Client] = None
        self._cluster_checked = False
        self._closed = False
        self._lock = threading.Lock()
        r = ol_keys.parallel_ranks(vllm_config)
        self._world = r["tp_size"] * r["pp_size"]
        from openlake_client.connector_stats import OpenLakeConnectorStats
        self._stats = OpenLakeConnectorStats()
        unsupported = [g for g in self._groups if g.kind == UNSUPPORTED]
        if unsupported and self._role_name == "SCHEDULER":
            logger.warning("OpenLake: KV-cache group(s) %s (%s) cannot be stored; this model's "
                           "prefixes are never loaded from the pool (always correct, never "
                           "faster)", [g.index for g in unsupported],
                           ", ".join(sorted({g.spec_name for g in unsupported})))
        if self._role_name == "SCHEDULER":
            self._init_scheduler()
        else:
            self._init_worker()

    # ---- Shared -----------------------------------------------------------------------------

    @property
    def requires_kv_delivery(self) -> bool:
        """A cache, not a hand-off: a preempted request whose save is pending is resumed (its
        dropped save is a later miss), never recomputed for the connector's sake."""
        return False

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
        for pool in (getattr(self, "_executor", None), getattr(self, "_layer_pool", None)):
            if pool is not None:
                pool.shutdown(wait=True)
        for mover in getattr(self, "_movers", {}).values():
            mover.close()
        if self._client is not None:
            self._client.close()
            self._client = None

    def get_kv_connector_stats(self) -> Any:
        """The transfers (workers) or lookups (scheduler) since the last call; None when none."""
        with self._lock:
            if self._stats.is_empty():
                return None
            return self._stats.clone_and_reset()

    @classmethod
    def requires_piecewise_for_cudagraph(cls, extra_config: Dict[str, Any]) -> bool:
        """Layer-by-layer loads rely on wait_for_layer_load, which full CUDA graphs skip."""
        return bool((extra_config or {}).get("openlake_layerwise", False))

    @classmethod
    def build_kv_connector_stats(cls, data: Optional[Dict[str, Any]] = None) -> Any:
        from openlake_client.connector_stats import OpenLakeConnectorStats
        return OpenLakeConnectorStats(data)

    @classmethod
    def build_prom_metrics(cls, vllm_config: Any, metric_types: Dict[type, type],
                           labelnames: List[str], per_engine_labelvalues: Dict[int, List[object]]
                           ) -> Any:
        from openlake_client.connector_stats import OpenLakePromMetrics
        return OpenLakePromMetrics(vllm_config, metric_types, labelnames, per_engine_labelvalues)

    def _count(self, **delta: float) -> None:
        with self._lock:
            self._stats.add(**delta)

    def _group_ns_name(self, group: int, tp_rank: int, pp_rank: int) -> str:
        base = ol_keys.namespace_name(self._config, self._extra, tp_rank, pp_rank)
        if len(self._groups) == 1:
            return base
        g = self._groups[group]
        return f"{base}/g{group}of{len(self._groups)}-{g.kind}-bs{g.block_size}"

    # ==== Scheduler side ========================================================================

    def _init_scheduler(self) -> None:
        self._reqs: Dict[str, _ReqState] = {}
        self._pending_loads: List[LoadSpec] = []
        self._async_saving: Set[str] = set()  # requests with async saves not yet done_sending
        self._held: Set[str] = set()          # finished, blocks held until done_sending
        self._loading: Set[str] = set()       # requests with async loads not yet done_recving
        r = ol_keys.parallel_ranks(self._config)
        ranks = [(t, p) for p in range(r["pp_size"]) for t in range(r["tp_size"])]
        # Per group, the namespace of each (TP, PP) shard; workers report changes.
        self._ns_names: Dict[int, Dict[Tuple[int, int], str]] = {
            g.index: {rk: self._group_ns_name(g.index, *rk) for rk in ranks}
            for g in self._groups}
        self._ns_refs: Dict[str, Any] = {}
        self._lookups: Dict[str, Tuple[Tuple[bytes, ...], Future]] = {}
        self._lookup_pool = (ThreadPoolExecutor(max_workers=1, thread_name_prefix="openlake-lookup")
                             if self._settings.lookup == "async" else None)
        self._executor = self._lookup_pool
        self._jobs: Dict[int, _SaveJob] = {}
        self._job_reports: Dict[int, List[int]] = {}
        self._job_ids = itertools.count(1)
        self._meta_seen = False
        self._events = EventLog(self._settings.event_medium)
        self._state_handoff = False  # vLLM hands committed Mamba states over (_boundary_offloads)

    def _state(self, request: Any) -> _ReqState:
        rid = request.request_id
        st = self._reqs.get(rid)
        n = len(self._groups)
        if st is None:
            st = self._reqs[rid] = _ReqState(request=request, block_ids=[[] for _ in range(n)],
                                             stored=[0] * n)
        else:
            st.request = request
        return st

    def _hashes(self, request: Any, group: Group) -> List[Any]:
        """vLLM's hash of each full block of `group` (the last hash of the hash blocks it
        spans)."""
        return ol_keys.request_hashes(request, max(1, group.block_size // self._hash_block))

    def _keys(self, request: Any, group: int = 0) -> List[bytes]:
        g = self._groups[group]
        if g.block_size % self._hash_block != 0:
            return []
        return [ol_keys.block_key(h) for h in self._hashes(request, g)]

    def _namespace(self, client: Any, name: str) -> Any:
        ns = self._ns_refs.get(name)
        if ns is None:
            ns = client.find_namespace(name)
            self._ns_refs[name] = ns
        return ns

    def _present_prefix(self, keys_by_group: List[List[bytes]], cap: int) -> Tuple[int, int, int]:
        """(tokens every shard of every group can supply, at most `cap`; of those, the tokens
        on this host's daemon rather than its cluster's other nodes; leading blocks of group 0
        in the pool, uncapped): (0, 0, 0) when the pool is unreachable."""
        if not keys_by_group or not keys_by_group[0]:
            return 0, 0, 0
        try:
            client = self._connect()
            if len(self._groups) == 1 and self._groups[0].kind == FULL:
                return self._full_prefix(client, keys_by_group[0], cap)
            return self._hybrid_prefix(client, keys_by_group, cap)
        except openlake_client.NotFoundError:
            return 0, 0, 0  # a shard never stored anything yet
        except openlake_client.OpenLakeError as e:
            logger.warning("OpenLake lookup failed, treating as a miss: %s", e)
            if isinstance(e, (openlake_client.UnavailableError,
                              openlake_client.DeadlineExceededError,
                              openlake_client.PreconditionError)):
                self._drop_client()
            return 0, 0, 0

    def _full_prefix(self, client: Any, keys: List[bytes], cap: int) -> Tuple[int, int, int]:
        bs = self._groups[0].block_size
        prefix = here = len(keys)
        for name in self._ns_names[0].values():
            ns = self._namespace(client, name)
            p, present, on_peers = client.exists(ns, keys[:prefix], detail=True)
            self._events.missing(0, [k for k, v in zip(keys[:prefix], present) if not v])
            prefix = min(prefix, int(p))
            here = min(here, int(p) - int(on_peers))
            if prefix == 0:
                break
        hit = min(prefix, cap // bs)
        return hit * bs, min(here, hit) * bs, prefix

    def _hybrid_prefix(self, client: Any, keys_by_group: List[List[bytes]],
                       cap: int) -> Tuple[int, int, int]:
        present: List[List[bool]] = []
        remote = False
        for g in self._groups:
            keys = keys_by_group[g.index]
            have = [True] * len(keys)
            for name in self._ns_names[g.index].values():
                if not keys:
                    break
                ns = self._namespace(client, name)
                _, got, on_peers = client.exists(ns, keys, detail=True)
                remote = remote or int(on_peers) > 0
                self._events.missing(g.index, [k for k, v in zip(keys, got) if not v])
                have = [a and bool(b) for a, b in zip(have, got)]
            present.append(have)
        hit = hit_tokens(self._groups, present, cap)
        lead = next((i for i, v in enumerate(present[0]) if not v), len(present[0]))
        return hit, 0 if remote else hit, lead

    def _drop_client(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = None
        self._ns_refs.clear()

    def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int) -> Tuple[Optional[int], bool]:
        if not self._can_load or any(g.kind == UNSUPPORTED for g in self._groups):
            return 0, False
        st = self._state(request)
        keys = [self._keys(request, g.index) for g in self._groups]
        bs = self._block_size
        if len(keys[0]) * self._groups[0].block_size <= num_computed_tokens:
            st.lookup = None
            return 0, False
        # Never the whole prompt: at least one token must be computed (vLLM asserts it).
        cap = int(request.num_tokens) - 1
        found = self._lookup(request.request_id, keys, cap, num_computed_tokens)
        if found is None:
            return None, False  # asked again next step
        hit, here, present = found
        if self._groups[0].kind == FULL:
            st.stored[0] = max(st.stored[0], present)  # never stored again
        if (hit - num_computed_tokens) // bs < self._settings.min_load_blocks:
            st.lookup = None
            return 0, False
        n = hit - num_computed_tokens
        # Blocks on other nodes are pulled into this host's daemon first, and a hybrid model's
        # failed loads can only be reported by request: such loads are asynchronous.
        is_async = self._settings.async_load or hit > here or len(self._groups) > 1
        st.lookup = (num_computed_tokens, n, is_async)
        return n, is_async

    def _lookup(self, req_id: str, keys: List[List[bytes]], cap: int,
                local: int) -> Optional[Tuple[int, int, int]]:
        """The pool's answer for a request's keys, asked once and kept until the request is
        scheduled or finished: vLLM may ask again for the same request (within a step, or while
        it waits for blocks), and must get the same answer though the pool (or a flaky link to
        a peer) may answer differently meanwhile. Async: asked in the background; None until
        the answer is in."""
        key = (cap,) + tuple(k for g in keys for k in g)
        pending = self._lookups.get(req_id)
        if pending is None or pending[0] != key:
            self._count(lookups=1, lookup_tokens=max(0, cap + 1 - local))
            if self._lookup_pool is None:
                fut: Future = Future()
                fut.set_result(self._present_prefix(keys, cap))
                self._lookups[req_id] = (key, fut)
                return fut.result()
            self._lookups[req_id] = (key, self._lookup_pool.submit(self._present_prefix, keys, cap))
            return None
        if not pending[1].done():
            return None
        return pending[1].result()

    def update_state_after_alloc(self, request: Any, blocks: Any, num_external_tokens: int) -> None:
        st = self._state(request)
        ids = _group_ids(blocks, len(self._groups))
        for g, gids in enumerate(ids):
            if gids:
                st.block_ids[g] = gids
        self._lookups.pop(request.request_id, None)
        if num_external_tokens <= 0 or st.lookup is None:
            return
        num_local, n, is_async = st.lookup
        st.lookup = None
        hit = num_local + min(num_external_tokens, n)
        self._count(hit_tokens=hit - num_local)
        for g in self._groups:
            keys = self._keys(request, g.index)
            need = g.needed(hit)
            start = max(need.start, num_local // g.block_size)
            stop = need.stop
            if stop <= start:
                continue
            target = st.block_ids[g.index][start:stop]
            gkeys = keys[start:stop]
            if len(gkeys) != len(target) or (g.kind != FULL and 0 in target):
                # Cannot happen with vLLM's scheduler. Still send the load: the worker reports
                # the blocks it cannot fill as failed, and an async load is still reported done.
                logger.warning("OpenLake: request %s group %d has %d keys for %d target blocks",
                               request.request_id, g.index, len(gkeys), len(target))
                gkeys = gkeys[:len(target)] if g.kind == FULL else []
            head = keys[0] if start > 0 and keys else None
            self._pending_loads.append(LoadSpec(request.request_id, gkeys, target, is_async,
                                                head, g.index))
            if g.kind == FULL:
                st.stored[g.index] = max(st.stored[g.index], stop)
        if is_async:
            self._loading.add(request.request_id)

    def build_connector_meta(self, scheduler_output: Any) -> KVConnectorMetadata:
        meta = OpenLakeConnectorMetadata()
        meta.loads, self._pending_loads = self._pending_loads, []
        preempted = set(getattr(scheduler_output, "preempted_req_ids", None) or ())
        meta.preempted = preempted
        n = len(self._groups)
        for rid in preempted:
            st = self._reqs.get(rid)
            if st is not None:
                st.block_ids = [[] for _ in range(n)]  # freed; the resumed request brings new ones
                st.lookup = None
                st.stored = [0] * n  # re-learnt from the pool when it is scheduled again
        scheduled = getattr(scheduler_output, "num_scheduled_tokens", None) or {}
        offers = _boundary_offloads(scheduler_output)
        self._state_handoff = self._state_handoff or offers is not None

        for new in getattr(scheduler_output, "scheduled_new_reqs", None) or []:
            st = self._reqs.get(new.req_id)
            if st is None:
                continue  # never seen by this connector (cannot happen with vLLM's scheduler)
            st.block_ids = _group_ids(new.block_ids, n)
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
                    for g, gids in enumerate(_group_ids(new_ids, n)):
                        st.block_ids[g] = gids if is_resumed else st.block_ids[g] + gids
                self._plan_save(meta, st, int(cached.num_computed_tokens[i]), int(scheduled.get(rid, 0)))
        for rid, items in (offers or {}).items():
            st = self._reqs.get(rid)
            if st is not None:
                self._plan_state_offers(meta, st, items or ())
        return meta

    def _plan_save(self, meta: OpenLakeConnectorMetadata, st: _ReqState, computed: int,
                   scheduled: int) -> None:
        """Adds the blocks of this request that become full in this step to the saves: per
        group, runs of real blocks (a sliding-window group's blocks out of the window are
        vLLM's null block, 0, and are not saved; a state group saves the one block whose
        boundary this step ends on)."""
        if not self._can_save or scheduled <= 0:
            return
        if any(g.kind == UNSUPPORTED for g in self._groups):
            return
        req = st.request
        if not self._settings.save_decode and computed >= int(getattr(req, "num_prompt_tokens", 0)):
            return
        after = min(computed + scheduled, int(req.num_tokens))
        lora = getattr(getattr(req, "lora_request", None), "lora_name", None)
        for g in self._groups:
            if g.kind == STATE and self._state_handoff:
                continue  # saved from vLLM's hand-off (_plan_state_offers)
            hashes = self._hashes(req, g)
            keys = [ol_keys.block_key(h) for h in hashes]
            ids = st.block_ids[g.index]
            full = min(after // g.block_size, len(keys), len(ids))
            first = st.stored[g.index]
            if full <= first:
                continue
            if g.kind == STATE:
                # The state after token `after` is in block after/B - 1 only when this step's
                # computation ends on that boundary; blocks it crossed hold no state.
                first = full - 1 if after == full * g.block_size else full
            i = first
            while i < full:
                if g.kind != FULL and ids[i] == 0:
                    i += 1
                    continue
                j = i
                while j < full and (g.kind == FULL or ids[j] != 0):
                    j += 1
                self._add_save(meta, req, g, i, keys[i:j], ids[i:j], hashes, lora)
                i = j
            st.stored[g.index] = full
        if any(sv.is_async and sv.req_id == req.request_id for sv in meta.saves):
            self._async_saving.add(req.request_id)

    def _add_save(self, meta: OpenLakeConnectorMetadata, req: Any, g: Group, first: int,
                  keys: List[bytes], ids: List[int], hashes: List[Any], lora: Any) -> None:
        """One save job: blocks `ids` of group `g` under `keys`, the request's blocks `first`
        onwards."""
        job = next(self._job_ids)
        # A sliding window's blocks are freed (and handed to other requests) as soon as they
        # leave the window, and a state block once the state moved on, maybe by the next step:
        # saved before it.
        is_async = self._settings.async_save and g.kind == FULL
        meta.saves.append(SaveSpec(req.request_id, keys, ids, first, is_async, g.index, job))
        if BASE_HAS_WORKER_META:  # an engine that never reports would only grow this
            bs, last = g.block_size, first + len(keys)
            self._jobs[job] = _SaveJob(req.request_id, g.index, first, keys, hashes[first:last],
                                       hashes[first - 1] if first > 0 else None,
                                       list(req.all_token_ids[first * bs:last * bs])
                                       if hasattr(req, "all_token_ids") else [], lora)

    def _plan_state_offers(self, meta: OpenLakeConnectorMetadata, st: _ReqState,
                           offers: Sequence[Any]) -> None:
        """Saves the Mamba states vLLM committed this step: (group, block id, boundary) each,
        the block holding the state after token `boundary` (maybe a copy outside the request's
        table), filed under the hash of the block ending there."""
        if not self._can_save:
            return
        req = st.request
        lora = getattr(getattr(req, "lora_request", None), "lora_name", None)
        for offer in offers:
            try:
                group, block, boundary = (int(x) for x in offer)
            except (TypeError, ValueError):
                continue
            if not 0 <= group < len(self._groups) or self._groups[group].kind != STATE:
                continue
            g = self._groups[group]
            if block <= 0 or boundary <= 0 or boundary % g.block_size:
                continue
            if not self._settings.save_decode and boundary > int(getattr(req, "num_prompt_tokens", 0)):
                continue
            hashes = self._hashes(req, g)
            index = boundary // g.block_size - 1
            if index >= len(hashes):
                continue
            self._add_save(meta, req, g, index, [ol_keys.block_key(hashes[index])], [block],
                           hashes, lora)

    def request_finished(self, request: Any, block_ids: List[int]) -> Tuple[bool, Optional[Dict[str, Any]]]:
        rid = request.request_id
        self._reqs.pop(rid, None)
        self._lookups.pop(rid, None)
        # Async saves may still read this request's blocks: keep them until done_sending.
        hold = rid in self._async_saving
        if hold:
            self._held.add(rid)
        return hold, None

    def request_finished_all_groups(self, request: Any, block_ids: Tuple[List[int], ...]
                                    ) -> Tuple[bool, Optional[Dict[str, Any]]]:
        """SupportsHMA: every group's blocks of a finished request (held together)."""
        return self.request_finished(request, list(block_ids[0]) if block_ids else [])

    def has_pending_push_work(self) -> bool:
        """True while a save some worker runs has not been reported done: vLLM keeps stepping
        (and so collecting the reports) even when it has no request to run. A job no report
        came for in a minute (a worker that died) stops counting."""
        if not (self._meta_seen and self._jobs):
            return False
        limit = time.monotonic() - max(60.0, 4 * self._settings.timeout_s)
        stale = [job for job, j in self._jobs.items() if j.created < limit]
        for job in stale:
            logger.warning("OpenLake: save job %d of %s was never reported done", job,
                           self._jobs[job].req_id)
            self._jobs.pop(job, None)
            self._job_reports.pop(job, None)
        return bool(self._jobs)

    def has_pending_block_frees(self) -> bool:
        """True while finished requests' blocks wait for their async saves: the scheduler,
        short of blocks, then waits for them instead of preempting a running request."""
        return bool(self._held)

    def update_connector_output(self, connector_output: Any) -> None:
        for rid in getattr(connector_output, "finished_sending", None) or ():
            self._async_saving.discard(rid)
            self._held.discard(rid)
        for rid in getattr(connector_output, "finished_recving", None) or ():
            self._loading.discard(rid)
        invalid = set(getattr(connector_output, "invalid_block_ids", None) or ())
        failed = set(getattr(connector_output, "failed_recving", None) or ())
        if invalid or failed:
            # Those blocks will be recomputed; store them again (a missing or corrupt block in
            # the pool is then replaced).
            for rid, st in self._reqs.items():
                for g in self._groups:
                    if rid in failed:
                        st.stored[g.index] = 0
                        continue
                    for i, b in enumerate(st.block_ids[g.index][:st.stored[g.index]]):
                        if b in invalid:
                            st.stored[g.index] = i
                            break
        meta = getattr(connector_output, "kv_connector_worker_meta", None)
        if meta is not None and hasattr(meta, "saves"):
            self._meta_seen = True
            for key, name in getattr(meta, "namespaces", {}).items():
                group, tp, pp = key
                if group in self._ns_names and self._ns_names[group].get((tp, pp)) != name:
                    logger.info("OpenLake: workers of group %d rank %d/%d store in %s", group,
                                tp, pp, name)
                    self._ns_names[group][(tp, pp)] = name
            for job, (stored, reports) in meta.saves.items():
                mine = self._job_reports.get(job)
                mine = [min(mine[0], stored), mine[1] + reports] if mine else [stored, reports]
                if mine[1] >= self._world:
                    self._job_reports.pop(job, None)
                    self._finish_job(job, mine[0])
                else:
                    self._job_reports[job] = mine

    def _finish_job(self, job: int, stored: int) -> None:
        j = self._jobs.pop(job, None)
        if j is None or stored <= 0:
            return
        bs = self._groups[j.group].block_size
        self._events.stored(j.group, j.keys[:stored], j.hashes[:stored], j.parent,
                            j.token_ids[:stored * bs], bs, j.lora_name)

    def take_events(self) -> Iterable[Any]:
        """BlockStored for blocks every worker stored, BlockRemoved for announced blocks found
        gone (connector_events.py)."""
        return self._events.take()

    def reset_cache(self) -> Optional[bool]:
        """vLLM's reset_prefix_cache(reset_connector=True): drop every block of our shards."""
        try:
            client = self._connect()
            for names in self._ns_names.values():
                for name in names.values():
                    try:
                        client.reset(client.find_namespace(name))
                    except openlake_client.NotFoundError:
                        pass
            self._ns_refs.clear()
            self._events.cleared()
            return True
        except openlake_client.OpenLakeError as e:
            logger.warning("OpenLake reset failed: %s", e)
            return False

    # ==== Worker side ===========================================================================

    def _init_worker(self) -> None:
        self._layouts: Dict[int, BlockLayout] = {}
        self._nss: Dict[int, Any] = {}
        self._movers: Dict[int, Any] = {}
        self._load_errors: Set[int] = set()
        self._pending_saves: Dict[str, int] = {}   # jobs not finished, per request
        self._had_async_save: Set[str] = set()
        self._finished: Set[str] = set()           # ids get_finished has been told about
        self._loads_left: Dict[str, int] = {}      # async load jobs not finished, per request
        self._done_recving: Set[str] = set()
        self._failed_recving: Set[str] = set()
        self._failed_loads: Set[str] = set()       # async loads with a failed block, not reported
        self._job_results: Dict[int, int] = {}     # save job -> blocks stored, not reported
        self._ns_report: Dict[Tuple[int, int, int], str] = {}
        self._cond = threading.Condition(self._lock)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openlake-xfer")
        # Layer-by-layer loads of the current step: the job, and one event per layer.
        self._layer_pool: Optional[ThreadPoolExecutor] = None
        self._layer_job: Optional[Future] = None
        self._layer_ready: List[threading.Event] = []
        r = self._worker_ranks()
        self._tp_rank, self._pp_rank = r

    @property
    def _mover(self) -> Any:
        """Group 0's mover (the only one of a model without hybrid groups)."""
        return self._movers.get(0)

    @property
    def _layout(self) -> Optional[BlockLayout]:
        return self._layouts.get(0)

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
        client = self._connect()
        groups = getattr(self._kv_cache_config_arg, "kv_cache_groups", None) or []
        for g in self._groups:
            if g.kind == UNSUPPORTED:
                continue
            layers = (kv_caches if g.layer_names is None
                      else {n: kv_caches[n] for n in g.layer_names if n in kv_caches})
            spec = getattr(groups[g.index], "kv_cache_spec", None) if g.index < len(groups) else None
            g_heads = getattr(spec, "num_kv_heads", None) or heads
            g_head_size = getattr(spec, "head_size", None) or head_size
            if g.kind == STATE:
                layout = plan_state_layout(layers, g.block_size)
            else:
                layout = plan_layout(layers, g.block_size, g_heads, g_head_size)
            fp = ol_keys.fingerprint(self._config, layout, self._tp_rank, self._pp_rank)
            if len(self._groups) > 1:
                fp["block_tokens"] = g.block_size
                fp["extra"] += (f" group={g.index}/{len(self._groups)} kind={g.kind}"
                                f" window={g.window}")
            name = self._group_ns_name(g.index, self._tp_rank, self._pp_rank)
            self._nss[g.index], name = self._open_namespace(client, name, fp, layout)
            self._ns_report[(g.index, self._tp_rank, self._pp_rank)] = name
            self._layouts[g.index] = layout
            self._movers[g.index] = _make_mover(layout, client, self._nss[g.index], self._settings)
            logger.info("OpenLake: group %d: %s; namespace %s, %s copies", g.index,
                        layout.describe(), name, self._movers[g.index].name)

    def _open_namespace(self, client: Any, name: str, fp: Dict[str, Any],
                        layout: BlockLayout) -> Tuple[Any, str]:
        """Opens `name`; when an engine with another KV layout (another attention backend, or
        another physical layout) created it, this engine gets a namespace of its own beside it,
        named by its fingerprint, so both run side by side."""
        try:
            return client.open_namespace(name, fp, layout.block_bytes), name
        except openlake_client.PreconditionError as e:
            if self._extra.get("openlake_namespace"):
                raise RuntimeError(
                    f"OpenLakeConnector: namespace {name!r} in the pool was created by an engine "
                    f"with another KV layout ({e}); openlake_namespace is set, so this engine "
                    "does not move beside it: choose another openlake_namespace") from e
            digest = hashlib.sha256(repr(sorted(fp.items())).encode()).hexdigest()[:12]
            alt = f"{name}~{digest}"
            logger.warning("OpenLake: namespace %s holds another KV layout (%s); this engine "
                           "stores in %s beside it", name, e, alt)
            return client.open_namespace(alt, fp, layout.block_bytes), alt

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        if not self.has_connector_metadata():
            return
        meta = self._get_connector_metadata()
        loads = list(getattr(meta, "loads", ()))
        with self._lock:  # every job of a request counted before any can finish
            for spec in loads:
                if spec.is_async:
                    self._loads_left[spec.req_id] = self._loads_left.get(spec.req_id, 0) + 1
        sync = [spec for spec in loads if not spec.is_async]
        if sync and self._layerwise_ok():
            self._start_layer_loads(sync)
            sync = []
        for spec in loads:
            if spec.is_async:
                self._executor.submit(self._load_async, spec)
        for spec in sync:
            self._load(spec)

    def _layerwise_ok(self) -> bool:
        return (self._settings.layerwise and len(self._movers) == 1
                and hasattr(self._movers.get(0), "begin_layers"))

    def _start_layer_loads(self, specs: List[LoadSpec]) -> None:
        """Copies the step's synchronous loads layer by layer on a thread of their own, in the
        model's layer order; wait_for_layer_load(layer) waits for that layer only."""
        layout = self._layouts[0]
        order = sorted(range(len(layout.layers)),
                       key=lambda i: [int(t) if t.isdigit() else t
                                      for t in re.split(r"(\d+)", layout.layers[i].name)])
        self._layer_ready = [threading.Event() for _ in layout.layers]
        if self._layer_pool is None:
            self._layer_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openlake-layers")
        self._layer_job = self._layer_pool.submit(self._layer_loads, specs, order)

    def _layer_loads(self, specs: List[LoadSpec], order: List[int]) -> None:
        mover = self._movers[0]
        t0 = time.monotonic()
        jobs = []
        try:
            for spec in specs:
                try:
                    jobs.append((spec, mover.begin_layers(spec.keys, spec.block_ids, spec.head)))
                except openlake_client.OpenLakeError as e:
                    logger.warning("OpenLake load of %d blocks for %s failed: %s",
                                   len(spec.keys), spec.req_id, e)
                    self._fail_load(spec, 0, "lookup failed")
            for index in order:
                for _, job in jobs:
                    mover.copy_layer(job, index)
                self._layer_ready[index].set()
        finally:
            for event in self._layer_ready:
                event.set()  # nothing waits forever, whatever happened
            for spec, job in jobs:
                loaded = 0
                try:
                    loaded = mover.finish_layers(job)
                except openlake_client.OpenLakeError as e:
                    logger.warning("OpenLake load for %s failed: %s", spec.req_id, e)
                self._count(loads=1, loaded_blocks=loaded,
                            loaded_bytes=loaded * self._layouts[0].block_bytes)
                if loaded < len(spec.block_ids):
                    self._fail_load(spec, loaded, "missing or failed verification")
            self._count(load_seconds=time.monotonic() - t0)

    def _finish_layer_loads(self) -> None:
        job, self._layer_job = self._layer_job, None
        if job is not None:
            try:
                job.result()
            except Exception:  # reported as load errors; never lose the step
                logger.exception("OpenLake layer-by-layer load failed")

    def _load(self, spec: LoadSpec) -> None:
        mover = self._movers.get(getattr(spec, "group", 0))
        if mover is None:
            self._fail_load(spec, 0, "no KV caches registered")
            return
        t0 = time.monotonic()
        loaded = 0
        try:
            if spec.keys:
                loaded = mover.load(spec.keys, spec.block_ids[:len(spec.keys)],
                                    getattr(spec, "head", None))
        except openlake_client.OpenLakeError as e:
            logger.warning("OpenLake load of %d blocks for %s failed: %s", len(spec.keys),
                           spec.req_id, e)
            loaded = 0
        layout = self._layouts.get(getattr(spec, "group", 0))
        self._count(loads=1, loaded_blocks=loaded,
                    loaded_bytes=loaded * (layout.block_bytes if layout else 0),
                    load_seconds=time.monotonic() - t0)
        if loaded < len(spec.block_ids):
            self._fail_load(spec, loaded, "missing or failed verification")

    def _fail_load(self, spec: LoadSpec, loaded: int, why: str) -> None:
        # The prefix must be contiguous: every block from the first bad one is invalid.
        bad = spec.block_ids[loaded:]
        logger.info("OpenLake: %d of %d blocks of %s not loaded (%s)", len(bad),
                    len(spec.block_ids), spec.req_id, why)
        self._count(load_errors=len(bad))
        with self._lock:
            if len(self._groups) > 1:
                # Block ids are per group: vLLM takes a hybrid model's failures by request.
                self._failed_loads.add(spec.req_id)
            else:
                self._load_errors.update(bad)
                if spec.is_async:
                    self._failed_loads.add(spec.req_id)

    def _load_async(self, spec: LoadSpec) -> None:
        try:
            self._load(spec)
        except Exception:  # never lose a request: report it done (with errors) whatever happens
            logger.exception("OpenLake async load for %s failed", spec.req_id)
            with self._lock:
                if len(self._groups) == 1:
                    self._load_errors.update(spec.block_ids)
                self._failed_loads.add(spec.req_id)
        finally:
            with self._lock:
                left = self._loads_left.get(spec.req_id, 1) - 1
                if left <= 0:
                    self._loads_left.pop(spec.req_id, None)
                    self._done_recving.add(spec.req_id)
                    if spec.req_id in self._failed_loads:
                        self._failed_loads.discard(spec.req_id)
                        self._failed_recving.add(spec.req_id)
                else:
                    self._loads_left[spec.req_id] = left

    def wait_for_layer_load(self, layer_name: str) -> None:
        """With openlake_layerwise: waits until this layer's loaded blocks are in place (the
        copy of the next layers goes on meanwhile). Otherwise loads completed in
        start_load_kv (or run asynchronously, reported by get_transfer_results)."""
        if self._layer_job is None:
            return
        index = self._layouts[0].layer_index(layer_name)
        if index is None or index >= len(self._layer_ready):
            self._finish_layer_loads()
            return
        self._layer_ready[index].wait()
        wait_layer = getattr(self._movers[0], "wait_layer", None)
        if wait_layer is not None:
            wait_layer(index)  # on a GPU: the forward's stream waits for this layer's copies

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs: Any) -> None:
        return  # whole blocks are saved after the forward, in wait_for_save

    def wait_for_save(self) -> None:
        """Called every step, empty ones included: submits this step's saves (async ones run on
        the transfer thread and hold their blocks until reported)."""
        # Layer-by-layer loads end (and are verified) within their step: a failure is reported
        # by get_block_ids_with_load_errors right after.
        self._finish_layer_loads()
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
        mover = self._movers.get(getattr(spec, "group", 0))
        stored = 0
        t0 = time.monotonic()
        try:
            if mover is not None:
                stored = int(mover.save(spec.keys, spec.block_ids, spec.first_depth))
                if stored < len(spec.keys):
                    logger.info("OpenLake: pool full, stored %d of %d blocks of %s", stored,
                                len(spec.keys), spec.req_id)
        except openlake_client.OpenLakeError as e:
            logger.warning("OpenLake save of %d blocks for %s failed: %s", len(spec.keys),
                           spec.req_id, e)
            self._count(save_errors=1)
        finally:
            layout = self._layouts.get(getattr(spec, "group", 0))
            self._count(saves=1, saved_blocks=stored,
                        saved_bytes=stored * (layout.block_bytes if layout else 0),
                        save_seconds=time.monotonic() - t0)
            with self._lock:
                self._job_results[getattr(spec, "job", 0)] = stored

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

    def get_transfer_results(self, finished_req_ids: Set[str]) -> Any:
        """What get_finished answers, plus the async loads that failed (also listed as
        finished receiving, as vLLM requires), by request."""
        sending, recving = self.get_finished(finished_req_ids)
        with self._lock:
            failed, self._failed_recving = self._failed_recving, set()
        return KVConnectorTransferResults(finished_sending=set(sending or ()),
                                          finished_recving=set(recving or ()),
                                          failed_recving=failed)

    def get_block_ids_with_load_errors(self) -> Set[int]:
        with self._lock:
            errors, self._load_errors = self._load_errors, set()
        return errors

    def build_connector_worker_meta(self) -> Any:
        """Save jobs this worker finished since the last step (the scheduler announces blocks
        once every worker stored them, and knows when no save is in flight) and, once, the
        namespaces it stores in."""
        with self._lock:
            results, self._job_results = self._job_results, {}
            names, self._ns_report = self._ns_report, {}
        if not results and not names:
            return None
        meta = OpenLakeWorkerMeta()
        meta.saves = {job: [stored, 1] for job, stored in results.items()}
        meta.namespaces = names
        return meta

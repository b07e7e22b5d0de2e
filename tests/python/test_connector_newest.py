"""OpenLakeConnector on vLLM's newest connector interface (base.py at vLLM 00f4240), driven by
the mini engine against a real openlaked: best-effort cache semantics, an engine that keeps
stepping while async saves drain, finished requests' blocks waited for instead of preemption,
failed async loads reported by request, two-group hybrid models (full attention + sliding
window, full attention + Mamba state), KV events, stats and Prometheus metrics, engines with
different KV layouts side by side, and the method signatures against the newest base.
Byte-exact as test_connector.py.
"""

import subprocess
import sys
import textwrap
import time

import pytest
import torch

from openlake_client import keys as ol_keys
from mini_engine import KV_DEVICE, MiniEngine
from test_connector import (HERE, answer, extra, miss_then_hit, pool, prompt, run_ok,
                            shard_namespaces, slow)


def corrupt(daemon, name, key):
    """Flips a byte of the stored block `key` in the slab (its checksum then fails)."""
    c = pool(daemon)
    ns = c.find_namespace(name)
    batch, hits = c.lookup(ns, [key])
    assert hits, "block not in the pool"
    slab = torch.frombuffer(c.slab_view(), dtype=torch.uint8)
    slab[hits[0][1] + 5] ^= 0xFF
    c.release([batch])


def window_namespace(daemon):
    """The namespace of the hybrid mini model's sliding-window group (group 1 of 2)."""
    names = [s["name"] for s in pool(daemon).stats()["namespaces_detail"] if "/g1of2" in s["name"]]
    assert len(names) == 1, names
    return names[0]


# ---- Best-effort cache, async saves ----------------------------------------------------------

def test_a_cache_never_requires_kv_delivery(daemon):
    e = MiniEngine(extra(daemon))
    assert e.scheduler.requires_kv_delivery is False
    assert all(w.connector.requires_kv_delivery is False for w in e.workers)
    e.shutdown()


def test_the_engine_steps_with_no_requests_while_saves_drain(daemon):
    e = MiniEngine(extra(daemon, async_save=True))
    for w in e.workers:
        slow(w.connector, "save", 0.2)
    p = prompt(26, 20)
    a = e.add("a", p, max_tokens=1)
    while e.waiting or e.running:
        e.step()
    # The request is done; its blocks are held for the save, which is still running.
    assert "a" in e.held
    assert e.scheduler.has_pending_push_work() and e.scheduler.has_pending_block_frees()
    empty = 0
    while e.scheduler.has_pending_push_work() or e.held:
        assert e.step() == 0
        empty += 1
        time.sleep(0.01)
        assert empty < 500
    assert empty > 1  # vLLM keeps stepping only because the connector says so
    assert not e.scheduler.has_pending_block_frees()
    # Every full block is now announced stored, once, with vLLM's hashes and tokens.
    stored = [ev for ev in e.events if type(ev).__name__.startswith("BlockStored")]
    hashes = [h for ev in stored for h in ev.block_hashes]
    assert hashes == list(a.block_hashes[:6])
    assert all(ev.medium == "OPENLAKE" and ev.block_size == 4 for ev in stored)
    first = stored[0]
    assert first.parent_block_hash is None and first.token_ids == p[:4 * len(first.block_hashes)]
    e.shutdown()


def test_finished_requests_blocks_are_waited_for_not_preempted(daemon):
    # 10 blocks: "a" (6 blocks) finishes with a slow save holding its blocks; "b" and "c" need
    # more than the rest. The scheduler waits for a's blocks rather than preempting.
    e = MiniEngine(extra(daemon, async_save=True), num_blocks=10, token_budget=8)
    for w in e.workers:
        slow(w.connector, "save", 0.3)
    e.add("a", prompt(22, 21), max_tokens=1)
    while "a" not in e.done:
        e.step()
    e.add("b", prompt(14, 22), max_tokens=4)
    e.add("c", prompt(10, 23), max_tokens=4)
    run_ok(e, max_steps=400)
    assert sum(r.num_preemptions for r in e.requests.values()) == 0
    assert set(e.done) == {"a", "b", "c"}
    e.shutdown()


# ---- Failed loads ---------------------------------------------------------------------------

def test_a_failed_async_load_is_reported_by_request_and_recomputed(daemon):
    e = MiniEngine(extra(daemon, async_load=True, async_save=False))
    p = prompt(24, 24)
    a = e.add("a", p)
    run_ok(e)
    corrupt(daemon, shard_namespaces(e)[0], ol_keys.block_key(a.block_hashes[3]))
    e.add("b", p + [8])
    run_ok(e)
    assert answer(e, "b") == (24, True)  # Exists does not read bytes: the load finds out
    assert "b" in e.failed_seen          # failed_recving, listed in finished_recving too
    assert e.invalid_seen                # and the blocks by id (one group)
    assert e.kv_stats.data["load_errors"] >= 1
    e.shutdown()


# ---- A hybrid model (HMA) -------------------------------------------------------------------

def test_two_group_hybrid_model_saves_and_loads_each_group(daemon):
    from openlake_client.connector_base import SupportsHMA
    e = MiniEngine(extra(daemon), window=8, num_blocks=48)
    assert isinstance(e.scheduler, SupportsHMA)
    p = prompt(30, 26)
    e.add("a", p, max_tokens=2)
    run_ok(e)
    e.shutdown()
    # A fresh engine: both groups must come from the pool (full: every block; window: the last
    # two blocks before the hit), asynchronously (failures go by request). 31 of a's 32 tokens
    # were computed: 7 full blocks.
    f = MiniEngine(extra(daemon), window=8, num_blocks=48)
    f.add("b", p + [3, 4, 5])
    run_ok(f)
    assert answer(f, "b") == (28, True)
    stats = f.kv_stats.data
    assert stats["loaded_blocks"] == 7 + 2 and stats["hit_tokens"] == 28
    names = [s["name"] for s in pool(daemon).stats()["namespaces_detail"]]
    assert sum("/g0of2-full-bs4" in n for n in names) == 1
    assert sum("/g1of2-window-bs4" in n for n in names) == 1
    f.shutdown()


def test_hybrid_window_blocks_missing_shorten_the_hit(daemon):
    e = MiniEngine(extra(daemon), window=8, num_blocks=48)
    p = prompt(30, 27)
    a = e.add("a", p)
    run_ok(e)
    c = pool(daemon)
    ns = c.find_namespace(window_namespace(daemon))
    # 7 blocks stored. The window group's block 6 (tokens 24..27) is gone: a hit at 28 tokens
    # needs blocks 5 and 6, so the longest hit is 24 tokens (blocks 4 and 5 of that group).
    assert c.remove(ns, [ol_keys.block_key(a.block_hashes[6])]) == 1
    e.add("b", p + [2, 2, 2])
    run_ok(e)
    assert answer(e, "b") == (24, True)
    e.shutdown()


def test_hybrid_failed_load_is_reported_by_request_never_by_block(daemon):
    e = MiniEngine(extra(daemon, async_save=False), window=8, num_blocks=48)
    p = prompt(30, 28)
    a = e.add("a", p)
    run_ok(e)
    corrupt(daemon, window_namespace(daemon), ol_keys.block_key(a.block_hashes[6]))
    e.add("b", p + [6, 6, 6])
    run_ok(e)  # the engine's errors include any invalid_block_ids for a hybrid model
    assert "b" in e.failed_seen and not e.invalid_seen
    e.shutdown()


def mamba_state_namespace(daemon):
    """The namespace of the Mamba mini model's state group (group 1 of 2)."""
    names = [s["name"] for s in pool(daemon).stats()["namespaces_detail"]
             if "/g1of2-state-bs4" in s["name"]]
    assert len(names) == 1, names
    return names[0]


def test_mamba_hybrid_loads_the_state_at_the_hit(daemon):
    e = MiniEngine(extra(daemon), mamba=True, num_blocks=96)
    assert [g.kind for g in e.scheduler._groups] == ["full", "state"]
    p = prompt(150, 40)
    e.add("a", p, max_tokens=2)
    run_ok(e)
    e.shutdown()
    # Chunks of 64 tokens, then up to the prompt's last full block (148): the state was
    # cached after tokens 64, 128 and 148, and only those three state blocks were saved.
    c = pool(daemon)
    state = c.find_namespace(mamba_state_namespace(daemon))
    a_hashes = e.requests["a"].block_hashes
    _, got = c.exists(state, [ol_keys.block_key(h) for h in a_hashes[:37]])
    assert [i for i, v in enumerate(got) if v] == [15, 31, 36]
    # A fresh engine hits at 148 tokens: 37 attention blocks and one state block, and its
    # Mamba layer then reads the state after token 148 (the engine checks it).
    f = MiniEngine(extra(daemon), mamba=True, num_blocks=96)
    f.add("b", p + [1, 2, 3])
    run_ok(f)
    assert answer(f, "b") == (148, True)
    stats = f.kv_stats.data
    assert stats["loaded_blocks"] == 37 + 1 and stats["hit_tokens"] == 148
    f.shutdown()


def test_mamba_hits_only_where_a_state_was_cached(daemon):
    e = MiniEngine(extra(daemon), mamba=True, num_blocks=96)
    p = prompt(150, 41)
    e.add("a", p)
    run_ok(e)
    # Sharing 70 tokens: attention blocks reach token 68, but the only state at or before it
    # is the one after token 64. Sharing 40: no state at or before it, no hit (the blocks a
    # chunk crossed were never saved, so no stale state can be loaded).
    e.add("b", p[:70] + prompt(30, 42))
    e.add("c", p[:40] + prompt(30, 43))
    run_ok(e)
    assert answer(e, "b") == (64, True)
    assert answer(e, "c") == (0, False)
    # The state block gone: the hit falls back to the previous cached state... of which there
    # is none before 64, so the request computes its prefix.
    c = pool(daemon)
    state = c.find_namespace(mamba_state_namespace(daemon))
    assert c.remove(state, [ol_keys.block_key(e.requests["a"].block_hashes[15])]) == 1
    e.add("d", p[:70] + prompt(30, 44))
    run_ok(e)
    assert answer(e, "d") == (0, False)
    e.shutdown()


def test_mamba_states_vllm_hands_over_are_saved_from_the_hand_off(daemon):
    # The engine commits a state only where a step ends on a boundary of two blocks (64, 128;
    # not 148), into a block outside the request's table that is scribbled right after the
    # step: the connector saves exactly those, from those blocks, in their step.
    e = MiniEngine(extra(daemon), mamba=True, handoff=True, num_blocks=96)
    p = prompt(150, 45)
    a = e.add("a", p)
    run_ok(e)
    c = pool(daemon)
    state = c.find_namespace(mamba_state_namespace(daemon))
    _, got = c.exists(state, [ol_keys.block_key(h) for h in a.block_hashes[:37]])
    assert [i for i, v in enumerate(got) if v] == [15, 31]
    e.add("b", p + [1, 2, 3])
    run_ok(e)  # the engine checks the state it reads after the load
    assert answer(e, "b") == (128, True)
    e.shutdown()


def test_mamba_state_layout_is_the_pages_of_every_state_tensor():
    from openlake_client.layout import plan_state_layout
    from mini_engine import KVStore
    kv = KVStore("flashinfer_nhd", 2, 8, 4, 2, 8)
    kv.make_state_layer(1, "model.layers.1.mixer", 8)
    layout = plan_state_layout({"model.layers.1.mixer": kv.tensors["model.layers.1.mixer"]}, 4)
    assert layout.kind == "state" and layout.block_bytes == 48 + 128  # the padding is not stored
    base = kv._state_buffer.data_ptr()
    assert layout.pieces(3) == [(base + 3 * 192, 176)]


# ---- Events, stats, metrics -----------------------------------------------------------------

def test_events_for_stored_then_removed_blocks(daemon):
    e = MiniEngine(extra(daemon, async_save=False), tp=2)
    p = prompt(18, 29)
    a = e.add("a", p)
    run_ok(e)
    stored = [h for ev in e.events if type(ev).__name__.startswith("BlockStored")
              for h in ev.block_hashes]
    assert stored == list(a.block_hashes[:4])  # once, though two ranks stored each block
    # A block found gone by a later lookup is announced removed.
    c = pool(daemon)
    for name in shard_namespaces(e):
        c.remove(c.find_namespace(name), [ol_keys.block_key(a.block_hashes[2])])
    b = e.add("b", p + [1])
    run_ok(e)
    removed = [h for ev in e.events if type(ev).__name__.startswith("BlockRemoved")
               for h in ev.block_hashes]
    assert removed == [a.block_hashes[2]]
    # "b" stored block 2 again, and its own fifth; reset_cache announces every one removed.
    assert b.block_hashes[:4] == a.block_hashes[:4]
    assert e.scheduler.reset_cache() is True
    gone = [h for ev in e.scheduler.take_events() for h in ev.block_hashes]
    assert sorted(gone) == sorted(b.block_hashes[:5])
    e.shutdown()


def test_stats_reduce_and_prometheus_metrics(daemon):
    e = MiniEngine(extra(daemon, async_save=False))
    p = prompt(26, 30)
    e.add("a", p)
    run_ok(e)
    e.add("b", p + [2])
    run_ok(e)
    d = e.kv_stats.data
    assert d["saved_blocks"] >= 6 and d["loaded_blocks"] == 6 and d["hit_tokens"] == 24
    assert d["saved_bytes"] > 0 and d["loaded_bytes"] == 6 * d["saved_bytes"] / d["saved_blocks"]
    r = e.kv_stats.reduce()
    assert 0 < r["hit_rate"] <= 1 and r["load_GBps"] > 0

    class Child:
        def __init__(self):
            self.value = 0.0

        def inc(self, v):
            self.value += v

    class Counter:  # the shape of prometheus_client.Counter that vLLM passes in
        made = {}

        def __init__(self, name, documentation, labelnames):
            self.children = {}
            Counter.made[name] = self

        def labels(self, *values):
            return self.children.setdefault(values, Child())

    class Gauge:
        pass

    class Histogram:
        pass

    cls = type(e.scheduler)
    prom = cls.build_prom_metrics(e.worker_config(0), {Gauge: Gauge, Counter: Counter,
                                                       Histogram: Histogram},
                                  ["model_name", "engine"], {0: ["m", "0"]})
    prom.observe(cls.build_kv_connector_stats(dict(d)).to_dict(), 0)
    assert Counter.made["vllm:openlake_loaded_blocks"].children[("m", "0")].value == 6
    assert Counter.made["vllm:openlake_hit_tokens"].children[("m", "0")].value == 24
    assert cls.build_kv_connector_stats(None).is_empty()
    e.shutdown()


# ---- Two KV layouts, one daemon -------------------------------------------------------------

def test_engines_of_other_layouts_share_blocks_or_run_side_by_side(daemon):
    p = prompt(22, 31)
    a = MiniEngine(extra(daemon), layout="flashinfer_nhd")
    a.add("a1", p)
    run_ok(a)
    # FlashAttention's layout in NHD: K/V planes outermost where FlashInfer has blocks
    # outermost, but the same block bytes: one namespace, and A's blocks are B's hits (the mini
    # engine checks every loaded position against a recompute).
    b = MiniEngine(extra(daemon), layout="legacy_fa")
    b.add("b1", p + [1])
    run_ok(b)
    assert answer(b, "b1") == (20, False)
    # HND: another byte order. It starts beside the first namespace, never reads its bytes, and
    # hits what it stored itself; the first engine still hits its own.
    c = MiniEngine(extra(daemon), layout="legacy_fa_hnd")
    c.add("c1", p + [1])
    run_ok(c)
    c.add("c2", p + [2])
    run_ok(c)
    assert answer(c, "c2") == (20, False)
    a.add("a2", p + [3])
    run_ok(a)
    assert answer(a, "a2") == (20, False)
    names = [s["name"] for s in pool(daemon).stats()["namespaces_detail"]]
    assert len(names) == 2 and sum("~" in n for n in names) == 1
    for e in (a, b, c):
        e.shutdown()


# ---- The newest base's surface --------------------------------------------------------------

NEWEST_BASE = textwrap.dedent('''
    import abc, dataclasses, enum, sys, types, inspect
    sys.path.insert(0, {here!r})
    for n in ["vllm", "vllm.distributed", "vllm.distributed.kv_transfer",
              "vllm.distributed.kv_transfer.kv_connector",
              "vllm.distributed.kv_transfer.kv_connector.v1"]:
        m = types.ModuleType(n); m.__path__ = []; sys.modules[n] = m
    base = types.ModuleType("vllm.distributed.kv_transfer.kv_connector.v1.base")
    exec(compile({body!r}, "base_00f4240_surface", "exec"), base.__dict__)
    sys.modules[base.__name__] = base
    import openlake_client.openlake_connector as oc
    C = oc.OpenLakeConnector
    assert issubclass(C, base.KVConnectorBase_V1) and issubclass(C, base.SupportsHMA)
    assert isinstance(C.__dict__["requires_kv_delivery"], property)
    checked = []
    for cls in (base.KVConnectorBase_V1, base.SupportsHMA):
        for name, member in vars(cls).items():
            if name.startswith("_") or name not in C.__dict__:
                continue
            ours = C.__dict__[name]
            if isinstance(member, property):
                assert isinstance(ours, property), name
                continue
            if isinstance(member, classmethod):
                assert isinstance(ours, classmethod), name
                member, ours = member.__func__, ours.__func__
            a = [(p.name, p.kind) for p in inspect.signature(member).parameters.values()]
            b = [(p.name, p.kind) for p in inspect.signature(ours).parameters.values()]
            assert a == b, (name, a, b)
            checked.append(name)
    r = C.get_transfer_results
    assert "get_transfer_results" in checked and "request_finished_all_groups" in checked
    assert isinstance(oc.KVConnectorTransferResults(failed_recving={{"x"}}), base.KVConnectorTransferResults)
    print("checked", len(checked))
''')

# The members of KVConnectorBase_V1 and SupportsHMA at vLLM 00f4240 that OpenLakeConnector
# overrides, with their exact parameter names (bodies elided).
BASE_SURFACE = textwrap.dedent('''
    import abc, dataclasses, enum
    from typing import Any

    class KVConnectorRole(enum.Enum):
        SCHEDULER = 0
        WORKER = 1

    class KVConnectorMetadata(abc.ABC):
        pass

    class KVConnectorWorkerMetadata(abc.ABC):
        @abc.abstractmethod
        def aggregate(self, other): ...

    @dataclasses.dataclass
    class KVConnectorTransferResults:
        finished_sending: set = dataclasses.field(default_factory=set)
        finished_recving: set = dataclasses.field(default_factory=set)
        failed_recving: set = dataclasses.field(default_factory=set)
        prefix_replay_checkpoints: dict = dataclasses.field(default_factory=dict)

    class SupportsHMA(abc.ABC):
        @abc.abstractmethod
        def request_finished_all_groups(self, request, block_ids): ...

    class KVConnectorBase_V1(abc.ABC):
        @property
        def requires_kv_delivery(self): return self._kv_transfer_config.is_kv_producer
        def __init__(self, vllm_config, role, kv_cache_config):
            self._connector_metadata = None
            self._vllm_config = vllm_config
            self._kv_transfer_config = vllm_config.kv_transfer_config
            self._kv_cache_config = kv_cache_config
            self._role = role
        @property
        def role(self): return self._role
        def bind_connector_metadata(self, connector_metadata): self._connector_metadata = connector_metadata
        def clear_connector_metadata(self): self._connector_metadata = None
        def _get_connector_metadata(self): return self._connector_metadata
        def has_connector_metadata(self): return self._connector_metadata is not None
        def register_kv_caches(self, kv_caches): return
        def handle_preemptions(self, kv_connector_metadata): return
        @abc.abstractmethod
        def start_load_kv(self, forward_context, **kwargs): ...
        @abc.abstractmethod
        def wait_for_layer_load(self, layer_name): ...
        @abc.abstractmethod
        def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs): ...
        @abc.abstractmethod
        def wait_for_save(self): ...
        def get_finished(self, finished_req_ids): return None, None
        def get_transfer_results(self, finished_req_ids): return KVConnectorTransferResults()
        def get_block_ids_with_load_errors(self): return set()
        def shutdown(self): return None
        def get_kv_connector_stats(self): return None
        def get_kv_connector_kv_cache_events(self): return None
        def build_connector_worker_meta(self): return None
        def bind_kv_cache_manager(self, kv_cache_manager): pass
        def bind_gpu_block_pool(self, gpu_block_pool): pass
        @abc.abstractmethod
        def get_num_new_matched_tokens(self, request, num_computed_tokens): ...
        @abc.abstractmethod
        def update_state_after_alloc(self, request, blocks, num_external_tokens): ...
        @abc.abstractmethod
        def build_connector_meta(self, scheduler_output): ...
        def on_new_request(self, request): pass
        def update_connector_output(self, connector_output): pass
        def request_finished(self, request, block_ids): return False, None
        def take_events(self): return ()
        def has_pending_block_frees(self): return False
        def has_pending_push_work(self): return False
        @classmethod
        def get_required_kvcache_layout(cls, vllm_config): return None
        @classmethod
        def requires_piecewise_for_cudagraph(cls, extra_config): return False
        def get_finished_count(self): return None
        @classmethod
        def build_kv_connector_stats(cls, data=None): return None
        @classmethod
        def build_prom_metrics(cls, vllm_config, metric_types, labelnames, per_engine_labelvalues):
            return None
        def reset_cache(self): return None
''')


def test_signatures_match_the_newest_base():
    script = NEWEST_BASE.format(here=str(HERE), body=BASE_SURFACE)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[-1]) >= 15


# ---- Layer by layer --------------------------------------------------------------------------

@pytest.mark.parametrize("engine,layout", [("memcpy", "legacy_fa"), ("torch", "flashinfer_hnd"),
                                           ("torch", "kernel_r2")])
def test_layerwise_loads_put_each_layer_in_place_before_its_attention(daemon, engine, layout):
    from openlake_client.openlake_connector import OpenLakeConnector
    if engine == "memcpy" and KV_DEVICE != "cpu":
        pytest.skip("the memcpy engine needs the KV cache in host memory")
    assert OpenLakeConnector.requires_piecewise_for_cudagraph({"openlake_layerwise": True})
    assert not OpenLakeConnector.requires_piecewise_for_cudagraph({})
    e = MiniEngine(extra(daemon, layerwise=True, async_save=False, copy_engine=engine),
                   layout=layout)
    copied = []
    for w in e.workers:
        mover = w.connector._mover
        inner = mover.copy_layer

        def slow_copy(job, index, inner=inner):
            time.sleep(0.05)  # the forward of earlier layers would run meanwhile
            inner(job, index)
            copied.append((index, time.monotonic()))

        mover.copy_layer = slow_copy
        wait = w.connector.wait_for_layer_load

        def timed_wait(name, wait=wait):
            wait(name)
            waited.append((name, time.monotonic()))

        w.connector.wait_for_layer_load = timed_wait
    waited = []
    p = prompt(26, 32)
    assert miss_then_hit(e, p, [4]) == (24, False)
    assert [i for i, _ in copied] == [0, 1]
    # Layer 0's attention could start before layer 1 was copied: the copies overlap the forward.
    t_layer0 = min(t for name, t in waited
                   if name.startswith("model.layers.0") and t >= copied[0][1])
    assert t_layer0 < copied[1][1]
    checks = [c for c in e.layer_checks if c[1] == "b"]
    assert [layer for _, _, layer, _ in checks] == [0, 1]
    assert all(not bad for _, _, _, bad in checks)  # each layer in place when its turn came
    assert e.kv_stats.data["loaded_blocks"] == 6
    e.shutdown()


@pytest.mark.parametrize("engine", ["memcpy", "torch"])
def test_layerwise_load_of_a_corrupt_block_is_reported_in_its_step(daemon, engine):
    if engine == "memcpy" and KV_DEVICE != "cpu":
        pytest.skip("the memcpy engine needs the KV cache in host memory")
    e = MiniEngine(extra(daemon, layerwise=True, async_save=False, copy_engine=engine),
                   layout="flashinfer_hnd")
    p = prompt(26, 33)
    a = e.add("a", p)
    run_ok(e)
    corrupt(daemon, shard_namespaces(e)[0], ol_keys.block_key(a.block_hashes[4]))
    e.add("b", p + [4])
    run_ok(e)  # the engine recomputes from block 4 and verifies every position
    assert e.invalid_seen and e.kv_stats.data["load_errors"] >= 2
    e.shutdown()

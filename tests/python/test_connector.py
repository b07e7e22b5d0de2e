"""OpenLakeConnector driven by the mini engine (VLLM_CONNECTOR.md §6), against a real openlaked.

Every scenario checks KV bytes exactly: MiniEngine.verify compares every computed position of
every finished request, on every worker, with what a recompute writes.
"""

import os
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import openlake_client as ol
from openlake_client import keys as ol_keys
from conftest import Daemon
from mini_engine import KV_DEVICE, LAYOUTS, MiniEngine

HERE = Path(__file__).resolve().parent


def extra(daemon, **kw):
    e = {"openlake_nodes": [daemon.address], "openlake_device": "local"}
    e.update({f"openlake_{k}": v for k, v in kw.items()})
    return e


def prompt(n, seed):
    rng = random.Random(seed)
    return [rng.randrange(1000) for _ in range(n)]


def answer(engine, rid):
    """The last non-None answer the connector gave for `rid`."""
    got = [a for r, a in engine.lookup_answers if r == rid and a[0] is not None]
    return got[-1] if got else None


def run_ok(engine, max_steps=300):
    engine.run(max_steps)
    assert not engine.errors, "\n".join(engine.errors)


def miss_then_hit(engine, p, tail, first="a", second="b"):
    """Runs request `first` on prompt p (a miss that stores it), then `second` on p + tail;
    returns the connector's answer for `second`."""
    engine.add(first, p)
    run_ok(engine)
    engine.add(second, p + tail)
    run_ok(engine)
    return answer(engine, second)


def pool(daemon):
    return ol.Client(daemon.address)


def shard_namespaces(engine):
    cfg = engine.worker_config(0)
    return ol_keys.all_namespace_names(cfg, engine.extra)


# ---- Miss → store → hit ---------------------------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
def test_miss_store_hit_every_layout(daemon, layout):
    e = MiniEngine(extra(daemon), layout=layout)
    p = prompt(22, 1)  # 5 full blocks of 4 tokens, and 2 more
    e.add("a", p)
    run_ok(e)
    assert answer(e, "a") == (0, False)
    e.add("b", p + [7])
    run_ok(e)
    # 23 tokens: blocks 0..4 are stored; all 5 may load (22 tokens < 23).
    assert answer(e, "b") == (20, False)
    e.shutdown()


@pytest.mark.parametrize("async_save", [False, True])
def test_sync_and_async_saves(daemon, async_save):
    e = MiniEngine(extra(daemon, async_save=async_save))
    p = prompt(30, 2)
    e.add("a", p, max_tokens=3)
    run_ok(e)
    # A fresh engine (a new GPU cache) finds what the first stored.
    f = MiniEngine(extra(daemon, async_save=async_save))
    f.add("b", p + [1, 2])
    run_ok(f)
    assert answer(f, "b") == (28, False)
    e.shutdown()
    f.shutdown()


def test_async_load(daemon):
    e = MiniEngine(extra(daemon, async_load=True))
    p = prompt(26, 3)
    assert miss_then_hit(e, p, [5]) == (24, True)
    assert e.requests["b"].num_output_tokens == 2
    e.shutdown()


@pytest.mark.parametrize("runner", [{"load_after_forward": True}, {"transfer_results": False}])
def test_async_load_with_either_runner(daemon, runner):
    # Newest vLLM launches the forward before start_load_kv when no load is synchronous, and
    # asks get_transfer_results; older runners load first and ask get_finished.
    e = MiniEngine(extra(daemon, async_load=True), **runner)
    p = prompt(18, 4)
    assert miss_then_hit(e, p, [9]) == (16, True)
    e.shutdown()


def test_partial_hit_after_a_middle_block_is_gone(daemon):
    e = MiniEngine(extra(daemon))
    p = prompt(24, 5)
    a = e.add("a", p)
    run_ok(e)
    c = pool(daemon)
    ns = c.find_namespace(shard_namespaces(e)[0])
    assert c.remove(ns, [ol_keys.block_key(a.block_hashes[2])]) == 1
    e.add("b", p + [3])
    run_ok(e)
    assert answer(e, "b") == (8, False)  # blocks 0 and 1 only: the prefix ends at the gap
    e.shutdown()


def test_full_prompt_hit_leaves_a_token_to_compute(daemon):
    e = MiniEngine(extra(daemon))
    p = prompt(20, 6)  # exactly 5 blocks
    e.add("a", p)
    run_ok(e)
    e.add("b", list(p))
    run_ok(e)
    n, is_async = answer(e, "b")
    assert n == 16 and n < len(p)  # never the whole prompt
    e.shutdown()


def test_chunked_prefill_stores_every_full_block(daemon):
    e = MiniEngine(extra(daemon, async_save=False), token_budget=6)
    p = prompt(30, 7)
    a = e.add("a", p)
    run_ok(e)
    assert e.steps >= 5
    c = pool(daemon)
    ns = c.find_namespace(shard_namespaces(e)[0])
    prefix, _ = c.exists(ns, [ol_keys.block_key(h) for h in a.block_hashes[:7]])
    assert prefix == 7
    e.shutdown()


def test_decode_fills_and_stores_new_blocks(daemon):
    e = MiniEngine(extra(daemon))
    p = prompt(14, 8)
    a = e.add("a", p, max_tokens=11)  # 25 tokens: 6 full blocks, 3 of them filled by decode
    run_ok(e)
    full = list(a.all_token_ids[:24])
    e.add("b", full + [1])
    run_ok(e)
    assert answer(e, "b") == (24, False)
    e.shutdown()


def test_decode_blocks_not_saved_when_disabled(daemon):
    e = MiniEngine(extra(daemon, save_decode=False))
    a = e.add("a", prompt(14, 9), max_tokens=11)
    run_ok(e)
    c = pool(daemon)
    ns = c.find_namespace(shard_namespaces(e)[0])
    prefix, _ = c.exists(ns, [ol_keys.block_key(h) for h in a.block_hashes])
    assert prefix == 3  # the prompt's full blocks only
    e.shutdown()


# ---- Preemption, abort, failures --------------------------------------------------------------

def slow(connector, what, seconds):
    mover = connector._mover
    inner = getattr(mover, what)

    def wrapped(*args, **kwargs):
        time.sleep(seconds)
        return inner(*args, **kwargs)

    setattr(mover, what, wrapped)


def test_preemption_during_an_inflight_save_keeps_the_store_right(daemon):
    # 8 GPU blocks, two requests that each grow to 6: one gets preempted while its (slow) async
    # save is still reading its blocks, and the other takes those blocks at once.
    e = MiniEngine(extra(daemon, async_save=True), num_blocks=8, token_budget=32)
    for w in e.workers:
        slow(w.connector, "save", 0.15)
    pa, pb = prompt(16, 10), prompt(16, 11)
    e.add("a", pa, max_tokens=8)
    e.add("b", pb, max_tokens=8)
    run_ok(e, max_steps=400)
    assert sum(r.num_preemptions for r in e.requests.values()) >= 1
    e.shutdown()
    # Whatever was stored must be exactly right: load it all into a fresh engine and compare.
    f = MiniEngine(extra(daemon), num_blocks=64)
    f.add("a2", list(e.requests["a"].all_token_ids[:20]) + [1])
    f.add("b2", list(e.requests["b"].all_token_ids[:20]) + [1])
    run_ok(f)
    assert answer(f, "a2")[0] > 0 and answer(f, "b2")[0] > 0
    f.shutdown()


def test_abort_during_an_async_load_frees_the_blocks_after_done_recving(daemon):
    e = MiniEngine(extra(daemon, async_load=True), num_blocks=32)
    p = prompt(20, 12)
    e.add("a", p)
    run_ok(e)
    for w in e.workers:
        slow(w.connector, "load", 0.3)
    e.add("b", p + [4])
    e.step()
    assert "b" in e.remote_wait
    e.abort("b")
    assert "b" in e.held  # kept until the worker reports the load finished
    run_ok(e)
    assert "b" not in e.held and sorted(e.free_blocks) == list(range(32))
    e.shutdown()


@pytest.mark.parametrize("engine", ["memcpy", "torch"])
def test_a_corrupt_stored_block_is_reported_recomputed_and_replaced(daemon, engine):
    if engine == "memcpy" and KV_DEVICE != "cpu":
        pytest.skip("the memcpy engine needs the KV cache in host memory")
    e = MiniEngine(extra(daemon, async_save=False, copy_engine=engine))
    p = prompt(24, 13)
    a = e.add("a", p)
    run_ok(e)
    c = pool(daemon)
    ns = c.find_namespace(shard_namespaces(e)[0])
    key3 = ol_keys.block_key(a.block_hashes[3])
    batch, hits = c.lookup(ns, [key3])
    slab = c.slab_view()
    off = hits[0][1]
    slab[off + 10] = (slab[off + 10] + 1) % 256  # one flipped byte in the shared slab
    c.release([batch])
    e.add("b", p + [2])
    run_ok(e)
    assert answer(e, "b") == (24, False)   # the pool claimed all six blocks...
    assert e.invalid_seen                  # ...the worker refused the corrupt one
    # b recomputed it and stored it again: a third request loads everything, correctly.
    e.add("c", p + [5])
    run_ok(e)
    assert answer(e, "c") == (24, False)
    e.shutdown()


def test_a_missing_block_at_load_time_is_reported(daemon):
    e = MiniEngine(extra(daemon, async_save=False))
    p = prompt(24, 14)
    a = e.add("a", p)
    run_ok(e)

    # Remove a block between the scheduler's lookup and the worker's load.
    sched = e.scheduler
    inner = sched.build_connector_meta
    c = pool(daemon)
    ns = c.find_namespace(shard_namespaces(e)[0])

    def evict_then_build(out):
        meta = inner(out)
        if meta.loads:
            c.remove(ns, [ol_keys.block_key(a.block_hashes[4])])
        return meta

    sched.build_connector_meta = evict_then_build
    e.add("b", p + [6])
    run_ok(e)
    assert e.invalid_seen
    e.shutdown()


def test_none_lookup_is_asked_again(daemon):
    e = MiniEngine(extra(daemon, lookup="async"))
    p = prompt(18, 15)
    e.add("a", p)
    run_ok(e)
    e.add("b", p + [1])
    run_ok(e)
    answers = [a for r, a in e.lookup_answers if r == "b"]
    assert answers[0] == (None, False)
    assert answer(e, "b") == (16, False)
    e.shutdown()


# ---- Parallelism, processes, lifecycle --------------------------------------------------------

def test_tensor_parallel_two_ranks(daemon):
    e = MiniEngine(extra(daemon), tp=2)
    p = prompt(22, 16)
    a = e.add("a", p)
    run_ok(e)
    names = shard_namespaces(e)
    assert len(names) == 2 and names[0] != names[1]
    c = pool(daemon)
    keys = [ol_keys.block_key(h) for h in a.block_hashes[:5]]
    for name in names:  # each rank stored its own head slice
        assert c.exists(c.find_namespace(name), keys)[0] == 5
    e.add("b", p + [3])
    run_ok(e)
    assert answer(e, "b") == (20, False)
    # One rank's copy gone: the scheduler must not claim it.
    c.remove(c.find_namespace(names[1]), keys[2:3])
    e.add("c", p + [4])
    run_ok(e)
    assert answer(e, "c") == (8, False)
    e.shutdown()


def test_mla(daemon):
    e = MiniEngine(extra(daemon), use_mla=True)
    p = prompt(22, 17)
    assert miss_then_hit(e, p, [3]) == (20, False)
    e.shutdown()


def test_local_prefix_cache_then_the_pool(daemon):
    # The GPU prefix cache still holds blocks 0..2 of the prompt; the pool has all six. The
    # scheduler passes the local hit as num_computed_tokens and the connector supplies only the
    # blocks beyond it (3..5), which land after the local ones.
    e = MiniEngine(extra(daemon), prefix_caching=True)
    p = prompt(24, 18)
    a = e.add("a", p)
    run_ok(e)
    for h in a.block_hashes[3:]:
        e.local_cache.pop(h, None)  # evicted from the GPU cache
    e.add("b", p + [8])
    run_ok(e)
    assert answer(e, "b") == (12, False)
    e.shutdown()


STORE = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {here!r})
    from mini_engine import MiniEngine
    import random
    rng = random.Random(99)
    p = [rng.randrange(1000) for _ in range(22)]
    e = MiniEngine({{"openlake_nodes": [{addr!r}]}})
    e.add("a", p + {tail!r})
    e.run()
    assert not e.errors, e.errors
    hits = [a for r, a in e.lookup_answers if r == "a" and a[0] is not None]
    e.shutdown()
    print("answer", hits[-1][0])
""")


def run_engine_process(daemon, seed, tail):
    env = dict(os.environ)
    if seed is None:
        env.pop("PYTHONHASHSEED", None)
    else:
        env["PYTHONHASHSEED"] = seed
    script = STORE.format(here=str(HERE), addr=daemon.address, tail=tail)
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)


def test_another_process_with_the_same_seed_hits(daemon):
    first = run_engine_process(daemon, "0", [])
    assert first.returncode == 0, first.stderr
    assert "answer 0" in first.stdout
    second = run_engine_process(daemon, "0", [5])
    assert second.returncode == 0, second.stderr
    assert "answer 20" in second.stdout  # all five blocks, from the first process
    other = run_engine_process(daemon, "1", [5])
    assert other.returncode == 0, other.stderr
    assert "answer 0" in other.stdout  # another seed, other hashes: nothing to find


def test_refuses_to_start_without_stable_hashes(daemon):
    r = run_engine_process(daemon, None, [])
    assert r.returncode != 0
    assert "PYTHONHASHSEED" in r.stderr and "UnstableHashError" in r.stderr


def test_reset_cache_and_shutdown_twice(daemon):
    e = MiniEngine(extra(daemon))
    p = prompt(18, 19)
    e.add("a", p)
    run_ok(e)
    assert e.scheduler.reset_cache() is True
    e.add("b", p + [1])
    run_ok(e)
    assert answer(e, "b") == (0, False)
    e.shutdown()
    e.shutdown()  # idempotent


@pytest.mark.parametrize("path", ["kernel", "dma"])
@pytest.mark.parametrize("layout", ["std_lbnhc", "legacy_fa_hnd", "kernel_r2", "mla"])
def test_torch_copy_engine(daemon, layout, path):
    # The engine GPUs use (on host tensors unless OPENLAKE_TEST_DEVICE=cuda): batched gathers
    # and scatters, and each step's crossing between staging and the slab either as one row
    # copy over the whole step or as one copy per run of back-to-back slots.
    e = MiniEngine(extra(daemon, copy_engine="torch", copy_path=path), layout=layout)
    mover = e.workers[0].connector._mover
    assert mover.name == "torch"
    mover.profile = {}  # the stage timing bench/gpu_kv_bench.py --profile reads
    p = prompt(22, 20)
    assert miss_then_hit(e, p, [7]) == (20, False)
    assert {"save: reserve", "save: cross + crc", "load: lookup", "load: scatter"} <= set(mover.profile)
    e.shutdown()


def test_producer_only_never_loads_consumer_only_never_saves(daemon):
    p = prompt(18, 21)
    prod = MiniEngine(extra(daemon), kv_role="kv_producer")
    assert miss_then_hit(prod, p, [1]) == (0, False)
    cons = MiniEngine(extra(daemon), kv_role="kv_consumer")
    cons.add("c", p + [2])
    run_ok(cons)
    assert answer(cons, "c") == (16, False)
    q = prompt(18, 22)
    cons.add("d", q)
    run_ok(cons)
    c = pool(daemon)
    ns = c.find_namespace(shard_namespaces(cons)[0])
    assert c.exists(ns, [ol_keys.block_key(h) for h in cons.requests["d"].block_hashes])[0] == 0
    prod.shutdown()
    cons.shutdown()


def test_unreachable_pool_is_a_miss_not_a_crash(tmp_path):
    # A worker must reach the pool to register its caches; the scheduler alone degrades to
    # misses. Build a scheduler-only connector.
    from mini_engine import FakeVllmConfig, FakeKVTransferConfig, FakeCacheConfig, \
        FakeModelConfig, FakeParallelConfig, FakeSchedulerConfig, Request, none_hash
    from openlake_client.openlake_connector import OpenLakeConnector, KVConnectorRole

    cfg = FakeVllmConfig(
        FakeKVTransferConfig(kv_connector_extra_config={"openlake_nodes": ["127.0.0.1:1"],
                                                        "openlake_timeout_s": 1}),
        FakeCacheConfig(), FakeModelConfig(), FakeParallelConfig(), FakeSchedulerConfig())
    s = OpenLakeConnector(cfg, KVConnectorRole.SCHEDULER, None)
    req = Request("x", prompt(18, 23), 2, 4, none_hash())
    assert s.get_num_new_matched_tokens(req, 0) == (0, False)
    s.shutdown()


VLLM_STUB = textwrap.dedent("""
    import abc, enum, sys, types
    sys.path.insert(0, {here!r})
    names = ["vllm", "vllm.distributed", "vllm.distributed.kv_transfer",
             "vllm.distributed.kv_transfer.kv_connector", "vllm.distributed.kv_transfer.kv_connector.v1"]
    for n in names:
        m = types.ModuleType(n); m.__path__ = []; sys.modules[n] = m
    base = types.ModuleType("vllm.distributed.kv_transfer.kv_connector.v1.base")

    class KVConnectorRole(enum.Enum):
        SCHEDULER = 0
        WORKER = 1

    class KVConnectorMetadata(abc.ABC):
        pass

    class KVConnectorBase_V1(abc.ABC):
        def __init__(self, vllm_config, role{extra_param}):
            self._vllm_config = vllm_config
            self._role = role
            self._connector_metadata = None
        def bind_connector_metadata(self, m): self._connector_metadata = m
        def clear_connector_metadata(self): self._connector_metadata = None
        def _get_connector_metadata(self): return self._connector_metadata
        def has_connector_metadata(self): return self._connector_metadata is not None
        @abc.abstractmethod
        def get_num_new_matched_tokens(self, request, num_computed_tokens): ...
        @abc.abstractmethod
        def update_state_after_alloc(self, request, blocks, num_external_tokens): ...
        @abc.abstractmethod
        def build_connector_meta(self, scheduler_output): ...
        @abc.abstractmethod
        def start_load_kv(self, forward_context, **kwargs): ...
        @abc.abstractmethod
        def wait_for_layer_load(self, layer_name): ...
        @abc.abstractmethod
        def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs): ...
        @abc.abstractmethod
        def wait_for_save(self): ...

    base.KVConnectorRole = KVConnectorRole
    base.KVConnectorMetadata = KVConnectorMetadata
    base.KVConnectorBase_V1 = KVConnectorBase_V1
    sys.modules[base.__name__] = base
    before = {{n for n in sys.modules if n.startswith("vllm")}}
    import openlake_client.openlake_connector as oc
    assert oc.HAVE_VLLM
    assert issubclass(oc.OpenLakeConnector, KVConnectorBase_V1)
    assert {{n for n in sys.modules if n.startswith("vllm")}} == before, "imported more of vLLM"
    from mini_engine import (FakeVllmConfig, FakeKVTransferConfig, FakeCacheConfig,
                             FakeModelConfig, FakeParallelConfig, FakeSchedulerConfig)
    cfg = FakeVllmConfig(FakeKVTransferConfig(kv_connector_extra_config={{
        "openlake_nodes": [{addr!r}]}}), FakeCacheConfig(), FakeModelConfig(),
        FakeParallelConfig(), FakeSchedulerConfig())
    s = oc.OpenLakeConnector(cfg, KVConnectorRole.SCHEDULER, None)   # vLLM's own enum
    assert s._role_name == "SCHEDULER"
    meta = s.build_connector_meta(type("Out", (), {{"scheduled_new_reqs": [],
        "scheduled_cached_reqs": None, "num_scheduled_tokens": {{}}}})())
    assert isinstance(meta, KVConnectorMetadata)
    s.shutdown()
    print("ok")
""")


@pytest.mark.parametrize("extra_param", [", kv_cache_config=None", ""])
def test_subclasses_vllms_base_when_importable(daemon, extra_param):
    # A stand-in for vLLM's leaf module `...kv_connector.v1.base` (the real one cannot be
    # installed here): an ABC with the abstract methods, its own role enum, and either base
    # __init__ signature (with kv_cache_config, newest; without, before Nov 2025).
    script = VLLM_STUB.format(here=str(HERE), addr=daemon.address, extra_param=extra_param)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("ok")


def test_extra_config_values_are_checked():
    from openlake_client.openlake_connector import Settings

    base = {"openlake_nodes": ["127.0.0.1:1"]}
    s = Settings.from_extra({**base, "openlake_copy_path": "dma", "openlake_pin_slab": "eager"})
    assert (s.copy_path, s.pin_slab) == ("dma", "eager")
    d = Settings.from_extra(base)
    assert (d.copy_engine, d.copy_path, d.pin_slab) == ("auto", "auto", "lazy")
    for key, bad in (("openlake_copy_engine", "cuda"), ("openlake_copy_path", "pcie"),
                     ("openlake_pin_slab", "always")):
        with pytest.raises(ValueError, match=key):
            Settings.from_extra({**base, key: bad})


# ---- The disk tier ------------------------------------------------------------------------------

def test_a_hit_after_the_daemon_restarted_on_its_disk_tier(tmp_path):
    tables = f'[kv_disk]\npaths = ["{tmp_path / "tier"}"]\ncapacity_gb = 0.25\n'
    first = Daemon(tmp_path / "first", tables=tables)
    e = MiniEngine(extra(first))
    p = prompt(30, 9)
    e.add("a", p)
    run_ok(e)
    e.shutdown()
    assert first.stop() == 0, first.log.read_text()
    # A new daemon on the same disk tier: the prefix computed before the restart is a hit.
    second = Daemon(tmp_path / "second", tables=tables)
    try:
        f = MiniEngine(extra(second))
        f.add("b", p + [1, 2])
        run_ok(f)
        assert answer(f, "b") == (28, False)
        f.shutdown()
        assert pool(second).stats()["disk_hits"] > 0
    finally:
        assert second.stop() == 0, second.log.read_text()

"""OpenLakeHiCacheStorage (openlake_client.sglang) driven as SGLang's HiCache drives an L3
backend, against a real openlaked: loaded dynamically from the extra config, the host pool
registered, pages backed up with batch_set_v1 in batches of at most 128, found with
batch_exists, prefetched with batch_get_v1 into other host slots and compared byte for byte;
ranks, models and layouts kept apart; the generic flat-page path; verification; clear."""

import hashlib
import threading

import pytest
import torch

import openlake_client as ol
from openlake_client.sglang import (HiCacheStorageConfig, HiCacheStorageExtraInfo,
                                    OpenLakeHiCacheStorage, page_key)
from sglang_standin import HostPool, load_dynamic_backend

STORAGE_BATCH = 128  # SGLang's most pages per storage call


def config(daemon, tp_rank=0, tp_size=1, mla=False, model="org/Tiny-1B", **extra):
    cfg = {"backend_name": "openlake", "module_path": "openlake_client.sglang",
           "class_name": "OpenLakeHiCacheStorage", "interface_v1": 1,
           "openlake_nodes": [daemon.address]}
    cfg.update(extra)
    return HiCacheStorageConfig(tp_rank=tp_rank, tp_size=tp_size, pp_rank=0, pp_size=1,
                                attn_cp_rank=0, attn_cp_size=1, is_mla_model=mla,
                                enable_storage_metrics=False, is_page_first_layout=True,
                                model_name=model, extra_config=cfg)


def keys_for(prompt, n):
    """SGLang's page keys: hex SHA-256 digests chained along the prompt."""
    out, parent = [], b""
    for i in range(n):
        parent = hashlib.sha256(parent + f"{prompt}:{i}".encode()).digest()
        out.append(parent.hex())
    return out


def backup(backend, pool, keys, seed):
    """Fills fresh host pages and writes them back as the backup thread does; returns the
    pages' indices and bytes."""
    idx = pool.alloc(len(keys) * pool.page_size)
    pool.fill(idx, seed)
    for i in range(0, len(keys), STORAGE_BATCH):
        ids = idx[i * pool.page_size:(i + STORAGE_BATCH) * pool.page_size]
        ok = backend.batch_set_v1(keys[i:i + STORAGE_BATCH], ids,
                                  HiCacheStorageExtraInfo(prefix_keys=keys[:i] or None))
        assert ok == [True] * len(keys[i:i + STORAGE_BATCH])
    return idx, pool.page_bytes(idx)


def stored(daemon, tag, n, seed, **pool_args):
    """A backend on a fresh host pool with n pages of prompt `tag` backed up; and a client and
    the backend's namespace, to reach into the pool."""
    pool = HostPool(**pool_args)
    backend = load_dynamic_backend(config(daemon), pool)
    keys = keys_for(tag, n)
    backup(backend, pool, keys, seed)
    c = ol.Client(daemon.address)
    return pool, backend, keys, c, c.find_namespace(backend.namespace_name())


def prefetch(backend, pool, keys):
    """batch_exists then batch_get_v1 into freshly allocated host pages, as a prefetch does;
    returns the leading pages loaded and their bytes."""
    hit = 0
    for i in range(0, len(keys), STORAGE_BATCH):
        n = backend.batch_exists(keys[i:i + STORAGE_BATCH], HiCacheStorageExtraInfo())
        assert isinstance(n, int)
        hit += n
        if n < len(keys[i:i + STORAGE_BATCH]):
            break
    if hit == 0:
        return 0, []
    idx = pool.alloc(hit * pool.page_size)
    ok = backend.batch_get_v1(keys[:hit], idx, HiCacheStorageExtraInfo())
    assert isinstance(ok, list) and len(ok) == hit
    loaded = next((i for i, v in enumerate(ok) if not v), hit)
    got = pool.page_bytes(idx[:loaded * pool.page_size]) if loaded else []
    pool.free(idx)
    return loaded, got


@pytest.mark.parametrize("layout,mla", [("page_first", False), ("layer_first", False),
                                        ("page_first_direct", False), ("page_first", True),
                                        ("layer_first", True)])
def test_backup_then_prefetch_byte_exact(daemon, layout, mla):
    pool = HostPool(layout=layout, mla=mla, pages=80)
    backend = load_dynamic_backend(config(daemon, mla=mla), pool)
    assert isinstance(backend, OpenLakeHiCacheStorage)
    keys = keys_for("p", 30)
    assert backend.batch_exists(keys) == 0
    _, written = backup(backend, pool, keys, seed=1)
    assert backend.batch_exists(keys) == 30
    loaded, got = prefetch(backend, pool, keys)
    assert loaded == 30 and got == written
    s = backend.stats()
    assert s["set_stored"] == 30 and s["get_hits"] == 30 and s["errors"] == 0
    # A second backup of the same pages writes nothing again.
    idx = pool.alloc(30 * pool.page_size)
    assert backend.batch_set_v1(keys, idx) == [True] * 30
    assert backend.stats()["set_skipped"] == 30
    backend.close()


def test_more_pages_than_one_storage_batch(daemon):
    pool = HostPool(pages=640, layer_num=1, head_num=1, head_dim=8)
    backend = load_dynamic_backend(config(daemon), pool)
    keys = keys_for("long", 300)
    _, written = backup(backend, pool, keys, seed=2)
    loaded, got = prefetch(backend, pool, keys)
    assert loaded == 300 and got == written


def test_leading_run_only(daemon):
    pool, backend, keys, c, ns = stored(daemon, "hole", 10, seed=3)
    assert c.remove(ns, [page_key(keys[6])]) == 1
    assert backend.batch_exists(keys) == 6
    idx = pool.alloc(10 * pool.page_size)
    assert backend.batch_get_v1(keys, idx) == [True] * 6 + [False] * 4
    assert backend.exists(keys[0]) and not backend.exists(keys[6])


def test_ranks_models_and_layouts_are_apart(daemon):
    keys = keys_for("shared", 8)
    pool0 = HostPool()
    rank0 = load_dynamic_backend(config(daemon, tp_rank=0, tp_size=2), pool0)
    _, written = backup(rank0, pool0, keys, seed=4)
    # MHA: another TP rank holds other heads, so it finds nothing of rank 0's.
    rank1 = load_dynamic_backend(config(daemon, tp_rank=1, tp_size=2), HostPool())
    assert rank1.batch_exists(keys) == 0
    # Another model, another layout: nothing either.
    assert load_dynamic_backend(config(daemon, tp_rank=0, tp_size=2, model="org/Other"),
                                HostPool()).batch_exists(keys) == 0
    assert load_dynamic_backend(config(daemon, tp_rank=0, tp_size=2),
                                HostPool(layout="layer_first")).batch_exists(keys) == 0
    # The same rank of the same model and layout (a restarted server) hits.
    again = HostPool()
    loaded, got = prefetch(load_dynamic_backend(config(daemon, tp_rank=0, tp_size=2), again),
                           again, keys)
    assert loaded == 8 and got == written


def test_mla_pages_are_shared_by_every_rank(daemon):
    keys = keys_for("mla", 6)
    pool0 = HostPool(mla=True)
    _, written = backup(load_dynamic_backend(config(daemon, 0, 4, mla=True), pool0), pool0, keys, 5)
    pool3 = HostPool(mla=True)
    rank3 = load_dynamic_backend(config(daemon, 3, 4, mla=True), pool3)
    loaded, got = prefetch(rank3, pool3, keys)
    assert loaded == 6 and got == written


def test_a_corrupt_page_is_a_miss_never_wrong_bytes(daemon):
    pool, backend, keys, c, ns = stored(daemon, "bad", 5, seed=6)
    batch, hits = c.lookup(ns, [page_key(keys[2])])
    slab = torch.frombuffer(c.slab_view(), dtype=torch.uint8)
    offset = hits[0][1]
    slab[offset + 7] ^= 0xFF
    c.release([batch])
    idx = pool.alloc(5 * pool.page_size)
    assert backend.batch_get_v1(keys, idx) == [True, True, False, False, False]


def test_generic_flat_page_path(daemon):
    pool = HostPool(layout="layer_first")
    backend = load_dynamic_backend(config(daemon), pool)
    keys = keys_for("flat", 4)
    idx = pool.alloc(4 * pool.page_size)
    pool.fill(idx, 7)
    pages = [pool.get_data_page(int(s)).contiguous() for s in idx[::pool.page_size]]
    assert backend.batch_set(keys, pages) is True
    assert backend.set(keys_for("flat1", 1)[0], pages[0]) is True
    out = backend.batch_get(keys + keys_for("absent", 1),
                            [pool.get_dummy_flat_data_page() for _ in range(5)])
    assert all(torch.equal(a, b) for a, b in zip(out[:4], pages)) and out[4] is None
    one = backend.get(keys[1])
    assert torch.equal(one, pages[1])
    with pytest.raises(ValueError):
        backend.set(keys[0], torch.zeros(3, dtype=pool.dtype))


def test_backup_and_prefetch_threads_at_once(daemon):
    pool = HostPool(pages=200)
    backend = load_dynamic_backend(config(daemon), pool)
    base = keys_for("base", 20)
    _, written = backup(backend, pool, base, seed=8)
    lock = threading.Lock()  # the stand-in pool's allocator is not thread-safe; SGLang's is locked
    errors = []

    def writer(t):
        try:
            ks = keys_for(f"w{t}", 10)
            with lock:
                idx = pool.alloc(10 * pool.page_size)
                pool.fill(idx, 100 + t)
            assert backend.batch_set_v1(ks, idx) == [True] * 10
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    def reader():
        try:
            for _ in range(5):
                assert backend.batch_exists(base) == 20
                with lock:
                    idx = pool.alloc(20 * pool.page_size)
                assert backend.batch_get_v1(base, idx) == [True] * 20
                with lock:
                    got = pool.page_bytes(idx)
                    pool.free(idx)
                assert got == written
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(3)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


def test_clear_stats_and_errors(daemon):
    pool, backend, keys, _, _ = stored(daemon, "c", 3, seed=9)
    assert backend.get_stats() is None  # storage metrics off
    assert backend.clear() is True
    assert backend.batch_exists(keys) == 0
    # Not registered: a clear error, not a crash in a daemon thread.
    bare = OpenLakeHiCacheStorage(config(daemon), {})
    with pytest.raises(RuntimeError, match="register_mem_pool_host"):
        bare.batch_exists(keys)
    # The pool's pointers must cover the page: a wrong pool is reported as failed pages.
    idx = pool.alloc(2 * pool.page_size)
    assert backend.batch_get_v1(keys[:3], idx) == [False, False, False]
    with pytest.raises(ValueError, match="Missing required field"):
        load_dynamic_backend(HiCacheStorageConfig(0, 1, 0, 1, 0, 1, False, False, True, "m",
                                                  extra_config={"backend_name": "x"}), pool)


def test_unreachable_daemon_is_a_clear_error(tmp_path):
    class Nowhere:
        address = "127.0.0.1:1"
    with pytest.raises(ol.OpenLakeError):
        OpenLakeHiCacheStorage(config(Nowhere(), openlake_timeout_s=1), {})

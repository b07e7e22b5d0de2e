"""The Python binding of the KV client, against a real openlaked."""

import subprocess
import sys

import pytest
import torch

import openlake_client as ol

FP = {"model": "py-test", "dtype": "float16", "layout": "NHD", "num_layers": 2,
      "num_kv_heads": 2, "head_size": 8, "block_tokens": 4}


def test_put_get_exists_stats(daemon):
    c = ol.Client(daemon.address)
    assert c.has_slab and c.slab_bytes > 0
    ns = c.open_namespace("py/tp0", FP, 4096)
    assert ns.block_bytes == 4096
    blocks = [torch.randint(0, 255, (4096,), dtype=torch.uint8) for _ in range(3)]
    keys = [bytes([i]) * 32 for i in range(3)]
    # Each block in two pieces, to exercise the scatter list.
    pieces = [[(b.data_ptr(), 1000), (b.data_ptr() + 1000, 3096)] for b in blocks]
    assert c.put(ns, keys, pieces) == 3
    out = [torch.zeros(4096, dtype=torch.uint8) for _ in range(3)]
    loaded, states = c.get(ns, keys, [[(o.data_ptr(), 4096)] for o in out])
    assert loaded == 3 and states == [ol.LOADED] * 3
    assert all(torch.equal(a, b) for a, b in zip(blocks, out))
    prefix, present = c.exists(ns, keys + [b"\xee" * 32])
    assert prefix == 3 and present == [True, True, True, False]
    s = c.stats()
    assert s["committed_blocks"] == 3 and s["namespaces"] == 1 and s["sessions"] >= 1
    assert c.find_namespace("py/tp0").id == ns.id
    assert c.remove(ns, keys[1:2]) == 1
    assert c.exists(ns, keys)[0] == 1


def test_slab_view_is_shared_memory(daemon):
    c = ol.Client(daemon.address)
    ns = c.open_namespace("py/view", FP, 4096)
    grants = c.reserve(ns, 1)
    slot, offset, generation = grants[0]
    view = c.slab_view()
    slab = torch.frombuffer(view, dtype=torch.uint8)  # zero copy
    slab[offset:offset + 4096] = 42
    crc = ol.crc64_at(c.slab_address + offset, 4096)
    assert crc == ol.crc64(bytes([42]) * 4096)
    c.commit(ns, [(slot, b"k" * 32, crc, 0)])
    # Another client (another mapping) reads the same bytes.
    d = ol.Client(daemon.address)
    out = torch.zeros(4096, dtype=torch.uint8)
    assert d.get(d.open_namespace("py/view", FP, 4096), [b"k" * 32], [[(out.data_ptr(), 4096)]])[0] == 1
    assert int(out[0]) == 42 and int(out[-1]) == 42


def test_errors_map_to_python_exceptions(daemon):
    c = ol.Client(daemon.address)
    c.open_namespace("py/err", FP, 4096)
    other = dict(FP, dtype="bfloat16")
    with pytest.raises(ol.PreconditionError) as e:
        c.open_namespace("py/err", other, 4096)
    assert "dtype: bfloat16 requested vs float16 stored" in str(e.value)
    assert e.value.code == "FAILED_PRECONDITION"
    with pytest.raises(ol.NotFoundError) as nf:
        c.find_namespace("nope")
    assert isinstance(nf.value, KeyError)
    with pytest.raises(ol.UnavailableError) as un:
        ol.Client("127.0.0.1:1", timeout=1, connect_timeout=1)
    assert isinstance(un.value, ConnectionError)
    with pytest.raises(ValueError):
        c.exists(c.find_namespace("py/err"), [b"x" * 33])
    with pytest.raises(ol.InvalidArgumentError):
        ns = c.find_namespace("py/err")
        c.put(ns, [b"a" * 32], [[(1, 10)]])  # wrong size: refused before any copy


def test_pool_full_is_pool_full_error(tmp_path):
    from conftest import Daemon

    d = Daemon(tmp_path, capacity_gb=0.03125, segment_mb=1)  # 30 segments × 3 slots of 256 KiB
    try:
        c = ol.Client(d.address)
        ns = c.open_namespace("py/full", FP, 256 << 10)
        buf = torch.zeros(256 << 10, dtype=torch.uint8)
        keys = [i.to_bytes(4, "little") * 8 for i in range(90)]
        assert c.put(ns, keys, [[(buf.data_ptr(), buf.numel())]] * 90) == 90
        batch, hits = c.lookup(ns, keys)  # pins everything
        assert len(hits) == 90
        with pytest.raises(ol.PoolFullError):
            c.put(ns, [b"n" * 32], [[(buf.data_ptr(), buf.numel())]])
        c.release([batch])
    finally:
        assert d.stop() == 0


def test_module_entry_point(daemon):
    r = subprocess.run([sys.executable, "-m", "openlake_client", "--address", daemon.address],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"openlake-vllm {ol.__version__}")
    assert "up; slab" in r.stdout
    down = subprocess.run([sys.executable, "-m", "openlake_client", "--address", "127.0.0.1:1",
                           "--timeout", "1"], capture_output=True, text=True, timeout=60)
    assert down.returncode == 1 and "not answering" in down.stderr

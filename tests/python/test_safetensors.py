"""openlake_client.safetensors against a real openlaked in storage mode: the format checked
against bytes built here from its specification, both ways; round trips of every dtype; lazy
reads that fetch only the tensor asked for; malformed objects refused."""

import json
import struct

import pytest

torch = pytest.importorskip("torch")

import openlake_client as ol  # noqa: E402
from openlake_client import safetensors  # noqa: E402


@pytest.fixture
def st(ckpt_store):
    ckpt_store.transfer.create_bucket("weights")
    return ckpt_store


def spec_file(entries, data, metadata=None):
    """A safetensors file as its specification describes it, built independently."""
    header = dict(entries)
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + data


def test_reads_a_file_built_from_the_specification(st):
    data = struct.pack("<2f", 1.5, -2.0) + struct.pack("<q", 42) + bytes([1, 0, 1])
    raw = spec_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                     "b": {"dtype": "I64", "shape": [], "data_offsets": [8, 16]},
                     "c": {"dtype": "BOOL", "shape": [3], "data_offsets": [16, 19]}},
                    data, {"format": "pt"})
    st.transfer.put_many("weights", [("spec.safetensors", raw)])
    f = safetensors.open_file("s3://weights/spec.safetensors", st)
    assert sorted(f.keys()) == ["a", "b", "c"] and f.metadata() == {"format": "pt"}
    assert torch.equal(f.get_tensor("a"), torch.tensor([1.5, -2.0]))
    assert f.get_tensor("b").item() == 42 and f.get_tensor("b").shape == ()
    assert torch.equal(f.get_tensor("c"), torch.tensor([True, False, True]))


def test_writes_what_the_specification_reads(st):
    tensors = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3),
               "h": torch.tensor([1, 2, 3], dtype=torch.int16)}
    safetensors.save_file(tensors, "s3://weights/ours.safetensors", st, {"step": "7"})
    size, _ = st.transfer.head("weights", "ours.safetensors")
    raw = bytearray(size)
    st.transfer.get_many("weights", [("ours.safetensors", 0, raw)])
    (n,) = struct.unpack_from("<Q", raw)
    assert (8 + n) % 8 == 0
    header = json.loads(raw[8:8 + n])
    assert header.pop("__metadata__") == {"step": "7"}
    for name, t in tensors.items():
        e = header[name]
        assert e["shape"] == list(t.shape)
        begin, end = e["data_offsets"]
        assert bytes(raw[8 + n + begin:8 + n + end]) == t.numpy().tobytes()
        assert begin % t.element_size() == 0
    assert header["w"]["dtype"] == "F32" and header["h"]["dtype"] == "I16"


def test_every_dtype_round_trips_and_reads_are_lazy(st):
    torch.manual_seed(3)
    tensors = {
        "f64": torch.randn(5, dtype=torch.float64), "f32": torch.randn(300, 1000),
        "f16": torch.randn(7, 3).half(), "bf16": torch.randn(64).to(torch.bfloat16),
        "i64": torch.arange(9), "i32": torch.arange(4, dtype=torch.int32),
        "i8": torch.tensor([-1, 2], dtype=torch.int8), "u8": torch.tensor([255], dtype=torch.uint8),
        "bool": torch.tensor([True, False]), "scalar": torch.tensor(2.5),
        "empty": torch.empty(0, 8), "strided": torch.randn(10, 10).t(),
    }
    url = "s3://weights/all.safetensors"
    safetensors.save_file(tensors, url, st)
    got = safetensors.load_file(url, st)
    assert got.keys() == tensors.keys()
    for k, v in tensors.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape and torch.equal(got[k], v), k
    f = safetensors.open_file(url, st)
    before = st.transfer.counters()["bytes_received"]
    small = f.get_tensors(["i8", "u8"])
    assert st.transfer.counters()["bytes_received"] - before == 3  # only their bytes
    assert torch.equal(small["i8"], tensors["i8"])
    with pytest.raises(KeyError):
        f.get_tensor("absent")


def test_malformed_objects_are_refused(st):
    st.transfer.put_many("weights", [("short", b"1234"), ("huge", struct.pack("<Q", 1 << 40)),
                                     ("notjson", struct.pack("<Q", 8) + b"{nope!!}")])
    bad = spec_file({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}, b"\0" * 8)
    st.transfer.put_many("weights", [("badshape", bad)])
    for key in ("short", "huge", "notjson", "badshape"):
        with pytest.raises(ol.DataLossError):
            safetensors.open_file(f"s3://weights/{key}", st)
    with pytest.raises(ol.NotFoundError):
        safetensors.open_file("s3://weights/absent", st)
    with pytest.raises(ValueError):
        safetensors.save_file({"c": torch.randn(2, dtype=torch.complex64)}, "s3://weights/c", st)


def test_a_progress_bar_counts_the_object_and_the_tensors(st, fake_stderr, tqdm_bars):
    err = fake_stderr()
    tensors = {"w": torch.randn(500, 1000), "b": torch.zeros(10, dtype=torch.int8)}
    data = sum(t.numel() * t.element_size() for t in tensors.values())
    url = "s3://weights/bar.safetensors"
    seen = []
    safetensors.save_file(tensors, url, st, progress=lambda d, n: seen.append((d, n)),
                          progress_bar=True)
    size, _ = st.transfer.head("weights", "bar.safetensors")
    assert seen[-1] == (size, size)
    got = safetensors.load_file(url, st, progress_bar=True)
    assert torch.equal(got["w"], tensors["w"])
    # The upload is the whole object (header and data); the load only the tensors' bytes.
    assert [(b.desc, b.n, b.total) for b in tqdm_bars] == [("save", size, size),
                                                           ("load", data, data)]
    assert "save: 100%" in err.getvalue() and "load: 100%" in err.getvalue()
    # Left to itself, with stderr no terminal: no bar, the callback as ever.
    seen.clear()
    safetensors.load_file(url, st, progress=lambda d, n: seen.append((d, n)))
    assert seen[-1] == (data, data) and len(tqdm_bars) == 2

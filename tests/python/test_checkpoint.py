"""openlake_client.checkpoint against a real openlaked in storage mode: torch's distributed
checkpoint API (Debian's torch 1.13: torch.distributed._shard.checkpoint) saving to and loading
from a bucket, through the writer and reader and the one-process helpers."""

import signal
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import openlake_client as ol  # noqa: E402
from openlake_client import checkpoint  # noqa: E402


def model_state():
    torch.manual_seed(7)
    return {
        "embed.weight": torch.randn(1100, 256),                 # 1.1 MB: its own object
        "layer.0.weight": torch.randn(64, 64).to(torch.bfloat16),
        "layer.0.bias": torch.zeros(64, dtype=torch.float16),
        "scalar": torch.tensor(3.5),
        "steps": torch.arange(10, dtype=torch.int64),
        "empty": torch.empty(0, 4),
        "config": {"lr": 0.001, "name": "run-1"},               # pickled, packed
    }


def same(a, b):
    assert a.keys() == b.keys()
    for k, v in a.items():
        if isinstance(v, torch.Tensor):
            assert v.dtype == b[k].dtype and v.shape == b[k].shape, k
            assert torch.equal(v, b[k]), k
        else:
            assert v == b[k], k


@pytest.fixture
def ckpt(ckpt_store):
    ckpt_store.transfer.create_bucket("ckpt")
    return ckpt_store


def test_save_then_load_a_new_state_dict(ckpt, store):
    state = model_state()
    seen = []
    checkpoint.save(state, "s3://ckpt/run1/step-100", ckpt,
                    progress=lambda d, n: seen.append((d, n)))
    assert seen and seen[-1][0] == seen[-1][1]
    keys = {k for k, _, _ in ckpt.transfer.list("ckpt", "run1/step-100/")}
    assert "run1/step-100/.metadata" in keys
    # The large tensor is an object of its own; the small ones share one per rank.
    assert len(keys) == 3
    got = checkpoint.load("s3://ckpt/run1/step-100", ckpt)
    same(state, got)


def test_load_into_preallocated_tensors_in_place(ckpt):
    state = model_state()
    checkpoint.save(state, "s3://ckpt/run1/inplace", ckpt)
    dest = {k: (torch.empty_like(v) if isinstance(v, torch.Tensor) else None)
            for k, v in state.items()}
    before = dest["embed.weight"].data_ptr()
    checkpoint.load_into(dest, "s3://ckpt/run1/inplace", ckpt)
    same(state, dest)
    assert dest["embed.weight"].data_ptr() == before  # read into the tensor, not replaced
    # A destination of another layout (non-contiguous) is filled through a staging tensor.
    t = torch.empty(256, 1100).t()
    checkpoint.load_into({"embed.weight": t}, "s3://ckpt/run1/inplace", ckpt)
    assert torch.equal(t, state["embed.weight"])


def test_a_resave_replaces_the_old_and_cleans_up(ckpt):
    checkpoint.save({"w": torch.ones(300_000)}, "s3://ckpt/run2/latest", ckpt)
    checkpoint.save({"w": torch.full((300_000,), 2.0)}, "s3://ckpt/run2/latest", ckpt)
    got = checkpoint.load("s3://ckpt/run2/latest", ckpt)
    assert torch.equal(got["w"], torch.full((300_000,), 2.0))
    keys = [k for k, _, _ in ckpt.transfer.list("ckpt", "run2/latest/")]
    assert len(keys) == 2  # .metadata and the new save's one object


def test_corruption_and_absence_are_errors(ckpt):
    checkpoint.save({"w": torch.randn(400_000)}, "s3://ckpt/run3/c", ckpt)
    data = [k for k, _, _ in ckpt.transfer.list("ckpt", "run3/c/data/")]
    assert len(data) == 1
    size, _ = ckpt.transfer.head("ckpt", data[0])
    raw = bytearray(size)
    ckpt.transfer.get_many("ckpt", [(data[0], 0, raw)])
    raw[1000] ^= 0xFF
    ckpt.transfer.put_many("ckpt", [(data[0], raw)])
    with pytest.raises(ol.DataLossError, match="CRC-64"):
        checkpoint.load("s3://ckpt/run3/c", ckpt)
    with pytest.raises(ol.NotFoundError):
        checkpoint.load("s3://ckpt/never/saved", ckpt)
    with pytest.raises(ValueError):
        checkpoint.load("/local/path", ckpt)


def test_a_save_killed_midway_leaves_the_previous_checkpoint(ckpt, store, tmp_path):
    checkpoint.save({"w": torch.ones(1_000_000)}, "s3://ckpt/run4/latest", ckpt)
    # A second process starts saving over it and is killed before its metadata goes up.
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent(f"""
        import os, signal, torch
        from openlake_client import checkpoint
        s = checkpoint.Store({store.endpoint!r}, {store.access_key!r}, {store.secret_key!r})
        def die(self, metadata, results):
            os.kill(os.getpid(), signal.SIGKILL)
        checkpoint.OpenLakeWriter.finish = die
        checkpoint.save({{"w": torch.zeros(1_000_000)}}, "s3://ckpt/run4/latest", s)
    """))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, timeout=120)
    assert r.returncode == -signal.SIGKILL, r.stderr.decode()
    got = checkpoint.load("s3://ckpt/run4/latest", ckpt)
    assert torch.equal(got["w"], torch.ones(1_000_000))


def test_async_save_returns_before_the_upload_and_keeps_the_snapshot(ckpt):
    state = {"w": torch.randn(2_000_000), "opt": {"step": 5, "m": torch.zeros(1000)}}
    expected = {"w": state["w"].clone(), "opt": {"step": 5, "m": torch.zeros(1000)}}
    handle = checkpoint.async_save(state, "s3://ckpt/run5/async", ckpt)
    assert handle.resume_seconds < 5
    state["w"].add_(1.0)  # training goes on at once
    state["opt"]["m"].fill_(9.0)
    handle.wait(120)
    assert handle.done() and handle.seconds >= handle.resume_seconds
    got = checkpoint.load("s3://ckpt/run5/async", ckpt)
    assert torch.equal(got["w"], expected["w"])
    assert got["opt"]["step"] == 5 and torch.equal(got["opt"]["m"], expected["opt"]["m"])
    # The next save refills the first one's snapshot memory.
    buf = handle.snapshot["w"].data_ptr()
    state["w"].add_(1.0)
    second = state["w"].clone()
    again = checkpoint.async_save(state, "s3://ckpt/run5/async2", ckpt, reuse=handle)
    assert again.snapshot["w"].data_ptr() == buf and handle.snapshot is None
    again.wait(120)
    assert torch.equal(checkpoint.load("s3://ckpt/run5/async2", ckpt)["w"], second)
    # A failing save hands its error to wait().
    bad = checkpoint.async_save({"w": torch.ones(10)}, "s3://nobucket/x", ckpt)
    with pytest.raises(ol.NotFoundError):
        bad.wait(60)


def tensor_bytes(state):
    return sum(v.numel() * v.element_size() for v in state.values())


def test_a_progress_bar_counts_every_byte_of_a_save_and_a_load(ckpt, fake_stderr, tqdm_bars):
    err = fake_stderr()
    # One tensor an object of its own, two packed: each transfer carries exactly their bytes.
    state = {"w": torch.randn(700_000), "b": torch.zeros(1000), "s": torch.arange(5)}
    total = tensor_bytes(state)
    seen = []
    checkpoint.save(state, "s3://ckpt/bar/a", ckpt, progress=lambda d, n: seen.append((d, n)),
                    progress_bar=True)
    assert seen[-1] == (total, total)  # the callback hears the transfer as before
    got = checkpoint.load("s3://ckpt/bar/a", ckpt, progress_bar=True)
    assert torch.equal(got["w"], state["w"])
    assert [(b.desc, b.n, b.total) for b in tqdm_bars] == [("save", total, total),
                                                           ("load", total, total)]
    # Drawn on stderr, and ended there at the full size.
    shown = tqdm_bars[0].format_sizeof(total, divisor=1024)
    # (tqdm may draw a finished bar more than once, when it refreshes and when it closes.)
    assert "save: 100%" in err.getvalue() and "load: 100%" in err.getvalue()
    assert f"{shown}/{shown}" in err.getvalue()


def test_no_progress_bar_unless_interactive(ckpt, fake_stderr, tqdm_bars):
    err = fake_stderr()
    state = {"w": torch.randn(300_000)}
    seen = []
    checkpoint.save(state, "s3://ckpt/bar/quiet", ckpt, progress=lambda d, n: seen.append((d, n)))
    checkpoint.load_into(state, "s3://ckpt/bar/quiet", ckpt)
    assert seen[-1] == (tensor_bytes(state), tensor_bytes(state))
    assert not tqdm_bars and err.getvalue() == ""  # stderr is no terminal
    checkpoint.save(state, "s3://ckpt/bar/quiet", ckpt, progress_bar=False)
    assert not tqdm_bars
    err.tty = True  # a terminal: a bar by default, for the load too
    checkpoint.save(state, "s3://ckpt/bar/quiet", ckpt)
    checkpoint.load_into(state, "s3://ckpt/bar/quiet", ckpt)
    checkpoint.save(state, "s3://ckpt/bar/quiet", ckpt, progress_bar=False)
    assert [b.desc for b in tqdm_bars] == ["save", "load"]


def test_an_async_save_shows_a_bar_only_when_asked(ckpt, fake_stderr, tqdm_bars):
    err = fake_stderr()
    err.tty = True
    state = {"w": torch.randn(300_000)}
    checkpoint.async_save(state, "s3://ckpt/bar/async", ckpt).wait(120)
    assert not tqdm_bars and err.getvalue() == ""  # in the background: none by default
    checkpoint.async_save(state, "s3://ckpt/bar/async", ckpt, progress_bar=True).wait(120)
    assert [(b.n, b.total) for b in tqdm_bars] == [(tensor_bytes(state), tensor_bytes(state))]


def test_a_bar_asked_for_without_tqdm_is_a_warning(ckpt, fake_stderr, monkeypatch):
    err = fake_stderr()
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm fails
    state = {"w": torch.randn(300_000)}
    seen = []
    with pytest.warns(UserWarning, match="python3-tqdm"):
        checkpoint.save(state, "s3://ckpt/bar/none", ckpt,
                        progress=lambda d, n: seen.append((d, n)), progress_bar=True)
    assert seen[-1] == (tensor_bytes(state), tensor_bytes(state))
    err.tty = True
    checkpoint.load("s3://ckpt/bar/none", ckpt)  # left to itself: quietly no bar
    assert err.getvalue() == ""

"""Fixtures for the Python tests: a real openlaked per test, on loopback.

Run by meson (`meson test --suite integration`), which sets OPENLAKED and PYTHONPATH; by hand:
    PYTHONPATH=build/bindings/python OPENLAKED=build/tools/openlaked/openlaked \\
        python3 -m pytest tests/python
"""

import ctypes
import io
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from openlake_client.local_daemon import LocalDaemon

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# Block hashes must agree across processes (the connector refuses to start otherwise).
os.environ.setdefault("PYTHONHASHSEED", "0")


def _openlaked() -> str:
    path = os.environ.get("OPENLAKED") or str(HERE.parents[1] / "build/tools/openlaked/openlaked")
    if not os.access(path, os.X_OK):
        pytest.exit(f"openlaked not found at {path}; build first or set OPENLAKED", returncode=2)
    return path


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Daemon(LocalDaemon):
    def __init__(self, tmp: Path, capacity_gb: float = 0.25, segment_mb: int = 4,
                 top: str = "", tables: str = "", lease_secs: int = 60, **where: Any):
        """`where`: host, port, env and argv_prefix, as LocalDaemon takes them."""
        super().__init__(_openlaked(), tmp, capacity_gb,
                         slab_settings=f"segment_mb = {segment_mb}\n"
                                       f"reserve_ttl_secs = {lease_secs}\n{tables}",
                         stop_timeout=20, preexec_fn=_die_with_parent, top_settings=top, **where)


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path)
    yield d
    assert d.stop() == 0, d.log.read_text()


@pytest.fixture
def openlaked_path():
    return _openlaked()


@pytest.fixture
def store(tmp_path):
    """A real openlaked in storage mode over four drive folders (RS(2+2)), S3 on loopback."""
    from openlake_client.local_store import LocalStore

    s = LocalStore(_openlaked(), tmp_path / "store", drives=4, preexec_fn=_die_with_parent)
    yield s
    assert s.stop() == 0, s.log.read_text()


@pytest.fixture
def ckpt_store(store):
    """openlake_client.checkpoint.Store on `store`: four connections, 5 MiB parts."""
    from openlake_client import checkpoint

    return checkpoint.Store(store.endpoint, store.access_key, store.secret_key, connections=4,
                            part_size=5 << 20)


class FakeStderr(io.StringIO):
    """A captured stderr that says it is a terminal when `tty` is set."""
    tty = False

    def isatty(self) -> bool:
        return self.tty


@pytest.fixture
def fake_stderr(monkeypatch):
    """`err = fake_stderr()` replaces sys.stderr by a FakeStderr (no terminal until
    `err.tty = True`): where progress bars go, and what openlake_client.progress asks whether
    the run is interactive. Called in the test itself: pytest installs its own capture as
    sys.stderr after the fixtures are set up."""
    def install() -> FakeStderr:
        err = FakeStderr()
        monkeypatch.setattr(sys, "stderr", err)
        return err
    return install


@pytest.fixture
def tqdm_bars(monkeypatch):
    """Every tqdm bar opened during the test, kept after it closes for its final count
    (`n`, `total`); skips the test where tqdm is not installed."""
    tqdm = pytest.importorskip("tqdm")
    opened = []

    class Kept(tqdm.tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            opened.append(self)

    monkeypatch.setattr(tqdm, "tqdm", Kept)  # progress.py imports it when it opens a bar
    return opened

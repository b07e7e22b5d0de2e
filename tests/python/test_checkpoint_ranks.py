"""Checkpoints across ranks: two processes joined by torch.distributed (gloo on loopback) save
one state dict (ShardedTensors, of which each rank holds and writes its own rows, and
replicated values the coordinator writes) to one openlaked, with torch's save_state_dict and
with async_save while the main thread keeps running collectives of its own; the checkpoint,
read back whole in one process, holds every rank's rows."""
import socket
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch without gloo", allow_module_level=True)

from openlake_client import checkpoint  # noqa: E402

WORKER = Path(__file__).with_name("ckpt_rank_worker.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ranks_save_sync_and_async_into_one_checkpoint(store, ckpt_store):
    ckpt_store.transfer.create_bucket("ckpt")
    world, port = 2, free_port()
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(r), str(world), str(port),
                               store.endpoint, store.access_key, store.secret_key],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(world)]
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        outs.append(out)
    assert [p.returncode for p in procs] == [0] * world, "\n".join(outs)

    rows = 300_000
    for name, bump in (("sync", 0.0), ("async", 0.0), ("async2", 100.0)):
        got = checkpoint.load(f"s3://ckpt/ranks/{name}", ckpt_store)
        assert set(got) == {"w", "b", "bias", "step"}, name
        assert got["step"] == 7 and torch.equal(got["bias"], torch.arange(5.0))
        want = torch.cat([torch.full((rows,), r + 1 + bump) for r in range(world)])
        assert torch.equal(got["w"], want), name
        assert torch.equal(got["b"], torch.arange(10 * world)), name

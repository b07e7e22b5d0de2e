"""Who may do what to the KV pool, against a real openlaked (docs/security.md, "The KV pool").

Another local user over loopback TCP is refused unless allowed; an allowed one reads every
namespace but changes only its own; a slot handed out again holds nothing a stale checksum
matches; one client cannot reserve the whole pool; idle TCP connections are closed.
"""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import openlake_client as ol
from conftest import Daemon

FP = {"model": "sec-test", "dtype": "float16", "layout": "NHD", "num_layers": 2,
      "num_kv_heads": 2, "head_size": 8, "block_tokens": 4}
NOBODY = 65534

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching to another uid needs root")


def as_nobody(address: str, body: str) -> dict:
    """Runs `body` (which fills the dict `out`) in a child that drops to uid 65534 after
    importing the module, then connects to `address` over TCP."""
    script = textwrap.dedent("""
        import json, os, sys
        import openlake_client as ol
        FP = json.loads(sys.argv[2])
        os.setgroups([]); os.setgid(%d); os.setuid(%d)
        out = {}
        def attempt(name, fn):
            try:
                out[name] = ["ok", fn()]
            except ol.OpenLakeError as e:
                out[name] = [e.code, str(e)]
        try:
            c = ol.Client(sys.argv[1], map_slab=False, timeout=5, connect_timeout=5)
        except ol.OpenLakeError as e:
            out["connect"] = [e.code, str(e)]
            print(json.dumps(out)); sys.exit(0)
        out["connect"] = ["ok", None]
    """ % (NOBODY, NOBODY)) + textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
    r = subprocess.run([sys.executable, "-c", script, address, json.dumps(FP)],
                       capture_output=True, text=True, timeout=60, env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def put_blocks(c, ns, keys, value=7):
    buf = torch.full((ns.block_bytes,), value, dtype=torch.uint8)
    assert c.put(ns, keys, [[(buf.data_ptr(), buf.numel())]] * len(keys)) == len(keys)


@needs_root
def test_another_user_is_refused_by_default(tmp_path):
    d = Daemon(tmp_path)
    try:
        out = as_nobody(d.address, "")
        assert out["connect"][0] == "PERMISSION_DENIED", out
        assert "uid 65534 may not use this server" in out["connect"][1]
        # The daemon's own user still gets in, over TCP and the Unix socket.
        assert ol.Client(d.address).has_slab
        assert ol.Client(f"unix:{d.socket}").has_slab
    finally:
        assert d.stop() == 0, d.log.read_text()


@needs_root
def test_an_allowed_user_reads_all_and_changes_only_its_own(tmp_path):
    d = Daemon(tmp_path, top=f"rpc_allowed_uids = [{NOBODY}]")
    try:
        c = ol.Client(d.address)
        ns = c.open_namespace("root/model", FP, 4096)
        keys = [bytes([i]) * 32 for i in range(4)]
        put_blocks(c, ns, keys)
        out = as_nobody(d.address, """
            ns = c.open_namespace("root/model", FP, 4096)
            keys = [bytes([i]) * 32 for i in range(4)]
            attempt("exists", lambda: c.exists(ns, keys)[0])
            def lookup():
                batch, hits = c.lookup(ns, keys[:1])
                c.release([batch])
                return len(hits)
            attempt("lookup", lookup)
            attempt("remove", lambda: c.remove(ns, keys[:1]))
            attempt("reset", lambda: c.reset(ns))
            attempt("reserve", lambda: len(c.reserve(ns, 1)))
            attempt("commit", lambda: c.commit(ns, [(0, b"z" * 32, 0, 0)]))
            mine = c.open_namespace("nobody/model", FP, 4096)
            def own():
                slot, _, _ = c.reserve(mine, 1)[0]
                c.commit(mine, [(slot, b"n" * 32, 123, 0)])
                return c.exists(mine, [b"n" * 32])[0]
            attempt("own", own)
            attempt("own_remove", lambda: c.remove(mine, [b"n" * 32]))
        """)
        assert out["connect"][0] == "ok", out
        assert out["exists"] == ["ok", 4] and out["lookup"] == ["ok", 1], out
        for op in ("remove", "reset", "reserve", "commit"):
            assert out[op][0] == "PERMISSION_DENIED", (op, out)
            assert "belongs to uid 0; uid 65534 may read it but not change it" in out[op][1]
        assert out["own"] == ["ok", 1] and out["own_remove"] == ["ok", 1], out
        # Root's blocks are all still there, intact.
        assert c.exists(ns, keys)[0] == 4
        got = torch.zeros(4096, dtype=torch.uint8)
        loaded, _ = c.get(ns, keys[:1], [[(got.data_ptr(), 4096)]])
        assert loaded == 1 and int(got[0]) == 7
        # An admin (the daemon's user) may change the other's namespace.
        assert c.reset(c.find_namespace("nobody/model")) is None
    finally:
        assert d.stop() == 0, d.log.read_text()


def test_a_reused_slot_does_not_verify_under_a_stale_checksum(daemon):
    """The four-call replay over TCP, without the slab: look up K0, remove it, reserve the slot
    it had, commit K1 there with K0's checksum. K1 must not read back as K0's bytes."""
    owner = ol.Client(daemon.address)
    ns = owner.open_namespace("replay/model", FP, 4096)
    k0, k1 = b"0" * 32, b"1" * 32
    put_blocks(owner, ns, [k0], value=0x5a)
    attacker = ol.Client(daemon.address, map_slab=False)
    ans = attacker.open_namespace("replay/model", FP, 4096)
    batch, hits = attacker.lookup(ans, [k0])
    slot, _, _, checksum = hits[0]
    attacker.release([batch])
    assert attacker.remove(ans, [k0]) == 1
    grants = attacker.reserve(ans, 1)
    assert grants[0][0] == slot  # the same slot came back
    attacker.commit(ans, [(grants[0][0], k1, checksum, 0)])
    got = torch.zeros(4096, dtype=torch.uint8)
    loaded, states = owner.get(ns, [k1], [[(got.data_ptr(), 4096)]])
    assert loaded == 0 and states == [ol.CORRUPT]


def test_one_client_cannot_reserve_the_whole_pool(tmp_path):
    # 30 segments × 3 slots of 256 KiB; one client may hold a quarter reserved.
    d = Daemon(tmp_path, capacity_gb=0.03125, segment_mb=1)
    try:
        writer = ol.Client(d.address)
        ns = writer.open_namespace("cap/model", FP, 256 << 10)
        keys = [i.to_bytes(4, "little") * 8 for i in range(60)]
        put_blocks(writer, ns, keys)  # several rounds, each within the writer's share
        hog = ol.Client(d.address, map_slab=False)
        hns = hog.open_namespace("cap/model", FP, 256 << 10)
        with pytest.raises(ol.PoolFullError) as e:
            hog.reserve(hns, 80, allow_partial=False)
        assert "may hold at most" in str(e.value)
        assert writer.exists(ns, keys)[0] == 60  # nothing was evicted for it
        part = hog.reserve(hns, 80, allow_partial=True)
        assert 0 < len(part) * (256 << 10) <= writer.slab_bytes // 4
        # Another client still finds room.
        other = ol.Client(d.address, map_slab=False)
        assert len(other.reserve(other.open_namespace("cap/model", FP, 256 << 10), 4)) == 4
    finally:
        assert d.stop() == 0, d.log.read_text()


def test_an_idle_tcp_connection_is_closed_and_its_reservations_end(tmp_path):
    d = Daemon(tmp_path, tables="[limits]\nkv_idle_timeout_secs = 1\n")
    try:
        idle = ol.Client(d.address, map_slab=False)
        engine = ol.Client(f"unix:{d.socket}")
        ns = idle.open_namespace("idle/model", FP, 4096)
        assert len(idle.reserve(ns, 3)) == 3
        assert engine.stats()["reserved_slots"] == 3
        time.sleep(3)
        assert engine.stats()["reserved_slots"] == 0  # ended with the connection
        with pytest.raises(ol.OpenLakeError):
            idle.exists(ns, [b"x" * 32])
        # The engine's Unix connection, idle as long, is still served.
        assert engine.stats()["committed_blocks"] == 0
    finally:
        assert d.stop() == 0, d.log.read_text()

"""The cluster pool across a real network link: two daemons in two network namespaces joined by a
veth pair, UCX over TCP on the veth (never loopback), the shared secret on every link.

Node A runs in a namespace of its own (10.X.Y.1 on its end of the veth), node B in the test's
namespace (10.X.Y.2 on the other end). Impairments are real packets lost and delayed on the
link: `tc netem` where the kernel has it; where it does not (this project's VMs), a token bucket
(`tc tbf`) that queues and shapes, and nftables dropping a share of the packets at random.

Needs root (CAP_NET_ADMIN); skipped where namespaces cannot be made.
"""

import os
import shutil
import subprocess
import threading
import time

import pytest

import openlake_client as ol
from kv_cluster import start_cluster, stop_cluster, wait_until
from conftest import Daemon
from mini_engine import MiniEngine
from test_connector import answer, prompt, run_ok
from test_cluster import on_peers

SECRET = "netns-test-secret-7f3a9c"
_ID = os.getpid() % 50000
NS = f"olns{_ID}"
VETH_NS = f"olva{_ID}"      # A's end, in its namespace
VETH_HOST = f"olvb{_ID}"    # B's end, here
NET = f"10.{200 + _ID % 50}.{_ID % 250}"
A_IP, B_IP = f"{NET}.1", f"{NET}.2"
NFT_TABLE = f"ol{_ID}"


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


def in_ns(*args, check=True):
    return sh("ip", "netns", "exec", NS, *args, check=check)


def teardown_link():
    sh("ip", "netns", "del", NS, check=False)
    sh("ip", "link", "del", VETH_HOST, check=False)
    sh("nft", "delete", "table", "inet", NFT_TABLE, check=False)


@pytest.fixture(scope="module")
def link():
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and iproute2")
    teardown_link()
    try:
        sh("ip", "netns", "add", NS)
        sh("ip", "link", "add", VETH_HOST, "type", "veth", "peer", "name", VETH_NS)
        sh("ip", "link", "set", VETH_NS, "netns", NS)
        sh("ip", "addr", "add", f"{B_IP}/24", "dev", VETH_HOST)
        sh("ip", "link", "set", VETH_HOST, "up")
        in_ns("ip", "addr", "add", f"{A_IP}/24", "dev", VETH_NS)
        in_ns("ip", "link", "set", VETH_NS, "up")
        in_ns("ip", "link", "set", "lo", "up")
    except subprocess.CalledProcessError as e:
        teardown_link()
        pytest.skip(f"cannot make a network namespace here: {e.stderr.strip()}")
    yield
    teardown_link()


def impair(rate_mbit=None, drop_percent=0):
    """Shapes both directions of the veth to rate_mbit and drops drop_percent of the packets
    leaving B (netem when the kernel has it, else tbf + nftables); None/0 lifts it."""
    for run, dev in ((sh, VETH_HOST), (in_ns, VETH_NS)):
        run("tc", "qdisc", "del", "dev", dev, "root", check=False)
    sh("nft", "delete", "table", "inet", NFT_TABLE, check=False)
    if rate_mbit is None and not drop_percent:
        return "none"
    netem = ["netem", "delay", "5ms", "loss", f"{drop_percent}%"]
    if rate_mbit:
        netem += ["rate", f"{rate_mbit}mbit"]
    if sh("tc", "qdisc", "add", "dev", VETH_HOST, "root", *netem, check=False).returncode == 0:
        in_ns("tc", "qdisc", "add", "dev", VETH_NS, "root", *netem[:3],
              *(["rate", f"{rate_mbit}mbit"] if rate_mbit else []))
        return "netem"
    if rate_mbit:
        for run, dev in ((sh, VETH_HOST), (in_ns, VETH_NS)):
            run("tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{rate_mbit}mbit",
                "burst", "32kb", "latency", "400ms")
    if drop_percent:
        if shutil.which("nft") is None:
            pytest.skip("no netem in this kernel and no nft to drop packets with")
        sh("nft", "add", "table", "inet", NFT_TABLE)
        sh("nft", "add", "chain", "inet", NFT_TABLE, "out",
           "{ type filter hook postrouting priority 0; }")
        sh("nft", "add", "rule", "inet", NFT_TABLE, "out", "oifname", VETH_HOST, "numgen",
           "random", "mod", "100", "<", str(drop_percent), "drop")
    return "tbf+nft"


def start_pair(tmp_path, lease_secs=60, secret_b=SECRET):
    env = {"UCX_TLS": "tcp,self"}
    per_node = [
        {"argv_prefix": ["ip", "netns", "exec", NS], "env": {"UCX_NET_DEVICES": VETH_NS},
         "lease_secs": lease_secs},
        {"env": {"UCX_NET_DEVICES": VETH_HOST}},
    ]
    return start_cluster(tmp_path, 2, env, hosts=[A_IP, B_IP], secret=SECRET,
                         per_node=per_node, capacity_gb=0.0625)


def extra(nodes, i):
    order = [nodes[i].address] + [d.address for j, d in enumerate(nodes) if j != i]
    return {"openlake_nodes": order, "openlake_device": "ucx", "openlake_secret": SECRET}


@pytest.fixture
def pair(link, tmp_path):
    impair()
    nodes = start_pair(tmp_path)
    yield nodes
    impair()
    codes = stop_cluster(nodes)
    assert codes == [0, 0], "\n".join(d.log.read_text() for d in nodes)


def test_a_hit_across_the_veth(pair):
    a, b = pair
    first = MiniEngine(extra(pair, 0))
    p = prompt(30, 11)
    first.add("a", p)
    run_ok(first)
    first.shutdown()
    second = MiniEngine(extra(pair, 1))
    second.add("b", p + [1, 2])
    assert wait_until(lambda: on_peers(b, second, "b", SECRET) == (7, 7))
    run_ok(second)
    assert answer(second, "b") == (28, True)
    second.shutdown()
    st = ol.Client(b.address, secret=SECRET).stats()
    assert st["remote_hits"] >= 7 and st["pull_rejected_blocks"] == 0
    assert "KV cluster: attached to node 0" in b.log.read_text()


def test_delay_and_loss_keep_lookups_within_their_deadline(pair):
    a, b = pair
    prompts = {f"r{i}": prompt(40, 300 + i) for i in range(4)}
    first = MiniEngine(extra(pair, 0))
    for rid, p in prompts.items():
        first.add(rid, p)
    run_ok(first)
    first.shutdown()
    probe = MiniEngine(extra(pair, 1))
    for rid, p in prompts.items():
        probe.add(rid, p + [5])
    assert wait_until(lambda: all(on_peers(b, probe, r, SECRET)[0] == 10 for r in prompts))
    how = impair(rate_mbit=20, drop_percent=3)
    # Existence queries: never longer than the daemon's lookup deadline (50 ms) plus the local
    # round trip, however the link behaves; a late peer is a miss.
    for _ in range(20):
        t0 = time.monotonic()
        on_peers(b, probe, "r0", SECRET)
        assert time.monotonic() - t0 < 0.5, how
    probe.shutdown()
    # Loads: each block comes verified or is reported and recomputed; never a wrong byte (the
    # engine checks every position).
    second = MiniEngine(extra(pair, 1))
    for rid, p in prompts.items():
        second.add(rid, p + [5])
    run_ok(second)
    second.shutdown()


def test_a_pull_past_the_owners_lease_is_discarded_under_an_eviction_storm(link, tmp_path):
    impair()
    nodes = start_pair(tmp_path, lease_secs=1)  # A's pins hold for a second
    a, b = nodes
    try:
        fp = {"model": "netns", "dtype": "bfloat16"}
        block = 256 << 10
        keys = [f"lease-{i}".encode() for i in range(12)]  # 3 MiB
        data = [bytes([(i * 7 + j) % 251 for j in range(256)]) * (block // 256)
                for i in range(len(keys))]
        wa = ol.Client(a.address, secret=SECRET)
        ns = wa.open_namespace("lease", fp, block)
        bufs = [bytearray(d) for d in data]
        pieces = [[(ol_addr(x), block)] for x in bufs]
        assert wa.put(ns, keys, pieces) == len(keys)
        rb = ol.Client(b.address, secret=SECRET)
        nsb = rb.open_namespace("lease", fp, block)
        assert wait_until(lambda: rb.exists(nsb, keys)[0] == len(keys))
        # 3 MiB at 24 Mbit/s: about a second on the wire, past 80% of A's one-second lease and
        # within B's two-second pull deadline.
        impair(rate_mbit=24)
        out = [bytearray(block) for _ in keys]
        got = {}

        def load():
            t0 = time.monotonic()
            got["loaded"], got["states"] = rb.get(nsb, keys, [[(ol_addr(x), block)] for x in out])
            got["took"] = time.monotonic() - t0

        loader = threading.Thread(target=load)
        loader.start()
        # Meanwhile A's slab churns: its expired pins' slots are handed to new blocks.
        storm = [bytearray(block) for _ in range(16)]
        t_end = time.monotonic() + 2.5
        n = 0
        while time.monotonic() < t_end:
            skeys = [f"storm-{n}-{i}".encode() for i in range(16)]
            try:
                wa.put(ns, skeys, [[(ol_addr(x), block)] for x in storm])
            except ol.PoolFullError:
                pass
            n += 1
        loader.join()
        impair()
        loaded = int(got["loaded"])
        for i in range(loaded):
            assert bytes(out[i]) == data[i], f"block {i} has wrong bytes"
        st = rb.stats()
        assert got["took"] < 5.0
        # What came after the lease was thrown away: nothing was committed at B from it.
        assert st["pull_rejected_blocks"] + st["pull_failures"] > 0, st
        assert loaded == 0 or st["pulled_blocks"] >= loaded
    finally:
        impair()
        codes = stop_cluster(nodes)
        assert codes == [0, 0], "\n".join(d.log.read_text() for d in nodes)


def test_a_peer_with_the_wrong_secret_is_refused_and_logged(pair, tmp_path):
    a, b = pair
    first = MiniEngine(extra(pair, 0))
    p = prompt(30, 21)
    first.add("a", p)
    run_ok(first)
    first.shutdown()
    # B comes back with another secret: A refuses its connections, and B's lookups are misses.
    port = b.port
    assert b.stop() == 0
    wrong = Daemon(tmp_path / "wrong", capacity_gb=0.0625,
                   top=f'self_id = 1\nadmin_addr = "off"\nrpc_secret = "not-the-{SECRET}"\n',
                   tables="".join(f'[[nodes]]\nid = {i}\nrpc_addr = "{d.address}"\n'
                                  for i, d in enumerate(pair)),
                   host=B_IP, port=port,
                   env={"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": VETH_HOST})
    pair[1] = wrong
    assert wait_until(lambda: "wrong shared secret" in a.log.read_text())
    e = MiniEngine({"openlake_nodes": [wrong.address, a.address], "openlake_device": "ucx",
                    "openlake_secret": f"not-the-{SECRET}"})
    e.add("b", p + [1, 2])
    run_ok(e)
    assert answer(e, "b") == (0, False)
    e.shutdown()
    assert ol.Client(wrong.address, secret=f"not-the-{SECRET}").stats()["pulled_blocks"] == 0


def ol_addr(buf: bytearray) -> int:
    import ctypes
    return ctypes.addressof(ctypes.c_char.from_buffer(buf))

"""The cluster pool through the vLLM connector: mini engines on different nodes of real openlaked
processes that form one pool ([[nodes]]), with UCX over TCP on lo and over shared memory.

A prompt computed by the engine on node A is a hit for the engine on node B: B's daemon pulls the
blocks from A's slab into its own, and the engine loads them from there (asynchronously, as
every remote hit), byte-exact (MiniEngine verifies every position of every finished request).
"""

import logging

import pytest

import openlake_client as ol
from openlake_client import keys as ol_keys
from openlake_client.openlake_connector import Settings, cluster_mismatches
from kv_cluster import start_cluster, stop_cluster, wait_until
from mini_engine import MiniEngine
from test_connector import answer, prompt, run_ok, shard_namespaces

TRANSPORTS = {
    "tcp": {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "lo"},
    "sm": {"UCX_TLS": "sm,self"},
}


def engine_on(nodes, i, device="ucx", **kw):
    """A mini engine whose workers use node i's daemon; openlake_nodes lists node i first."""
    order = [nodes[i].address] + [d.address for j, d in enumerate(nodes) if j != i]
    return MiniEngine({"openlake_nodes": order, "openlake_device": device}, **kw)


def on_peers(node, engine, rid, secret=""):
    """(prefix, on_peers) of request rid's blocks as node's daemon sees them, every shard."""
    keys = ol_keys.request_keys(engine.requests[rid],
                                ol_keys.hash_group(engine.worker_config(0).cache_config))
    c = ol.Client(node.address, secret=secret, map_slab=False)
    try:
        out = []
        for name in shard_namespaces(engine):
            try:
                p, _, remote = c.exists(c.find_namespace(name), keys, detail=True)
            except ol.NotFoundError:
                p, remote = 0, 0
            out.append((int(p), int(remote)))
        return min(out)
    finally:
        c.close()


@pytest.fixture(params=sorted(TRANSPORTS))
def cluster(request, tmp_path):
    nodes = start_cluster(tmp_path, 3, TRANSPORTS[request.param])
    yield nodes
    codes = stop_cluster(nodes)
    assert codes == [0, 0, 0], "\n".join(d.log.read_text() for d in nodes)


def test_a_prompt_computed_on_one_node_is_a_hit_on_another(cluster):
    a, b, _ = cluster
    first = engine_on(cluster, 0)
    prompts = {f"r{i}": prompt(30, 100 + i) for i in range(3)}
    for rid, p in prompts.items():
        first.add(rid, p)
    run_ok(first)
    first.shutdown()
    second = engine_on(cluster, 1)
    for rid, p in prompts.items():
        second.add(rid, p + [7, 7])
    # The chains' homes hear of them at A's next announcement (a second or so).
    assert wait_until(lambda: all(on_peers(b, second, rid) == (7, 7) for rid in prompts))
    run_ok(second)
    for rid in prompts:
        assert answer(second, rid) == (28, True)  # remote hits load asynchronously
    second.shutdown()
    st = ol.Client(b.address).stats()
    assert st["remote_hits"] >= 3 * 7
    assert st["pulled_blocks"] >= 3 * 7
    assert st["pull_rejected_blocks"] == 0
    assert ol.Client(a.address).stats()["peer_served_blocks"] >= 3 * 7
    # Now B holds its own copy: a third engine there hits without asking anyone.
    third = engine_on(cluster, 1)
    third.add("again", prompts["r0"] + [9, 9])
    run_ok(third)
    assert answer(third, "again") == (28, False)
    third.shutdown()


def test_device_local_asks_only_this_hosts_daemon(cluster):
    first = engine_on(cluster, 0)
    p = prompt(30, 200)
    first.add("a", p)
    run_ok(first)
    first.shutdown()
    probe = engine_on(cluster, 2)
    probe.add("b", p + [1, 2])
    assert wait_until(lambda: on_peers(cluster[2], probe, "b")[0] == 7)
    probe.shutdown()
    local = engine_on(cluster, 2, device="local")
    local.add("b", p + [1, 2])
    run_ok(local)
    assert answer(local, "b") == (0, False)  # node 2 itself holds nothing of it
    local.shutdown()


def test_openlake_nodes_that_disagree_with_the_daemons_are_named(cluster, caplog):
    a, b, c = cluster
    good = Settings.from_extra({"openlake_nodes": [b.address, a.address, c.address],
                                "openlake_device": "ucx"})
    assert cluster_mismatches(good) == []
    bad = Settings.from_extra({"openlake_nodes": [b.address, a.address, "10.255.255.1:9400"],
                               "openlake_device": "ucx"})
    (line,) = cluster_mismatches(bad)
    assert c.address in line and "10.255.255.1:9400" in line
    local = Settings.from_extra({"openlake_nodes": [b.address, a.address],
                                 "openlake_device": "local"})
    assert "only this host's daemon" in cluster_mismatches(local)[0]
    rdma = Settings.from_extra({"openlake_nodes": [b.address], "openlake_device": "mlx5_0"})
    assert any("mlx5_0" in m for m in cluster_mismatches(rdma))
    # The connector says so when it starts, and runs all the same.
    with caplog.at_level(logging.WARNING, logger="openlake_client.connector"):
        e = MiniEngine({"openlake_nodes": bad.nodes, "openlake_device": "ucx"})
        e.add("x", prompt(12, 3))
        run_ok(e)
        e.shutdown()
    assert any("10.255.255.1:9400" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_local_cluster_and_the_ttft_examples_remote_path_on_host_tensors(tmp_path, transport):
    """examples/ttft_hit_vs_miss.py --remote, without the model: pages saved through node A's
    daemon (local_cluster, the packaged helper) load through node B's, which pulls them from A;
    chunks after the first name the chain's head. Byte-exact, on host tensors."""
    torch = pytest.importorskip("torch")
    from openlake_client.layout import plan_layout
    from openlake_client.local_daemon import local_cluster
    from openlake_client.torch_mover import TorchMover
    from conftest import _openlaked

    nodes = local_cluster(_openlaked(), tmp_path, 2, 0.25, env=TRANSPORTS[transport],
                          slab_settings="segment_mb = 4")
    try:
        layers, blocks, chunk = 4, 40, 16
        g = torch.Generator().manual_seed(5)
        pages = {f"model.layers.{i}.self_attn.attn":
                 torch.randint(-2**15, 2**15, (blocks, 2, 16, 2, 64), generator=g,
                               dtype=torch.int16).view(torch.bfloat16)
                 for i in range(layers)}
        layout = plan_layout(pages, 16)
        fp = {"model": "remote-path", "dtype": "bfloat16", "layout": layout.signature}
        keys = [f"remote-path-{i}".encode() for i in range(blocks)]
        movers = []
        for d in nodes:
            c = ol.Client(d.address)
            movers.append(TorchMover(layout, c, c.open_namespace("ttft-remote", fp,
                                                                 layout.block_bytes)))
        saved = {n: p.clone() for n, p in pages.items()}
        assert movers[0].save(keys, list(range(blocks)), 0) == blocks
        for p in pages.values():
            p.zero_()
        b = ol.Client(nodes[1].address, map_slab=False)
        ns = b.find_namespace("ttft-remote")
        assert wait_until(lambda: b.exists(ns, keys, detail=True)[2] == blocks)
        target = torch.randperm(blocks, generator=g).tolist()
        loaded = 0
        for s in range(0, blocks, chunk):
            loaded += movers[1].load(keys[s:s + chunk], target[s:s + chunk],
                                     keys[0] if s else None)
        assert loaded == blocks
        for n, p in pages.items():
            assert torch.equal(p[target].view(torch.int16), saved[n].view(torch.int16)), n
        assert b.stats()["pulled_blocks"] == blocks
        b.close()
        for m in movers:
            m.close()
    finally:
        codes = [d.stop() for d in nodes]
    assert codes == [0, 0], "\n".join(d.log.read_text() for d in nodes)

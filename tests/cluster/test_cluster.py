"""One object store over three real openlaked processes (two drive folders each, RS(4+2)):
any node serves any object, a node can die mid-write without losing an acknowledged byte, and
a node that returns is healed."""

import os
import random
import subprocess
import shutil
import time
from pathlib import Path

import pytest

from conftest import Writer, holds, read_all, wait_until


def test_one_store_through_every_node(cluster):
    a, b, c = cluster.nodes
    a.client().create_bucket(Bucket="data")
    written = {}
    for i, node in enumerate(cluster.nodes * 3):
        key = f"k{i}"
        body = random.randbytes(i * 70_000 + 1)
        node.client().put_object(Bucket="data", Key=key, Body=body)
        written[key] = body
    for node in cluster.nodes:
        read_all(node, "data", written)
        listed = node.client().list_objects_v2(Bucket="data")
        assert sorted(o["Key"] for o in listed["Contents"]) == sorted(written)
        assert [b["Name"] for b in node.client().list_buckets()["Buckets"]] == ["data"]
    # Every node's drives hold shards of the objects.
    for node in cluster.nodes:
        for d in node.drives:
            assert holds(d, "data", "k8")
    # Bucket settings made through one node are seen through the others, even where they
    # were read (and kept) before.
    assert c.client().get_bucket_versioning(Bucket="data").get("Status") is None
    a.client().put_bucket_versioning(Bucket="data",
                                     VersioningConfiguration={"Status": "Enabled"})
    wait_until(lambda: c.client().get_bucket_versioning(Bucket="data").get("Status") == "Enabled",
               10, "versioning seen through node 3")
    # A delete through one node is gone through the others.
    b.client().delete_objects(Bucket="data", Delete={"Objects": [{"Key": "k0"}]})
    with pytest.raises(Exception):
        c.client().head_object(Bucket="data", Key="k0")


def test_node_killed_mid_writes_loses_nothing_acknowledged(cluster):
    nodes = cluster.nodes
    nodes[0].client().create_bucket(Bucket="acks")
    writers = [Writer(n, "acks", f"w{n.id}") for n in nodes]
    for w in writers:
        w.start()
    time.sleep(1.5)
    victim = random.choice(nodes)
    victim.kill()
    time.sleep(2.0)
    for w in writers:
        w.stop_flag.set()
    for w in writers:
        w.join(60)
    survivors = [n for n in nodes if n is not victim]
    acked = {}
    for w in writers:
        acked.update(w.acked)
    # Writes went on at quorum through the survivors after the kill.
    for w in writers:
        if w.client._endpoint.host.endswith(str(victim.s3_port)):
            continue
        assert len(w.acked) > 5
    for node in survivors:
        read_all(node, "acks", acked)

    # It returns; the heal puts back what it missed; then another node dies.
    cluster.restart(victim)
    missed = [k for k in acked]
    wait_until(lambda: all(holds(d, "acks", k) for d in victim.drives for k in missed), 60,
               "the returned node to be healed")
    second = random.choice(survivors)
    second.kill()
    for node in nodes:
        if node is not second:
            read_all(node, "acks", acked)
    cluster.restart(second)


def test_same_key_through_two_nodes_one_whole_version_wins(cluster):
    a, b, _ = cluster.nodes
    a.client().create_bucket(Bucket="race")
    bodies = {a.id: b"A" * 300_000, b.id: b"B" * 300_000}
    import threading
    errors = []

    def put(node, n):
        s3 = node.client()
        for _ in range(n):
            try:
                s3.put_object(Bucket="race", Key="same", Body=bodies[node.id])
            except Exception as e:  # noqa: BLE001
                errors.append(e)

    for _ in range(3):
        ts = [threading.Thread(target=put, args=(n, 5)) for n in (a, b)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        for node in cluster.nodes:
            got = node.client().get_object(Bucket="race", Key="same")["Body"].read()
            assert got in bodies.values(), "a mix of two versions"
    assert not errors, errors


def test_aws_cli_sync_in_through_one_node_out_through_another(cluster, tmp_path):
    if shutil.which("aws") is None:
        pytest.skip("the aws CLI is not installed (Debian: awscli)")
    a, b, _ = cluster.nodes
    a.client().create_bucket(Bucket="sync")
    src = tmp_path / "src"
    for i in range(20):
        p = src / f"dir{i % 3}" / f"file{i}.bin"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(random.randbytes(i * 50_000 + 3))
    env = {"AWS_ACCESS_KEY_ID": a.client()._request_signer._credentials.access_key,
           "AWS_SECRET_ACCESS_KEY": a.client()._request_signer._credentials.secret_key,
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
           "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    subprocess.run(["aws", "--endpoint-url", a.endpoint, "s3", "sync", str(src), "s3://sync/in"],
                   check=True, env=env, capture_output=True, timeout=300)
    dst = tmp_path / "dst"
    subprocess.run(["aws", "--endpoint-url", b.endpoint, "s3", "sync", "s3://sync/in", str(dst)],
                   check=True, env=env, capture_output=True, timeout=300)
    for p in src.rglob("*.bin"):
        assert (dst / p.relative_to(src)).read_bytes() == p.read_bytes()


def test_cli_shows_the_cluster_and_a_dead_node(cluster):
    cli = os.environ.get("OPENLAKE_CLI") or str(
        Path(__file__).resolve().parents[2] / "build/tools/openlake/openlake")
    if not os.access(cli, os.X_OK):
        pytest.skip("the openlake CLI is not built")
    a, b, c = cluster.nodes
    status = subprocess.run([cli, "cluster", "status", "--config", str(a.config)],
                            capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "sees 6/6 of the cluster's" in status.stdout
    topo = subprocess.run([cli, "cluster", "topology", "--config", str(a.config), "--probe"],
                          capture_output=True, text=True, timeout=60)
    assert topo.returncode == 0, topo.stdout + topo.stderr
    assert "1 set of 6 (RS 4+2)" in topo.stdout
    assert topo.stdout.count("reached by 3/3 nodes") == 6
    c.kill()
    # The survivors notice at their healers' next hello (each second here), or sooner at a
    # request that needs it.
    def probed():
        return subprocess.run([cli, "cluster", "topology", "--config", str(a.config), "--probe"],
                              capture_output=True, text=True, timeout=60)
    wait_until(lambda: probed().stdout.count("reached by 0/2 nodes") == 2, 20,
               "both survivors to see node 3's drives offline")
    topo = probed()
    assert topo.returncode != 0
    assert f"node {c.id}" in topo.stdout and "unreachable" in topo.stdout
    cluster.restart(c)

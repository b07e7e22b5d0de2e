"""Partitions of a real cluster: the nodes of one half run in a network namespace of their own,
joined to the others by a veth pair, and a cut drops every packet crossing it both ways (a
silent black hole: connections hang rather than break, as when a real network splits). A
client on each side writes through its own half's nodes.

- RS(4+2) over three nodes, cut 2|1: the pair goes on writing, the lone node refuses every
  write (too few lock holders and too few drives), and after the cut mends the lone node is
  healed and every acknowledged object reads back byte-exact through every node.
- RS(2+2) over four nodes, cut 2|2: half is not a quorum, so neither half can write (no split
  brain), while both may still read; after the cut mends, writes go on and nothing
  acknowledged is lost.

Needs root (CAP_NET_ADMIN), iproute2 and nftables; skipped where namespaces cannot be made.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import (ACCESS_KEY, SECRET_KEY, boto3_or_skip, holds, read_all, start_cluster,
                      wait_until)

SECRET = "partition-test-rpc-secret-5d1e9b"
_ID = os.getpid() % 50000
NS = f"olpn{_ID}"
VETH_NS = f"olpa{_ID}"      # the namespace's end
VETH_HOST = f"olpb{_ID}"    # this side's end
NET = f"10.{150 + _ID % 50}.{_ID % 250}"
NS_IP, HOST_IP = f"{NET}.1", f"{NET}.2"
NFT_TABLE = f"olpart{_ID}"
IN_NS = ("ip", "netns", "exec", NS)


def sh(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, **kw)


def unlink():
    sh("nft", "delete", "table", "inet", NFT_TABLE, check=False)
    sh("ip", "netns", "del", NS, check=False)
    sh("ip", "link", "del", VETH_HOST, check=False)


@pytest.fixture(scope="module")
def link():
    boto3_or_skip()
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nft"):
        pytest.skip("partitions need root, iproute2 and nftables")
    unlink()
    steps = [
        (), ("netns", "add", NS),
        (), ("link", "add", VETH_HOST, "type", "veth", "peer", "name", VETH_NS),
        (), ("link", "set", VETH_NS, "netns", NS),
        (), ("addr", "add", f"{HOST_IP}/24", "dev", VETH_HOST),
        (), ("link", "set", VETH_HOST, "up"),
        IN_NS, ("addr", "add", f"{NS_IP}/24", "dev", VETH_NS),
        IN_NS, ("link", "set", VETH_NS, "up"),
        IN_NS, ("link", "set", "lo", "up"),
    ]
    try:
        for where, args in zip(steps[::2], steps[1::2]):
            sh(*where, "ip", *args)
    except subprocess.CalledProcessError as e:
        unlink()
        pytest.skip(f"cannot make a network namespace here: {e.stderr.decode().strip()}")
    yield
    unlink()


def cut():
    """Every packet crossing the veth is dropped, both ways."""
    sh("nft", "add", "table", "inet", NFT_TABLE)
    for chain, hook, match in (("in", "input", "iifname"), ("out", "output", "oifname")):
        sh("nft", "add", "chain", "inet", NFT_TABLE, chain,
           f"{{ type filter hook {hook} priority 0; }}")
        sh("nft", "add", "rule", "inet", NFT_TABLE, chain, match, VETH_HOST, "drop")


def mend():
    sh("nft", "delete", "table", "inet", NFT_TABLE)


def start_split(tmp_path_factory, nodes, drives_per_node, set_drive_count, parity, in_ns):
    """A cluster whose last `in_ns` nodes run in the namespace, the others on this side."""
    here = nodes - in_ns
    return start_cluster(tmp_path_factory, nodes=nodes, drives_per_node=drives_per_node,
                         set_drive_count=set_drive_count, parity=parity,
                         hosts=[HOST_IP] * here + [NS_IP] * in_ns,
                         argv_prefixes=[()] * here + [IN_NS] * in_ns, rpc_secret=SECRET)


# One S3 request, made from the namespace by a client process of its own.
NS_CLIENT = r"""
import hashlib, json, sys
import boto3
from botocore.config import Config
from botocore.exceptions import ClientError
endpoint, access, secret, op, bucket, key = sys.argv[1:7]
s3 = boto3.session.Session().client(
    "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=access,
    aws_secret_access_key=secret,
    config=Config(retries={"max_attempts": 1}, connect_timeout=5, read_timeout=90,
                  s3={"addressing_style": "path"}, signature_version="s3v4"))
try:
    if op == "put":
        s3.put_object(Bucket=bucket, Key=key, Body=sys.stdin.buffer.read())
        out = {"ok": True}
    elif op == "delete":
        s3.delete_object(Bucket=bucket, Key=key)
        out = {"ok": True}
    else:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        out = {"ok": True, "sha256": hashlib.sha256(body).hexdigest()}
except ClientError as e:
    out = {"ok": False, "code": e.response["Error"]["Code"],
           "status": e.response["ResponseMetadata"]["HTTPStatusCode"]}
except Exception as e:
    out = {"ok": False, "code": type(e).__name__, "status": 0}
print(json.dumps(out))
"""


def s3op(node, op, bucket, key, body=b""):
    """PUT, GET or DELETE through `node` from a client on its side of the cut. Returns
    {"ok": True[, "sha256": ...]} or {"ok": False, "code": ..., "status": ...}."""
    if node.argv_prefix:
        r = sh(*node.argv_prefix, sys.executable, "-c", NS_CLIENT, node.endpoint, ACCESS_KEY,
               SECRET_KEY, op, bucket, key, input=body, timeout=120)
        return json.loads(r.stdout)
    from botocore.exceptions import ClientError
    s3 = node.client(read_timeout=90)
    try:
        if op == "put":
            s3.put_object(Bucket=bucket, Key=key, Body=body)
            return {"ok": True}
        if op == "delete":
            s3.delete_object(Bucket=bucket, Key=key)
            return {"ok": True}
        got = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        return {"ok": True, "sha256": hashlib.sha256(got).hexdigest()}
    except ClientError as e:
        return {"ok": False, "code": e.response["Error"]["Code"],
                "status": e.response["ResponseMetadata"]["HTTPStatusCode"]}


def sha(body):
    return hashlib.sha256(body).hexdigest()


def refused(result):
    """A write the cluster turned down as unable to reach a quorum: 503, never a success."""
    return not result["ok"] and result["status"] == 503


def healed(nodes, bucket, keys):
    return all(holds(d, bucket, k) for n in nodes for d in n.drives for k in keys)


@pytest.fixture
def split_cluster(link, tmp_path_factory):
    made = []

    def make(**layout):
        c = start_split(tmp_path_factory, **layout)
        made.append(c)
        return c

    yield make
    sh("nft", "delete", "table", "inet", NFT_TABLE, check=False)
    for c in made:
        c.stop()
        shutil.rmtree(c.root, ignore_errors=True)


def test_two_one_split_the_pair_writes_the_lone_node_refuses(split_cluster):
    c = split_cluster(nodes=3, drives_per_node=2, set_drive_count=6, parity=2, in_ns=1)
    a, b, lone = c.nodes
    a.client().create_bucket(Bucket="part")
    acked = {}
    for i, node in enumerate(c.nodes * 2):  # before the cut, through every node
        body = os.urandom(40_000 + i)
        assert s3op(node, "put", "part", f"before-{i}", body)["ok"]
        acked[f"before-{i}"] = body
    shared_before = b"before the cut " * 1000
    assert s3op(lone, "put", "part", "shared", shared_before)["ok"]

    cut()
    try:
        # The lone node: too few lock holders answer (1 of 3), so every write is refused,
        # the first once its requests to the others pass their deadline, the next at once.
        t0 = time.monotonic()
        first = s3op(lone, "put", "part", "minority-0", b"m" * 50_000)
        assert refused(first), first
        assert time.monotonic() - t0 < 30
        for i in range(1, 3):
            r = s3op(lone, "put", "part", f"minority-{i}", b"m" * 50_000)
            assert refused(r), r
        assert refused(s3op(lone, "put", "part", "shared", b"minority " * 1000))
        assert refused(s3op(lone, "delete", "part", "before-0"))

        # The pair: 4 of 6 drives and 2 of 3 lock holders, enough for RS(4+2).
        shared_after = b"the majority's version " * 1000
        for i in range(6):
            node = (a, b)[i % 2]
            body = os.urandom(60_000 + i)
            r = s3op(node, "put", "part", f"during-{i}", body)
            assert r["ok"], r
            acked[f"during-{i}"] = body
        assert s3op(a, "put", "part", "shared", shared_after)["ok"]
        acked["shared"] = shared_after
        assert s3op(b, "delete", "part", "before-1")["ok"]
        del acked["before-1"]
        read_all(a, "part", acked)
        read_all(b, "part", acked)
    finally:
        mend()

    # The cut mends: the lone node gets what it missed, and says nothing it refused.
    during = [k for k in acked if k.startswith("during-")]
    wait_until(lambda: healed([lone], "part", during), 90, "the lone node to be healed")
    wait_until(lambda: s3op(lone, "get", "part", "shared").get("sha256") == sha(shared_after),
               30, "the lone node to serve the majority's version")
    for node in c.nodes:
        read_all(node, "part", acked)
        s3 = node.client()
        keys = {o["Key"] for o in s3.list_objects_v2(Bucket="part").get("Contents", [])}
        assert keys == set(acked), f"listing through node {node.id}"
        for gone in ("minority-0", "minority-1", "minority-2", "before-1"):
            assert s3op(node, "get", "part", gone)["status"] == 404
    # And the lone node writes again.
    r = s3op(lone, "put", "part", "after", b"after" * 1000)
    assert r["ok"], r
    assert a.client().get_object(Bucket="part", Key="after")["Body"].read() == b"after" * 1000


def test_two_two_split_neither_half_writes(split_cluster):
    c = split_cluster(nodes=4, drives_per_node=1, set_drive_count=4, parity=2, in_ns=2)
    a, b, x, y = c.nodes
    a.client().create_bucket(Bucket="even")
    acked = {}
    for i, node in enumerate(c.nodes):
        body = os.urandom(30_000 + i)
        assert s3op(node, "put", "even", f"before-{i}", body)["ok"]
        acked[f"before-{i}"] = body

    cut()
    try:
        # RS(2+2) writes need k + 1 = 3 drives and an exclusive lock needs 3 of 4 holders:
        # neither half has them, whichever node it asks.
        for node in (a, x, b, y):
            r = s3op(node, "put", "even", f"split-{node.id}", b"s" * 40_000)
            assert refused(r), (node.id, r)
            assert refused(s3op(node, "put", "even", "before-0", b"overwrite" * 100))
            assert refused(s3op(node, "delete", "even", "before-1"))
        # Reads need k = 2 shards and a shared lock 2 of 4 holders: both halves still serve
        # what was written before the cut, unchanged.
        for node in (a, x):
            for key, body in acked.items():
                r = s3op(node, "get", "even", key)
                assert r.get("sha256") == sha(body), (node.id, key, r)
    finally:
        mend()

    # Mended: each node takes its peers back at its own next probe (a call to a peer taken as
    # down fails at once and starts one), so writes go through again on each side, each after a
    # try or two.
    for node, key in ((x, "after-x"), (a, "after-a")):
        body = key.encode() * 2_000
        wait_until(lambda: s3op(node, "put", "even", key, body)["ok"], 60,
                   f"writes through node {node.id} after the cut mends")
        acked[key] = body
    for node in c.nodes:
        read_all(node, "even", acked)
        for node_id in range(1, 5):
            assert s3op(node, "get", "even", f"split-{node_id}")["status"] == 404

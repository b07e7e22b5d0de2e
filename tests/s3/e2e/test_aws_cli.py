"""The aws CLI (Debian's awscli 2.x) against openlaked: buckets, small and multipart copies,
listing, sync both ways, presigned URLs, recursive removal."""

import json
import os
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest

from conftest import REGION

AWS_TIMEOUT = 120


def _aws_binary() -> str:
    for candidate in ("/usr/bin/aws", shutil.which("aws")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.skip("the aws CLI is not installed (Debian: awscli)")


@pytest.fixture(scope="module")
def aws(server):
    binary = _aws_binary()
    env = dict(os.environ)
    env.update({
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_ACCESS_KEY_ID": server.access_key,
        "AWS_SECRET_ACCESS_KEY": server.secret_key,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_PAGER": "",
        "AWS_MAX_ATTEMPTS": "1",
    })
    env.pop("AWS_PROFILE", None)
    env.pop("AWS_SESSION_TOKEN", None)

    def run(*args, check=True):
        cmd = [binary, "--endpoint-url", server.endpoint, "--no-cli-pager", *args]
        if args[0] == "s3" and args[1] in ("cp", "sync", "rm", "mv"):
            cmd.append("--only-show-errors")
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=AWS_TIMEOUT)
        if check:
            assert p.returncode == 0, f"{args}: rc {p.returncode}\n{p.stdout}\n{p.stderr}"
        return p
    return run


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_mb_cp_ls_rm_rb(aws, tmp_path, bucket_name):
    b = bucket_name("cli")
    assert "make_bucket: " + b in aws("s3", "mb", f"s3://{b}").stdout
    assert b in aws("s3", "ls").stdout

    small = tmp_path / "small.bin"
    small.write_bytes(os.urandom(1024))
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        for _ in range(64):
            f.write(os.urandom(1 << 20))
    aws("s3", "cp", str(small), f"s3://{b}/dir/small.bin")
    aws("s3", "cp", str(big), f"s3://{b}/big.bin")

    head = json.loads(aws("s3api", "head-object", "--bucket", b, "--key", "big.bin").stdout)
    assert head["ContentLength"] == 64 << 20
    m = re.fullmatch(r'"[0-9a-f]{32}-(\d+)"', head["ETag"])
    assert m, f"a multipart upload's ETag ends in -N: {head['ETag']}"
    assert int(m.group(1)) >= 2
    head = json.loads(aws("s3api", "head-object", "--bucket", b, "--key", "dir/small.bin").stdout)
    assert head["ContentLength"] == 1024
    assert re.fullmatch(r'"[0-9a-f]{32}"', head["ETag"])

    back = tmp_path / "back"
    back.mkdir()
    aws("s3", "cp", f"s3://{b}/dir/small.bin", str(back / "small.bin"))
    aws("s3", "cp", f"s3://{b}/big.bin", str(back / "big.bin"))
    assert (back / "small.bin").read_bytes() == small.read_bytes()
    assert (back / "big.bin").read_bytes() == big.read_bytes()

    top = aws("s3", "ls", f"s3://{b}").stdout
    assert "PRE dir/" in top
    assert re.search(r"\s67108864 big\.bin$", top, re.M)
    rec = aws("s3", "ls", "--recursive", f"s3://{b}").stdout
    assert re.search(r"\s1024 dir/small\.bin$", rec, re.M)

    # Not empty: rb refuses.
    p = aws("s3", "rb", f"s3://{b}", check=False)
    assert p.returncode != 0 and "BucketNotEmpty" in p.stderr
    aws("s3", "rm", "--recursive", f"s3://{b}")
    assert aws("s3", "ls", "--recursive", f"s3://{b}").stdout.strip() == ""
    assert "remove_bucket: " + b in aws("s3", "rb", f"s3://{b}").stdout
    assert b not in aws("s3", "ls").stdout


def test_sync_up_and_down(aws, tmp_path, bucket_name):
    b = bucket_name("sync")
    aws("s3", "mb", f"s3://{b}")
    src = tmp_path / "src"
    (src / "sub" / "deeper").mkdir(parents=True)
    (src / "a.txt").write_bytes(b"alpha\n")
    (src / "empty").write_bytes(b"")
    (src / "sub" / "b.bin").write_bytes(os.urandom(300_000))
    (src / "sub" / "deeper" / "c with space.txt").write_bytes(b"gamma " * 1000)
    aws("s3", "sync", str(src), f"s3://{b}/tree")

    listed = aws("s3", "ls", "--recursive", f"s3://{b}/tree/").stdout
    for key in ("tree/a.txt", "tree/empty", "tree/sub/b.bin", "tree/sub/deeper/c with space.txt"):
        assert key in listed

    dst = tmp_path / "dst"
    dst.mkdir()
    aws("s3", "sync", f"s3://{b}/tree", str(dst))
    assert _tree(dst) == _tree(src)

    # Nothing changed: a second sync (either way) copies nothing.
    cmd_up = aws("s3", "sync", "--dryrun", str(src), f"s3://{b}/tree")
    assert cmd_up.stdout.strip() == ""
    again = aws("s3", "sync", str(src), f"s3://{b}/tree")
    assert "upload:" not in again.stdout
    down = aws("s3", "sync", "--dryrun", f"s3://{b}/tree", str(dst))
    assert down.stdout.strip() == ""

    # One change: exactly that file goes up.
    (src / "a.txt").write_bytes(b"alpha, changed\n")
    changed = aws("s3", "sync", "--dryrun", str(src), f"s3://{b}/tree").stdout
    assert "a.txt" in changed and "b.bin" not in changed

    aws("s3", "rm", "--recursive", f"s3://{b}")
    aws("s3", "rb", f"s3://{b}")


def test_presign(aws, tmp_path, bucket_name):
    b = bucket_name("pre")
    aws("s3", "mb", f"s3://{b}")
    data = os.urandom(200_000)
    f = tmp_path / "obj"
    f.write_bytes(data)
    aws("s3", "cp", str(f), f"s3://{b}/k/obj+1 ~x")
    url = aws("s3", "presign", f"s3://{b}/k/obj+1 ~x", "--expires-in", "300").stdout.strip()
    assert url.startswith("http://127.0.0.1:")
    assert ("X-Amz-Signature=" in url) or ("Signature=" in url and "AWSAccessKeyId=" in url)
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
        assert r.read() == data
    aws("s3", "rm", "--recursive", f"s3://{b}")
    aws("s3", "rb", f"s3://{b}")


def test_versioned_bucket(aws, tmp_path, bucket_name):
    """s3api's versioning calls: enable, two uploads, list both versions, fetch the old one,
    delete (a marker), and `s3 rm` leaving the versions listed."""
    b = bucket_name("cliver")
    aws("s3", "mb", f"s3://{b}")
    aws("s3api", "put-bucket-versioning", "--bucket", b,
        "--versioning-configuration", "Status=Enabled")
    state = json.loads(aws("s3api", "get-bucket-versioning", "--bucket", b).stdout)
    assert state["Status"] == "Enabled"
    src = tmp_path / "f"
    ids = []
    for body in (b"first", b"second"):
        src.write_bytes(body)
        out = aws("s3api", "put-object", "--bucket", b, "--key", "f", "--body", str(src))
        ids.append(json.loads(out.stdout)["VersionId"])
    listed = json.loads(aws("s3api", "list-object-versions", "--bucket", b).stdout)
    assert [v["VersionId"] for v in listed["Versions"]] == ids[::-1]
    dst = tmp_path / "old"
    aws("s3api", "get-object", "--bucket", b, "--key", "f", "--version-id", ids[0], str(dst))
    assert dst.read_bytes() == b"first"
    aws("s3", "rm", f"s3://{b}/f")
    assert aws("s3", "ls", f"s3://{b}/").stdout == ""
    listed = json.loads(aws("s3api", "list-object-versions", "--bucket", b).stdout)
    assert len(listed["Versions"]) == 2 and listed["DeleteMarkers"][0]["IsLatest"] is True

"""Drives that fill up or turn read-only under a running daemon (small tmpfs mounts as drives):
readiness follows the write quorum, and a write the drives cannot take is refused, never
acknowledged on too few drives; a full store answers MinIO's 507 XMinioStorageFull without
drive paths, counted in metrics."""

import os
import re
import subprocess
import time

import pytest

from conftest import Server, boto3_or_skip, make_client
from test_admin import _admin, _get

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@pytest.fixture
def mounts():
    made = []

    def mount(path, size_mb, readonly=False):
        path.mkdir(parents=True, exist_ok=True)
        opts = f"size={size_mb}m" + (",ro" if readonly else "")
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
        made.append(path)

    def remount_ro(path):
        subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)

    mount.remount_ro = remount_ro
    yield mount
    for p in reversed(made):
        subprocess.run(["umount", "-l", str(p)], capture_output=True)


def _ready(admin):
    return _get(f"http://{admin}/health/ready")


def test_full_drives_answer_507_without_paths(tmp_path, mounts):
    boto3_or_skip()
    server = Server(tmp_path)
    for d in server.drives[:2]:
        d.mkdir(parents=True)
    for d in server.drives[2:]:
        mounts(d, 3)
    admin = _admin(server, 'admin_addr = "127.0.0.1:0"\n')
    try:
        # Two of four drives have under 4 MiB free: a write needs three (k + 1 for RS 2+2).
        status, text = _ready(admin)
        assert status == 503 and "drives that can take writes" in text, text
        s3 = make_client(server)
        s3.create_bucket(Bucket="full")
        with pytest.raises(Exception) as e:
            s3.put_object(Bucket="full", Key="big", Body=os.urandom(12 << 20))
        resp = e.value.response
        assert resp["ResponseMetadata"]["HTTPStatusCode"] == 507, resp
        assert resp["Error"]["Code"] == "XMinioStorageFull"
        assert str(tmp_path) not in str(resp) and "/d2" not in str(resp)
        status, metrics = _get(f"http://{admin}/metrics")
        m = re.search(r"^openlake_s3_storage_full_total (\S+)$", metrics, re.M)
        assert m and float(m.group(1)) >= 1, metrics
        # Nothing half-written is listed as stored.
        assert s3.list_objects_v2(Bucket="full").get("KeyCount", 0) == 0
    finally:
        assert server.stop() == 0, server.log.read_text()


def test_read_only_and_full_drives_make_the_store_unready_and_refuse_writes(tmp_path, mounts):
    boto3_or_skip()
    server = Server(tmp_path)
    for d in server.drives[:2]:
        d.mkdir(parents=True)
    mounts(server.drives[2], 64)
    mounts(server.drives[3], 64)
    filler = server.drives[2] / "filler"
    admin = _admin(server, 'admin_addr = "127.0.0.1:0"\n')
    try:
        assert _ready(admin)[0] == 200
        s3 = make_client(server)
        s3.create_bucket(Bucket="rwb")
        s3.put_object(Bucket="rwb", Key="before", Body=b"x" * (3 << 20))
        # One drive turns read-only: three can still take writes (the quorum).
        mounts.remount_ro(server.drives[3])
        assert _ready(admin)[0] == 200
        # Another fills up: two left, fewer than the three a write needs.
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M", "count=64"],
                       capture_output=True)
        status, text = _ready(admin)
        assert status == 503, text
        with pytest.raises(Exception) as e:
            s3.put_object(Bucket="rwb", Key="after", Body=os.urandom(6 << 20))
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] in (503, 507)
        # What was acknowledged before is intact.
        assert s3.get_object(Bucket="rwb", Key="before")["Body"].read() == b"x" * (3 << 20)
    finally:
        filler.unlink(missing_ok=True)
        assert server.stop() == 0, server.log.read_text()

"""Drive loss through the S3 front end: a drive folder removed while openlaked runs, every
object still reads byte-exact, the healer rebuilds the folder, and the rebuilt drive then
carries the data when two others are lost (RS 2+2)."""

import os
import shutil
import time

import pytest

from conftest import Server, boto3_or_skip, make_client

HEAL_TIMEOUT = 25


def _files(drive, bucket):
    root = drive / bucket
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _pack_bytes(drive):
    """Bytes in the drive's pack of small objects' records (.openlake.sys/pack)."""
    pack = drive / ".openlake.sys" / "pack"
    return sum(p.stat().st_size for p in pack.glob("*")) if pack.is_dir() else 0


def _holds_records(drive):
    return any(drive.rglob("%meta")) or _pack_bytes(drive) > 0


def _lose(drive):
    """Removes a drive folder under the running server (whose healer may be recreating it
    at the same moment: then its contents are gone all the same)."""
    for _ in range(10):
        shutil.rmtree(drive, ignore_errors=True)
        if not drive.exists() or not _holds_records(drive):
            break
    assert not drive.exists() or not _holds_records(drive)


def _read_all(s3, bucket, objects):
    for key, data in objects.items():
        got = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert got == data, f"{key}: {len(got)} bytes back, {len(data)} stored"


def _populate(server):
    s3 = make_client(server)
    bucket = "durable"
    s3.create_bucket(Bucket=bucket)
    objects = {f"small/{i:02d}": os.urandom(37 * i + 1) for i in range(16)}
    objects.update({f"big/{i}": os.urandom(3 << 20) for i in range(4)})
    for key, data in objects.items():
        s3.put_object(Bucket=bucket, Key=key, Body=data)
    before = _files(server.drives[0], bucket)
    assert before == _files(server.drives[1], bucket)
    # The big objects have a folder each; the small ones' records are packed.
    assert sum(1 for f in before if f.endswith("%meta")) == 4
    assert _pack_bytes(server.drives[0]) > 16 * 37
    return s3, bucket, objects


@pytest.fixture
def server(tmp_path):
    boto3_or_skip()
    s = Server(tmp_path).start()
    yield s
    alive = s.alive()
    rc = s.stop()
    assert alive and rc == 0, s.log.read_text()


def test_drive_loss_reads_and_writes(server):
    s3, bucket, objects = _populate(server)
    _lose(server.drives[1])
    _read_all(s3, bucket, objects)
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert listed == sorted(objects)
    # Writes go on too (write quorum k + 1 = 3 of 4), and read back.
    for i in range(3):
        data = os.urandom(1 << 20 if i else 100)
        s3.put_object(Bucket=bucket, Key=f"after-loss/{i}", Body=data)
        objects[f"after-loss/{i}"] = data
    _read_all(s3, bucket, objects)
    # A second drive lost: RS(2+2) still reads everything. (Whether it then takes a write
    # depends on the healer, which may already have given a folder back its identity; the
    # k + 1 quorum itself is tested in tests/store/fault_test.cc.)
    _lose(server.drives[3])
    _read_all(s3, bucket, objects)


def test_drive_loss_healed(server):
    s3, bucket, objects = _populate(server)
    lost = server.drives[1]
    _lose(lost)
    _read_all(s3, bucket, objects)
    s3.put_object(Bucket=bucket, Key="after-loss", Body=b"written with a drive gone")
    objects["after-loss"] = b"written with a drive gone"

    # The healer (heal_interval_secs = 1) gives it back its identity and its shards.
    deadline = time.monotonic() + HEAL_TIMEOUT
    want = _files(server.drives[0], bucket)
    # The small objects' records differ between drives by a few bytes (the shard's index).
    want_packed = _pack_bytes(server.drives[0]) * 0.95
    while time.monotonic() < deadline:
        if (lost / ".openlake.sys" / "format.json").is_file() and \
                (lost / bucket).is_dir() and _files(lost, bucket) == want and \
                _pack_bytes(lost) >= want_packed:
            break
        if "taken offline" in server.log.read_text():
            break  # it will not come back
        time.sleep(0.25)
    assert (lost / ".openlake.sys" / "format.json").is_file(), server.log.read_text()
    assert (lost / bucket).is_dir() and _files(lost, bucket) == want, server.log.read_text()
    assert _pack_bytes(lost) >= want_packed, server.log.read_text()
    # Shard files are the same size on every drive (metadata differs by its per-drive fields).
    for rel in want:
        if rel.endswith("%meta"):
            continue
        assert (lost / bucket / rel).stat().st_size == \
            (server.drives[0] / bucket / rel).stat().st_size, rel
    _read_all(s3, bucket, objects)

    # Now lose the two other drives: the rebuilt one and d0 hold enough shards for all.
    _lose(server.drives[2])
    _lose(server.drives[3])
    _read_all(s3, bucket, objects)

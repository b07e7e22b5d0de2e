"""S3Transfer (openlake_client._openlake, over openlake/s3/transfer.h) against a real openlaked
in storage mode: objects of mixed sizes up and back at once from and into buffers of every
kind Python hands over, multipart uploads, ranges, progress, and errors as exceptions."""

import os

import pytest

import openlake_client as ol


def test_buffers_of_every_kind_up_and_back(store):
    t = store.transfer(connections=4, part_size=5 << 20)
    t.create_bucket("data")
    t.create_bucket("data")  # yours already: fine
    blobs = {
        "empty": b"",
        "bytes": os.urandom(1000),
        "bytearray": bytearray(os.urandom(3 << 20)),
        "multipart": memoryview(os.urandom((12 << 20) + 7)),
    }
    seen = []
    etags = t.put_many("data", list(blobs.items()), progress=lambda d, n: seen.append((d, n)))
    total = sum(len(b) for b in blobs.values())
    assert seen[-1] == (total, total)
    assert etags[3].endswith("-3")  # three parts of 5 MiB at most
    listed = {k: (size, etag) for k, size, etag in t.list("data")}
    assert listed == {k: (len(b), e) for (k, b), e in zip(blobs.items(), etags)}
    assert t.head("data", "multipart") == (len(blobs["multipart"]), etags[3])

    # Back into preallocated buffers, whole and in part (a range across part boundaries).
    outs = {k: bytearray(len(b)) for k, b in blobs.items()}
    t.get_many("data", [(k, 0, memoryview(o)) for k, o in outs.items()])
    assert all(bytes(outs[k]) == bytes(b) for k, b in blobs.items())
    part = bytearray(7 << 20)
    t.get_many("data", [("multipart", (4 << 20) + 1, part)])
    assert bytes(part) == bytes(blobs["multipart"][(4 << 20) + 1:(11 << 20) + 1])
    c = t.counters()
    assert c["bytes_sent"] == total and c["retries"] == 0


def test_tensors_and_arrays_go_without_copies(store):
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    t = store.transfer(connections=2)
    t.create_bucket("weights")
    w = torch.randn(256, 1024)
    a = np.arange(100_000, dtype=np.int64)
    t.put_many("weights", [("w", w.numpy()), ("a", a)])
    w2 = torch.empty_like(w)
    a2 = np.empty_like(a)
    t.get_many("weights", [("w", 0, w2.numpy()), ("a", 0, a2)])
    assert torch.equal(w, w2) and (a == a2).all()
    with pytest.raises(ValueError, match="C-contiguous"):
        t.put_many("weights", [("strided", a[::2])])
    with pytest.raises(BufferError):
        t.get_many("weights", [("a", 0, b"read-only bytes")])


def test_reads_checked_against_a_crc64(store):
    t = store.transfer(connections=2)
    t.create_bucket("sums")
    data = os.urandom((9 << 20) + 3)
    t.put_many("sums", [("d", data)])
    back, part = bytearray(len(data)), bytearray(10)
    t.get_many("sums", [("d", 0, back, ol.crc64(data)), ("d", 5, part, None)])
    assert back == data and part == data[5:15]
    with pytest.raises(ol.DataLossError, match="CRC-64") as e:
        t.get_many("sums", [("d", 0, back, ol.crc64(data)), ("d", 1, part, ol.crc64(data[:10]))])
    assert "d at 1" in str(e.value)
    with pytest.raises(ValueError, match="crc64"):
        t.get_many("sums", [("d", 0, part, 1, 2)])


def test_errors_name_the_item_and_s3s_code(store):
    t = store.transfer(connections=2)
    t.create_bucket("errs")
    t.put_many("errs", [("there", b"12345")])
    with pytest.raises(ol.NotFoundError) as e:
        t.get_many("errs", [("there", 0, bytearray(5)), ("absent", 0, bytearray(5))])
    assert e.value.s3_code == "NoSuchKey" and "absent" in str(e.value)
    with pytest.raises(ol.InvalidArgumentError):  # OutOfRange: the object is too short
        t.get_many("errs", [("there", 2, bytearray(10))])
    with pytest.raises(ol.NotFoundError) as e:
        t.put_many("nobucket", [("a", b"1"), ("b", b"2")])
    assert e.value.s3_code == "NoSuchBucket" and "1 more of 2" in str(e.value)
    with pytest.raises(ol.NotFoundError):
        t.head("errs", "absent")
    wrong = ol.S3Transfer(store.endpoint, store.access_key, "not-the-secret", connections=1)
    with pytest.raises(ol.PermissionDeniedError) as e:
        wrong.put_many("errs", [("x", b"1")])
    assert e.value.s3_code == "SignatureDoesNotMatch"
    with pytest.raises(ol.InvalidArgumentError):
        ol.S3Transfer(store.endpoint, store.access_key, store.secret_key, part_size=1 << 20)

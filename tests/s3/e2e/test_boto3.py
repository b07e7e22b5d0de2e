"""boto3 (Debian's python3-boto3) against openlaked: every operation the server serves, with
its error answers, plus streamed (aws-chunked) uploads built by hand."""

import base64
import binascii
import datetime
import hashlib
import hmac
import io
import os
import time
import urllib.error
import urllib.request
import zlib

import pytest

from conftest import REGION, boto3_or_skip, error_code, make_client, raw_request, send, \
    sign_headers, xml_code

boto3_or_skip()
from botocore.exceptions import ClientError  # noqa: E402


def md5_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def crc32_b64(data: bytes) -> str:
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


@pytest.fixture
def bucket(s3, bucket_name):
    name = bucket_name("bt")
    s3.create_bucket(Bucket=name)
    yield name
    # Empty and delete it (uploads too), so a failed test leaves nothing behind.
    try:
        for up in s3.list_multipart_uploads(Bucket=name).get("Uploads", []):
            s3.abort_multipart_upload(Bucket=name, Key=up["Key"], UploadId=up["UploadId"])
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
            for o in page.get("Contents", []):
                s3.delete_object(Bucket=name, Key=o["Key"])
        s3.delete_bucket(Bucket=name)
    except ClientError:
        pass


def get_bytes(s3, bucket, key, **kw) -> bytes:
    return s3.get_object(Bucket=bucket, Key=key, **kw)["Body"].read()


# ---------------------------------------------------------------- buckets

def test_bucket_lifecycle(s3, bucket_name):
    name = bucket_name("life")
    r = s3.create_bucket(Bucket=name)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert r["ResponseMetadata"]["HTTPHeaders"].get("x-amz-request-id")
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert name in names
    assert s3.head_bucket(Bucket=name)["ResponseMetadata"]["HTTPStatusCode"] == 200
    loc = s3.get_bucket_location(Bucket=name)["LocationConstraint"]
    assert loc in (None, "", REGION)
    ver = s3.get_bucket_versioning(Bucket=name)
    assert "Status" not in ver or ver["Status"] in ("", None)

    s3.put_object(Bucket=name, Key="x", Body=b"1")
    # Re-creating your own bucket in us-east-1 succeeds and keeps what it holds, as S3.
    s3.create_bucket(Bucket=name)
    assert s3.get_object(Bucket=name, Key="x")["Body"].read() == b"1"
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket=name)
    assert error_code(e) == ("BucketNotEmpty", 409)
    s3.delete_object(Bucket=name, Key="x")
    s3.delete_bucket(Bucket=name)
    assert name not in [b["Name"] for b in s3.list_buckets()["Buckets"]]

    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket=name)
    assert error_code(e) == ("NoSuchBucket", 404)
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket=name)
    assert error_code(e)[1] == 404
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=name, Key="x", Body=b"1")
    assert error_code(e) == ("NoSuchBucket", 404)


@pytest.mark.parametrize("bad", ["ab", "a" * 64, "UpperCase", "under_score", "-leading",
                                 "trailing-", "192.168.1.1", "double..dot"])
def test_create_bucket_bad_names(server, bad):
    # botocore validates some names itself; send these raw so the server decides.
    status, _, body = raw_request(server, "PUT", "/" + bad)
    assert (status, xml_code(body)) == (400, "InvalidBucketName"), body


def test_default_client(server, bucket_name):
    s3 = make_client(server, signature_version=None)
    name = bucket_name("dflt")
    s3.create_bucket(Bucket=name)
    data = os.urandom(5000)
    s3.put_object(Bucket=name, Key="k", Body=data)
    assert get_bytes(s3, name, "k") == data
    s3.delete_object(Bucket=name, Key="k")
    s3.delete_bucket(Bucket=name)


# ---------------------------------------------------------------- listing

KEYS = ["a/1", "a/2", "a/b/3", "b/4", "c", "d e/5", "d+f/6", "e%/7", "z\u00e9/8"]


@pytest.fixture
def listed(s3, bucket):
    for k in KEYS:
        s3.put_object(Bucket=bucket, Key=k, Body=k.encode())
    return bucket


def test_list_v1_v2_prefix_delimiter(s3, listed):
    for fn, extra in ((s3.list_objects, {}), (s3.list_objects_v2, {})):
        r = fn(Bucket=listed, **extra)
        assert [o["Key"] for o in r["Contents"]] == sorted(KEYS)
        assert all(o["Size"] == len(o["Key"].encode()) for o in r["Contents"])
        r = fn(Bucket=listed, Prefix="a/")
        assert [o["Key"] for o in r["Contents"]] == ["a/1", "a/2", "a/b/3"]
        r = fn(Bucket=listed, Delimiter="/")
        assert [o["Key"] for o in r["Contents"]] == ["c"]
        assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/", "b/", "d e/", "d+f/", "e%/",
                                                              "z\u00e9/"]
        r = fn(Bucket=listed, Prefix="a/", Delimiter="/")
        assert [o["Key"] for o in r["Contents"]] == ["a/1", "a/2"]
        assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/b/"]
        r = fn(Bucket=listed, Prefix="nothing")
        assert "Contents" not in r
    r = s3.list_objects_v2(Bucket=listed, StartAfter="b/4")
    assert [o["Key"] for o in r["Contents"]] == sorted(KEYS)[sorted(KEYS).index("b/4") + 1:]
    r = s3.list_objects_v2(Bucket=listed, Prefix="a/")
    assert r["KeyCount"] == 3


def test_list_pagination(s3, listed):
    keys = []
    pages = 0
    for page in s3.get_paginator("list_objects").paginate(Bucket=listed,
                                                          PaginationConfig={"PageSize": 2}):
        pages += 1
        keys += [o["Key"] for o in page.get("Contents", [])]
    assert keys == sorted(KEYS) and pages == 5

    # v1 with a delimiter pages by NextMarker.
    r = s3.list_objects(Bucket=listed, MaxKeys=2, Delimiter="/")
    assert r["IsTruncated"]
    seen = [o["Key"] for o in r.get("Contents", [])] + [p["Prefix"] for p in
                                                        r.get("CommonPrefixes", [])]
    while r["IsTruncated"]:
        r = s3.list_objects(Bucket=listed, MaxKeys=2, Delimiter="/", Marker=r["NextMarker"])
        seen += [o["Key"] for o in r.get("Contents", [])] + [p["Prefix"] for p in
                                                             r.get("CommonPrefixes", [])]
    assert sorted(seen) == ["a/", "b/", "c", "d e/", "d+f/", "e%/", "z\u00e9/"]

    keys = []
    tokens = 0
    for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket=listed, PaginationConfig={"PageSize": 3}):
        keys += [o["Key"] for o in page.get("Contents", [])]
        tokens += bool(page.get("NextContinuationToken"))
    assert keys == sorted(KEYS) and tokens == 2
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket=listed, StartAfter="a/2", PaginationConfig={"PageSize": 2}):
        keys += [o["Key"] for o in page.get("Contents", [])]
    assert keys == sorted(KEYS)[2:]


def test_list_encoding_type_url(s3, listed):
    # botocore decodes the keys itself only when it asked for url encoding on its own; asked
    # for by the caller, the answer comes back encoded.
    from urllib.parse import unquote
    r = s3.list_objects_v2(Bucket=listed, EncodingType="url")
    keys = [o["Key"] for o in r["Contents"]]
    assert [unquote(k) for k in keys] == sorted(KEYS)
    assert "d%20e/5" in keys and "e%25/7" in keys
    r = s3.list_objects(Bucket=listed, EncodingType="url", Delimiter="/")
    assert "d%20e/" in [p["Prefix"] for p in r["CommonPrefixes"]]
    # Without EncodingType botocore asks for url encoding and decodes: plain keys come back.
    assert [o["Key"] for o in s3.list_objects(Bucket=listed)["Contents"]] == sorted(KEYS)


def test_list_encoding_type_url_wire(server, s3, listed):
    status, _, body = raw_request(server, "GET", f"/{listed}?encoding-type=url&list-type=2")
    assert status == 200
    assert b"<EncodingType>url</EncodingType>" in body
    assert b"<Key>d%20e/5</Key>" in body or b"<Key>d+e/5</Key>" in body
    assert b"<Key>z%C3%A9/8</Key>" in body
    assert b"<Key>e%25/7</Key>" in body


# ---------------------------------------------------------------- put / get

def test_put_content_md5(s3, bucket):
    data = os.urandom(10_000)
    r = s3.put_object(Bucket=bucket, Key="md5", Body=data, ContentMD5=md5_b64(data))
    assert r["ETag"] == '"%s"' % hashlib.md5(data).hexdigest()
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="md5-bad", Body=data, ContentMD5=md5_b64(data + b"x"))
    assert error_code(e) == ("BadDigest", 400)
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="md5-bad")
    assert error_code(e)[1] == 404
    # Overwriting with a bad digest leaves the old object.
    with pytest.raises(ClientError):
        s3.put_object(Bucket=bucket, Key="md5", Body=b"other", ContentMD5=md5_b64(b"nope"))
    assert get_bytes(s3, bucket, "md5") == data


def test_expect_continue_empty_then_non_empty_on_one_connection(server, bucket):
    """botocore sends "Expect: 100-continue" with file bodies (as the aws CLI's sync does) and
    keeps the status line of a final answer that came without "100 Continue" for the next
    response on that pooled connection (boto/botocore#3755): that response is misread and the
    client waits out its read timeout. So an empty body is granted "100 Continue" too. Empty
    and non-empty PUTs in turn over one pooled connection, each well within the timeout."""
    s3 = make_client(server, max_pool_connections=1, read_timeout=10)
    sent = {"empty": b"", "a.txt": b"alpha\n", "empty2": b"", "b": b"b" * 3000, "c": b"c"}
    for key, data in sent.items():
        start = time.monotonic()
        r = s3.put_object(Bucket=bucket, Key=key, Body=io.BytesIO(data))
        assert time.monotonic() - start < 5, key
        assert r["ETag"] == '"%s"' % hashlib.md5(data).hexdigest()
    for key, data in sent.items():
        assert get_bytes(s3, bucket, key) == data


@pytest.mark.parametrize("algo", ["CRC32", "CRC32C", "SHA1", "SHA256"])
def test_put_checksum_algorithm(s3, bucket, algo):
    data = os.urandom(3000)
    sent = {}

    def capture(request, **_):
        sent.update({k.lower(): v for k, v in request.headers.items()})
    s3.meta.events.register("before-send.s3.PutObject", capture)
    try:
        r = s3.put_object(Bucket=bucket, Key="ck-" + algo, Body=data, ChecksumAlgorithm=algo)
    finally:
        s3.meta.events.unregister("before-send.s3.PutObject", capture)
    # Over plain http boto3 1.26 sends the checksum as a header (a trailer only over https).
    header = "x-amz-checksum-" + algo.lower()
    value = sent[header]
    value = value.decode() if isinstance(value, bytes) else value
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert r["ResponseMetadata"]["HTTPHeaders"].get(header) == value
    assert get_bytes(s3, bucket, "ck-" + algo) == data


def test_put_checksum_headers_raw(server, s3, bucket):
    data = b"checksummed body " * 100
    good = {"x-amz-checksum-crc32": crc32_b64(data)}
    status, _, body = raw_request(server, "PUT", f"/{bucket}/crc", data, good)
    assert status == 200, body
    sha = base64.b64encode(hashlib.sha256(data).digest()).decode()
    status, _, body = raw_request(server, "PUT", f"/{bucket}/sha", data,
                                  {"x-amz-checksum-sha256": sha})
    assert status == 200, body
    for name, value in (("x-amz-checksum-crc32", crc32_b64(b"x")),
                        ("x-amz-checksum-sha256",
                         base64.b64encode(hashlib.sha256(b"x").digest()).decode())):
        status, _, body = raw_request(server, "PUT", f"/{bucket}/bad", data, {name: value})
        assert status == 400 and xml_code(body) in ("BadDigest", "XAmzContentChecksumMismatch")
    assert get_bytes(s3, bucket, "crc") == data
    assert get_bytes(s3, bucket, "sha") == data
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="bad")
    assert error_code(e)[1] == 404


def test_put_wrong_payload_sha256(server, s3, bucket):
    data = b"payload" * 50
    status, _, body = raw_request(server, "PUT", f"/{bucket}/psha", data,
                                  payload_hash=hashlib.sha256(b"other").hexdigest())
    assert status in (400, 403) and xml_code(body) in ("XAmzContentSHA256Mismatch",
                                                       "BadDigest", "SignatureDoesNotMatch")
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="psha")


def test_metadata_and_headers_round_trip(s3, bucket):
    s3.put_object(Bucket=bucket, Key="meta", Body=b"hello", ContentType="text/x-test",
                  CacheControl="max-age=60", ContentDisposition='attachment; filename="f.txt"',
                  ContentEncoding="identity", ContentLanguage="en",
                  Metadata={"color": "blue", "multi-word": "a b  c"})
    h = s3.head_object(Bucket=bucket, Key="meta")
    assert h["ContentType"] == "text/x-test"
    assert h["CacheControl"] == "max-age=60"
    assert h["ContentDisposition"] == 'attachment; filename="f.txt"'
    assert h["ContentLanguage"] == "en"
    assert h["Metadata"] == {"color": "blue", "multi-word": "a b  c"}
    assert h["ContentLength"] == 5
    g = s3.get_object(Bucket=bucket, Key="meta")
    assert g["Body"].read() == b"hello"
    assert g["ContentType"] == "text/x-test" and g["Metadata"]["color"] == "blue"
    assert g["ETag"] == h["ETag"] == '"%s"' % hashlib.md5(b"hello").hexdigest()
    assert isinstance(h["LastModified"], datetime.datetime)


def test_get_ranges(s3, bucket):
    data = bytes(range(256)) * 40  # 10240 bytes
    s3.put_object(Bucket=bucket, Key="r", Body=data)
    n = len(data)
    for rng, a, b in (("bytes=0-0", 0, 0), ("bytes=100-199", 100, 199),
                      ("bytes=10000-", 10000, n - 1), ("bytes=-17", n - 17, n - 1),
                      ("bytes=10200-99999", 10200, n - 1), ("bytes=-99999", 0, n - 1)):
        r = s3.get_object(Bucket=bucket, Key="r", Range=rng)
        assert r["Body"].read() == data[a:b + 1], rng
        assert r["ResponseMetadata"]["HTTPStatusCode"] == 206, rng
        assert r["ContentLength"] == b + 1 - a
        assert r["ContentRange"] == f"bytes {a}-{b}/{n}"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="r", Range="bytes=10240-")
    assert error_code(e) == ("InvalidRange", 416)
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="r", Range="bytes=20000-20001")
    assert error_code(e) == ("InvalidRange", 416)
    # A large object, ranged across its stripes.
    big = os.urandom(5 << 20)
    s3.put_object(Bucket=bucket, Key="big", Body=big)
    for a, b in ((0, 1 << 20), ((1 << 20) - 7, (3 << 20) + 11), ((5 << 20) - 5, (5 << 20) - 1)):
        assert get_bytes(s3, bucket, "big", Range=f"bytes={a}-{b}") == big[a:b + 1]
    assert get_bytes(s3, bucket, "big") == big


def test_conditional_get(s3, bucket):
    s3.put_object(Bucket=bucket, Key="c", Body=b"conditional")
    h = s3.head_object(Bucket=bucket, Key="c")
    etag, mtime = h["ETag"], h["LastModified"]
    assert get_bytes(s3, bucket, "c", IfMatch=etag) == b"conditional"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfMatch='"0123456789abcdef0123456789abcdef"')
    assert error_code(e) == ("PreconditionFailed", 412)
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfNoneMatch=etag)
    assert error_code(e)[1] == 304
    assert get_bytes(s3, bucket, "c", IfNoneMatch='"ffff"') == b"conditional"
    later = mtime + datetime.timedelta(hours=1)
    earlier = mtime - datetime.timedelta(hours=1)
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfModifiedSince=later)
    assert error_code(e)[1] == 304
    assert get_bytes(s3, bucket, "c", IfModifiedSince=earlier) == b"conditional"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfUnmodifiedSince=earlier)
    assert error_code(e) == ("PreconditionFailed", 412)
    assert get_bytes(s3, bucket, "c", IfUnmodifiedSince=later) == b"conditional"
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="c", IfNoneMatch=etag)
    assert error_code(e)[1] == 304


def test_response_overrides(s3, bucket):
    s3.put_object(Bucket=bucket, Key="o", Body=b"override", ContentType="text/plain")
    r = s3.get_object(Bucket=bucket, Key="o", ResponseContentType="application/x-over",
                      ResponseContentDisposition="inline", ResponseCacheControl="no-cache",
                      ResponseContentLanguage="fr", ResponseContentEncoding="identity",
                      ResponseExpires=datetime.datetime(2030, 1, 1,
                                                        tzinfo=datetime.timezone.utc))
    assert r["Body"].read() == b"override"
    assert r["ContentType"] == "application/x-over"
    assert r["ContentDisposition"] == "inline"
    assert r["CacheControl"] == "no-cache"
    assert r["ContentLanguage"] == "fr"
    # The stored object keeps its own.
    assert s3.head_object(Bucket=bucket, Key="o")["ContentType"] == "text/plain"


def test_head_missing(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="missing")
    assert error_code(e)[1] == 404
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="missing")
    assert error_code(e) == ("NoSuchKey", 404)


# ---------------------------------------------------------------- copy / delete

def test_copy_object(s3, bucket, bucket_name):
    data = os.urandom(4 << 20)
    s3.put_object(Bucket=bucket, Key="src", Body=data, ContentType="app/src",
                  Metadata={"k": "v"})
    etag = s3.head_object(Bucket=bucket, Key="src")["ETag"]
    r = s3.copy_object(Bucket=bucket, Key="copy", CopySource={"Bucket": bucket, "Key": "src"})
    assert r["CopyObjectResult"]["ETag"] == etag
    h = s3.head_object(Bucket=bucket, Key="copy")
    assert h["Metadata"] == {"k": "v"} and h["ContentType"] == "app/src"
    assert get_bytes(s3, bucket, "copy") == data

    s3.copy_object(Bucket=bucket, Key="replaced", CopySource=f"{bucket}/src",
                   MetadataDirective="REPLACE", Metadata={"n": "w"}, ContentType="app/new")
    h = s3.head_object(Bucket=bucket, Key="replaced")
    assert h["Metadata"] == {"n": "w"} and h["ContentType"] == "app/new"
    assert get_bytes(s3, bucket, "replaced") == data

    other = bucket_name("dst")
    s3.create_bucket(Bucket=other)
    try:
        s3.copy_object(Bucket=other, Key="x y/\u00fc", CopySource={"Bucket": bucket, "Key": "src"})
        assert get_bytes(s3, other, "x y/\u00fc") == data
        s3.delete_object(Bucket=other, Key="x y/\u00fc")
    finally:
        s3.delete_bucket(Bucket=other)

    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="src", CopySource={"Bucket": bucket, "Key": "src"})
    assert error_code(e) == ("InvalidRequest", 400)
    s3.copy_object(Bucket=bucket, Key="src", CopySource={"Bucket": bucket, "Key": "src"},
                   MetadataDirective="REPLACE", Metadata={"self": "1"})
    assert s3.head_object(Bucket=bucket, Key="src")["Metadata"] == {"self": "1"}
    assert get_bytes(s3, bucket, "src") == data

    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="cond", CopySource={"Bucket": bucket, "Key": "src"},
                       CopySourceIfMatch='"00000000000000000000000000000000"')
    assert error_code(e) == ("PreconditionFailed", 412)
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="cond")
    assert error_code(e)[1] == 404
    s3.copy_object(Bucket=bucket, Key="cond", CopySource={"Bucket": bucket, "Key": "src"},
                   CopySourceIfMatch=etag)
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="nope", CopySource={"Bucket": bucket, "Key": "missing"})
    assert error_code(e) == ("NoSuchKey", 404)


def test_delete_object_and_objects(s3, bucket):
    r = s3.delete_object(Bucket=bucket, Key="never-existed")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    keys = [f"del/{i}" for i in range(10)]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=k.encode())
    r = s3.delete_object(Bucket=bucket, Key="del/0")
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[1:5]]
                                                 + [{"Key": "del/missing"}]})
    assert sorted(d["Key"] for d in r["Deleted"]) == sorted(keys[1:5] + ["del/missing"])
    assert not r.get("Errors")
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[5:8]],
                                                 "Quiet": True})
    assert not r.get("Deleted") and not r.get("Errors")
    left = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="del/")["Contents"]]
    assert left == keys[8:]


# ---------------------------------------------------------------- multipart

MiB = 1 << 20


def test_multipart_full(s3, bucket):
    parts_data = [os.urandom(5 * MiB), os.urandom(5 * MiB), os.urandom(1234)]
    src = os.urandom(7 * MiB)
    s3.put_object(Bucket=bucket, Key="copysrc", Body=src)
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp", ContentType="app/mp",
                                    Metadata={"m": "1"})
    uid = up["UploadId"]
    assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket=bucket)["Uploads"]] == [uid]
    etags = []
    for i, d in enumerate(parts_data[:2], start=1):
        r = s3.upload_part(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=i, Body=d,
                           ContentMD5=md5_b64(d))
        assert r["ETag"] == '"%s"' % hashlib.md5(d).hexdigest()
        etags.append(r["ETag"])
    # Part 3 copied from a range of another object; part 4 is the small last part.
    r = s3.upload_part_copy(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=3,
                            CopySource={"Bucket": bucket, "Key": "copysrc"},
                            CopySourceRange=f"bytes={MiB}-{6 * MiB - 1}")
    etags.append(r["CopyPartResult"]["ETag"])
    r = s3.upload_part(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=4, Body=parts_data[2])
    etags.append(r["ETag"])
    lp = s3.list_parts(Bucket=bucket, Key="mp", UploadId=uid)
    assert [p["PartNumber"] for p in lp["Parts"]] == [1, 2, 3, 4]
    assert [p["Size"] for p in lp["Parts"]] == [5 * MiB, 5 * MiB, 5 * MiB, 1234]
    assert [p["ETag"] for p in lp["Parts"]] == etags
    lp = s3.list_parts(Bucket=bucket, Key="mp", UploadId=uid, MaxParts=2)
    assert lp["IsTruncated"] and [p["PartNumber"] for p in lp["Parts"]] == [1, 2]
    lp = s3.list_parts(Bucket=bucket, Key="mp", UploadId=uid,
                       PartNumberMarker=lp["NextPartNumberMarker"])
    assert [p["PartNumber"] for p in lp["Parts"]] == [3, 4]

    r = s3.complete_multipart_upload(
        Bucket=bucket, Key="mp", UploadId=uid,
        MultipartUpload={"Parts": [{"PartNumber": i + 1, "ETag": e}
                                   for i, e in enumerate(etags)]})
    want_etag = hashlib.md5(b"".join(bytes.fromhex(e.strip('"')) for e in etags)).hexdigest()
    assert r["ETag"] == f'"{want_etag}-4"'
    whole = parts_data[0] + parts_data[1] + src[MiB:6 * MiB] + parts_data[2]
    assert get_bytes(s3, bucket, "mp") == whole
    h = s3.head_object(Bucket=bucket, Key="mp")
    assert h["ContentLength"] == len(whole) and h["ETag"] == r["ETag"]
    assert h["ContentType"] == "app/mp" and h["Metadata"] == {"m": "1"}
    assert get_bytes(s3, bucket, "mp", Range=f"bytes={5 * MiB - 3}-{5 * MiB + 2}") == \
        whole[5 * MiB - 3:5 * MiB + 3]
    assert "Uploads" not in s3.list_multipart_uploads(Bucket=bucket)
    with pytest.raises(ClientError) as e:
        s3.list_parts(Bucket=bucket, Key="mp", UploadId=uid)
    assert error_code(e) == ("NoSuchUpload", 404)


def _upload(s3, bucket, key, sizes):
    uid = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    etags = []
    for i, n in enumerate(sizes, start=1):
        etags.append(s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=i,
                                    Body=os.urandom(n))["ETag"])
    return uid, etags


def test_complete_with_full_object_checksum_headers(server, s3, bucket):
    """Current SDKs send the whole object's checksum with CompleteMultipartUpload and a
    checksum per Part: the completion goes through (the document's own bytes are what the
    request's payload hash covers)."""
    uid = s3.create_multipart_upload(Bucket=bucket, Key="sdk-v2")["UploadId"]
    part = os.urandom(100_000)
    etag = s3.upload_part(Bucket=bucket, Key="sdk-v2", UploadId=uid, PartNumber=1,
                          Body=part)["ETag"]
    doc = (f"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{etag}</ETag>"
           f"<ChecksumCRC32>{crc32_b64(part)}</ChecksumCRC32></Part>"
           f"</CompleteMultipartUpload>").encode()
    status, _, body = raw_request(server, "POST", f"/{bucket}/sdk-v2?uploadId={uid}", doc,
                                  {"x-amz-checksum-crc32": crc32_b64(part),
                                   "x-amz-checksum-type": "FULL_OBJECT"})
    assert status == 200, body
    assert get_bytes(s3, bucket, "sdk-v2") == part


def test_conditional_writes_honoured_not_ignored(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="cw", Body=b"first")
    status, _, body = raw_request(server, "PUT", f"/{bucket}/cw", b"second",
                                  {"If-None-Match": "*"})
    assert (status, xml_code(body)) == (412, "PreconditionFailed"), body
    assert get_bytes(s3, bucket, "cw") == b"first"


def test_multipart_errors(s3, bucket):
    uid, etags = _upload(s3, bucket, "bad", [5 * MiB, 5 * MiB, 100])

    def complete(parts):
        with pytest.raises(ClientError) as e:
            s3.complete_multipart_upload(Bucket=bucket, Key="bad", UploadId=uid,
                                         MultipartUpload={"Parts": parts})
        return error_code(e)

    wrong = [{"PartNumber": 1, "ETag": etags[0]},
             {"PartNumber": 2, "ETag": '"0123456789abcdef0123456789abcdef"'}]
    assert complete(wrong) == ("InvalidPart", 400)
    assert complete([{"PartNumber": 1, "ETag": etags[0]},
                     {"PartNumber": 7, "ETag": etags[1]}]) == ("InvalidPart", 400)
    assert complete([{"PartNumber": 2, "ETag": etags[1]},
                     {"PartNumber": 1, "ETag": etags[0]}]) == ("InvalidPartOrder", 400)
    # The upload survives failed completions.
    assert len(s3.list_parts(Bucket=bucket, Key="bad", UploadId=uid)["Parts"]) == 3
    s3.abort_multipart_upload(Bucket=bucket, Key="bad", UploadId=uid)
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=bucket, Key="bad", UploadId=uid, PartNumber=1, Body=b"x")
    assert error_code(e) == ("NoSuchUpload", 404)
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="bad", UploadId=uid,
                                     MultipartUpload={"Parts": [{"PartNumber": 1,
                                                                 "ETag": etags[0]}]})
    assert error_code(e) == ("NoSuchUpload", 404)
    with pytest.raises(ClientError) as e:
        s3.abort_multipart_upload(Bucket=bucket, Key="bad", UploadId=uid)
    assert error_code(e) == ("NoSuchUpload", 404)
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="bad")

    # A small part that is not the last one.
    uid, etags = _upload(s3, bucket, "small", [1000, 5 * MiB])
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(
            Bucket=bucket, Key="small", UploadId=uid,
            MultipartUpload={"Parts": [{"PartNumber": i + 1, "ETag": t}
                                       for i, t in enumerate(etags)]})
    assert error_code(e) == ("EntityTooSmall", 400)
    s3.abort_multipart_upload(Bucket=bucket, Key="small", UploadId=uid)
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="small")


# ---------------------------------------------------------------- presigned and streamed

def test_presigned_get_v4_and_expiry(s3, bucket):
    data = os.urandom(33_333)
    s3.put_object(Bucket=bucket, Key="p/q r", Body=data)
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p/q r"},
                                    ExpiresIn=60)
    assert "X-Amz-Signature=" in url
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.read() == data
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "p/q r"},
                                    ExpiresIn=1)
    time.sleep(2.1)
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url, timeout=10)
    assert e.value.code == 403 and xml_code(e.value.read()) == "AccessDenied"

    put_url = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "pp"},
                                        ExpiresIn=60)
    req = urllib.request.Request(put_url, data=b"presigned put", method="PUT")
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200
    assert get_bytes(s3, bucket, "pp") == b"presigned put"


def test_presigned_sigv2(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="v2", Body=b"sigv2 body")
    v2 = make_client(server, signature_version="s3")
    url = v2.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "v2"},
                                    ExpiresIn=60)
    assert "AWSAccessKeyId=" in url and "Signature=" in url
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.read() == b"sigv2 body"


def _signing_key(secret, date, region=REGION):
    k = hmac.new(("AWS4" + secret).encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


EMPTY_SHA = hashlib.sha256(b"").hexdigest()


def _streaming_put(server, path, data, chunk_size, corrupt_chunk=None):
    headers = {"Content-Encoding": "aws-chunked",
               "x-amz-decoded-content-length": str(len(data))}
    chunks = [data[i:i + chunk_size] for i in range(0, len(data), chunk_size)] + [b""]
    # The encoded length must be known to sign Content-Length; compute with fake signatures.
    length = sum(len(f"{len(c):x};chunk-signature=" + "0" * 64 + "\r\n") + len(c) + 2
                 for c in chunks)
    headers["Content-Length"] = str(length)
    h = sign_headers(server, "PUT", path, b"", headers,
                     payload_hash="STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
    auth = h["Authorization"]
    seed = auth.split("Signature=")[1]
    amz_date = h["X-Amz-Date"]
    scope = f"{amz_date[:8]}/{REGION}/s3/aws4_request"
    key = _signing_key(server.secret_key, amz_date[:8])
    prev = seed
    body = b""
    for i, c in enumerate(chunks):
        sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, prev, EMPTY_SHA,
                         hashlib.sha256(c).hexdigest()])
        sig = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
        prev = sig
        if i == corrupt_chunk:
            c = bytes([c[0] ^ 1]) + c[1:]
        body += f"{len(c):x};chunk-signature={sig}\r\n".encode() + c + b"\r\n"
    assert len(body) == length
    status, _, data = send(server, "PUT", path, body, h)
    return status, data


def test_streamed_signed_upload(server, s3, bucket):
    data = os.urandom(200_000)
    status, body = _streaming_put(server, f"/{bucket}/streamed", data, 64 * 1024)
    assert status == 200, body
    assert get_bytes(s3, bucket, "streamed") == data
    assert s3.head_object(Bucket=bucket, Key="streamed")["ContentLength"] == len(data)
    # A chunk changed in flight: its signature no longer matches, nothing is stored.
    status, body = _streaming_put(server, f"/{bucket}/tampered", data, 64 * 1024,
                                  corrupt_chunk=1)
    assert status == 403 and xml_code(body) == "SignatureDoesNotMatch", body
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="tampered")


def _unsigned_trailer_put(server, path, data, checksum_b64):
    headers = {"Content-Encoding": "aws-chunked",
               "x-amz-decoded-content-length": str(len(data)),
               "x-amz-trailer": "x-amz-checksum-crc32"}
    body = (f"{len(data):x}\r\n".encode() + data + b"\r\n0\r\n"
            + f"x-amz-checksum-crc32:{checksum_b64}\r\n\r\n".encode())
    headers["Content-Length"] = str(len(body))
    h = sign_headers(server, "PUT", path, b"", headers,
                     payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER")
    status, _, data = send(server, "PUT", path, body, h)
    return status, data


def test_unsigned_trailer_upload(server, s3, bucket):
    data = os.urandom(70_000)
    status, body = _unsigned_trailer_put(server, f"/{bucket}/trailer", data, crc32_b64(data))
    assert status == 200, body
    assert get_bytes(s3, bucket, "trailer") == data
    status, body = _unsigned_trailer_put(server, f"/{bucket}/trailer-bad", data,
                                         crc32_b64(data + b"!"))
    assert status == 400 and xml_code(body) == "BadDigest", body
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="trailer-bad")
    assert error_code(e)[1] == 404
    assert get_bytes(s3, bucket, "trailer") == data


def test_request_ids(s3, bucket):
    ids = set()
    for _ in range(5):
        r = s3.list_objects_v2(Bucket=bucket)
        ids.add(r["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"])
    assert len(ids) == 5
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="none")
    assert e.value.response["ResponseMetadata"]["HTTPHeaders"].get("x-amz-request-id")
    assert e.value.response["Error"].get("RequestId") or \
        e.value.response["ResponseMetadata"].get("RequestId")

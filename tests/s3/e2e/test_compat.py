"""S3 behaviour that SDKs, tools and conformance suites rely on beyond the basic calls
(docs/s3.md, "What is implemented"): each test drives a real openlaked through boto3 or raw
signed requests and checks the answer S3 gives.
"""

import base64
import gzip
import hashlib
import os
import re
import shutil
import zlib
from urllib.parse import quote as _quote, unquote

import pytest

from conftest import Server, error_code, make_client, raw_request, send, xml_code

pytest.importorskip("boto3")
from botocore.exceptions import ClientError  # noqa: E402


def quote(key: str) -> str:
    """A key as a path: every byte but unreserved ones and '/' percent-encoded."""
    return _quote(key, safe="/")


def test_failed_conditions_carry_etag_and_last_modified(s3, server, bucket_name):
    """304 and 412 answers of GET and HEAD name the object's ETag and Last-Modified, as S3's
    do (caches revalidate with them)."""
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    put = s3.put_object(Bucket=b, Key="k", Body=b"conditional")
    head = s3.head_object(Bucket=b, Key="k")
    etag, modified = put["ETag"], head["ResponseMetadata"]["HTTPHeaders"]["last-modified"]
    for method in ("GET", "HEAD"):
        for cond, status in (({"If-None-Match": etag}, 304),
                             ({"If-Modified-Since": modified}, 304),
                             ({"If-Match": '"0123"'}, 412),
                             ({"If-Unmodified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"}, 412)):
            got, hdrs, body = raw_request(server, method, f"/{b}/k", headers=cond)
            assert got == status, (method, cond, body)
            assert hdrs.get("etag") == etag, (method, cond, hdrs)
            assert hdrs.get("last-modified") == modified, (method, cond, hdrs)
            if status == 304:
                assert body == b""


def test_aws_chunked_is_not_stored_as_content_encoding(s3, server, bucket_name):
    """aws-chunked frames the request body; S3 removes it from the stored Content-Encoding."""
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    body = gzip.compress(b"x" * 1000)
    for sent, stored in (("gzip, aws-chunked", "gzip"), ("aws-chunked", None),
                         ("aws-chunked,gzip", "gzip"), ("gzip", "gzip")):
        s3.put_object(Bucket=b, Key="k", Body=body, ContentEncoding=sent)
        got = s3.head_object(Bucket=b, Key="k")
        assert got.get("ContentEncoding") == stored, sent
    # The body itself is stored as sent (aws-chunked framing decoded, gzip untouched).
    assert s3.get_object(Bucket=b, Key="k")["Body"].read() == body


def test_unknown_expect_is_ignored(s3, server, bucket_name):
    """An Expect other than 100-continue is ignored, as S3 does, not 417."""
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    status, _, data = raw_request(server, "PUT", f"/{b}/e", b"expected",
                                  {"Expect": "something-else"})
    assert status == 200, data
    assert s3.get_object(Bucket=b, Key="e")["Body"].read() == b"expected"


def test_recreating_your_own_bucket(s3, bucket_name, tmp_path):
    """us-east-1: re-creating your own bucket is a 200 that keeps its contents; another
    region's endpoint answers BucketAlreadyOwnedByYou."""
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="kept", Body=b"still here")
    r = s3.create_bucket(Bucket=b)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert s3.get_object(Bucket=b, Key="kept")["Body"].read() == b"still here"

    (tmp_path / "eu").mkdir()
    other = Server(tmp_path / "eu", region="eu-west-1").start()
    try:
        eu = make_client(other, region="eu-west-1")
        cfg = {"LocationConstraint": "eu-west-1"}
        eu.create_bucket(Bucket=b, CreateBucketConfiguration=cfg)
        eu.put_object(Bucket=b, Key="kept", Body=b"eu")
        with pytest.raises(ClientError) as e:
            eu.create_bucket(Bucket=b, CreateBucketConfiguration=cfg)
        assert error_code(e) == ("BucketAlreadyOwnedByYou", 409)
        assert eu.get_object(Bucket=b, Key="kept")["Body"].read() == b"eu"
        status, _, data = raw_request(other, "PUT", f"/{b}", region="eu-west-1")
        assert (status, xml_code(data)) == (409, "BucketAlreadyOwnedByYou")
    finally:
        assert other.stop() == 0
        shutil.rmtree(tmp_path / "eu", ignore_errors=True)


def test_complete_multipart_upload_is_idempotent(s3, bucket_name):
    """A retried Complete of an upload that already completed with the same parts answers the
    same success (SDKs retry it on timeouts); other parts, or another upload id, are still
    NoSuchUpload. A part number uploaded twice completes with the last upload."""
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    up = s3.create_multipart_upload(Bucket=b, Key="mp")["UploadId"]
    first = s3.upload_part(Bucket=b, Key="mp", UploadId=up, PartNumber=1, Body=b"a" * 5000)
    second = s3.upload_part(Bucket=b, Key="mp", UploadId=up, PartNumber=1, Body=b"b" * 4000)
    assert first["ETag"] != second["ETag"]
    parts = {"Parts": [{"PartNumber": 1, "ETag": second["ETag"]}]}
    with pytest.raises(ClientError) as e:  # the replaced upload of part 1 is gone
        s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": first["ETag"]}]})
    assert error_code(e) == ("InvalidPart", 400)
    done = s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up, MultipartUpload=parts)
    assert s3.get_object(Bucket=b, Key="mp")["Body"].read() == b"b" * 4000
    again = s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up, MultipartUpload=parts)
    assert again["ETag"] == done["ETag"]
    assert again["Key"] == "mp" and again["Bucket"] == b
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": first["ETag"]}]})
    assert error_code(e) == ("NoSuchUpload", 404)
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId="0" * 32,
                                     MultipartUpload=parts)
    assert error_code(e) == ("NoSuchUpload", 404)
    # Once the object is overwritten, the retry is no longer its completion.
    s3.put_object(Bucket=b, Key="mp", Body=b"newer")
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up, MultipartUpload=parts)
    assert error_code(e) == ("NoSuchUpload", 404)
    assert s3.get_object(Bucket=b, Key="mp")["Body"].read() == b"newer"


def test_odd_keys_round_trip_and_list(s3, server, bucket_name):
    """Keys are S3 keys: empty segments, '.' and '..' segments, leading and trailing slashes,
    control characters and any UTF-8 round-trip, list in S3's order, and roll up under a
    delimiter; none of them reaches outside the bucket's folder."""
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    keys = ["a//b", "a/./b", "a/../b", "..", ".", "/lead", "//", "trail/", "a/b/", "ctl\x01\r\t",
            "nul\x00x", "日本語/キー", "emoji/\U0001F600", "sp ace+plus%25"]
    for k in keys:
        status, _, body = raw_request(server, "PUT", f"/{b}/" + quote(k), ("v:" + k).encode())
        assert status == 200, (k, body)
    for k in keys:
        status, _, body = raw_request(server, "GET", f"/{b}/" + quote(k))
        assert (status, body) == (200, ("v:" + k).encode()), k
    # botocore parses listings with an XML parser that refuses some control characters: the
    # URL-encoded form carries every key.
    listed = s3.list_objects_v2(Bucket=b, EncodingType="url")
    got = [unquote(o["Key"]) for o in listed["Contents"]]
    assert got == sorted(keys, key=lambda k: k.encode())
    top = s3.list_objects_v2(Bucket=b, Delimiter="/", EncodingType="url")
    assert [unquote(p["Prefix"]) for p in top["CommonPrefixes"]] == [
        "/", "a/", "emoji/", "trail/", "日本語/"]
    under = s3.list_objects_v2(Bucket=b, Prefix="a/", Delimiter="/")
    assert [p["Prefix"] for p in under["CommonPrefixes"]] == ["a/../", "a/./", "a//", "a/b/"]
    for k in keys:
        assert raw_request(server, "DELETE", f"/{b}/" + quote(k))[0] == 204
    assert s3.list_objects_v2(Bucket=b)["KeyCount"] == 0
    for d in server.drives:
        assert not os.path.exists(os.path.join(d, "lead"))


def test_listing_escapes_and_tokens(s3, server, bucket_name):
    """Without encoding-type=url, control characters in keys come back as XML character
    references (a carriage return too), not %-encoded; an empty continuation-token lists from
    the start."""
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    for k in ("x\r\ny", "plain"):
        assert raw_request(server, "PUT", f"/{b}/" + quote(k), b"1")[0] == 200
    status, _, body = raw_request(server, "GET", f"/{b}?list-type=2")
    assert status == 200
    assert b"<Key>x&#xD;\ny</Key>" in body
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=b)["Contents"]]
    assert keys == ["plain", "x\r\ny"]
    status, _, body = raw_request(server, "GET", f"/{b}?list-type=2&continuation-token=")
    assert status == 200, body
    assert body.count(b"<Key>") == 2


def test_conditional_puts(s3, server, bucket_name):
    """If-None-Match: * creates only when the key is absent; If-Match: <etag> replaces only the
    object with that ETag (compare-and-swap); a failed condition is 412 and changes nothing."""
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    path = f"/{b}/table/_delta_log/0001.json"
    status, hdrs, body = raw_request(server, "PUT", path, b"v1", {"If-None-Match": "*"})
    assert status == 200, body
    v1 = hdrs["etag"]
    status, _, body = raw_request(server, "PUT", path, b"v1-again", {"If-None-Match": "*"})
    assert (status, xml_code(body)) == (412, "PreconditionFailed")
    status, hdrs, body = raw_request(server, "PUT", path, b"v2", {"If-Match": v1})
    assert status == 200, body
    v2 = hdrs["etag"]
    status, _, body = raw_request(server, "PUT", path, b"stale", {"If-Match": v1})
    assert (status, xml_code(body)) == (412, "PreconditionFailed")
    assert raw_request(server, "GET", path)[2] == b"v2"
    assert raw_request(server, "PUT", path, b"v3", {"If-Match": v2.strip('"')})[0] == 200
    # If-Match of a key that does not exist is NoSuchKey, as S3; If-None-Match takes only *.
    status, _, body = raw_request(server, "PUT", f"/{b}/absent", b"x", {"If-Match": v1})
    assert (status, xml_code(body)) == (404, "NoSuchKey")
    status, _, body = raw_request(server, "PUT", f"/{b}/absent", b"x", {"If-None-Match": v1})
    assert (status, xml_code(body)) == (501, "NotImplemented")
    assert raw_request(server, "GET", f"/{b}/absent")[0] == 404
    # CopyObject takes If-None-Match: * for its destination too.
    copy = {"x-amz-copy-source": path}
    status, _, body = raw_request(server, "PUT", f"/{b}/copy", b"", {**copy, "If-None-Match": "*"})
    assert status == 200, body
    status, _, body = raw_request(server, "PUT", f"/{b}/copy", b"", {**copy, "If-None-Match": "*"})
    assert (status, xml_code(body)) == (412, "PreconditionFailed")


def test_conditional_create_races_have_one_winner(server, bucket_name):
    """Concurrent If-None-Match: * PUTs of one new key: exactly one succeeds, the others get
    412 PreconditionFailed or 409 ConditionalRequestConflict, and the object is the winner's."""
    from concurrent.futures import ThreadPoolExecutor
    b = bucket_name()
    assert raw_request(server, "PUT", f"/{b}")[0] == 200
    for round_ in range(3):
        path = f"/{b}/lock-{round_}"
        bodies = [f"writer {i} ".encode() * (1000 * (i + 1)) for i in range(8)]

        def put(body):
            status, _, data = raw_request(server, "PUT", path, body, {"If-None-Match": "*"})
            return status, xml_code(data), body

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(put, bodies))
        winners = [r for r in results if r[0] == 200]
        assert len(winners) == 1, results
        for status, code, _ in results:
            assert (status, code) in ((200, ""), (412, "PreconditionFailed"),
                                      (409, "ConditionalRequestConflict")), results
        assert raw_request(server, "GET", path)[2] == winners[0][2]


def test_conditional_complete_multipart_upload(s3, server, bucket_name):
    """CompleteMultipartUpload with If-None-Match: * or If-Match: a failed condition is 412 and
    leaves the upload, so that it can complete once the condition holds."""
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="mp", Body=b"existing")
    etag = s3.head_object(Bucket=b, Key="mp")["ETag"]
    up = s3.create_multipart_upload(Bucket=b, Key="mp")["UploadId"]
    part = s3.upload_part(Bucket=b, Key="mp", UploadId=up, PartNumber=1, Body=b"p" * 100)
    doc = (f"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{part['ETag']}"
           f"</ETag></Part></CompleteMultipartUpload>").encode()
    path = f"/{b}/mp?uploadId={up}"
    status, _, body = raw_request(server, "POST", path, doc, {"If-None-Match": "*"})
    assert (status, xml_code(body)) == (412, "PreconditionFailed")
    status, _, body = raw_request(server, "POST", path, doc, {"If-Match": '"0000"'})
    assert (status, xml_code(body)) == (412, "PreconditionFailed")
    assert s3.get_object(Bucket=b, Key="mp")["Body"].read() == b"existing"
    status, _, body = raw_request(server, "POST", path, doc, {"If-Match": etag})
    assert status == 200, body
    assert s3.get_object(Bucket=b, Key="mp")["Body"].read() == b"p" * 100


def test_part_number_reads(s3, bucket_name):
    """GetObject and HeadObject with partNumber=N answer part N's bytes with
    x-amz-mp-parts-count (SDKs' multipart downloads use it); a single PUT has part 1 only."""
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    sizes = [5 << 20, (5 << 20) + 3, 1234]
    datas = [bytes([65 + i]) * n for i, n in enumerate(sizes)]
    up = s3.create_multipart_upload(Bucket=b, Key="mp")["UploadId"]
    parts = []
    for i, d in enumerate(datas):
        r = s3.upload_part(Bucket=b, Key="mp", UploadId=up, PartNumber=i + 1, Body=d)
        parts.append({"PartNumber": i + 1, "ETag": r["ETag"]})
    s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up,
                                 MultipartUpload={"Parts": parts})
    total = sum(sizes)
    first = 0
    for i, d in enumerate(datas):
        got = s3.get_object(Bucket=b, Key="mp", PartNumber=i + 1)
        assert got["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert got["PartsCount"] == 3
        assert got["ContentLength"] == len(d)
        assert got["ContentRange"] == f"bytes {first}-{first + len(d) - 1}/{total}"
        assert got["Body"].read() == d
        head = s3.head_object(Bucket=b, Key="mp", PartNumber=i + 1)
        assert head["PartsCount"] == 3 and head["ContentLength"] == len(d)
        first += len(d)
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=b, Key="mp", PartNumber=4)
    assert error_code(e) == ("InvalidPartNumber", 416)
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=b, Key="mp", PartNumber=1, Range="bytes=0-1")
    assert error_code(e)[1] == 400

    s3.put_object(Bucket=b, Key="single", Body=b"single body")
    got = s3.get_object(Bucket=b, Key="single", PartNumber=1)
    assert got["Body"].read() == b"single body"
    assert "PartsCount" not in got
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=b, Key="single", PartNumber=2)
    assert error_code(e) == ("InvalidPartNumber", 416)
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=b, Key="single", PartNumber=2)
    assert error_code(e)[1] == 416


def test_longest_keys_round_trip(s3, bucket_name):
    """S3 allows 1,024-byte keys with segments of any length: they store, list and read back
    (one byte more is KeyTooLongError)."""
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    keys = ["k" * 1024, "d/" + "é" * 511, "x" * 300 + "/" + "y" * 300 + "/" + "z" * 400]
    for k in keys:
        assert len(k.encode()) <= 1024
        s3.put_object(Bucket=b, Key=k, Body=k[-5:].encode())
    for k in keys:
        assert s3.get_object(Bucket=b, Key=k)["Body"].read() == k[-5:].encode()
        assert s3.head_object(Bucket=b, Key=k)["ContentLength"] == len(k[-5:].encode())
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket=b)["Contents"]]
    assert listed == sorted(keys, key=lambda k: k.encode())
    copy = s3.copy_object(Bucket=b, Key="x" * 1024, CopySource={"Bucket": b, "Key": keys[0]})
    assert copy["CopyObjectResult"]["ETag"]
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=b, Key="k" * 1025, Body=b"x")
    assert error_code(e) == ("KeyTooLongError", 400)
    for k in keys + ["x" * 1024]:
        s3.delete_object(Bucket=b, Key=k)
    assert s3.list_objects_v2(Bucket=b)["KeyCount"] == 0


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _crc32(data: bytes) -> bytes:
    return zlib.crc32(data).to_bytes(4, "big")


def test_checksums_of_a_put_are_stored_and_returned(s3, server, bucket_name):
    """The x-amz-checksum-* of a PUT (header or trailer) comes back on GET and HEAD with
    x-amz-checksum-mode: ENABLED (not on ranged reads), and in GetObjectAttributes."""
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    data = os.urandom(100_000)
    sums = {"CRC32": _b64(_crc32(data)), "SHA256": _b64(hashlib.sha256(data).digest()),
            "SHA1": _b64(hashlib.sha1(data).digest())}
    for algo, want in sums.items():
        key = f"obj-{algo}"
        put = s3.put_object(Bucket=b, Key=key, Body=data, ChecksumAlgorithm=algo)
        assert put[f"Checksum{algo}"] == want
        got = s3.get_object(Bucket=b, Key=key, ChecksumMode="ENABLED")
        assert got[f"Checksum{algo}"] == want
        assert got["Body"].read() == data
        head = s3.head_object(Bucket=b, Key=key, ChecksumMode="ENABLED")
        assert head[f"Checksum{algo}"] == want
        hdrs = head["ResponseMetadata"]["HTTPHeaders"]
        assert hdrs.get("x-amz-checksum-type") == "FULL_OBJECT"
        assert f"x-amz-meta-cks:algo" not in hdrs
        plain = s3.head_object(Bucket=b, Key=key)
        assert f"Checksum{algo}" not in plain
        ranged = s3.get_object(Bucket=b, Key=key, ChecksumMode="ENABLED", Range="bytes=0-9")
        assert f"Checksum{algo}" not in ranged
        attrs = s3.get_object_attributes(Bucket=b, Key=key,
                                         ObjectAttributes=["ETag", "Checksum", "ObjectSize",
                                                           "StorageClass"])
        assert attrs["Checksum"][f"Checksum{algo}"] == want
        assert attrs["ObjectSize"] == len(data)
        assert attrs["ETag"] == put["ETag"].strip('"')
        assert attrs["StorageClass"] == "STANDARD"
    # A header-sent checksum (no trailer) is kept the same way.
    status, _, body = raw_request(server, "PUT", f"/{b}/hdr", data,
                                  {"x-amz-checksum-crc32": sums["CRC32"]})
    assert status == 200, body
    got = s3.head_object(Bucket=b, Key="hdr", ChecksumMode="ENABLED")
    assert got["ChecksumCRC32"] == sums["CRC32"]
    # No checksum sent: none stored or answered.
    s3.put_object(Bucket=b, Key="none", Body=data)
    assert "ChecksumCRC32" not in s3.head_object(Bucket=b, Key="none", ChecksumMode="ENABLED")
    with pytest.raises(ClientError) as e:
        s3.get_object_attributes(Bucket=b, Key="none", ObjectAttributes=["Bogus"])
    assert error_code(e)[1] == 400


def test_multipart_checksums_composite(s3, bucket_name):
    """An upload created with a checksum algorithm keeps each part's checksum (ListParts,
    GetObjectAttributes) and the object gets the COMPOSITE checksum: the checksum of the parts'
    checksums, "-N"."""
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    parts_data = [os.urandom(5 << 20), os.urandom(1000)]
    up = s3.create_multipart_upload(Bucket=b, Key="mp", ChecksumAlgorithm="SHA256")
    assert up.get("ChecksumAlgorithm") == "SHA256"
    uid = up["UploadId"]
    parts = []
    for i, d in enumerate(parts_data):
        r = s3.upload_part(Bucket=b, Key="mp", UploadId=uid, PartNumber=i + 1, Body=d,
                           ChecksumAlgorithm="SHA256")
        assert r["ChecksumSHA256"] == _b64(hashlib.sha256(d).digest())
        parts.append({"PartNumber": i + 1, "ETag": r["ETag"],
                      "ChecksumSHA256": r["ChecksumSHA256"]})
    listed = s3.list_parts(Bucket=b, Key="mp", UploadId=uid)
    assert [p["ChecksumSHA256"] for p in listed["Parts"]] == [p["ChecksumSHA256"] for p in parts]
    assert listed.get("ChecksumAlgorithm") == "SHA256"
    done = s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=uid,
                                        MultipartUpload={"Parts": parts})
    raws = b"".join(hashlib.sha256(d).digest() for d in parts_data)
    want = f"{_b64(hashlib.sha256(raws).digest())}-2"
    assert done["ChecksumSHA256"] == want
    head = s3.head_object(Bucket=b, Key="mp", ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == want
    assert head["ResponseMetadata"]["HTTPHeaders"]["x-amz-checksum-type"] == "COMPOSITE"
    part2 = s3.head_object(Bucket=b, Key="mp", ChecksumMode="ENABLED", PartNumber=2)
    assert part2["ChecksumSHA256"] == parts[1]["ChecksumSHA256"]
    attrs = s3.get_object_attributes(Bucket=b, Key="mp", ObjectAttributes=["ObjectParts",
                                                                           "Checksum"])
    assert attrs["Checksum"]["ChecksumSHA256"] == want
    assert attrs["ObjectParts"]["TotalPartsCount"] == 2
    assert [p["ChecksumSHA256"] for p in attrs["ObjectParts"]["Parts"]] == [
        p["ChecksumSHA256"] for p in parts]
    page = s3.get_object_attributes(Bucket=b, Key="mp", ObjectAttributes=["ObjectParts"],
                                    MaxParts=1)
    assert page["ObjectParts"]["IsTruncated"] is True
    assert [p["PartNumber"] for p in page["ObjectParts"]["Parts"]] == [1]
    # A part listed with a checksum other than its own is refused; the upload stays.
    up2 = s3.create_multipart_upload(Bucket=b, Key="bad", ChecksumAlgorithm="CRC32")["UploadId"]
    r = s3.upload_part(Bucket=b, Key="bad", UploadId=up2, PartNumber=1, Body=b"x" * 10,
                       ChecksumAlgorithm="CRC32")
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=b, Key="bad", UploadId=up2, MultipartUpload={
            "Parts": [{"PartNumber": 1, "ETag": r["ETag"], "ChecksumCRC32": "AAAAAA=="}]})
    assert error_code(e) == ("InvalidPart", 400)
    s3.complete_multipart_upload(Bucket=b, Key="bad", UploadId=up2, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": r["ETag"], "ChecksumCRC32": r["ChecksumCRC32"]}]})


def test_multipart_checksums_full_object(server, s3, bucket_name):
    """x-amz-checksum-type: FULL_OBJECT: the object's CRC is that of all its bytes, combined from
    the parts' CRCs; one sent with the Complete must match (BadDigest otherwise)."""
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    datas = [os.urandom(5 << 20), os.urandom(777)]
    status, hdrs, body = raw_request(server, "POST", f"/{b}/full?uploads", b"",
                                     {"x-amz-checksum-algorithm": "CRC32",
                                      "x-amz-checksum-type": "FULL_OBJECT"})
    assert status == 200, body
    assert hdrs.get("x-amz-checksum-type") == "FULL_OBJECT"
    uid = re.search(rb"<UploadId>([^<]+)</UploadId>", body).group(1).decode()
    etags = []
    for i, d in enumerate(datas):
        status, h, body = raw_request(server, "PUT", f"/{b}/full?partNumber={i + 1}&uploadId={uid}",
                                      d, {"x-amz-checksum-crc32": _b64(_crc32(d))})
        assert status == 200, body
        etags.append(h["etag"])
    doc = ("<CompleteMultipartUpload>" + "".join(
        f"<Part><PartNumber>{i + 1}</PartNumber><ETag>{e}</ETag></Part>"
        for i, e in enumerate(etags)) + "</CompleteMultipartUpload>").encode()
    whole = _b64(_crc32(b"".join(datas)))
    status, _, body = raw_request(server, "POST", f"/{b}/full?uploadId={uid}", doc,
                                  {"x-amz-checksum-crc32": _b64(b"\0\0\0\0")})
    assert (status, xml_code(body)) == (400, "BadDigest")
    status, _, body = raw_request(server, "POST", f"/{b}/full?uploadId={uid}", doc,
                                  {"x-amz-checksum-crc32": whole})
    assert status == 200, body
    assert f"<ChecksumCRC32>{whole}</ChecksumCRC32>".encode() in body
    head = s3.head_object(Bucket=b, Key="full", ChecksumMode="ENABLED")
    assert head["ChecksumCRC32"] == whole
    assert head["ResponseMetadata"]["HTTPHeaders"]["x-amz-checksum-type"] == "FULL_OBJECT"
    # SHA256 cannot be a full-object checksum of parts.
    status, _, body = raw_request(server, "POST", f"/{b}/x?uploads", b"",
                                  {"x-amz-checksum-algorithm": "SHA256",
                                   "x-amz-checksum-type": "FULL_OBJECT"})
    assert (status, xml_code(body)) == (400, "InvalidRequest")


def test_storage_classes(s3, server, bucket_name):
    """x-amz-storage-class STANDARD and REDUCED_REDUNDANCY are taken on PUT, multipart uploads
    and copies, and reported by HEAD, listings and GetObjectAttributes; a class this store has
    not is refused, never ignored."""
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="rrs", Body=b"r", StorageClass="REDUCED_REDUNDANCY")
    s3.put_object(Bucket=b, Key="std", Body=b"s", StorageClass="STANDARD")
    assert s3.head_object(Bucket=b, Key="rrs")["StorageClass"] == "REDUCED_REDUNDANCY"
    assert "StorageClass" not in s3.head_object(Bucket=b, Key="std")  # S3 omits STANDARD
    listed = {o["Key"]: o["StorageClass"] for o in s3.list_objects_v2(Bucket=b)["Contents"]}
    assert listed == {"rrs": "REDUCED_REDUNDANCY", "std": "STANDARD"}
    attrs = s3.get_object_attributes(Bucket=b, Key="rrs", ObjectAttributes=["StorageClass"])
    assert attrs["StorageClass"] == "REDUCED_REDUNDANCY"
    # A copy onto itself that changes only the class is allowed, and keeps the metadata.
    s3.put_object(Bucket=b, Key="meta", Body=b"m", ContentType="text/x-test",
                  Metadata={"colour": "blue"})
    s3.copy_object(Bucket=b, Key="meta", CopySource={"Bucket": b, "Key": "meta"},
                   StorageClass="REDUCED_REDUNDANCY")
    head = s3.head_object(Bucket=b, Key="meta")
    assert head["StorageClass"] == "REDUCED_REDUNDANCY"
    assert head["ContentType"] == "text/x-test" and head["Metadata"] == {"colour": "blue"}
    s3.copy_object(Bucket=b, Key="meta", CopySource={"Bucket": b, "Key": "meta"},
                   StorageClass="STANDARD")
    assert "StorageClass" not in s3.head_object(Bucket=b, Key="meta")
    up = s3.create_multipart_upload(Bucket=b, Key="mp", StorageClass="REDUCED_REDUNDANCY")
    r = s3.upload_part(Bucket=b, Key="mp", UploadId=up["UploadId"], PartNumber=1, Body=b"p")
    s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up["UploadId"], MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": r["ETag"]}]})
    assert s3.head_object(Bucket=b, Key="mp")["StorageClass"] == "REDUCED_REDUNDANCY"
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=b, Key="cold", Body=b"c", StorageClass="GLACIER")
    assert error_code(e) == ("NotImplemented", 501)


def test_reduced_redundancy_is_coded_with_less_parity(s3, server, bucket_name):
    """REDUCED_REDUNDANCY objects are coded RS(3+1) on the set's four drives (RS(2+2)): each
    drive's shard file of a 3 MiB object holds 1 MiB instead of 1.5 MiB, for PUT, copies and
    multipart uploads alike."""
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    body = os.urandom(3 << 20)

    def shard_bytes(key):
        sizes = []
        for d in server.drives:
            files = [p for p in (d / b / key).glob("%data.*/part.*")]
            sizes.append(sum(p.stat().st_size for p in files))
        return sizes
    s3.put_object(Bucket=b, Key="std", Body=body)
    s3.put_object(Bucket=b, Key="rrs", Body=body, StorageClass="REDUCED_REDUNDANCY")
    s3.copy_object(Bucket=b, Key="copied", CopySource={"Bucket": b, "Key": "std"},
                   StorageClass="REDUCED_REDUNDANCY")
    up = s3.create_multipart_upload(Bucket=b, Key="mp", StorageClass="REDUCED_REDUNDANCY")
    r = s3.upload_part(Bucket=b, Key="mp", UploadId=up["UploadId"], PartNumber=1, Body=body)
    s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up["UploadId"], MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": r["ETag"]}]})
    assert shard_bytes("std") == [(3 << 20) // 2] * 4
    for key in ("rrs", "copied", "mp"):
        assert shard_bytes(key) == [1 << 20] * 4, key
        assert s3.get_object(Bucket=b, Key=key)["Body"].read() == body
    # Copied back to STANDARD, it is coded with the set's parity again.
    s3.copy_object(Bucket=b, Key="rrs", CopySource={"Bucket": b, "Key": "rrs"},
                   StorageClass="STANDARD")
    assert shard_bytes("rrs") == [(3 << 20) // 2] * 4


def _form(fields, file_bytes, filename="upload.bin", boundary="----openlake-test-7f3a"):
    """A multipart/form-data body: the fields in order, then the file."""
    out = b""
    for name, value in fields.items():
        out += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n"
                f"{value}\r\n").encode()
    out += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"{filename}\"\r\nContent-Type: application/octet-stream\r\n\r\n").encode()
    out += file_bytes + f"\r\n--{boundary}--\r\n".encode()
    return out, f"multipart/form-data; boundary={boundary}"


def _post(server, bucket, fields, file_bytes, **kw):
    body, ctype = _form(fields, file_bytes, **kw)
    from conftest import send
    return send(server, "POST", f"/{bucket}", body,
                {"Content-Type": ctype, "Host": f"127.0.0.1:{server.port}"})


def test_post_policy_uploads(s3, server, bucket_name):
    """Browser form uploads (POST /bucket) with a SigV4-signed policy, as boto3's
    generate_presigned_post makes them: the conditions are enforced, a field the policy does
    not name is refused, and the upload lands with its metadata."""
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    conditions = [["starts-with", "$key", "uploads/"], ["content-length-range", 1, 1000],
                  {"success_action_status": "201"}, ["starts-with", "$Content-Type", "image/"],
                  {"x-amz-meta-owner": "alice"}]
    post = s3.generate_presigned_post(
        Bucket=b, Key="uploads/${filename}",
        Fields={"success_action_status": "201", "Content-Type": "image/png",
                "x-amz-meta-owner": "alice"},
        Conditions=conditions, ExpiresIn=600)
    fields = dict(post["fields"])
    status, hdrs, body = _post(server, b, fields, b"\x89PNG" + b"x" * 100, filename="cat.png")
    assert status == 201, body
    assert b"<Key>uploads/cat.png</Key>" in body
    got = s3.get_object(Bucket=b, Key="uploads/cat.png")
    assert got["Body"].read() == b"\x89PNG" + b"x" * 100
    assert got["ContentType"] == "image/png" and got["Metadata"] == {"owner": "alice"}
    assert hdrs["etag"] == got["ETag"]

    # Too large for content-length-range: refused, nothing stored.
    status, _, body = _post(server, b, fields, b"y" * 1001, filename="big.png")
    assert (status, xml_code(body)) == (400, "EntityTooLarge")
    assert raw_request(server, "HEAD", f"/{b}/uploads/big.png")[0] == 404
    # A condition that fails, a field the policy does not name, a bad signature.
    bad = dict(fields, **{"Content-Type": "text/html"})
    status, _, body = _post(server, b, bad, b"z")
    assert (status, xml_code(body)) == (403, "AccessDenied"), body
    extra = dict(fields, **{"x-amz-meta-extra": "1"})
    status, _, body = _post(server, b, extra, b"z")
    assert (status, xml_code(body)) == (403, "AccessDenied") and b"Extra input fields" in body
    forged = dict(fields, **{"x-amz-signature": "0" * 64})
    status, _, body = _post(server, b, forged, b"z")
    assert (status, xml_code(body)) == (403, "SignatureDoesNotMatch")
    # An expired policy; no file; not a form; no signature at all.
    old = s3.generate_presigned_post(Bucket=b, Key="uploads/old", ExpiresIn=-10)
    status, _, body = _post(server, b, dict(old["fields"]), b"z")
    assert (status, xml_code(body)) == (403, "AccessDenied") and b"expired" in body
    from conftest import send
    status, _, body = send(server, "POST", f"/{b}", b"a=b",
                           {"Content-Type": "application/x-www-form-urlencoded"})
    assert (status, xml_code(body)) == (412, "PreconditionFailed")
    status, _, body = _post(server, b, {"key": "uploads/anon"}, b"z")
    assert (status, xml_code(body)) == (403, "AccessDenied")
    assert raw_request(server, "HEAD", f"/{b}/uploads/anon")[0] == 404
    # Without success_action_status: 204.
    plain = s3.generate_presigned_post(Bucket=b, Key="plain.bin", ExpiresIn=600)
    status, _, body = _post(server, b, dict(plain["fields"]), b"plain bytes")
    assert status == 204, body
    assert s3.get_object(Bucket=b, Key="plain.bin")["Body"].read() == b"plain bytes"


def test_post_policy_uploads_signed_v2(server, bucket_name):
    """The same form signed the SigV2 way (AWSAccessKeyId and signature fields), as
    generate_presigned_post makes it for a client with signature_version "s3"."""
    v2 = make_client(server, signature_version="s3")
    b = bucket_name()
    v2.create_bucket(Bucket=b)
    post = v2.generate_presigned_post(
        Bucket=b, Key="v2/${filename}", Fields={"x-amz-meta-tag": "old-sdk"},
        Conditions=[["starts-with", "$key", "v2/"], {"x-amz-meta-tag": "old-sdk"},
                    ["content-length-range", 1, 100]], ExpiresIn=600)
    fields = dict(post["fields"])
    assert "AWSAccessKeyId" in fields and "signature" in fields
    status, _, body = _post(server, b, fields, b"form bytes", filename="f.txt")
    assert status == 204, body
    got = v2.get_object(Bucket=b, Key="v2/f.txt")
    assert got["Body"].read() == b"form bytes" and got["Metadata"] == {"tag": "old-sdk"}
    forged = dict(fields, signature="AAAAAAAAAAAAAAAAAAAAAAAAAAA=")
    status, _, body = _post(server, b, forged, b"z")
    assert (status, xml_code(body)) == (403, "SignatureDoesNotMatch")
    unknown = dict(fields, AWSAccessKeyId="AKIANOBODYNOBODY0000")
    status, _, body = _post(server, b, unknown, b"z")
    assert (status, xml_code(body)) == (403, "InvalidAccessKeyId")
    status, _, body = _post(server, b, fields, b"y" * 101, filename="big.txt")
    assert (status, xml_code(body)) == (400, "EntityTooLarge")


BOB_KEY = "OLE2EBOBACCESSKEY002"
BOB_SECRET = "bob-secret-key-0123456789abcdefghijklmnopq"


def test_users_own_their_buckets(tmp_path, bucket_name):
    """Each [[credentials]] entry is a user: a bucket is its maker's, and another user can
    neither list, read, write, copy from, delete nor take it (BucketAlreadyExists), nor see it
    in ListBuckets."""
    root = tmp_path / "two-users"
    root.mkdir()
    srv = Server(root)
    srv.config.write_text(srv.config.read_text() + "[[credentials]]\n"
                          f'access_key = "{BOB_KEY}"\nsecret_key = "{BOB_SECRET}"\n')
    srv.start()
    try:
        alice = make_client(srv)
        bob = make_client(srv, access_key=BOB_KEY, secret_key=BOB_SECRET)
        a, b = bucket_name("alice"), bucket_name("bob")
        alice.create_bucket(Bucket=a)
        alice.put_object(Bucket=a, Key="secret.txt", Body=b"alice's", ACL="private")
        bob.create_bucket(Bucket=b)
        bob.put_object(Bucket=b, Key="mine", Body=b"bob's")
        assert [x["Name"] for x in alice.list_buckets()["Buckets"]] == [a]
        assert [x["Name"] for x in bob.list_buckets()["Buckets"]] == [b]
        up = bob.create_multipart_upload(Bucket=b, Key="mp")["UploadId"]
        refused = [
            lambda: bob.get_object(Bucket=a, Key="secret.txt"),
            lambda: bob.head_object(Bucket=a, Key="secret.txt"),
            lambda: bob.list_objects_v2(Bucket=a),
            lambda: bob.put_object(Bucket=a, Key="secret.txt", Body=b"bob was here"),
            lambda: bob.delete_object(Bucket=a, Key="secret.txt"),
            lambda: bob.delete_objects(Bucket=a, Delete={"Objects": [{"Key": "secret.txt"}]}),
            lambda: bob.copy_object(Bucket=b, Key="stolen",
                                    CopySource={"Bucket": a, "Key": "secret.txt"}),
            lambda: bob.upload_part_copy(Bucket=b, Key="mp", UploadId=up, PartNumber=1,
                                         CopySource={"Bucket": a, "Key": "secret.txt"}),
            lambda: bob.create_multipart_upload(Bucket=a, Key="x"),
            lambda: bob.head_bucket(Bucket=a),
            lambda: bob.delete_bucket(Bucket=a),
            lambda: alice.get_object(Bucket=b, Key="mine"),
        ]
        for call in refused:
            with pytest.raises(ClientError) as e:
                call()
            assert error_code(e)[1] == 403, e.value.response
        with pytest.raises(ClientError) as e:
            bob.create_bucket(Bucket=a)
        assert error_code(e) == ("BucketAlreadyExists", 409)
        assert alice.get_object(Bucket=a, Key="secret.txt")["Body"].read() == b"alice's"
        assert [o["Key"] for o in alice.list_objects_v2(Bucket=a)["Contents"]] == ["secret.txt"]
        with pytest.raises(ClientError) as e:
            bob.head_object(Bucket=b, Key="stolen")
        assert error_code(e)[1] == 404
        # A deleted bucket's name is free again, for anyone.
        bob.abort_multipart_upload(Bucket=b, Key="mp", UploadId=up)
        bob.delete_object(Bucket=b, Key="mine")
        bob.delete_bucket(Bucket=b)
        alice.create_bucket(Bucket=b)
        assert [x["Name"] for x in alice.list_buckets()["Buckets"]] == sorted([a, b])
    finally:
        assert srv.stop() == 0


def test_bucket_tagging(s3, server, bucket_name):
    """Get/Put/DeleteBucketTagging: up to 50 tags under S3's rules, NoSuchTagSet without."""
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    with pytest.raises(ClientError) as e:
        s3.get_bucket_tagging(Bucket=b)
    assert error_code(e) == ("NoSuchTagSet", 404)
    tags = [{"Key": "team", "Value": "training"}, {"Key": "cost center", "Value": "a/b+c=d"}]
    r = s3.put_bucket_tagging(Bucket=b, Tagging={"TagSet": tags})
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert s3.get_bucket_tagging(Bucket=b)["TagSet"] == tags
    many = [{"Key": f"k{i}", "Value": "v"} for i in range(50)]
    s3.put_bucket_tagging(Bucket=b, Tagging={"TagSet": many})
    assert len(s3.get_bucket_tagging(Bucket=b)["TagSet"]) == 50
    for bad in (many + [{"Key": "k50", "Value": "v"}], [{"Key": "aws:x", "Value": "v"}],
                [{"Key": "dup", "Value": "1"}, {"Key": "dup", "Value": "2"}]):
        with pytest.raises(ClientError) as e:
            s3.put_bucket_tagging(Bucket=b, Tagging={"TagSet": bad})
        assert error_code(e) == ("InvalidTag", 400)
    assert len(s3.get_bucket_tagging(Bucket=b)["TagSet"]) == 50  # unchanged
    s3.delete_bucket_tagging(Bucket=b)
    with pytest.raises(ClientError) as e:
        s3.get_bucket_tagging(Bucket=b)
    assert error_code(e) == ("NoSuchTagSet", 404)
    # Bucket tags are not object tags.
    s3.put_object(Bucket=b, Key="k", Body=b"x")
    assert s3.get_object_tagging(Bucket=b, Key="k")["TagSet"] == []


def test_object_tagging(s3, server, bucket_name):
    """Tags set by x-amz-tagging on PUT, multipart uploads and copies, and by
    Get/Put/DeleteObjectTagging; changing them leaves the ETag and Last-Modified alone."""
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    put = s3.put_object(Bucket=b, Key="k", Body=b"tagged", Tagging="team=ml&stage=raw%20data")
    assert s3.get_object_tagging(Bucket=b, Key="k")["TagSet"] == [
        {"Key": "team", "Value": "ml"}, {"Key": "stage", "Value": "raw data"}]
    head = s3.head_object(Bucket=b, Key="k")
    assert head["ResponseMetadata"]["HTTPHeaders"]["x-amz-tagging-count"] == "2"
    assert "Metadata" not in head or not head["Metadata"]  # tags are not x-amz-meta-*
    modified = head["LastModified"]

    tags = [{"Key": "owner", "Value": "ana"}, {"Key": "ünï/cødé", "Value": "a+b=c @:."}]
    s3.put_object_tagging(Bucket=b, Key="k", Tagging={"TagSet": tags})
    assert s3.get_object_tagging(Bucket=b, Key="k")["TagSet"] == tags
    after = s3.get_object(Bucket=b, Key="k")
    assert after["Body"].read() == b"tagged" and after["ETag"] == put["ETag"]
    assert after["LastModified"] == modified and after["TagCount"] == 2

    s3.delete_object_tagging(Bucket=b, Key="k")
    assert s3.get_object_tagging(Bucket=b, Key="k")["TagSet"] == []
    assert "x-amz-tagging-count" not in s3.head_object(Bucket=b, Key="k")[
        "ResponseMetadata"]["HTTPHeaders"]
    assert s3.get_object(Bucket=b, Key="k")["Body"].read() == b"tagged"

    # Limits: 10 tags, keys of 128 characters, values of 256, unique keys, no "aws:".
    for bad in ([{"Key": f"k{i}", "Value": "v"} for i in range(11)],
                [{"Key": "k" * 129, "Value": "v"}],
                [{"Key": "k", "Value": "v" * 257}],
                [{"Key": "k", "Value": "1"}, {"Key": "k", "Value": "2"}],
                [{"Key": "aws:cloudformation", "Value": "v"}]):
        with pytest.raises(ClientError) as e:
            s3.put_object_tagging(Bucket=b, Key="k", Tagging={"TagSet": bad})
        assert error_code(e)[0] == "InvalidTag"
    most = [{"Key": f"{i}" + "k" * 127, "Value": "v" * 256} for i in range(10)]
    s3.put_object_tagging(Bucket=b, Key="k", Tagging={"TagSet": most})
    assert s3.get_object_tagging(Bucket=b, Key="k")["TagSet"] == most
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=b, Key="k2", Body=b"x", Tagging="a=1&a=2")
    assert error_code(e)[0] == "InvalidTag"
    with pytest.raises(ClientError) as e:
        s3.get_object_tagging(Bucket=b, Key="missing")
    assert error_code(e)[0] == "NoSuchKey"
    with pytest.raises(ClientError) as e:
        s3.put_object_tagging(Bucket=b, Key="missing", Tagging={"TagSet": tags})
    assert error_code(e)[0] == "NoSuchKey"
    got, _, body = raw_request(server, "PUT", f"/{b}/k?tagging", body=b"<Tagging><Oops/></Tagging>")
    assert got == 400 and xml_code(body) == "MalformedXML"

    # Copies keep the source's tags, or take x-amz-tagging with the REPLACE directive.
    s3.put_object_tagging(Bucket=b, Key="k", Tagging={"TagSet": tags})
    s3.copy_object(Bucket=b, Key="c1", CopySource={"Bucket": b, "Key": "k"})
    assert s3.get_object_tagging(Bucket=b, Key="c1")["TagSet"] == tags
    s3.copy_object(Bucket=b, Key="c2", CopySource={"Bucket": b, "Key": "k"},
                   MetadataDirective="REPLACE", Metadata={"m": "1"}, Tagging="x=y")
    assert s3.get_object_tagging(Bucket=b, Key="c2")["TagSet"] == tags  # tagging COPY
    s3.copy_object(Bucket=b, Key="c3", CopySource={"Bucket": b, "Key": "k"},
                   TaggingDirective="REPLACE", Tagging="x=y")
    assert s3.get_object_tagging(Bucket=b, Key="c3")["TagSet"] == [{"Key": "x", "Value": "y"}]
    assert s3.head_object(Bucket=b, Key="c3")["ContentLength"] == 6
    s3.copy_object(Bucket=b, Key="k", CopySource={"Bucket": b, "Key": "k"},
                   TaggingDirective="REPLACE")
    assert s3.get_object_tagging(Bucket=b, Key="k")["TagSet"] == []

    # A multipart upload's tags are the completed object's.
    up = s3.create_multipart_upload(Bucket=b, Key="mp", Tagging="kind=shard")
    part = s3.upload_part(Bucket=b, Key="mp", UploadId=up["UploadId"], PartNumber=1, Body=b"p")
    s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up["UploadId"], MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    assert s3.get_object_tagging(Bucket=b, Key="mp")["TagSet"] == [{"Key": "kind", "Value": "shard"}]


def test_bucket_policy_public_read(s3, server, bucket_name):
    """A bucket policy lets anyone read a prefix of a model-weight bucket without credentials
    (unsigned requests and botocore's UNSIGNED client), list it under that prefix only, and
    nothing else; an explicit Deny binds the owner too, who can still change the policy."""
    import json
    from botocore import UNSIGNED

    b = bucket_name()
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="models/tiny/config.json", Body=b'{"layers": 2}')
    s3.put_object(Bucket=b, Key="private/token", Body=b"secret")
    path = f"/{b}/models/tiny/config.json"

    def anon(method, target, body=b""):
        return send(server, method, target, body, {})

    assert anon("GET", path)[0] == 403
    with pytest.raises(ClientError) as e:
        s3.get_bucket_policy(Bucket=b)
    assert error_code(e) == ("NoSuchBucketPolicy", 404)
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "ReadModels", "Effect": "Allow", "Principal": "*",
             "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{b}/models/*"},
            {"Sid": "ListModels", "Effect": "Allow", "Principal": {"AWS": ["*"]},
             "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{b}",
             "Condition": {"StringLike": {"s3:prefix": "models/*"}}},
            {"Sid": "KeepModels", "Effect": "Deny", "Principal": "*",
             "Action": "s3:DeleteObject", "Resource": f"arn:aws:s3:::{b}/models/*"},
            {"Sid": "DropBox", "Effect": "Allow", "Principal": "*",
             "Action": "s3:PutObject", "Resource": f"arn:aws:s3:::{b}/inbox/*"},
        ]}
    s3.put_bucket_policy(Bucket=b, Policy=json.dumps(policy))
    assert json.loads(s3.get_bucket_policy(Bucket=b)["Policy"]) == policy

    status, _, body = anon("GET", path)
    assert (status, body) == (200, b'{"layers": 2}')
    assert anon("HEAD", path)[0] == 200
    assert anon("GET", f"/{b}/private/token")[0] == 403
    assert anon("PUT", f"/{b}/models/evil", b"x")[0] == 403
    assert anon("PUT", f"/{b}/inbox/report", b"from anyone")[0] == 200
    assert s3.get_object(Bucket=b, Key="inbox/report")["Body"].read() == b"from anyone"
    assert anon("DELETE", path)[0] == 403
    status, _, body = anon("GET", f"/{b}?list-type=2&prefix=models/")
    assert status == 200 and b"<Key>models/tiny/config.json</Key>" in body
    assert b"private" not in body
    assert anon("GET", f"/{b}?list-type=2")[0] == 403
    assert anon("GET", "/")[0] == 403  # ListBuckets is never anonymous
    assert anon("GET", f"/{b}?policy")[0] == 403

    public = make_client(server, signature_version=UNSIGNED)
    got = public.get_object(Bucket=b, Key="models/tiny/config.json")["Body"].read()
    assert got == b'{"layers": 2}'
    keys = [o["Key"] for o in public.list_objects_v2(Bucket=b, Prefix="models/")["Contents"]]
    assert keys == ["models/tiny/config.json"]
    with pytest.raises(ClientError) as e:
        public.get_object(Bucket=b, Key="private/token")
    assert error_code(e) == ("AccessDenied", 403)

    # The owner is bound by the Deny (per key in DeleteObjects too) but may drop the policy.
    with pytest.raises(ClientError) as e:
        s3.delete_object(Bucket=b, Key="models/tiny/config.json")
    assert error_code(e) == ("AccessDenied", 403)
    res = s3.delete_objects(Bucket=b, Delete={"Objects": [
        {"Key": "models/tiny/config.json"}, {"Key": "private/token"}]})
    assert [x["Key"] for x in res.get("Deleted", [])] == ["private/token"]
    s3.delete_object(Bucket=b, Key="inbox/report")
    assert [(x["Key"], x["Code"]) for x in res["Errors"]] == [
        ("models/tiny/config.json", "AccessDenied")]
    s3.delete_bucket_policy(Bucket=b)
    assert anon("GET", path)[0] == 403
    s3.delete_object(Bucket=b, Key="models/tiny/config.json")

    # Documents S3 refuses, and a policy about another bucket.
    for bad in ("not json", json.dumps({"Statement": []}),
                json.dumps({"Statement": {"Effect": "Allow", "Principal": "*",
                                          "Action": "s3:GetObject",
                                          "Resource": "arn:aws:s3:::someone-else/*"}})):
        with pytest.raises(ClientError) as e:
            s3.put_bucket_policy(Bucket=b, Policy=bad)
        assert error_code(e) == ("MalformedPolicy", 400)
    with pytest.raises(ClientError) as e:
        s3.get_bucket_policy(Bucket=b)
    assert error_code(e) == ("NoSuchBucketPolicy", 404)
    # A missing bucket is NoSuchBucket for anyone.
    assert xml_code(anon("GET", f"/{b}-missing/k")[2]) == "NoSuchBucket"


def test_acls(tmp_path, bucket_name):
    """Canned ACLs and grants on buckets and objects (x-amz-acl, x-amz-grant-*, documents):
    a public-read object is read without credentials, a public-read bucket listed, a grant
    lets another user read or change an ACL, Get*Acl show the grants, and a copy does not
    inherit its source's ACL."""
    from botocore import UNSIGNED
    root = tmp_path / "acls"
    root.mkdir()
    srv = Server(root)
    srv.config.write_text(srv.config.read_text() + "[[credentials]]\n"
                          f'access_key = "{BOB_KEY}"\nsecret_key = "{BOB_SECRET}"\n'
                          'display_name = "Bob"\n')
    srv.start()
    try:
        alice = make_client(srv)
        bob = make_client(srv, access_key=BOB_KEY, secret_key=BOB_SECRET)
        public = make_client(srv, signature_version=UNSIGNED)
        bob_id = hashlib.sha256(f"openlake-owner:{BOB_KEY}".encode()).hexdigest()
        all_users = "http://acs.amazonaws.com/groups/global/AllUsers"
        a = bucket_name("acl")
        alice.create_bucket(Bucket=a)
        alice_id = alice.get_bucket_acl(Bucket=a)["Owner"]["ID"]
        assert alice.get_bucket_acl(Bucket=a)["Grants"] == [
            {"Grantee": {"Type": "CanonicalUser", "ID": alice_id, "DisplayName": srv.access_key},
             "Permission": "FULL_CONTROL"}]
        alice.put_object(Bucket=a, Key="public", Body=b"hello", ACL="public-read")
        alice.put_object(Bucket=a, Key="private", Body=b"no")

        assert public.get_object(Bucket=a, Key="public")["Body"].read() == b"hello"
        refused = [lambda: public.get_object(Bucket=a, Key="private"),
                   lambda: public.list_objects_v2(Bucket=a),
                   lambda: bob.get_object(Bucket=a, Key="private"),
                   lambda: public.get_object_acl(Bucket=a, Key="public")]
        for call in refused:
            with pytest.raises(ClientError) as e:
                call()
            assert error_code(e) == ("AccessDenied", 403)
        grants = alice.get_object_acl(Bucket=a, Key="public")["Grants"]
        assert {"Grantee": {"Type": "Group", "URI": all_users}, "Permission": "READ"} in grants

        # A public-read bucket is listed by anyone; writing still needs WRITE.
        alice.put_bucket_acl(Bucket=a, ACL="public-read")
        assert [o["Key"] for o in public.list_objects_v2(Bucket=a)["Contents"]] == [
            "private", "public"]
        with pytest.raises(ClientError) as e:
            public.put_object(Bucket=a, Key="x", Body=b"x")
        assert error_code(e) == ("AccessDenied", 403)
        alice.put_bucket_acl(Bucket=a, ACL="private")
        with pytest.raises(ClientError) as e:
            public.list_objects_v2(Bucket=a)
        assert error_code(e) == ("AccessDenied", 403)

        # Grants to another user, by header and by document.
        alice.put_object_acl(Bucket=a, Key="private", GrantRead=f'id="{bob_id}"')
        assert alice.get_object_acl(Bucket=a, Key="private")["Grants"] == [
            {"Grantee": {"Type": "CanonicalUser", "ID": bob_id, "DisplayName": "Bob"},
             "Permission": "READ"}]
        assert bob.get_object(Bucket=a, Key="private")["Body"].read() == b"no"
        with pytest.raises(ClientError) as e:
            bob.put_object_acl(Bucket=a, Key="private", ACL="public-read")
        assert error_code(e) == ("AccessDenied", 403)
        alice.put_object_acl(Bucket=a, Key="private", AccessControlPolicy={
            "Owner": {"ID": alice_id},
            "Grants": [{"Grantee": {"Type": "CanonicalUser", "ID": alice_id},
                        "Permission": "FULL_CONTROL"},
                       {"Grantee": {"Type": "CanonicalUser", "ID": bob_id},
                        "Permission": "WRITE_ACP"}]})
        bob.put_object_acl(Bucket=a, Key="private", ACL="public-read")
        assert public.get_object(Bucket=a, Key="private")["Body"].read() == b"no"
        assert alice.head_object(Bucket=a, Key="private")["ContentLength"] == 2

        # A copy is private unless the request grants more.
        alice.copy_object(Bucket=a, Key="copy", CopySource={"Bucket": a, "Key": "public"})
        with pytest.raises(ClientError) as e:
            public.get_object(Bucket=a, Key="copy")
        assert error_code(e) == ("AccessDenied", 403)
        alice.copy_object(Bucket=a, Key="copy2", CopySource={"Bucket": a, "Key": "private"},
                          ACL="public-read")
        assert public.get_object(Bucket=a, Key="copy2")["Body"].read() == b"no"

        # Refusals: e-mail grantees, unknown ids and groups, unknown canned ACLs, both forms.
        for kwargs, code in (({"GrantRead": 'emailAddress="x@example.com"'},
                              "UnresolvableGrantByEmailAddress"),
                             ({"GrantRead": 'id="0123"'}, "InvalidArgument"),
                             ({"GrantRead": 'uri="http://example.com/g"'}, "InvalidArgument"),
                             ({"ACL": "everyone"}, "InvalidArgument"),
                             ({"ACL": "public-read", "GrantRead": f'id="{bob_id}"'},
                              "InvalidRequest")):
            with pytest.raises(ClientError) as e:
                alice.put_object_acl(Bucket=a, Key="public", **kwargs)
            assert error_code(e) == (code, 400), kwargs
        with pytest.raises(ClientError) as e:
            alice.put_object(Bucket=a, Key="bad", Body=b"x", ACL="everyone")
        assert error_code(e) == ("InvalidArgument", 400)
        # DELETE ?acl is no DeleteBucket.
        status, _, _ = raw_request(srv, "DELETE", f"/{a}?acl")
        assert status == 405
        alice.head_bucket(Bucket=a)
        # A bucket created with a canned ACL has it.
        b = bucket_name("aclb")
        alice.create_bucket(Bucket=b, ACL="public-read")
        alice.put_object(Bucket=b, Key="k", Body=b"v")
        assert [o["Key"] for o in public.list_objects_v2(Bucket=b)["Contents"]] == ["k"]
    finally:
        assert srv.stop() == 0

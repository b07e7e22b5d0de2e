"""S3 behaviour that SDKs, tools and conformance suites rely on beyond the basic calls
(docs/s3.md, "What is implemented"): each test drives a real openlaked through boto3 or raw
signed requests and checks the answer S3 gives.
"""

import gzip
import os
import shutil
from urllib.parse import quote as _quote, unquote

import pytest

from conftest import Server, error_code, make_client, raw_request, xml_code

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

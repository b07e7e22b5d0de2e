"""Every S3 error answer of the server, driven by a real request against a real openlaked.

Each place in libopenlake/s3 where an operation answers an S3 error (`c.Error(...)`, or
`c.Fail(status)` mapping an engine status through ErrorFromStatus) is reached here by a
request a client can send, and the exact S3 error code and HTTP status of that answer are
asserted (the status alone for HEAD and 304 answers, which have no body). Helpers shared by
several operations (BucketExists, WriteHeadersSupported, WriteOptions, ReadDocument,
StoreBody, WriteBody, CopyInto, in op_streams.cc) are driven through each operation that calls
them. After every test the daemon must still be alive and serving: an autouse fixture reads a
canary object back byte for byte. (g++ 12 once miscompiled one such error branch: the daemon
answered, then aborted; every branch runs here so that a build, or an ASan build, shows it.)

Each test, or parametrized case, names the function and the S3 error it reaches, as
`Function: Code`. Separate daemons serve what the main one cannot: one configured for
another region (CreateBucket's "unspecified" location constraint), and two whose drives are
damaged on purpose (the disk-failure branches of CopyInto, WriteBody and the commits: shard
files deleted, staging folders removed). Sites no client request can reach are listed at the
end of this file.
"""

import base64
import datetime
import hashlib
import hmac
import os
import re
import shutil
import socket
import urllib.parse

import pytest

from conftest import (REGION, Server, boto3_or_skip, error_code, make_client, raw_request,
                      send, sign_headers, xml_code)

boto3_or_skip()
from botocore.exceptions import ClientError  # noqa: E402

CANARY = os.urandom(64 << 10)
LONG_KEY = "k" * 1025  # one byte over S3's 1024-byte key limit
STREAMING = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
NO_UPLOAD = "0123456789abcdef0123456789abcdef"  # well-formed, never issued
MISSING_BUCKET = f"never-made-{os.getpid()}"
OTHER_MD5 = base64.b64encode(hashlib.md5(b"something else").digest()).decode()
OTHER_SHA = hashlib.sha256(b"something else").hexdigest()
MiB = 1 << 20


# ---------------------------------------------------------------- helpers

def answer(server, method, path, body=b"", headers=None, **sign):
    """A SigV4-signed request: (status, S3 error code, headers, body)."""
    status, hdrs, data = raw_request(server, method, path, body, headers, **sign)
    return status, xml_code(data), hdrs, data


def check(server, want, method, path, body=b"", headers=None, **sign):
    """Sends a signed request and asserts its answer: `want` is (status, code), or the status
    alone for answers without a body (HEAD, 304). Returns the response headers."""
    status, code, hdrs, data = answer(server, method, path, body, headers, **sign)
    if isinstance(want, int):
        assert status == want and data == b"", (status, data)
    else:
        assert (status, code) == want, data
    return hdrs


def md5_b64(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def put(server, bucket, key, data):
    status, _, hdrs, body = answer(server, "PUT", f"/{bucket}/{key}", data)
    assert status == 200, body
    return hdrs["etag"]


def create_upload(server, bucket, key):
    status, _, _, body = answer(server, "POST", f"/{bucket}/{key}?uploads")
    assert status == 200, body
    return re.search(rb"<UploadId>([^<]+)</UploadId>", body).group(1).decode()


def upload_part(server, bucket, key, upload_id, number, data):
    status, _, hdrs, body = answer(server, "PUT",
                                   f"/{bucket}/{key}?partNumber={number}&uploadId={upload_id}",
                                   data)
    assert status == 200, body
    return hdrs["etag"]


def complete_doc(parts):
    return ("<CompleteMultipartUpload>" + "".join(
        f"<Part><PartNumber>{n}</PartNumber><ETag>{e}</ETag></Part>" for n, e in parts)
        + "</CompleteMultipartUpload>").encode()


def delete_doc(*keys):
    return ("<Delete>" + "".join(f"<Object><Key>{k}</Key></Object>" for k in keys)
            + "</Delete>").encode()


def missing(server, bucket, key):
    return answer(server, "HEAD", f"/{bucket}/{key}")[0] == 404


def _signing_key(secret, date, region=REGION):
    k = hmac.new(("AWS4" + secret).encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


def presign(server, method, path, region=REGION, expires=60, when=None, extra=()):
    """A SigV4 presigned target for `path`, signed by hand so that its date, region and
    X-Amz-Content-Sha256 can be chosen."""
    t = when or datetime.datetime.now(datetime.timezone.utc)
    amz_date = t.strftime("%Y%m%dT%H%M%SZ")
    scope = f"{amz_date[:8]}/{region}/s3/aws4_request"
    params = [("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
              ("X-Amz-Credential", f"{server.access_key}/{scope}"),
              ("X-Amz-Date", amz_date), ("X-Amz-Expires", str(expires)),
              ("X-Amz-SignedHeaders", "host")] + list(extra)
    q = lambda s: urllib.parse.quote(s, safe="-_.~")  # noqa: E731
    query = "&".join(f"{q(k)}={q(v)}" for k, v in sorted(params))
    payload = dict(extra).get("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
    canonical = "\n".join([method, path, query, f"host:127.0.0.1:{server.port}\n", "host",
                           payload])
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(canonical.encode()).hexdigest()])
    sig = hmac.new(_signing_key(server.secret_key, amz_date[:8], region), sts.encode(),
                   hashlib.sha256).hexdigest()
    return f"{path}?{query}&X-Amz-Signature={sig}"


def aws_chunked(server, method, path, chunks, decoded_length=None, corrupt_chunk=None):
    """A signed streamed (STREAMING-AWS4-HMAC-SHA256-PAYLOAD) request whose chunks are
    `chunks`, announcing `decoded_length` (their true total by default); `corrupt_chunk`
    changes one byte of that chunk after signing. (status, code, body)."""
    total = sum(len(c) for c in chunks)
    headers = {"Content-Encoding": "aws-chunked",
               "x-amz-decoded-content-length": str(total if decoded_length is None
                                                   else decoded_length)}
    frames = list(chunks) + [b""]
    headers["Content-Length"] = str(sum(len(f"{len(c):x};chunk-signature=") + 64 + 2 + len(c)
                                        + 2 for c in frames))
    h = sign_headers(server, method, path, b"", headers, payload_hash=STREAMING)
    prev = h["Authorization"].split("Signature=")[1]
    amz_date = h["X-Amz-Date"]
    scope = f"{amz_date[:8]}/{REGION}/s3/aws4_request"
    key = _signing_key(server.secret_key, amz_date[:8])
    empty = hashlib.sha256(b"").hexdigest()
    body = b""
    for i, c in enumerate(frames):
        sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, prev, empty,
                         hashlib.sha256(c).hexdigest()])
        prev = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
        if i == corrupt_chunk:
            c = bytes([c[0] ^ 1]) + c[1:]
        body += f"{len(c):x};chunk-signature={prev}\r\n".encode() + c + b"\r\n"
    status, _, data = send(server, method, path, body, h)
    return status, xml_code(data), data


def _read_response(sock):
    """(status, head bytes, body) of the next final response on `sock` (1xx skipped)."""
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            assert chunk, f"connection closed mid-response: {buf!r}"
            buf += chunk
        head, _, buf = buf.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if status == 100:
            continue
        m = re.search(rb"\r\ncontent-length: *(\d+)", head, re.I)
        length = int(m.group(1)) if m else 0
        while len(buf) < length:
            chunk = sock.recv(65536)
            assert chunk, "connection closed mid-body"
            buf += chunk
        return status, head, buf[:length]


def _send_head(server, method, path, headers, payload_hash="UNSIGNED-PAYLOAD"):
    h = sign_headers(server, method, path, b"", headers, payload_hash=payload_hash)
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    s.sendall((f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items())
               + "\r\n").encode())
    return s


def body_after_continue(server, path, body, during):
    """PUT `path` announcing `body` with "Expect: 100-continue"; once the server invites the
    body (it has then opened the engine's writer, see HttpExchange::ReadBody) `during()` runs,
    then the body goes and the final answer comes back: (status, code)."""
    s = _send_head(server, "PUT", path, {"Content-Length": str(len(body)),
                                         "Expect": "100-continue"})
    try:
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = s.recv(4096)
            assert chunk, got
            got += chunk
        assert got == b"HTTP/1.1 100 Continue\r\n\r\n", got
        during()
        s.sendall(body)
        status, _, data = _read_response(s)
        return status, xml_code(data)
    finally:
        s.close()


def head_only(server, method, path, headers):
    """Only the head of a request whose body is never sent (the answer must come first)."""
    s = _send_head(server, method, path, headers)
    try:
        status, _, data = _read_response(s)
        return status, xml_code(data)
    finally:
        s.close()


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def canary_bucket(server):
    name = f"errs-{os.getpid()}"
    assert answer(server, "PUT", f"/{name}")[0] == 200
    put(server, name, "canary", CANARY)
    return name


@pytest.fixture(scope="module")
def work(server, canary_bucket):
    """A bucket with a small object `src` (1 KiB) in it; tests add their own keys."""
    name = f"work-{os.getpid()}"
    assert answer(server, "PUT", f"/{name}")[0] == 200
    put(server, name, "src", os.urandom(1024))
    return name


@pytest.fixture(autouse=True)
def still_serving(server, canary_bucket):
    yield
    assert server.alive(), server.log.read_text()
    status, _, data = raw_request(server, "GET", f"/{canary_bucket}/canary")
    assert status == 200 and data == CANARY


@pytest.fixture
def upload(server, work):
    """A fresh multipart upload of `mp-<n>` in `work`: (key, upload id)."""
    key = f"mp-{os.urandom(4).hex()}"
    uid = create_upload(server, work, key)
    yield key, uid
    answer(server, "DELETE", f"/{work}/{key}?uploadId={uid}")


# ---------------------------------------------------------------- S3Service::Process: routing

@pytest.mark.parametrize("method,path,want", [
    # Process (RouteRequest): MethodNotAllowed, on the service, a bucket, an object.
    pytest.param("PUT", "/", (405, "MethodNotAllowed"), id="service-put"),
    pytest.param("DELETE", "/", (405, "MethodNotAllowed"), id="service-delete"),
    pytest.param("PATCH", "/{b}", (405, "MethodNotAllowed"), id="bucket-patch"),
    pytest.param("PATCH", "/{b}/k", (405, "MethodNotAllowed"), id="object-patch"),
    pytest.param("POST", "/{b}/k", (405, "MethodNotAllowed"), id="object-post"),
    # Process (RouteRequest): InvalidURI for bad percent-escapes in the path and the query.
    pytest.param("GET", "/{b}/%zz", (400, "InvalidURI"), id="path-escape"),
    pytest.param("GET", "/{b}?prefix=%g1", (400, "InvalidURI"), id="query-escape"),
    # Process (RouteRequest): InvalidArgument for list-type other than 2 and half a part.
    pytest.param("GET", "/{b}?list-type=1", (400, "InvalidArgument"), id="list-type"),
    pytest.param("PUT", "/{b}/k?partNumber=1", (400, "InvalidArgument"), id="part-no-upload"),
    pytest.param("PUT", "/{b}/k?uploadId=" + NO_UPLOAD, (400, "InvalidArgument"),
                 id="upload-no-part"),
])
def test_route_errors(server, canary_bucket, method, path, want):
    path = path.format(b=canary_bucket)
    # Routing comes before authentication: unsigned requests get the same answer.
    status, _, data = send(server, method, path, b"", {"Host": f"127.0.0.1:{server.port}"})
    assert (status, xml_code(data)) == want, data
    check(server, want, method, path)


@pytest.mark.parametrize("target", ["abc", "*"])
def test_route_target_not_a_path(server, target):
    # Process (RouteRequest): InvalidURI for a request target that is not a path.
    s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    try:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        status, _, data = _read_response(s)
    finally:
        s.close()
    assert (status, xml_code(data)) == (400, "InvalidURI"), data


# ------------------------------------------------------ S3Service::Process: authentication

def _tampered(h, **changes):
    h = dict(h)
    for k, v in changes.items():
        if v is None:
            h.pop(k, None)
        else:
            h[k] = v
    return h


def test_auth_errors(server, canary_bucket):
    # Process (VerifySigV4 / VerifySigV2 failed): each answers its own code.
    path = f"/{canary_bucket}/canary"
    host = {"Host": f"127.0.0.1:{server.port}"}
    # Process: AccessDenied (not signed at all).
    status, _, data = send(server, "GET", path, None, host)
    assert (status, xml_code(data)) == (403, "AccessDenied"), data
    # Process: SignatureDoesNotMatch (SigV4, wrong secret).
    check(server, (403, "SignatureDoesNotMatch"), "GET", path,
          secret_key="not-the-secret-key-at-all-0123456789abcd")
    # Process: InvalidAccessKeyId.
    check(server, (403, "InvalidAccessKeyId"), "GET", path, access_key="OLUNKNOWNKEY00000000")
    h = sign_headers(server, "GET", path)
    # Process: RequestTimeTooSkewed (X-Amz-Date far off).
    status, _, data = send(server, "GET", path, None, _tampered(h, **{"X-Amz-Date":
                                                                      "20200101T000000Z"}))
    assert (status, xml_code(data)) == (403, "RequestTimeTooSkewed"), data
    # Process: InvalidRequest (no x-amz-content-sha256).
    status, _, data = send(server, "GET", path, None, _tampered(h, **{"X-Amz-Content-SHA256":
                                                                      None}))
    assert (status, xml_code(data)) == (400, "InvalidRequest"), data
    # Process: AuthorizationHeaderMalformed (not AWS4-HMAC-SHA256).
    status, _, data = send(server, "GET", path, None, _tampered(
        h, Authorization="AWS4-HMAC-SHA512 Credential=x"))
    assert (status, xml_code(data)) == (400, "AuthorizationHeaderMalformed"), data
    # Process: AccessDenied (presigned URL expired an hour ago).
    old = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
    status, _, data = send(server, "GET", presign(server, "GET", path, when=old), None, host)
    assert (status, xml_code(data)) == (403, "AccessDenied"), data
    # Process: AuthorizationQueryParametersError (X-Amz-Expires out of range).
    status, _, data = send(server, "GET", presign(server, "GET", path, expires=604801), None,
                           host)
    assert (status, xml_code(data)) == (400, "AuthorizationQueryParametersError"), data
    # Process: SignatureDoesNotMatch (SigV2, wrong secret).
    v2 = make_client(server, signature_version="s3",
                     secret_key="not-the-secret-key-at-all-0123456789abcd")
    with pytest.raises(ClientError) as e:
        v2.get_object(Bucket=canary_bucket, Key="canary")
    assert error_code(e) == ("SignatureDoesNotMatch", 403)


@pytest.mark.parametrize("presigned", [False, True], ids=["header", "presigned"])
def test_wrong_region(server, canary_bucket, presigned):
    path = f"/{canary_bucket}/canary"
    if presigned:
        # Process: AuthorizationQueryParametersError (signed for another region).
        status, _, data = send(server, "GET", presign(server, "GET", path, region="eu-west-3"),
                               None, {"Host": f"127.0.0.1:{server.port}"})
        assert (status, xml_code(data)) == (400, "AuthorizationQueryParametersError"), data
    else:
        # Process: AuthorizationHeaderMalformed (signed for another region).
        status, code, _, data = answer(server, "GET", path, region="eu-west-3")
        assert (status, code) == (400, "AuthorizationHeaderMalformed"), data
    assert b"the region &apos;eu-west-3&apos; is wrong; expecting &apos;us-east-1&apos;" in data


# ----------------------------------------------------- S3Service::Process: not implemented

@pytest.mark.parametrize("method,path", [
    ("GET", "/{b}?cors"),          # Process: NotImplemented (bucket sub-resource)
    ("GET", "/{b}/canary?retention"),  # Process: NotImplemented (object sub-resource)
])
def test_not_implemented_routes(server, canary_bucket, method, path):
    check(server, (501, "NotImplemented"), method, path.format(b=canary_bucket))


# ---------------------------------------------------------------- buckets

def test_create_bucket_errors(server, canary_bucket, bucket_name):
    name = bucket_name("cb")
    # CreateBucket (WriteHeadersSupported): NotImplemented for SSE-KMS.
    check(server, (501, "NotImplemented"), "PUT", f"/{name}", b"",
          {"x-amz-server-side-encryption": "aws:kms"})
    # CreateBucket: MalformedXML.
    check(server, (400, "MalformedXML"), "PUT", f"/{name}", b"not xml at all")
    # CreateBucket: IllegalLocationConstraintException (a named foreign region).
    doc = (b"<CreateBucketConfiguration><LocationConstraint>eu-west-1</LocationConstraint>"
           b"</CreateBucketConfiguration>")
    status, code, _, data = answer(server, "PUT", f"/{name}", doc)
    assert (status, code) == (400, "IllegalLocationConstraintException"), data
    assert b"The eu-west-1 location constraint is incompatible" in data
    # CreateBucket (MakeBucket failed): InvalidBucketName.
    check(server, (400, "InvalidBucketName"), "PUT", "/ab")
    assert answer(server, "HEAD", f"/{name}")[0] == 404  # none of it made the bucket


@pytest.mark.xfail(strict=True, reason="x-amz-bucket-object-lock-enabled is ignored: the bucket "
                   "is made without object lock (200) instead of 501 NotImplemented")
def test_create_bucket_object_lock_refused(server, bucket_name):
    # CreateBucket (WriteHeadersSupported): NotImplemented, as for every object lock header.
    name = bucket_name("lock")
    try:
        check(server, (501, "NotImplemented"), "PUT", f"/{name}", b"",
              {"x-amz-bucket-object-lock-enabled": "true"})
    finally:
        answer(server, "DELETE", f"/{name}")


def test_delete_bucket_errors(server, canary_bucket):
    # DeleteBucket (DeleteBucket failed): NoSuchBucket, BucketNotEmpty, InvalidBucketName.
    check(server, (404, "NoSuchBucket"), "DELETE", f"/{MISSING_BUCKET}")
    check(server, (409, "BucketNotEmpty"), "DELETE", f"/{canary_bucket}")
    check(server, (400, "InvalidBucketName"), "DELETE", "/Upper")


# BucketExists (op_streams): NoSuchBucket and InvalidBucketName through every caller.
BUCKET_EXISTS_CALLERS = [
    pytest.param("HEAD", "", id="HeadBucket"),
    pytest.param("GET", "?location", id="GetBucketLocation"),
    pytest.param("GET", "?versioning", id="GetBucketVersioning"),
    pytest.param("POST", "?delete", id="DeleteObjects"),
]


@pytest.mark.parametrize("bucket,want", [
    pytest.param(MISSING_BUCKET, (404, "NoSuchBucket"), id="NoSuchBucket"),
    pytest.param("Bad_Name", (400, "InvalidBucketName"), id="InvalidBucketName"),
])
@pytest.mark.parametrize("method,query", BUCKET_EXISTS_CALLERS)
def test_bucket_exists(server, method, query, bucket, want):
    body = delete_doc("k") if query == "?delete" else b""
    check(server, want[0] if method == "HEAD" else want, method, f"/{bucket}{query}", body)


# ----------------------------------------------------- WriteHeadersSupported, WriteOptions

# WriteHeadersSupported (op_streams): NotImplemented through every caller, each with another
# header it refuses.
@pytest.mark.parametrize("op,header", [
    # CreateBucket (WriteHeadersSupported): NotImplemented, object lock.
    pytest.param("CreateBucket", ("x-amz-object-lock-token", "x"), id="CreateBucket"),
    # PutObject (WriteOptions -> WriteHeadersSupported): NotImplemented, SSE.
    pytest.param("PutObject", ("x-amz-server-side-encryption", "AES256"), id="PutObject"),
    # PutObject (WriteOptions -> WriteConditionsOf): NotImplemented, If-None-Match with an
    # ETag (writes take only *).
    pytest.param("PutObject", ("If-None-Match", '"abc"'), id="PutObject-conditional"),
    # PutObject (WriteOptions -> WriteHeadersSupported): NotImplemented, a storage class.
    pytest.param("PutObject", ("x-amz-storage-class", "GLACIER"), id="PutObject-storage-class"),
    # PutObject (WriteOptions -> WriteHeadersSupported): NotImplemented, a website redirect.
    pytest.param("PutObject", ("x-amz-website-redirect-location", "/x"),
                 id="PutObject-redirect"),
    # CopyObject (WriteHeadersSupported): NotImplemented, object lock.
    pytest.param("CopyObject", ("x-amz-object-lock-legal-hold", "ON"), id="CopyObject"),
    # CreateMultipartUpload (WriteOptions -> WriteHeadersSupported): NotImplemented, object lock.
    pytest.param("CreateMultipartUpload", ("x-amz-object-lock-mode", "GOVERNANCE"),
                 id="CreateMultipartUpload"),
    # CompleteMultipartUpload (WriteHeadersSupported): NotImplemented, SSE.
    pytest.param("CompleteMultipartUpload", ("x-amz-server-side-encryption", "AES256"),
                 id="CompleteMultipartUpload"),
    # CompleteMultipartUpload (WriteConditionsOf): NotImplemented, If-None-Match with an ETag.
    pytest.param("CompleteMultipartUpload", ("If-None-Match", '"abc"'),
                 id="CompleteMultipartUpload-conditional"),
    # CreateMultipartUpload (WriteOptions -> WriteHeadersSupported): NotImplemented, a
    # condition (S3 takes them on the Complete).
    pytest.param("CreateMultipartUpload", ("If-None-Match", "*"),
                 id="CreateMultipartUpload-conditional"),
])
def test_write_headers_supported(server, work, upload, bucket_name, op, header):
    key = f"whs-{op}"
    h = {header[0]: header[1]}
    if op == "CreateBucket":
        req = ("PUT", f"/{bucket_name('whs')}", b"")
    elif op == "PutObject":
        req = ("PUT", f"/{work}/{key}", b"data")
    elif op == "CopyObject":
        req = ("PUT", f"/{work}/{key}", b"")
        h["x-amz-copy-source"] = f"/{work}/src"
    elif op == "CreateMultipartUpload":
        req = ("POST", f"/{work}/{key}?uploads", b"")
    else:
        key, uid = upload
        etag = upload_part(server, work, key, uid, 1, b"part")
        req = ("POST", f"/{work}/{key}?uploadId={uid}", complete_doc([(1, etag)]))
    check(server, (501, "NotImplemented"), *req, h)
    if op != "CreateBucket":
        assert missing(server, work, key)


@pytest.mark.parametrize("op", ["PutObject", "CreateMultipartUpload"])
def test_write_options_metadata_too_large(server, work, op):
    # WriteOptions (PutOptionsFrom failed): MetadataTooLarge, via PutObject and
    # CreateMultipartUpload.
    h = {"x-amz-meta-big": "v" * 2100}
    if op == "PutObject":
        check(server, (400, "MetadataTooLarge"), "PUT", f"/{work}/meta-big", b"x", h)
        assert missing(server, work, "meta-big")
    else:
        check(server, (400, "MetadataTooLarge"), "POST", f"/{work}/meta-big?uploads", b"", h)


# ---------------------------------------------------------------- ReadDocument

def _document_request(server, op, work, bucket_name):
    """(method, path, a valid document) of an operation that reads a request document."""
    if op == "CreateBucket":
        return "PUT", f"/{bucket_name('doc')}", b"<CreateBucketConfiguration/>"
    if op == "DeleteObjects":
        return "POST", f"/{work}?delete", delete_doc("never-there")
    key = f"doc-{os.urandom(4).hex()}"
    uid = create_upload(server, work, key)
    etag = upload_part(server, work, key, uid, 1, b"part")
    return "POST", f"/{work}/{key}?uploadId={uid}", complete_doc([(1, etag)])


DOCUMENT_READERS = ["CreateBucket", "DeleteObjects", "CompleteMultipartUpload"]


@pytest.mark.parametrize("op", DOCUMENT_READERS)
@pytest.mark.parametrize("headers,want", [
    # ReadDocument (PayloadReader::Init failed): InvalidDigest (Content-MD5 not an MD5).
    pytest.param({"Content-MD5": "not base64!"}, (400, "InvalidDigest"), id="InvalidDigest"),
    # ReadDocument (PayloadReader::Init failed): InvalidRequest (x-amz-trailer, no trailer).
    pytest.param({"x-amz-trailer": "x-amz-checksum-crc32"}, (400, "InvalidRequest"),
                 id="InvalidRequest"),
])
def test_read_document_init(server, work, bucket_name, op, headers, want):
    method, path, doc = _document_request(server, op, work, bucket_name)
    check(server, want, method, path, doc, headers)


@pytest.mark.parametrize("op", DOCUMENT_READERS)
@pytest.mark.parametrize("case", ["BadDigest", "XAmzContentSHA256Mismatch"])
def test_read_document_body(server, work, bucket_name, op, case):
    # ReadDocument (ReadAll failed): BadDigest (Content-MD5 of other bytes) and
    # XAmzContentSHA256Mismatch (signed payload hash of other bytes).
    method, path, doc = _document_request(server, op, work, bucket_name)
    if case == "BadDigest":
        check(server, (400, "BadDigest"), method, path, doc, {"Content-MD5": OTHER_MD5})
    else:
        check(server, (400, "XAmzContentSHA256Mismatch"), method, path, doc,
              payload_hash=OTHER_SHA)


@pytest.mark.parametrize("op,size", [
    ("CreateBucket", (64 << 10) + 1),        # its own 64 KiB limit
    ("DeleteObjects", (4 << 20) + 1),         # ServiceOptions::max_xml_bytes
    ("CompleteMultipartUpload", (4 << 20) + 1),
])
def test_read_document_too_big(server, work, bucket_name, op, size):
    # ReadDocument (ReadAll failed): MaxMessageLengthExceeded.
    method, path, _ = _document_request(server, op, work, bucket_name)
    check(server, (400, "MaxMessageLengthExceeded"), method, path, b" " * size)


# ---------------------------------------------------------------- listings

@pytest.mark.parametrize("query", [
    pytest.param("?max-keys=ten", id="ListObjects"),
    pytest.param("?list-type=2&max-keys=-1", id="ListObjectsV2"),
    pytest.param("?uploads&max-uploads=1x", id="ListMultipartUploads"),
])
def test_listing_bad_max(server, canary_bucket, query):
    # ListingParams: InvalidArgument (max-keys / max-uploads not a non-negative integer).
    check(server, (400, "InvalidArgument"), "GET", f"/{canary_bucket}{query}")


@pytest.mark.parametrize("query", [
    pytest.param("?encoding-type=xml", id="ListObjects"),
    pytest.param("?list-type=2&encoding-type=URL", id="ListObjectsV2"),
    pytest.param("?uploads&encoding-type=", id="ListMultipartUploads"),
])
def test_listing_bad_encoding(server, canary_bucket, query):
    # ListingParams: InvalidArgument (encoding-type other than url).
    check(server, (400, "InvalidArgument"), "GET", f"/{canary_bucket}{query}")


@pytest.mark.parametrize("token", [
    pytest.param("not-base64", id="not-base64"),
    pytest.param(base64.b64encode(b"xx:canary").decode(), id="not-ours"),
])
def test_list_v2_bad_continuation_token(server, canary_bucket, token):
    # ListObjects (v2): InvalidArgument (continuation token not one this server gave).
    check(server, (400, "InvalidArgument"), "GET",
          f"/{canary_bucket}?list-type=2&continuation-token={urllib.parse.quote(token, safe='')}")


@pytest.mark.parametrize("query", [
    pytest.param("", id="ListObjects"),
    pytest.param("?list-type=2", id="ListObjectsV2"),
    pytest.param("?uploads", id="ListMultipartUploads"),
])
@pytest.mark.parametrize("bucket,want", [
    pytest.param(MISSING_BUCKET, (404, "NoSuchBucket"), id="NoSuchBucket"),
    pytest.param("Bad_Name", (400, "InvalidBucketName"), id="InvalidBucketName"),
])
def test_listing_engine_errors(server, query, bucket, want):
    # ListObjects / ListMultipartUploads (engine listing failed): NoSuchBucket,
    # InvalidBucketName.
    check(server, want, "GET", f"/{bucket}{query}")


@pytest.mark.parametrize("query", ["max-parts=-1", "part-number-marker=x"])
def test_list_parts_bad_params(server, work, upload, query):
    # ListParts: InvalidArgument (max-parts / part-number-marker).
    key, uid = upload
    check(server, (400, "InvalidArgument"), "GET", f"/{work}/{key}?uploadId={uid}&{query}")


@pytest.mark.parametrize("upload_id", [NO_UPLOAD, "not-an-id"])
def test_list_parts_no_such_upload(server, work, upload_id):
    # ListParts (engine ListParts failed): NoSuchUpload.
    check(server, (404, "NoSuchUpload"), "GET", f"/{work}/k?uploadId={upload_id}")


# ---------------------------------------------------------------- PutObject

@pytest.mark.parametrize("headers,payload,want", [
    # PutObject (PayloadReader::Init failed): InvalidDigest.
    pytest.param({"Content-MD5": "AAAA"}, None, (400, "InvalidDigest"), id="InvalidDigest"),
    # PutObject (Init): InvalidRequest, a checksum value of the wrong size.
    pytest.param({"x-amz-checksum-crc32": "AAAA"}, None, (400, "InvalidRequest"),
                 id="checksum-value"),
    # PutObject (Init): InvalidRequest, an unknown checksum algorithm.
    pytest.param({"x-amz-checksum-md4": "AAAAAA=="}, None, (400, "InvalidRequest"),
                 id="checksum-algo"),
    # PutObject (Init): InvalidRequest, two checksums.
    pytest.param({"x-amz-checksum-crc32": "AAAAAA==", "x-amz-checksum-sha1":
                  "AAAAAAAAAAAAAAAAAAAAAAAAAAA="}, None, (400, "InvalidRequest"),
                 id="checksum-two"),
    # PutObject (Init): InvalidArgument, x-amz-content-sha256 neither a hash nor a form.
    pytest.param({}, "not-a-hash", (400, "InvalidArgument"), id="payload-form"),
    # PutObject (Init): NotImplemented, SigV4a streaming.
    pytest.param({}, "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD", (501, "NotImplemented"),
                 id="sigv4a"),
    # PutObject (Init): MissingContentLength, aws-chunked without x-amz-decoded-content-length.
    pytest.param({"Content-Encoding": "aws-chunked"}, STREAMING, (411, "MissingContentLength"),
                 id="no-decoded-length"),
])
def test_put_object_body_init(server, work, headers, payload, want):
    sign = {"payload_hash": payload} if payload else {}
    check(server, want, "PUT", f"/{work}/init-fail", b"body", headers, **sign)
    assert missing(server, work, "init-fail")


def test_put_object_presigned_signed_streaming(server, work):
    # PutObject (Init): InvalidRequest, a presigned URL with a signed streaming body.
    target = presign(server, "PUT", f"/{work}/pre-stream",
                     extra=[("X-Amz-Content-Sha256", STREAMING)])
    status, _, data = send(server, "PUT", target, b"x", {"Host": f"127.0.0.1:{server.port}"})
    assert (status, xml_code(data)) == (400, "InvalidRequest"), data
    assert missing(server, work, "pre-stream")


@pytest.mark.parametrize("op", ["PutObject", "UploadPart"])
def test_store_body_writer_refused(server, work, upload, op):
    # StoreBody (the engine gave no writer): NoSuchBucket / NoSuchUpload, KeyTooLongError.
    key, uid = upload
    if op == "PutObject":
        check(server, (404, "NoSuchBucket"), "PUT", f"/{MISSING_BUCKET}/k", b"x")
        check(server, (400, "KeyTooLongError"), "PUT", f"/{work}/{LONG_KEY}", b"x")
    else:
        check(server, (404, "NoSuchUpload"), "PUT",
              f"/{work}/{key}?partNumber=1&uploadId={NO_UPLOAD}", b"x")
        check(server, (400, "KeyTooLongError"), "PUT",
              f"/{work}/{LONG_KEY}?partNumber=1&uploadId={uid}", b"x")


@pytest.mark.parametrize("op", ["PutObject", "UploadPart"])
def test_store_body_entity_too_large(server, work, upload, op):
    # StoreBody (the engine gave no writer): EntityTooLarge, a declared body over 5 GiB
    # (only the head is sent: the answer comes before the body).
    key, uid = upload
    path = f"/{work}/huge" if op == "PutObject" else \
        f"/{work}/{key}?partNumber=1&uploadId={uid}"
    assert head_only(server, "PUT", path, {"Content-Length": str((5 << 30) + 1)}) == \
        (400, "EntityTooLarge")


def _upload_target(server, work, upload, op):
    key, uid = upload
    return f"/{work}/wb-{op}" if op == "PutObject" else \
        f"/{work}/{key}?partNumber=1&uploadId={uid}"


@pytest.mark.parametrize("op", ["PutObject", "UploadPart"])
@pytest.mark.parametrize("case,want", [
    pytest.param("md5", (400, "BadDigest"), id="BadDigest-md5"),
    pytest.param("crc32", (400, "BadDigest"), id="BadDigest-checksum"),
    pytest.param("sha256", (400, "XAmzContentSHA256Mismatch"), id="XAmzContentSHA256Mismatch"),
    pytest.param("chunk-signature", (403, "SignatureDoesNotMatch"), id="chunk-signature"),
    pytest.param("short-stream", (400, "IncompleteBody"), id="IncompleteBody"),
])
def test_write_body_verification(server, work, upload, op, case, want):
    # WriteBody (PayloadReader::Next failed): the body did not pass its checks; nothing
    # became visible.
    path = _upload_target(server, work, upload, op)
    data = os.urandom(3000)
    if case == "md5":
        check(server, want, "PUT", path, data, {"Content-MD5": OTHER_MD5})
    elif case == "crc32":
        check(server, want, "PUT", path, data, {"x-amz-checksum-crc32": "AAAAAA=="})
    elif case == "sha256":
        check(server, want, "PUT", path, data, payload_hash=OTHER_SHA)
    elif case == "chunk-signature":
        assert aws_chunked(server, "PUT", path, [data[:1000], data[1000:]],
                           corrupt_chunk=1)[:2] == want
    else:  # the stream ends before x-amz-decoded-content-length's bytes
        assert aws_chunked(server, "PUT", path, [data], decoded_length=len(data) + 1)[:2] == want
    if op == "PutObject":
        assert missing(server, work, f"wb-{op}")
    else:
        key, uid = upload
        status, _, _, body = answer(server, "GET", f"/{work}/{key}?uploadId={uid}")
        assert status == 200 and b"<Part>" not in body


@pytest.mark.parametrize("op", ["PutObject", "UploadPart"])
def test_write_body_longer_than_declared(server, work, upload, op):
    # WriteBody (ObjectWriter::Write failed): EntityTooLarge, a streamed body with more bytes
    # than its x-amz-decoded-content-length.
    path = _upload_target(server, work, upload, op)
    data = os.urandom(3000)
    assert aws_chunked(server, "PUT", path, [data], decoded_length=100)[:2] == \
        (400, "EntityTooLarge")
    if op == "PutObject":
        assert missing(server, work, f"wb-{op}")


def test_put_object_bucket_deleted_mid_body(server, bucket_name):
    # StoreBody -> WriteBody -> Commit (ObjectWriter::Commit failed): NoSuchBucket, the
    # bucket deleted between the writer's creation and the end of the body.
    name = bucket_name("gone")
    assert answer(server, "PUT", f"/{name}")[0] == 200

    def delete_bucket():
        assert answer(server, "DELETE", f"/{name}")[0] == 204
    assert body_after_continue(server, f"/{name}/k", os.urandom(2000), delete_bucket) == \
        (404, "NoSuchBucket")
    assert answer(server, "HEAD", f"/{name}")[0] == 404


def test_upload_part_aborted_mid_body(server, work, upload):
    # StoreBody -> WriteBody -> Commit (ObjectWriter::Commit failed): NoSuchUpload, the upload
    # aborted between the writer's creation and the end of the part's body.
    key, uid = upload

    def abort():
        assert answer(server, "DELETE", f"/{work}/{key}?uploadId={uid}")[0] == 204
    assert body_after_continue(server, f"/{work}/{key}?partNumber=1&uploadId={uid}",
                               os.urandom(2000), abort) == (404, "NoSuchUpload")


# ---------------------------------------------------------------- GetObject, HeadObject

@pytest.fixture(scope="module")
def obj(server, work):
    """An object of 10 KiB: (key, ETag, Last-Modified)."""
    put(server, work, "obj", os.urandom(10 << 10))
    h = raw_request(server, "HEAD", f"/{work}/obj")[1]
    return "obj", h["etag"], h["last-modified"]


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_get_part_number(server, work, obj, method):
    # GetObject (PartRange): InvalidArgument (not 1-10000), InvalidRequest (with a Range),
    # InvalidPartNumber (past the parts), NoSuchKey (StatObject failed).
    for query, headers, want in (("partNumber=0", {}, (400, "InvalidArgument")),
                                 ("partNumber=x", {}, (400, "InvalidArgument")),
                                 ("partNumber=1", {"Range": "bytes=0-1"},
                                  (400, "InvalidRequest")),
                                 ("partNumber=2", {}, (416, "InvalidPartNumber"))):
        check(server, want[0] if method == "HEAD" else want, method, f"/{work}/obj?{query}",
              b"", headers)
    want = (404, "NoSuchKey")
    check(server, want[0] if method == "HEAD" else want, method, f"/{work}/absent?partNumber=1")


def _conditions(obj):
    _, etag, mtime = obj
    return [
        # PreconditionFailed: If-Match with another ETag; If-Unmodified-Since before the write.
        ({"If-Match": '"00000000000000000000000000000000"'}, (412, "PreconditionFailed")),
        ({"If-Unmodified-Since": "Sat, 01 Jan 2000 00:00:00 GMT"}, (412, "PreconditionFailed")),
        # NotModified (304, no body): If-None-Match with its ETag; If-Modified-Since its time.
        ({"If-None-Match": etag}, 304),
        ({"If-Modified-Since": mtime}, 304),
    ]


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_get_object_engine_errors(server, work, obj, method):
    # GetObject: OpenObject failed (GET) / StatObject failed (HEAD), each kind of failure.
    cases = [
        # GetObject: NoSuchKey (also of a key with an empty segment, a valid S3 key),
        # NoSuchBucket, KeyTooLongError, InvalidBucketName; then the failed conditions.
        ({}, f"/{work}/absent", (404, "NoSuchKey")),
        ({}, f"/{MISSING_BUCKET}/obj", (404, "NoSuchBucket")),
        ({}, f"/{work}/{LONG_KEY}", (400, "KeyTooLongError")),
        ({}, f"/{work}/a//b", (404, "NoSuchKey")),
        ({}, "/Bad_Name/obj", (400, "InvalidBucketName")),
    ] + [(h, f"/{work}/obj", want) for h, want in _conditions(obj)]
    for headers, path, want in cases:
        if method == "HEAD" and not isinstance(want, int):
            want = want[0]
        check(server, want, method, path, b"", headers)


@pytest.mark.parametrize("rng", ["bytes=10240-", "bytes=99999-100000", "bytes=-0"])
def test_get_object_invalid_range(server, work, obj, rng):
    # GetObject (OpenObject failed): InvalidRange.
    check(server, (416, "InvalidRange"), "GET", f"/{work}/obj", b"", {"Range": rng})


@pytest.mark.parametrize("rng", ["bytes=10240-", "bytes=-0"])
def test_head_object_invalid_range(server, work, obj, rng):
    # GetObject, HEAD (ResolveRange failed): 416, with the object's size in Content-Range.
    h = check(server, 416, "HEAD", f"/{work}/obj", b"", {"Range": rng})
    assert h["content-range"] == f"bytes */{10 << 10}"


# ---------------------------------------------------------------- CopyObject

@pytest.mark.parametrize("source,want", [
    # CopyObject (ParseCopySource failed): InvalidArgument, a version id.
    pytest.param("/{b}/src?versionId=abc", (400, "InvalidArgument"), id="version"),
    # CopyObject (ParseCopySource failed): InvalidArgument, a bad escape.
    pytest.param("/{b}/%zz", (400, "InvalidArgument"), id="escape"),
    # CopyObject (ParseCopySource failed): InvalidArgument, no key.
    pytest.param("{b}", (400, "InvalidArgument"), id="no-key"),
    pytest.param("/{b}/", (400, "InvalidArgument"), id="empty-key"),
    pytest.param("", (400, "InvalidArgument"), id="empty"),
])
@pytest.mark.parametrize("op", ["CopyObject", "UploadPartCopy"])
def test_copy_source_malformed(server, work, upload, op, source, want):
    # ParseCopySource's errors through both callers: CopyObject and UploadPartCopy.
    key, uid = upload
    path = f"/{work}/copy-dst" if op == "CopyObject" else \
        f"/{work}/{key}?partNumber=1&uploadId={uid}"
    check(server, want, "PUT", path, b"", {"x-amz-copy-source": source.format(b=work)})


def test_copy_object_request_errors(server, work):
    src = {"x-amz-copy-source": f"/{work}/src"}
    # CopyObject: InvalidArgument, an unknown metadata directive.
    check(server, (400, "InvalidArgument"), "PUT", f"/{work}/copy-dst", b"",
          {**src, "x-amz-metadata-directive": "MERGE"})
    # CopyObject (PutOptionsFrom failed): MetadataTooLarge with REPLACE.
    check(server, (400, "MetadataTooLarge"), "PUT", f"/{work}/copy-dst", b"",
          {**src, "x-amz-metadata-directive": "REPLACE", "x-amz-meta-big": "v" * 2100})
    # CopyObject: InvalidRequest, onto itself without REPLACE.
    check(server, (400, "InvalidRequest"), "PUT", f"/{work}/src", b"", src)
    assert missing(server, work, "copy-dst")


def test_copy_object_engine_errors(server, work, obj):
    _, etag, mtime = obj
    dst = f"/{work}/copy-dst"
    # CopyObject: PreconditionFailed for a copy's NotModified (If-None-Match, If-Modified-Since).
    check(server, (412, "PreconditionFailed"), "PUT", dst, b"",
          {"x-amz-copy-source": f"/{work}/obj", "x-amz-copy-source-if-none-match": etag})
    check(server, (412, "PreconditionFailed"), "PUT", dst, b"",
          {"x-amz-copy-source": f"/{work}/obj", "x-amz-copy-source-if-modified-since": mtime})
    # CopyObject (engine CopyObject failed): PreconditionFailed (If-Match, If-Unmodified-Since).
    check(server, (412, "PreconditionFailed"), "PUT", dst, b"",
          {"x-amz-copy-source": f"/{work}/obj", "x-amz-copy-source-if-match": '"0000"'})
    check(server, (412, "PreconditionFailed"), "PUT", dst, b"",
          {"x-amz-copy-source": f"/{work}/obj",
           "x-amz-copy-source-if-unmodified-since": "Sat, 01 Jan 2000 00:00:00 GMT"})
    # CopyObject (engine CopyObject failed): NoSuchKey, NoSuchBucket (source), NoSuchBucket
    # (destination), KeyTooLongError (destination).
    check(server, (404, "NoSuchKey"), "PUT", dst, b"", {"x-amz-copy-source": f"/{work}/absent"})
    check(server, (404, "NoSuchBucket"), "PUT", dst, b"",
          {"x-amz-copy-source": f"/{MISSING_BUCKET}/obj"})
    check(server, (404, "NoSuchBucket"), "PUT", f"/{MISSING_BUCKET}/x", b"",
          {"x-amz-copy-source": f"/{work}/obj"})
    check(server, (400, "KeyTooLongError"), "PUT", f"/{work}/{LONG_KEY}", b"",
          {"x-amz-copy-source": f"/{work}/obj"})
    assert missing(server, work, "copy-dst")


# ---------------------------------------------------------------- DeleteObject, DeleteObjects

@pytest.mark.parametrize("path,want", [
    # DeleteObject (engine DeleteObject failed, not NoSuchKey): NoSuchBucket.
    pytest.param(f"/{MISSING_BUCKET}/k", (404, "NoSuchBucket"), id="NoSuchBucket"),
    # DeleteObject: InvalidBucketName.
    pytest.param("/Bad_Name/k", (400, "InvalidBucketName"), id="InvalidBucketName"),
    # DeleteObject: KeyTooLongError.
    pytest.param("/{b}/" + LONG_KEY, (400, "KeyTooLongError"), id="KeyTooLongError"),
    # DeleteObject: InvalidArgument (a key that is not UTF-8).
    pytest.param("/{b}/%FF%FE", (400, "InvalidArgument"), id="InvalidArgument"),
])
def test_delete_object_errors(server, work, path, want):
    check(server, want, "DELETE", path.format(b=work))


@pytest.mark.parametrize("doc", [b"<Delete><Object><Key>src</Key></Object>", b"<Delete/>",
                                 b"<Other/>"])
def test_delete_objects_malformed(server, work, doc):
    # DeleteObjects: MalformedXML.
    check(server, (400, "MalformedXML"), "POST", f"/{work}?delete", doc,
          {"Content-MD5": md5_b64(doc)})
    assert not missing(server, work, "src")


# ---------------------------------------------------------------- multipart

def test_create_multipart_upload_errors(server, work):
    # CreateMultipartUpload (engine CreateUpload failed): NoSuchBucket, KeyTooLongError,
    # InvalidArgument (a key that is not UTF-8).
    check(server, (404, "NoSuchBucket"), "POST", f"/{MISSING_BUCKET}/k?uploads")
    check(server, (400, "KeyTooLongError"), "POST", f"/{work}/{LONG_KEY}?uploads")
    check(server, (400, "InvalidArgument"), "POST", f"/{work}/%FF%FE?uploads")


@pytest.mark.parametrize("number", ["0", "10001", "one", ""])
@pytest.mark.parametrize("op", ["UploadPart", "UploadPartCopy"])
def test_bad_part_number(server, work, upload, op, number):
    # UploadPart / UploadPartCopy: InvalidArgument (part number outside 1..10000).
    key, uid = upload
    h = {"x-amz-copy-source": f"/{work}/src"} if op == "UploadPartCopy" else {}
    check(server, (400, "InvalidArgument"), "PUT",
          f"/{work}/{key}?partNumber={number}&uploadId={uid}", b"x" if not h else b"", h)


def test_upload_part_body_init(server, work, upload):
    # UploadPart (PayloadReader::Init failed): InvalidDigest.
    key, uid = upload
    check(server, (400, "InvalidDigest"), "PUT", f"/{work}/{key}?partNumber=1&uploadId={uid}",
          b"x", {"Content-MD5": "AAAA"})


@pytest.mark.parametrize("rng", ["bytes=5-", "bytes=-5", "bytes=9-3", "items=0-1",
                                 "bytes=0-1,3-4"])
def test_upload_part_copy_bad_range(server, work, upload, rng):
    # UploadPartCopy: InvalidArgument (x-amz-copy-source-range not bytes=first-last).
    key, uid = upload
    check(server, (400, "InvalidArgument"), "PUT", f"/{work}/{key}?partNumber=1&uploadId={uid}",
          b"", {"x-amz-copy-source": f"/{work}/src", "x-amz-copy-source-range": rng})


def test_upload_part_copy_errors(server, work, obj, upload):
    key, uid = upload
    _, etag, mtime = obj
    path = f"/{work}/{key}?partNumber=1&uploadId={uid}"
    src = {"x-amz-copy-source": f"/{work}/obj"}
    # UploadPartCopy: PreconditionFailed for a copy's NotModified (If-None-Match,
    # If-Modified-Since).
    check(server, (412, "PreconditionFailed"), "PUT", path, b"",
          {**src, "x-amz-copy-source-if-none-match": etag})
    check(server, (412, "PreconditionFailed"), "PUT", path, b"",
          {**src, "x-amz-copy-source-if-modified-since": mtime})
    # UploadPartCopy (OpenObject failed): PreconditionFailed, NoSuchKey, NoSuchBucket,
    # InvalidRange (the range starts past the source).
    check(server, (412, "PreconditionFailed"), "PUT", path, b"",
          {**src, "x-amz-copy-source-if-match": '"0000"'})
    check(server, (404, "NoSuchKey"), "PUT", path, b"", {"x-amz-copy-source": f"/{work}/absent"})
    check(server, (404, "NoSuchBucket"), "PUT", path, b"",
          {"x-amz-copy-source": f"/{MISSING_BUCKET}/obj"})
    check(server, (416, "InvalidRange"), "PUT", path, b"",
          {**src, "x-amz-copy-source-range": "bytes=10240-10300"})
    # UploadPartCopy: InvalidRange (the range starts inside the source and runs past it).
    check(server, (416, "InvalidRange"), "PUT", path, b"",
          {**src, "x-amz-copy-source-range": "bytes=0-10240"})
    # UploadPartCopy (engine UploadPart failed): NoSuchUpload.
    check(server, (404, "NoSuchUpload"), "PUT",
          f"/{work}/{key}?partNumber=1&uploadId={NO_UPLOAD}", b"", src)
    status, _, _, body = answer(server, "GET", f"/{work}/{key}?uploadId={uid}")
    assert status == 200 and b"<Part>" not in body


@pytest.mark.parametrize("doc", [b"<CompleteMultipartUpload><Part>", b"not xml",
                                 b"<CompleteMultipartUpload></CompleteMultipartUpload>",
                                 b"<CompleteMultipartUpload><Part><PartNumber>x</PartNumber>"
                                 b"<ETag>e</ETag></Part></CompleteMultipartUpload>"])
def test_complete_malformed(server, work, upload, doc):
    # CompleteMultipartUpload: MalformedXML.
    key, uid = upload
    check(server, (400, "MalformedXML"), "POST", f"/{work}/{key}?uploadId={uid}", doc)


def test_complete_engine_errors(server, work, upload):
    key, uid = upload
    e1 = upload_part(server, work, key, uid, 1, b"first part")
    e2 = upload_part(server, work, key, uid, 2, b"second part")
    path = f"/{work}/{key}?uploadId={uid}"
    # CompleteMultipartUpload (engine CompleteUpload failed): InvalidPart (ETag differs,
    # part never uploaded), InvalidPartOrder, EntityTooSmall (a part but the last under
    # 5 MiB), NoSuchUpload.
    check(server, (400, "InvalidPart"), "POST", path, complete_doc([(1, '"%s"' % ("0" * 32))]))
    check(server, (400, "InvalidPart"), "POST", path, complete_doc([(3, e2)]))
    check(server, (400, "InvalidPartOrder"), "POST", path, complete_doc([(2, e2), (1, e1)]))
    check(server, (400, "EntityTooSmall"), "POST", path, complete_doc([(1, e1), (2, e2)]))
    check(server, (404, "NoSuchUpload"), "POST", f"/{work}/{key}?uploadId={NO_UPLOAD}",
          complete_doc([(1, e1)]))
    assert missing(server, work, key)
    # The upload survived every failed completion.
    status, _, _, body = answer(server, "GET", path)
    assert status == 200 and body.count(b"<Part>") == 2


def test_abort_errors(server, work):
    # AbortMultipartUpload (engine AbortUpload failed): NoSuchUpload, KeyTooLongError.
    check(server, (404, "NoSuchUpload"), "DELETE", f"/{work}/k?uploadId={NO_UPLOAD}")
    check(server, (400, "KeyTooLongError"), "DELETE", f"/{work}/{LONG_KEY}?uploadId={NO_UPLOAD}")


@pytest.mark.xfail(strict=True, reason="multipart operations on a missing bucket answer "
                   "NoSuchUpload; S3 answers NoSuchBucket")
@pytest.mark.parametrize("method,query,headers", [
    pytest.param("GET", "", {}, id="ListParts"),
    pytest.param("PUT", "&partNumber=1", {}, id="UploadPart"),
    pytest.param("PUT", "&partNumber=1", {"x-amz-copy-source": "/{b}/src"}, id="UploadPartCopy"),
    pytest.param("POST", "", {}, id="CompleteMultipartUpload"),
    pytest.param("DELETE", "", {}, id="AbortMultipartUpload"),
])
def test_multipart_missing_bucket(server, work, method, query, headers):
    body = complete_doc([(1, '"%s"' % ("0" * 32))]) if method == "POST" else \
        b"x" if method == "PUT" and not headers else b""
    check(server, (404, "NoSuchBucket"), method,
          f"/{MISSING_BUCKET}/k?uploadId={NO_UPLOAD}{query}", body,
          {k: v.format(b=work) for k, v in headers.items()})


# ---------------------------------------------------------------- a server of another region

EU = "eu-central-1"


@pytest.fixture(scope="module")
def eu_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("openlaked-eu")
    s = Server(root)
    s.config.write_text(s.config.read_text().replace(f'region = "{REGION}"', f'region = "{EU}"'))
    s.start()
    yield s
    alive = s.alive()
    rc = s.stop()
    assert alive and rc == 0, s.log.read_text()


@pytest.mark.parametrize("constraint,named", [("", "unspecified"), ("us-east-1", "us-east-1")])
def test_create_bucket_location_other_region(eu_server, bucket_name, constraint, named):
    # CreateBucket: IllegalLocationConstraintException, on a server of another region than
    # us-east-1: an empty constraint is us-east-1's ("unspecified"), and us-east-1 named.
    doc = (f"<CreateBucketConfiguration><LocationConstraint>{constraint}</LocationConstraint>"
           f"</CreateBucketConfiguration>").encode()
    name = bucket_name("eu")
    status, code, _, data = answer(eu_server, "PUT", f"/{name}", doc, region=EU)
    assert (status, code) == (400, "IllegalLocationConstraintException"), data
    assert f"The {named} location constraint is incompatible".encode() in data
    assert f"sent to ({EU})".encode() in data
    assert eu_server.alive()
    assert answer(eu_server, "HEAD", f"/{name}", region=EU)[0] == 404
    assert answer(eu_server, "GET", "/", region=EU)[0] == 200


@pytest.mark.xfail(strict=True, reason="a CreateBucket without a configuration is accepted by "
                   "a server of another region than us-east-1; S3 refuses it there")
def test_create_bucket_no_configuration_other_region(eu_server, bucket_name):
    # CreateBucket: IllegalLocationConstraintException, as S3's regional endpoints answer a
    # request without CreateBucketConfiguration (the bucket would be us-east-1's).
    name = bucket_name("eu")
    try:
        check(eu_server, (400, "IllegalLocationConstraintException"), "PUT", f"/{name}",
              region=EU)
    finally:
        answer(eu_server, "DELETE", f"/{name}", region=EU)


# ---------------------------------------------------------------- servers with damaged drives

HURT_CANARY = os.urandom(1000)


def _hurt_server(tmp_path_factory, name):
    root = tmp_path_factory.mktemp(name)
    s = Server(root).start()
    assert answer(s, "PUT", "/hurt")[0] == 200
    put(s, "hurt", "canary", HURT_CANARY)
    return s


def _stop(s):
    assert s.alive(), s.log.read_text()
    status, _, data = raw_request(s, "GET", "/hurt/canary")
    assert status == 200 and data == HURT_CANARY
    rc = s.stop()
    assert rc == 0, s.log.read_text()


@pytest.fixture
def ruined(tmp_path_factory):
    """A daemon of its own (its healer must not meet the damage of the tests further down)
    holding `hurt/ruined`, 200 KiB kept in shard files, whose shard files are then deleted on
    3 of its 4 drives: its metadata is intact, so it opens, but its bytes cannot be rebuilt."""
    s = _hurt_server(tmp_path_factory, "openlaked-ruined")
    put(s, "hurt", "ruined", os.urandom(200 << 10))
    shards = [p for d in s.drives for p in d.glob("hurt/ruined/*/part.1")]
    assert len(shards) == 4, shards
    for p in shards[:3]:
        p.unlink()
    yield s
    _stop(s)


def test_copy_into_read_fails(ruined):
    # CopyInto (ObjectReader::Next failed): InternalError, the source cannot be rebuilt.
    s = ruined
    uid = create_upload(s, "hurt", "from-ruined")
    check(s, (500, "InternalError"), "PUT", f"/hurt/from-ruined?partNumber=1&uploadId={uid}",
          b"", {"x-amz-copy-source": "/hurt/ruined"})
    status, _, _, body = answer(s, "GET", f"/hurt/from-ruined?uploadId={uid}")
    assert status == 200 and b"<Part>" not in body
    # CopyObject (engine CopyObject failed): InternalError, the same through a whole copy.
    check(s, (500, "InternalError"), "PUT", "/hurt/copy-of-ruined", b"",
          {"x-amz-copy-source": "/hurt/ruined"})
    assert missing(s, "hurt", "copy-of-ruined")


@pytest.fixture(scope="module")
def hurt(tmp_path_factory):
    """A daemon of its own whose staging folders the tests below remove. Holds, in bucket
    `hurt`: `canary`, `small` (1 KiB, inline) and `window` (exactly one 2 MiB write window:
    k=2 data shards of 1 MiB blocks)."""
    s = _hurt_server(tmp_path_factory, "openlaked-hurt")
    put(s, "hurt", "small", os.urandom(1024))
    put(s, "hurt", "window", os.urandom(2 * MiB))
    yield s
    _stop(s)


@pytest.fixture
def hurt_serving(hurt):
    yield hurt
    assert hurt.alive(), hurt.log.read_text()
    status, _, data = raw_request(hurt, "GET", "/hurt/canary")
    assert status == 200 and data == HURT_CANARY
    assert "taken offline" not in hurt.log.read_text()


def _break_tmp(server, drives=3):
    """Removes the staging folder (.openlake.sys/tmp) of `drives` drives: writes that stage
    there fail on them, and with 3 of 4 gone a write misses its quorum (2 for RS 2+2).
    Nothing recreates it while the daemon runs. Returns the undo."""
    gone = [d / ".openlake.sys" / "tmp" for d in server.drives[:drives]]
    for t in gone:
        shutil.rmtree(t)

    def undo():
        for t in gone:
            t.mkdir(mode=0o700, exist_ok=True)
    return undo


@pytest.mark.parametrize("source", [
    # CopyInto (ObjectWriter::Write failed): ServiceUnavailable, the first full window.
    pytest.param("window", id="write"),
    # CopyInto -> Commit (ObjectWriter::Commit failed): ServiceUnavailable, a part smaller
    # than a window is staged at the commit.
    pytest.param("small", id="commit"),
])
def test_copy_into_write_fails(hurt_serving, source):
    s = hurt_serving
    key = f"part-from-{source}"
    uid = create_upload(s, "hurt", key)  # before the damage: its record is staged in tmp
    undo = _break_tmp(s)
    try:
        check(s, (503, "ServiceUnavailable"), "PUT", f"/hurt/{key}?partNumber=1&uploadId={uid}",
              b"", {"x-amz-copy-source": f"/hurt/{source}"})
    finally:
        undo()
    status, _, _, body = answer(s, "GET", f"/hurt/{key}?uploadId={uid}")
    assert status == 200 and b"<Part>" not in body


@pytest.mark.parametrize("size", [
    # WriteBody (ObjectWriter::Write failed): ServiceUnavailable, the first full window.
    pytest.param(2 * MiB, id="write"),
    # WriteBody -> Commit (ObjectWriter::Commit failed): ServiceUnavailable, a body smaller
    # than a window but over the inline threshold is staged (its shard files) at the commit.
    # (An inline object stages nothing: its record is packed, docs/object-store.md.)
    pytest.param(256 * 1024, id="commit"),
])
@pytest.mark.parametrize("op", ["PutObject", "UploadPart"])
def test_write_body_disk_fails(hurt_serving, op, size):
    s = hurt_serving
    key = f"{op}-{size}"
    if op == "PutObject":
        path = f"/hurt/{key}"
    else:
        path = f"/hurt/{key}?partNumber=1&uploadId={create_upload(s, 'hurt', key)}"
    undo = _break_tmp(s)
    try:
        check(s, (503, "ServiceUnavailable"), "PUT", path, os.urandom(size))
    finally:
        undo()
    assert missing(s, "hurt", key)


@pytest.mark.parametrize("op", ["CreateBucket", "CopyObject", "DeleteObject", "DeleteObjects",
                                "CreateMultipartUpload", "CompleteMultipartUpload"])
def test_engine_too_few_drives(hurt_serving, op):
    # The engine's ServiceUnavailable (too few drives took the write) through the operations'
    # own Fail calls: CreateBucket (MakeBucket), CopyObject (engine CopyObject), DeleteObject
    # (engine DeleteObject), CreateMultipartUpload (CreateUpload), CompleteMultipartUpload
    # (CompleteUpload); DeleteObjects reports it per key inside a 200. The objects copied and
    # deleted are over the inline threshold: their records need the staging folder (an inline
    # object's record is packed and stages nothing, docs/object-store.md "Packed records").
    s = hurt_serving
    key = f"few-{op}"
    doomed = b"to delete" * 30000
    if op in ("DeleteObject", "DeleteObjects"):
        put(s, "hurt", key, doomed)
    if op == "CompleteMultipartUpload":
        uid = create_upload(s, "hurt", key)
        etag = upload_part(s, "hurt", key, uid, 1, b"the only part")
    undo = _break_tmp(s)
    try:
        if op == "CreateBucket":
            check(s, (503, "ServiceUnavailable"), "PUT", "/few-drives")
        elif op == "CopyObject":
            check(s, (503, "ServiceUnavailable"), "PUT", f"/hurt/{key}", b"",
                  {"x-amz-copy-source": "/hurt/window"})
        elif op == "DeleteObject":
            check(s, (503, "ServiceUnavailable"), "DELETE", f"/hurt/{key}")
        elif op == "DeleteObjects":
            status, _, _, body = answer(s, "POST", "/hurt?delete", delete_doc(key))
            assert status == 200 and b"<Error><Key>" + key.encode() + \
                b"</Key><Code>ServiceUnavailable</Code>" in body, body
        elif op == "CreateMultipartUpload":
            check(s, (503, "ServiceUnavailable"), "POST", f"/hurt/{key}?uploads")
        else:
            check(s, (503, "ServiceUnavailable"), "POST", f"/hurt/{key}?uploadId={uid}",
                  complete_doc([(1, etag)]))
    finally:
        undo()
    if op == "CreateBucket":
        pass  # a bucket is left behind: test_failed_create_bucket_leaves_no_bucket
    elif op in ("DeleteObject", "DeleteObjects"):
        status, _, _, body = answer(s, "GET", f"/hurt/{key}")
        assert (status, body) == (200, doomed)
    else:
        assert missing(s, "hurt", key)


@pytest.mark.xfail(strict=True, reason="MakeBucket's roll-back after too few drives only undoes "
                   "the drives that took the bucket whole: its folder stays on the others and "
                   "the bucket exists after the 503")
def test_failed_create_bucket_leaves_no_bucket(hurt_serving):
    s = hurt_serving
    undo = _break_tmp(s)
    try:
        check(s, (503, "ServiceUnavailable"), "PUT", "/half-made")
    finally:
        undo()
    assert answer(s, "HEAD", "/half-made")[0] == 404


# ---------------------------------------------------------------- not reachable by a request
#
# S3Service::Dispatch: NotImplemented. Process answers every route of Op::kNotImplemented
#   before it dispatches, so Dispatch's own case never runs.
# ListBuckets: the engine's ListBuckets never fails (drives that cannot be read are skipped),
#   so its Fail has no status to answer.

"""S3 versioning through boto3 and raw requests against a real openlaked (docs/s3.md,
"Versioning"): PutBucketVersioning, versioned PUT/GET/HEAD/DELETE, delete markers,
ListObjectVersions and its pages, DeleteObjects with versions, copies from a version, tagging
of a version, suspended versioning and the null version, and what a restart keeps.
"""

import xml.etree.ElementTree as ET
from urllib.parse import quote

import pytest

from conftest import Server, make_client, raw_request, xml_code

pytest.importorskip("boto3")
from botocore.exceptions import ClientError  # noqa: E402


NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def enable(s3, bucket, status="Enabled"):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": status})


def versions_of(server, bucket, page=1000, **params):
    """Every version and delete marker as (key, version id, is latest, is marker), in the
    order S3's pages give them (keys in order, each key's newest first), following
    NextKeyMarker and NextVersionIdMarker."""
    out = []
    query = {"max-keys": str(page), **params}
    for _ in range(10000):
        qs = "&".join(f"{k}={quote(v, safe='')}" for k, v in sorted(query.items()))
        status, _, body = raw_request(server, "GET", f"/{bucket}?versions&{qs}")
        assert status == 200, body
        root = ET.fromstring(body)
        for e in root:
            tag = e.tag.split("}")[-1]
            if tag in ("Version", "DeleteMarker"):
                out.append((e.find(NS + "Key").text, e.find(NS + "VersionId").text,
                            e.find(NS + "IsLatest").text == "true", tag == "DeleteMarker"))
        if root.find(NS + "IsTruncated").text != "true":
            return out
        query["key-marker"] = root.find(NS + "NextKeyMarker").text
        vid = root.find(NS + "NextVersionIdMarker")
        query["version-id-marker"] = vid.text if vid is not None else ""
    raise AssertionError("the listing never ended")


def test_versioning_state_and_versioned_objects(s3, server, bucket_name):
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    assert "Status" not in s3.get_bucket_versioning(Bucket=b)
    # Written before versioning: the null version.
    s3.put_object(Bucket=b, Key="k", Body=b"zero")
    enable(s3, b)
    assert s3.get_bucket_versioning(Bucket=b)["Status"] == "Enabled"
    ids = []
    for body in (b"one", b"two" * 100000, b"three"):
        r = s3.put_object(Bucket=b, Key="k", Body=body)
        assert len(r["VersionId"]) == 32
        ids.append(r["VersionId"])
    assert len(set(ids)) == 3
    got = s3.get_object(Bucket=b, Key="k")
    assert got["Body"].read() == b"three" and got["VersionId"] == ids[2]
    assert s3.get_object(Bucket=b, Key="k", VersionId=ids[1])["Body"].read() == b"two" * 100000
    assert s3.get_object(Bucket=b, Key="k", VersionId="null")["Body"].read() == b"zero"
    head = s3.head_object(Bucket=b, Key="k", VersionId=ids[0])
    assert head["ContentLength"] == 3 and head["VersionId"] == ids[0]
    rng = s3.get_object(Bucket=b, Key="k", VersionId=ids[1], Range="bytes=3-5")
    assert rng["Body"].read() == b"two"

    assert versions_of(server, b) == [("k", ids[2], True, False), ("k", ids[1], False, False),
                                  ("k", ids[0], False, False), ("k", "null", False, False)]
    for bad, code in (("0" * 32, "NoSuchVersion"), ("not-a-version", "InvalidArgument")):
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket=b, Key="k", VersionId=bad)
        assert e.value.response["Error"]["Code"] == code


def test_delete_markers(s3, server, bucket_name):
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    enable(s3, b)
    v1 = s3.put_object(Bucket=b, Key="doc", Body=b"v1")["VersionId"]
    d = s3.delete_object(Bucket=b, Key="doc")
    assert d["DeleteMarker"] is True
    marker = d["VersionId"]
    # The key is gone from reads and listings, with the marker named.
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=b, Key="doc")
    assert e.value.response["Error"]["Code"] == "NoSuchKey"
    headers = e.value.response["ResponseMetadata"]["HTTPHeaders"]
    assert headers["x-amz-delete-marker"] == "true"
    assert headers["x-amz-version-id"] == marker
    assert s3.list_objects_v2(Bucket=b).get("KeyCount") == 0
    # Asked for by its id, a delete marker is 405 MethodNotAllowed.
    status, _, body = raw_request(server, "GET", f"/{b}/doc?versionId={marker}")
    assert status == 405 and xml_code(body) == "MethodNotAllowed"
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=b, Key="doc", VersionId=marker)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 405
    assert versions_of(server, b) == [("doc", marker, True, True), ("doc", v1, False, False)]
    # A versioned bucket with only markers is not empty.
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket=b)
    assert e.value.response["Error"]["Code"] == "BucketNotEmpty"
    # Removing the marker undeletes; removing the last version empties the bucket.
    gone = s3.delete_object(Bucket=b, Key="doc", VersionId=marker)
    assert gone["VersionId"] == marker and gone["DeleteMarker"] is True
    assert s3.get_object(Bucket=b, Key="doc")["Body"].read() == b"v1"
    assert s3.delete_object(Bucket=b, Key="doc", VersionId=v1)["VersionId"] == v1
    # Removing a version that is not there succeeds, as in S3.
    s3.delete_object(Bucket=b, Key="doc", VersionId=v1)
    assert versions_of(server, b) == []
    # A delete of a key that never existed still makes a marker.
    d = s3.delete_object(Bucket=b, Key="never")
    assert d["DeleteMarker"] is True
    s3.delete_object(Bucket=b, Key="never", VersionId=d["VersionId"])
    s3.delete_bucket(Bucket=b)


def test_list_object_versions_pages(s3, server, bucket_name):
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    enable(s3, b)
    want = []
    for key in ("a", "b/1", "b/2", "c", "d"):
        ids = [s3.put_object(Bucket=b, Key=key, Body=key.encode() * i)["VersionId"]
               for i in range(1, 4)]
        want += [(key, vid, i == 0, False) for i, vid in enumerate(reversed(ids))]
    for page in (1, 2, 4, 1000):
        assert versions_of(server, b, page) == want, page
    # boto3's paginator follows the same markers.
    seen = []
    for p in s3.get_paginator("list_object_versions").paginate(
            Bucket=b, PaginationConfig={"PageSize": 2}):
        seen += [(v["Key"], v["VersionId"]) for v in p.get("Versions", [])]
    assert sorted(seen) == sorted((w[0], w[1]) for w in want)
    # The delimiter rolls b/ up into one common prefix; a prefix lists below it.
    r = s3.list_object_versions(Bucket=b, Delimiter="/")
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["b/"]
    assert sorted({v["Key"] for v in r["Versions"]}) == ["a", "c", "d"]
    r = s3.list_object_versions(Bucket=b, Prefix="b/")
    assert len(r["Versions"]) == 6
    # A page ending inside a key names where to go on.
    r = s3.list_object_versions(Bucket=b, MaxKeys=2)
    assert r["IsTruncated"] and r["NextKeyMarker"] == "a"
    assert r["NextVersionIdMarker"] == want[1][1]
    r = s3.list_object_versions(Bucket=b, KeyMarker="a", VersionIdMarker=want[1][1], MaxKeys=1)
    assert [(v["Key"], v["VersionId"]) for v in r["Versions"]] == [("a", want[2][1])]
    # A version-id marker needs a key marker.
    status, _, body = raw_request(server, "GET", f"/{b}?versions&version-id-marker={want[0][1]}")
    assert status == 400 and xml_code(body) == "InvalidArgument"


def test_delete_objects_with_versions(s3, server, bucket_name):
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    enable(s3, b)
    old = s3.put_object(Bucket=b, Key="x", Body=b"old")["VersionId"]
    new = s3.put_object(Bucket=b, Key="x", Body=b"new")["VersionId"]
    s3.put_object(Bucket=b, Key="y", Body=b"y")
    r = s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "x", "VersionId": old},
                                                        {"Key": "y"}]})
    deleted = {d["Key"]: d for d in r["Deleted"]}
    assert deleted["x"]["VersionId"] == old
    assert deleted["y"]["DeleteMarker"] is True and len(deleted["y"]["DeleteMarkerVersionId"]) == 32
    assert s3.get_object(Bucket=b, Key="x")["Body"].read() == b"new"
    assert [v[1] for v in versions_of(server, b) if v[0] == "x"] == [new]
    # A malformed version id fails that key only.
    r = s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "x", "VersionId": "bad"}]})
    assert r["Errors"][0]["Code"] == "InvalidArgument"


def test_copy_and_tag_a_version(s3, server, bucket_name):
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    enable(s3, b)
    first = s3.put_object(Bucket=b, Key="model", Body=b"weights-1")["VersionId"]
    s3.put_object(Bucket=b, Key="model", Body=b"weights-2")
    # Restoring an old version: copy it onto its own key, which makes a new version.
    r = s3.copy_object(Bucket=b, Key="model",
                       CopySource={"Bucket": b, "Key": "model", "VersionId": first})
    assert r["CopySourceVersionId"] == first and r["VersionId"] not in (first, None)
    assert s3.get_object(Bucket=b, Key="model")["Body"].read() == b"weights-1"
    assert len(versions_of(server, b)) == 3
    # Tags of one version change that version alone, which keeps its id.
    s3.put_object_tagging(Bucket=b, Key="model", VersionId=first,
                          Tagging={"TagSet": [{"Key": "stage", "Value": "archived"}]})
    tags = s3.get_object_tagging(Bucket=b, Key="model", VersionId=first)
    assert tags["TagSet"] == [{"Key": "stage", "Value": "archived"}]
    assert tags["VersionId"] == first
    assert s3.get_object_tagging(Bucket=b, Key="model")["TagSet"] == []
    assert len(versions_of(server, b)) == 3
    # A delete marker cannot be a copy's source.
    marker = s3.delete_object(Bucket=b, Key="model")["VersionId"]
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=b, Key="other",
                       CopySource={"Bucket": b, "Key": "model", "VersionId": marker})
    assert e.value.response["Error"]["Code"] == "InvalidRequest"


def test_multipart_upload_makes_a_version(s3, bucket_name):
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    enable(s3, b)
    v1 = s3.put_object(Bucket=b, Key="big", Body=b"small")["VersionId"]
    up = s3.create_multipart_upload(Bucket=b, Key="big")["UploadId"]
    part = s3.upload_part(Bucket=b, Key="big", UploadId=up, PartNumber=1, Body=b"p" * 1000)
    done = s3.complete_multipart_upload(
        Bucket=b, Key="big", UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    assert len(done["VersionId"]) == 32 and done["VersionId"] != v1
    assert s3.get_object(Bucket=b, Key="big", VersionId=v1)["Body"].read() == b"small"
    assert s3.get_object(Bucket=b, Key="big")["Body"].read() == b"p" * 1000


def test_suspended_versioning_and_the_null_version(s3, server, bucket_name):
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    enable(s3, b)
    kept = s3.put_object(Bucket=b, Key="k", Body=b"kept")["VersionId"]
    enable(s3, b, "Suspended")
    assert s3.get_bucket_versioning(Bucket=b)["Status"] == "Suspended"
    r = s3.put_object(Bucket=b, Key="k", Body=b"null-1")
    assert "VersionId" not in r
    s3.put_object(Bucket=b, Key="k", Body=b"null-2")
    assert versions_of(server, b) == [("k", "null", True, False), ("k", kept, False, False)]
    assert s3.get_object(Bucket=b, Key="k", VersionId="null")["Body"].read() == b"null-2"
    d = s3.delete_object(Bucket=b, Key="k")
    assert d["DeleteMarker"] is True and d["VersionId"] == "null"
    assert versions_of(server, b) == [("k", "null", True, True), ("k", kept, False, False)]
    s3.delete_object(Bucket=b, Key="k", VersionId="null")
    assert s3.get_object(Bucket=b, Key="k")["Body"].read() == b"kept"


def test_versioning_configuration_errors(s3, server, bucket_name):
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    for doc, want in ((b"<VersioningConfiguration><Status>On</Status></VersioningConfiguration>",
                       (400, "MalformedXML")),
                      (b"<Versioning/>", (400, "MalformedXML")),
                      (b"<VersioningConfiguration><Status>Enabled</Status>"
                       b"<MfaDelete>Enabled</MfaDelete></VersioningConfiguration>",
                       (501, "NotImplemented"))):
        status, _, body = raw_request(server, "PUT", f"/{b}?versioning", doc)
        assert (status, xml_code(body)) == want, doc
    assert "Status" not in s3.get_bucket_versioning(Bucket=b)
    with pytest.raises(ClientError) as e:
        enable(s3, bucket_name())
    assert e.value.response["Error"]["Code"] == "NoSuchBucket"


def test_versions_survive_a_restart(tmp_path):
    srv = Server(tmp_path).start()
    try:
        s3 = make_client(srv)
        s3.create_bucket(Bucket="keep")
        enable(s3, "keep")
        ids = [s3.put_object(Bucket="keep", Key="r", Body=bytes([i]) * 300000)["VersionId"]
               for i in range(3)]
        marker = s3.delete_object(Bucket="keep", Key="r")["VersionId"]
        assert srv.stop() == 0
        srv.start()
        s3 = make_client(srv)
        assert s3.get_bucket_versioning(Bucket="keep")["Status"] == "Enabled"
        assert [v[1] for v in versions_of(srv, "keep")] == [marker] + ids[::-1]
        for i, vid in enumerate(ids):
            got = s3.get_object(Bucket="keep", Key="r", VersionId=vid)["Body"].read()
            assert got == bytes([i]) * 300000
    finally:
        srv.kill()

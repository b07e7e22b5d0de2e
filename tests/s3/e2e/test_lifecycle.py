"""Bucket lifecycle configurations through boto3 against a real openlaked (docs/s3.md,
"Lifecycle"): Put/Get/DeleteBucketLifecycleConfiguration with S3's checks, and the daemon's
scanner expiring objects, noncurrent versions, lone delete markers and uploads on its own,
counted in /metrics. (Rules counted in days are checked with a chosen clock in
tests/s3/lifecycle_test.cc; here a rule with a past Date is due at once.)
"""

import re
import time
import urllib.request

import pytest

from conftest import Server, make_client

pytest.importorskip("boto3")
from botocore.exceptions import ClientError  # noqa: E402


def rule(rid, prefix="", status="Enabled", **actions):
    r = {"ID": rid, "Filter": {"Prefix": prefix}, "Status": status}
    r.update(actions)
    return r


def test_lifecycle_configuration_round_trip(s3, bucket_name):
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    with pytest.raises(ClientError) as e:
        s3.get_bucket_lifecycle_configuration(Bucket=b)
    assert e.value.response["Error"]["Code"] == "NoSuchLifecycleConfiguration"
    rules = [
        rule("keep-7-days", "checkpoints/", Expiration={"Days": 7},
             NoncurrentVersionExpiration={"NoncurrentDays": 1, "NewerNoncurrentVersions": 3},
             AbortIncompleteMultipartUpload={"DaysAfterInitiation": 2}),
        {"ID": "tmp", "Status": "Enabled",
         "Filter": {"And": {"Prefix": "scratch/", "Tags": [{"Key": "tmp", "Value": "1"}],
                            "ObjectSizeGreaterThan": 100}},
         "Expiration": {"Days": 1}},
        rule("markers", Expiration={"ExpiredObjectDeleteMarker": True}),
    ]
    s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration={"Rules": rules})
    got = s3.get_bucket_lifecycle_configuration(Bucket=b)["Rules"]
    assert [r["ID"] for r in got] == ["keep-7-days", "tmp", "markers"]
    assert got[0]["Filter"] == {"Prefix": "checkpoints/"}
    assert got[0]["Expiration"] == {"Days": 7}
    assert got[0]["NoncurrentVersionExpiration"] == {"NoncurrentDays": 1,
                                                     "NewerNoncurrentVersions": 3}
    assert got[0]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 2}
    assert got[1]["Filter"]["And"]["Tags"] == [{"Key": "tmp", "Value": "1"}]
    assert got[1]["Filter"]["And"]["ObjectSizeGreaterThan"] == 100
    assert got[2]["Expiration"] == {"ExpiredObjectDeleteMarker": True}
    s3.delete_bucket_lifecycle(Bucket=b)
    with pytest.raises(ClientError) as e:
        s3.get_bucket_lifecycle_configuration(Bucket=b)
    assert e.value.response["Error"]["Code"] == "NoSuchLifecycleConfiguration"


@pytest.mark.parametrize("rules,code", [
    ([rule("zero", Expiration={"Days": 0})], "InvalidArgument"),
    ([rule("noon", Expiration={"Date": "2030-01-01T12:00:00Z"})], "InvalidArgument"),
    ([rule("none")], "InvalidRequest"),
    ([rule("x", Expiration={"Days": 1}), rule("x", Expiration={"Days": 2})], "InvalidArgument"),
    ([rule("cold", Transitions=[{"Days": 1, "StorageClass": "GLACIER"}])], "NotImplemented"),
    ([rule("bad", status="Sometimes", Expiration={"Days": 1})], "MalformedXML"),
])
def test_lifecycle_configuration_errors(s3, bucket_name, rules, code):
    b = bucket_name()
    s3.create_bucket(Bucket=b)
    with pytest.raises(ClientError) as e:
        s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration={"Rules": rules})
    assert e.value.response["Error"]["Code"] == code
    with pytest.raises(ClientError) as e:
        s3.get_bucket_lifecycle_configuration(Bucket=b)
    assert e.value.response["Error"]["Code"] == "NoSuchLifecycleConfiguration"


def _metrics(server):
    m = re.search(r"admin: http://(127\.0\.0\.1:\d+)/metrics",
                  (server.root / "stdout.log").read_text())
    assert m, (server.root / "stdout.log").read_text()
    with urllib.request.urlopen(f"http://{m.group(1)}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {name: float(value) for name, value in
            re.findall(r"^(openlake_s3_lifecycle_\w+) (\S+)$", text, re.M)}


def _wait(predicate, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def test_the_daemon_applies_the_rules(tmp_path):
    srv = Server(tmp_path)
    srv.config.write_text('lifecycle_interval_secs = 1\nadmin_addr = "127.0.0.1:0"\n' +
                          srv.config.read_text())
    srv.start()
    try:
        s3 = make_client(srv)
        s3.create_bucket(Bucket="plain")
        s3.create_bucket(Bucket="vers")
        s3.put_bucket_versioning(Bucket="vers", VersioningConfiguration={"Status": "Enabled"})
        for i in range(5):
            s3.put_object(Bucket="plain", Key=f"tmp/{i}", Body=b"scratch")
            s3.put_object(Bucket="plain", Key=f"keep/{i}", Body=b"kept")
        up = s3.create_multipart_upload(Bucket="plain", Key="tmp/big")["UploadId"]
        s3.put_object(Bucket="vers", Key="tmp/a", Body=b"v1")
        s3.put_object(Bucket="vers", Key="tmp/a", Body=b"v2")
        past = "2020-01-01T00:00:00Z"
        s3.put_bucket_lifecycle_configuration(Bucket="plain", LifecycleConfiguration={"Rules": [
            rule("scratch", "tmp/", Expiration={"Date": past})]})
        s3.put_bucket_lifecycle_configuration(Bucket="vers", LifecycleConfiguration={"Rules": [
            rule("scratch", "tmp/", Expiration={"Date": past}),
            rule("markers", Expiration={"ExpiredObjectDeleteMarker": True})]})

        def plain_keys():
            return sorted(o["Key"] for o in
                          s3.list_objects_v2(Bucket="plain").get("Contents", []))
        assert _wait(lambda: plain_keys() == [f"keep/{i}" for i in range(5)]), plain_keys()
        # In the versioned bucket the expiry is a delete marker over the versions.
        assert _wait(lambda: s3.list_objects_v2(Bucket="vers").get("KeyCount") == 0)
        versions = s3.list_object_versions(Bucket="vers")
        assert len(versions["Versions"]) == 2 and len(versions["DeleteMarkers"]) == 1
        # The upload was started no day ago: a rule for uploads counts days, so it stays.
        assert [u["UploadId"] for u in
                s3.list_multipart_uploads(Bucket="plain").get("Uploads", [])] == [up]
        # A lone delete marker goes: remove the versions behind it, and the scanner takes it.
        for v in versions["Versions"]:
            s3.delete_object(Bucket="vers", Key="tmp/a", VersionId=v["VersionId"])
        assert _wait(lambda: "DeleteMarkers" not in s3.list_object_versions(Bucket="vers"))
        counts = _metrics(srv)
        assert counts["openlake_s3_lifecycle_expired_total"] >= 6
        assert counts["openlake_s3_lifecycle_versions_removed_total"] >= 1
        assert counts["openlake_s3_lifecycle_passes_total"] >= 1
        assert counts["openlake_s3_lifecycle_errors_total"] == 0
    finally:
        srv.kill()

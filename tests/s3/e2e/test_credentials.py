"""No [[credentials]] in the config: openlaked makes a key pair, prints it once, keeps it
owner-only, and reads the same pair back on the next start."""

import os
import stat
import time

from conftest import Server, boto3_or_skip, make_client


def test_generated_credentials(tmp_path):
    boto3_or_skip()
    server = Server(tmp_path, credentials=False).start()
    try:
        key, secret = server.access_key, server.secret_key
        assert key.startswith("OL") and len(key) == 20 and len(secret) == 40
        assert "S3 credentials (generated" in server.stdout
        stored = server.data / ".openlake-credentials.toml"
        assert stat.S_IMODE(os.stat(stored).st_mode) == 0o600
        assert os.stat(stored).st_uid == os.getuid()
        text = stored.read_text()
        assert key in text and secret in text
        s3 = make_client(server)
        s3.create_bucket(Bucket="gen-creds")
        s3.put_object(Bucket="gen-creds", Key="k", Body=b"generated")
        bad = make_client(server, secret_key=secret[::-1])
        try:
            bad.list_buckets()
            raise AssertionError("a wrong secret was accepted")
        except Exception as e:  # botocore ClientError
            assert "SignatureDoesNotMatch" in str(e)
    finally:
        assert server.stop() == 0, server.log.read_text()

    again = Server(tmp_path, credentials=False)
    again.access_key, again.secret_key = key, secret  # start() then waits for no new pair
    again.start()
    try:
        time.sleep(0.5)
        out = (tmp_path / "stdout.log").read_text()
        assert "S3: http://" in out and "S3 credentials (generated" not in out, out
        assert key not in out and secret not in out
        s3 = make_client(again)
        assert s3.get_object(Bucket="gen-creds", Key="k")["Body"].read() == b"generated"
        assert stat.S_IMODE(os.stat(stored).st_mode) == 0o600
    finally:
        assert again.stop() == 0, again.log.read_text()

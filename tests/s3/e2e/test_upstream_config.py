"""Upstream OpenLake's storage-tcp-local.toml runs as is: S3 on 127.0.0.1:9000 over four
folders under ./data, with the credentials written in the file."""

import shutil
import socket
from pathlib import Path

import pytest

from conftest import Server, boto3_or_skip, make_client

CONFIG = Path(__file__).resolve().parents[3] / "examples/configs/storage-tcp-local.toml"


def _port_busy(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_storage_tcp_local_runs_as_is(tmp_path):
    boto3_or_skip()
    if _port_busy(9000):
        pytest.skip("port 9000 is in use on this machine")
    server = Server(tmp_path)
    shutil.copy(CONFIG, tmp_path / "storage-tcp-local.toml")
    server.config = tmp_path / "storage-tcp-local.toml"
    server.cwd = tmp_path
    server.access_key, server.secret_key = "openlakeadmin", "openlakeadmin"
    server.start()
    try:
        assert server.port == 9000
        assert "over 4 drive folders (4 online; 1 set(s), RS 3+1)" in server.stdout
        for d in ("disk1", "disk2", "disk3", "disk4"):
            assert (tmp_path / "data" / d / ".openlake.sys" / "format.json").is_file()
        s3 = make_client(server)
        s3.create_bucket(Bucket="upstream-config")
        s3.put_object(Bucket="upstream-config", Key="k", Body=b"as is")
        assert s3.get_object(Bucket="upstream-config", Key="k")["Body"].read() == b"as is"
    finally:
        assert server.stop() == 0, server.log.read_text()

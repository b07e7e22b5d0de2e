"""openlaked's admin listener: /health/live and /health/ready, /metrics in Prometheus' text
format (checked with promtool) carrying the S3 requests just made, scraped by a real Prometheus
server and read back through its HTTP API; and a bearer token when one is configured."""

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conftest import Server, boto3_or_skip, make_client


def _with_top_keys(server: Server, extra: str) -> None:
    """Top-level keys go before the config's [[credentials]] table."""
    server.config.write_text(extra + server.config.read_text())


def _admin(server: Server, extra: str) -> str:
    _with_top_keys(server, extra)
    server.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        m = re.search(r"admin: http://(127\.0\.0\.1:\d+)/metrics",
                      (server.root / "stdout.log").read_text())
        if m:
            return m.group(1)
        time.sleep(0.05)
    raise AssertionError("no admin line:\n" + (server.root / "stdout.log").read_text())


def _get(url: str, token: str = None):
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_health_metrics_promtool_and_prometheus(tmp_path):
    boto3_or_skip()
    server = Server(tmp_path)
    admin = _admin(server, 'admin_addr = "127.0.0.1:0"\n')
    prom = None
    try:
        assert _get(f"http://{admin}/health/live") == (200, "ok\n")
        assert _get(f"http://{admin}/health/ready") == (200, "ready\n")
        assert _get(f"http://{admin}/nope")[0] == 404
        s3 = make_client(server)
        s3.create_bucket(Bucket="metrics")
        for i in range(3):
            s3.put_object(Bucket="metrics", Key=f"k{i}", Body=b"x" * 1000)
        s3.get_object(Bucket="metrics", Key="k0")["Body"].read()
        status, text = _get(f"http://{admin}/metrics")
        assert status == 200
        assert 'openlake_s3_requests_total{op="PutObject",code="2xx"} 3' in text
        assert 'openlake_s3_bytes_in_total{op="PutObject"} 3000' in text
        assert 'openlake_store_drives{state="ok"} 4' in text
        assert re.search(r'openlake_s3_request_duration_seconds_count\{op="GetObject"\} 1\b',
                         text)
        assert "openlake_build_info{version=" in text
        # Every reactor: its busy ratio since the previous scrape (within [0, 1]) and its
        # ring's submissions (the requests above went through the rings).
        ratios = re.findall(r'^openlake_reactor_busy_ratio\{reactor="(\d+)",cpu="\d+"\} (\S+)$',
                            text, re.M)
        assert ratios and all(0.0 <= float(v) <= 1.0 for _, v in ratios)
        subs = re.findall(r'^openlake_reactor_ring_submissions_total\{reactor="\d+",cpu="\d+"\}'
                          r' (\S+)$', text, re.M)
        assert len(subs) == len(ratios) and sum(float(v) for v in subs) > 0
        assert "openlake_reactor_ring_completions_total{" in text
        # Each drive: online, and no errors on a healthy store.
        for d in server.drives:
            assert f'openlake_store_drive_online{{drive="{d}",state="ok"}} 1' in text
            assert f'openlake_store_drive_errors_total{{drive="{d}"}} 0' in text
        assert "openlake_store_healed_bytes_total 0" in text

        promtool = shutil.which("promtool")
        if promtool is None:
            pytest.skip("promtool is not installed (Debian's prometheus package)")
        check = subprocess.run([promtool, "check", "metrics"], input=text, text=True,
                               capture_output=True, timeout=30)
        assert check.returncode == 0, check.stdout + check.stderr

        prometheus = shutil.which("prometheus")
        if prometheus is None:
            pytest.skip("prometheus is not installed")
        port = _free_port()
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text("global:\n  scrape_interval: 1s\nscrape_configs:\n"
                       "  - job_name: openlake\n    static_configs:\n"
                       f"      - targets: ['{admin}']\n")
        prom = subprocess.Popen(
            [prometheus, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "wb"))
        query = urllib.parse.quote('openlake_s3_requests_total{op="PutObject"}')
        deadline = time.monotonic() + 40
        value = None
        while time.monotonic() < deadline and value is None:
            time.sleep(1)
            try:
                _, body = _get(f"http://127.0.0.1:{port}/api/v1/query?query={query}")
                result = json.loads(body)["data"]["result"]
                if result:
                    value = float(result[0]["value"][1])
            except (OSError, ValueError, KeyError):
                continue
        assert value == 3, (tmp_path / "prometheus.log").read_text()[-2000:]
    finally:
        if prom is not None:
            prom.terminate()
            prom.wait(20)
        assert server.stop() == 0, server.log.read_text()


def test_admin_token(tmp_path):
    server = Server(tmp_path)
    admin = _admin(server, 'admin_addr = "127.0.0.1:0"\nadmin_token = "s3cr3t-admin"\n')
    try:
        assert _get(f"http://{admin}/metrics")[0] == 401
        assert _get(f"http://{admin}/health/live", "wrong")[0] == 401
        status, text = _get(f"http://{admin}/metrics", "s3cr3t-admin")
        assert status == 200 and "openlake_uptime_seconds" in text
    finally:
        assert server.stop() == 0, server.log.read_text()


def test_admin_beyond_loopback_needs_a_token(tmp_path):
    server = Server(tmp_path)
    _with_top_keys(server, 'admin_addr = "0.0.0.0:0"\n')
    from conftest import openlaked_path
    p = subprocess.run([openlaked_path(), "--config", str(server.config)], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 2
    assert "listens beyond loopback: set admin_token" in p.stderr


def test_secrets_from_the_environment(tmp_path):
    """As a Kubernetes Secret passes them: the S3 key pair and the admin token as variables,
    replacing what the config says (here: a config with none)."""
    server = Server(tmp_path, credentials=False)
    server.env = {"OPENLAKE_S3_ACCESS_KEY": "ENVACCESSKEY0001",
                  "OPENLAKE_S3_SECRET_KEY": "env-secret-0123456789abcdef",
                  "OPENLAKE_ADMIN_TOKEN": "env-admin-token"}
    server.access_key, server.secret_key = "ENVACCESSKEY0001", "env-secret-0123456789abcdef"
    admin = _admin(server, 'admin_addr = "127.0.0.1:0"\n')
    try:
        assert "credentials (generated" not in server.stdout
        assert _get(f"http://{admin}/health/ready")[0] == 401
        assert _get(f"http://{admin}/health/ready", "env-admin-token") == (200, "ready\n")
        s3 = make_client(server)
        s3.create_bucket(Bucket="from-env")
        assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["from-env"]
    finally:
        assert server.stop() == 0, server.log.read_text()
    # Half a key pair is refused, naming both variables.
    from conftest import openlaked_path
    import os
    p = subprocess.run([openlaked_path(), "--config", str(server.config)], capture_output=True,
                       text=True, timeout=30,
                       env={**os.environ, "OPENLAKE_S3_ACCESS_KEY": "ONLYTHEACCESSKEY"})
    assert p.returncode == 2
    assert "OPENLAKE_S3_ACCESS_KEY and OPENLAKE_S3_SECRET_KEY go together" in p.stderr

"""Fixtures for the S3 end-to-end tests: a real openlaked serving S3 on loopback, driven by
the real clients (the aws CLI, boto3) and by raw sockets.

Run by meson (`meson test -C build s3_e2e`), which sets OPENLAKED; by hand:
    OPENLAKED=build/tools/openlaked/openlaked /usr/bin/python3 -m pytest -q tests/s3/e2e
"""

import ctypes
import http.client
import itertools
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REGION = "us-east-1"
ACCESS_KEY = "OLE2ETESTACCESSKEY01"
SECRET_KEY = "e2e-secret-key-0123456789abcdefghijklmnopq"
START_TIMEOUT = 20
STOP_TIMEOUT = 20


def openlaked_path() -> str:
    path = os.environ.get("OPENLAKED") or str(HERE.parents[2] / "build/tools/openlaked/openlaked")
    if not os.access(path, os.X_OK):
        pytest.exit(f"openlaked not found at {path}; build first or set OPENLAKED", returncode=2)
    return path


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Server:
    """One openlaked in storage mode over four drive folders under `root`, RS(2+2)."""

    def __init__(self, root: Path, credentials: bool = True, region: str = REGION):
        self.root = root
        self.data = root / "data"
        self.drives = [self.data / f"d{i}" for i in range(4)]
        self.log = root / "openlaked.log"
        self.access_key = ACCESS_KEY if credentials else None
        self.secret_key = SECRET_KEY if credentials else None
        lines = [
            'mode = "storage"',
            's3_addr = "127.0.0.1:0"',
            f'region = "{region}"',
            "data_dirs = [" + ", ".join(f'"{d}"' for d in self.drives) + "]",
            "set_drive_count = 4",
            "default_parity_count = 2",
            "heal_interval_secs = 1",
        ]
        if credentials:
            lines += ["[[credentials]]", f'access_key = "{ACCESS_KEY}"',
                      f'secret_key = "{SECRET_KEY}"']
        self.config = root / "openlaked.toml"
        self.config.write_text("\n".join(lines) + "\n")
        self.proc = None
        self.port = None
        self.stdout = ""
        self.cwd = None  # where relative data_dirs land (None: the test's own)
        self.env = {}  # added to the daemon's environment

    def start(self) -> "Server":
        self.log_file = open(self.log, "ab")
        out_path = self.root / "stdout.log"
        self.out_file = open(out_path, "wb")
        self.proc = subprocess.Popen([openlaked_path(), "--config", str(self.config)],
                                     stdout=self.out_file, stderr=self.log_file,
                                     cwd=self.cwd, env={**os.environ, **self.env},
                                     preexec_fn=_die_with_parent)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            self.stdout = out_path.read_text(errors="replace")
            m = re.search(r"S3: http://127\.0\.0\.1:(\d+) ", self.stdout)
            gen = re.search(r"access key: (\S+)\n\s*secret key: (\S+)\n", self.stdout)
            if m and (self.access_key or gen):
                self.port = int(m.group(1))
                if gen:
                    self.access_key, self.secret_key = gen.group(1), gen.group(2)
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"openlaked did not start:\n{self.stdout}\n{self.log.read_text()}")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode
        self.proc = None
        self.log_file.close()
        self.out_file.close()
        return rc

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def conn(self, timeout: float = 10) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("openlaked")
    s = Server(root).start()
    yield s
    alive = s.alive()
    rc = s.stop()
    assert alive, "openlaked died during the tests:\n" + s.log.read_text()
    assert rc == 0, s.log.read_text()
    shutil.rmtree(root, ignore_errors=True)


_counter = itertools.count()


@pytest.fixture
def bucket_name():
    """A fresh bucket name per call (S3 rules: lower case, 3-63 characters)."""
    def make(prefix: str = "b") -> str:
        return f"{prefix}-{os.getpid()}-{next(_counter)}-{uuid.uuid4().hex[:8]}"
    return make


def boto3_or_skip():
    try:
        import boto3  # noqa: F401
        import botocore  # noqa: F401
    except ImportError:
        pytest.skip("boto3 is not installed (Debian: python3-boto3)", allow_module_level=True)
    return boto3


def make_client(server, signature_version="s3v4", access_key=None, secret_key=None,
                region=REGION, **config):
    boto3 = boto3_or_skip()
    from botocore.config import Config
    cfg = {"retries": {"max_attempts": 1}, "connect_timeout": 5, "read_timeout": 30,
           "s3": {"addressing_style": "path"}}
    if signature_version:
        cfg["signature_version"] = signature_version
    cfg.update(config)
    return boto3.session.Session().client(
        "s3", endpoint_url=server.endpoint, region_name=region,
        aws_access_key_id=access_key or server.access_key,
        aws_secret_access_key=secret_key or server.secret_key,
        config=Config(**cfg))


@pytest.fixture
def s3(server):
    return make_client(server)


def error_code(excinfo):
    """(code, HTTP status) of a botocore ClientError."""
    err = excinfo.value.response
    return err.get("Error", {}).get("Code"), err["ResponseMetadata"]["HTTPStatusCode"]


def sign_headers(server, method, path, body=b"", headers=None, payload_hash=None,
                 region=REGION, access_key=None, secret_key=None):
    """Headers for a SigV4 header-signed request of `path` (already percent-encoded, may carry
    a query), signed by botocore. `payload_hash` overrides x-amz-content-sha256."""
    boto3_or_skip()
    import hashlib
    from botocore.auth import SigV4Auth

    class _RawPathSigV4Auth(SigV4Auth):
        # S3 signs the path as sent: no dot-segment removal (botocore's S3 signer agrees).
        def _normalize_url_path(self, path):
            return path
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    hdrs = {"Host": f"127.0.0.1:{server.port}"}
    hdrs.update(headers or {})
    hdrs["X-Amz-Content-SHA256"] = payload_hash or hashlib.sha256(body).hexdigest()
    req = AWSRequest(method=method, url=server.endpoint + path, data=body, headers=hdrs)
    creds = Credentials(access_key or server.access_key, secret_key or server.secret_key)
    _RawPathSigV4Auth(creds, "s3", region).add_auth(req)
    return dict(req.headers.items())


def send(server, method, path, body, headers, timeout=10):
    """A request sent as given over http.client: (status, headers dict lower-cased, body)."""
    c = server.conn(timeout)
    try:
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        c.close()


def raw_request(server, method, path, body=b"", headers=None, timeout=10, **sign):
    """A signed request over http.client: (status, headers dict lower-cased, body)."""
    return send(server, method, path, body, sign_headers(server, method, path, body, headers,
                                                           **sign), timeout)


def xml_code(body: bytes) -> str:
    m = re.search(rb"<Code>([^<]*)</Code>", body)
    return m.group(1).decode() if m else ""

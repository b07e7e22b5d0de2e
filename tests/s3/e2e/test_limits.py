"""What one client may hold, tried against a real openlaked as an attacker would (issue 13,
"Denial of service and memory"; docs/security.md, "Under attack"): request heads that trickle
in, slow connections that fill every place on the S3 and admin listeners, and RPC frame headers
that claim more bytes than they bring."""

import re
import resource
import socket
import struct
import time

import pytest

from conftest import Server, make_client


def _with_top_keys(server: Server, extra: str) -> None:
    server.config.write_text(extra + server.config.read_text())


def _wait_line(server: Server, pattern: str) -> re.Match:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        m = re.search(pattern, (server.root / "stdout.log").read_text())
        if m:
            return m
        time.sleep(0.05)
    raise AssertionError(f"no {pattern!r} in:\n" + (server.root / "stdout.log").read_text())


def _slow(port: int, n: int, head: bytes = b"GET / HTTP/1.1\r\nHost: x\r\n") -> list:
    """n connections, each with a head begun and never finished."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        try:
            s.sendall(head)
        except OSError:
            pass  # refused already (a full cap with nothing to take back): it is closed
        socks.append(s)
    return socks


def _rss_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@pytest.fixture
def limited(tmp_path):
    server = Server(tmp_path)
    _with_top_keys(server, 'admin_addr = "127.0.0.1:0"\n'
                           f'rpc_addr = "127.0.0.1:0"\nkv_socket = "{tmp_path}/kv/kv.sock"\n')
    server.config.write_text(server.config.read_text() +
                             "[limits]\ns3_head_timeout_secs = 2\n"
                             "[kv_slab]\ncapacity_gb = 0.0625\n")
    server.start()
    yield server
    alive = server.alive()
    rc = server.stop()
    assert alive, "openlaked died:\n" + server.log.read_text()
    assert rc == 0, server.log.read_text()


def test_a_trickling_head_gets_408_at_the_head_deadline(limited):
    s = socket.create_connection(("127.0.0.1", limited.port), timeout=10)
    start = time.monotonic()
    s.sendall(b"GET / HTTP/1.1\r\n")
    # One byte at a time, each well inside the idle timeout (60 s), for most of the head
    # deadline (2 s); then nothing more, so the answer is not lost to a reset from bytes the
    # server never read. Timed per read, as before, the head would get 60 s more.
    while time.monotonic() - start < 1.5:
        s.sendall(b"X")
        time.sleep(0.25)
    got = b""
    s.settimeout(8)
    while True:
        piece = s.recv(4096)
        if not piece:
            break
        got += piece
    elapsed = time.monotonic() - start
    s.close()
    assert got.startswith(b"HTTP/1.1 408 "), got[:200]
    assert b"<Code>RequestTimeout</Code>" in got
    assert 1.5 <= elapsed < 6, elapsed


def test_slow_connections_do_not_lock_s3_clients_out(limited):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096 + 256:
        if hard < 4096 + 256:
            pytest.skip("needs 4352 open files")
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    socks = _slow(limited.port, 4096 + 32)  # every place (max_connections), and more
    try:
        time.sleep(1.5)  # past the grace a new head gets
        s3 = make_client(limited)
        for _ in range(5):
            assert s3.list_buckets()["ResponseMetadata"]["HTTPStatusCode"] == 200
            s3 = make_client(limited)  # a fresh connection each time
    finally:
        for s in socks:
            s.close()


def test_the_admin_probes_answer_while_its_places_are_taken(limited):
    admin = _wait_line(limited, r"admin: http://127\.0\.0\.1:(\d+)/metrics")
    port = int(admin.group(1))
    socks = _slow(port, 200)
    try:
        time.sleep(1.5)
        for path in ("/health/live", "/health/ready"):
            c = socket.create_connection(("127.0.0.1", port), timeout=5)
            c.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            answer = c.recv(4096)
            c.close()
            assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    finally:
        for s in socks:
            s.close()


def test_rpc_frame_headers_claiming_large_frames_cost_no_memory(limited):
    m = _wait_line(limited, r"KV pool: tcp 127\.0\.0\.1:(\d+),")
    port = int(m.group(1))
    before = _rss_kib(limited.proc.pid)
    socks = []
    for i in range(24):  # each claims 63 MiB: 1.5 GiB if it were allocated up front
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.recv(4096)  # the hello
        header = struct.pack("<IBBBBHHIII", 0x50524C4F, 1, 1, 0, 0, 1, 0, 63 << 20, 0, 0)
        header += struct.pack("<Q", i + 1)
        s.sendall(header + b"x" * 1000)
        socks.append(s)
    time.sleep(1)
    grown = _rss_kib(limited.proc.pid) - before
    for s in socks:
        s.close()
    assert grown < 64 * 1024, f"RSS grew by {grown} KiB"
    # The pool still answers.
    c = socket.create_connection(("127.0.0.1", port), timeout=5)
    assert c.recv(4096)[:4] == b"OLRP"
    c.close()


def test_a_large_frame_before_authentication_is_refused(tmp_path):
    server = Server(tmp_path)
    _with_top_keys(server, 'rpc_addr = "0.0.0.0:0"\nrpc_secret = "a-long-enough-rpc-secret-0123"\n'
                           f'kv_socket = "{tmp_path}/kv/kv.sock"\nadmin_addr = "off"\n')
    server.config.write_text(server.config.read_text() + "[kv_slab]\ncapacity_gb = 0.0625\n")
    server.start()
    try:
        m = _wait_line(server, r"KV pool: tcp [0-9.]+:(\d+),")
        s = socket.create_connection(("127.0.0.1", int(m.group(1))), timeout=5)
        s.recv(4096)  # the hello, asking for the secret
        header = struct.pack("<IBBBBHHIIIQ", 0x50524C4F, 1, 4, 0, 0, 0, 0, 1 << 20, 0, 0, 1)
        s.sendall(header)
        s.settimeout(5)
        assert s.recv(4096) == b""  # closed at once, before a byte of the claim arrived
        s.close()
        assert server.alive()
    finally:
        assert server.stop() == 0, server.log.read_text()

"""Config mistakes a careless user makes: each exits 2 naming the file and line, before anything
is created or served; the folders the embedded default makes are owner-only."""

import os
import stat
import subprocess
import time

import pytest

from conftest import openlaked_path


def _run(tmp_path, text, env=None):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    return subprocess.run([openlaked_path(), "--config", str(cfg)], capture_output=True,
                          text=True, timeout=30, cwd=tmp_path,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("text, line, words", [
    ('data_dirs = ["d0", "d1", "d2", "d3"]\nset_drive_count = 5\n', 2,
     "key 'set_drive_count' is 5 but data_dirs lists 4 folders"),
    ('rpc_secret = "x"\n', 1, "key 'rpc_secret' must be at least 8 characters"),
    ('admin_token = "tok"\n', 1, "key 'admin_token' must be at least 8 characters"),
    ('[[credentials]]\naccess_key = "key1"\nsecret_key = "s"\n', 3,
     "key 'credentials.secret_key' must be at least 8 characters"),
    ('mode = "kv"\n[kv_slab]\ncapacity_gb = inf\n', 3, "key 'kv_slab.capacity_gb' must be a positive"),
])
def test_config_mistakes_exit_2_with_file_and_line(tmp_path, text, line, words):
    p = _run(tmp_path, text)
    assert p.returncode == 2, p.stderr
    assert f"bad.toml:{line}: {words}" in p.stderr, p.stderr
    assert not (tmp_path / "d0").exists()


def test_a_file_as_a_drive_folder_is_named_as_such(tmp_path):
    (tmp_path / "d1").write_text("not a folder")
    p = _run(tmp_path, 'data_dirs = ["d0", "d1"]\n')
    assert p.returncode == 2, p.stderr
    assert "bad.toml:1: key 'data_dirs' lists 'd1', which is a file, not a folder" in p.stderr


def test_a_short_secret_from_the_environment_is_refused(tmp_path):
    p = _run(tmp_path, 'mode = "kv"\n', env={"OPENLAKE_RPC_SECRET": "abc"})
    assert p.returncode == 2, p.stderr
    assert "rpc_secret must be at least 8 characters" in p.stderr


def test_the_default_data_folder_is_owner_only(tmp_path):
    cfg = tmp_path / "ok.toml"
    cfg.write_text('s3_addr = "127.0.0.1:0"\nrpc_addr = "127.0.0.1:0"\nadmin_addr = "off"\n'
                   'data_dirs = ["data/d0", "data/d1", "data/d2", "data/d3"]\n')
    proc = subprocess.Popen([openlaked_path(), "--config", str(cfg)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(200):
            if (tmp_path / "data" / "d3").exists():
                break
            proc.poll()
            assert proc.returncode is None, proc.stdout.read()
            time.sleep(0.05)
        for d in ("data", "data/d0", "data/d3"):
            mode = stat.S_IMODE(os.stat(tmp_path / d).st_mode)
            assert mode == 0o700, (d, oct(mode))
    finally:
        proc.terminate()
        proc.wait(timeout=30)

"""A private object store on loopback: one openlaked in storage mode over drive folders of its
own, for examples, benchmarks and tests of the S3 side (checkpoints, datasets).

    with LocalStore("build/tools/openlaked/openlaked", folder, drives=4) as store:
        t = store.transfer()                     # an S3Transfer with the store's credentials
        t.create_bucket("ckpt")

The daemon gets a config, `drives` folders and a log in `folder`, free 127.0.0.1 ports for S3
and RPC, the admin endpoint off, and a credential pair drawn at random for this run (never a
default password). RS(k+m) over the drives: parity 2 for four or more drives, else 1. It is
stopped (SIGTERM, then SIGKILL after `stop_timeout` seconds) when the block ends.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Any, Callable, Optional

from .local_daemon import DaemonProcess, free_port


class LocalStore(DaemonProcess):
    def __init__(self, openlaked: str, folder: Path, drives: int = 4,
                 start_timeout: float = 30.0, stop_timeout: float = 60.0,
                 preexec_fn: Optional[Callable[[], Any]] = None,
                 settings: str = "") -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.access_key = "OL" + secrets.token_hex(9).upper()
        self.secret_key = secrets.token_urlsafe(30)
        self.region = "us-east-1"
        s3_port, rpc_port = free_port(), free_port()
        self.endpoint = f"127.0.0.1:{s3_port}"
        self.drives = [folder / f"drive{i}" for i in range(drives)]
        for d in self.drives:
            d.mkdir(exist_ok=True)
        parity = 2 if drives >= 4 else 1
        cfg = folder / "openlaked.toml"
        cfg.write_text(
            'mode = "storage"\n'
            f'rpc_addr = "127.0.0.1:{rpc_port}"\n'
            f's3_addr = "{self.endpoint}"\n'
            'admin_addr = "off"\n'
            f'region = "{self.region}"\n'
            "data_dirs = [" + ", ".join(f'"{d}"' for d in self.drives) + "]\n"
            f"set_drive_count = {drives}\n"
            f"default_parity_count = {parity}\n"
            f"{settings}\n"
            "[[credentials]]\n"
            f'access_key = "{self.access_key}"\n'
            f'secret_key = "{self.secret_key}"\n')
        self._start([openlaked, "--config", str(cfg)], folder / "openlaked.log",
                    lambda text: re.search(r"S3: http://127\.0\.0\.1:\d+ ", text) is not None,
                    start_timeout, stop_timeout, preexec_fn, None)

    @property
    def url(self) -> str:
        return f"http://{self.endpoint}"

    def transfer(self, **options: Any):
        """An S3Transfer to this store (options: connections, part_size, retries, timeout)."""
        from ._openlake import S3Transfer

        return S3Transfer(self.endpoint, self.access_key, self.secret_key, self.region, **options)

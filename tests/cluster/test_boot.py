"""A node told to stop while it still waits for its cluster stops at once (as a Kubernetes pod
deleted during a rollout must), instead of holding the signal until the wait times out."""

import signal
import time

from conftest import Cluster, wait_until


def test_sigterm_while_waiting_for_peers_stops_the_node(tmp_path):
    c = Cluster(tmp_path, nodes=2, drives_per_node=1, set_drive_count=2, parity=1)
    lone = c.nodes[0]  # its peer never starts
    lone.launch()
    try:
        wait_until(lambda: "waiting for the cluster" in lone.out.read_text(errors="replace"),
                   30, "the node to wait for its peer")
        time.sleep(1.5)  # into the retry loop
        assert lone.alive()
        lone.proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        rc = lone.proc.wait(15)
        took = time.monotonic() - t0
        out = lone.out.read_text(errors="replace")
        assert rc == 0, (rc, out, lone.log.read_text(errors="replace"))
        assert "SIGTERM received while waiting for the cluster" in out, out
        assert took < 10, took  # the wait lasts 60 s in this config
        # Nothing of a half-started store is left to trip the next start: the drive is
        # untouched or formatted, and the node waits again as before.
        lone.stop()
        lone.launch()
        wait_until(lambda: lone.out.read_text(errors="replace").count("waiting for the cluster")
                   >= 1, 30, "the node to wait again")
        assert lone.alive()
    finally:
        lone.stop()

"""A replica of `python jobs/serve.py` killed with SIGKILL under 16 clients (the drill of
bench/bench_serve_kill.py, on the tiny output): nobody restarts it, yet the service answers
again within 15 s; only the requests in flight on the lost replica fail, each with a 5xx; no
request hangs. Long: the drill is 25 s of load and a replica's restart."""

from __future__ import annotations

import os
import signal
import time

import pytest
from conftest import free_port
from served_output import indexed_output

pytestmark = [pytest.mark.long, pytest.mark.ray]


def test_a_replica_killed_under_load_is_replaced_and_only_its_requests_fail(
        tmp_path, tiny_model_dir, brown_corpus, monkeypatch):
    from bench.bench_serve_kill import judged, load, replica_pids
    from bench.served import start

    root = indexed_output(tmp_path, tiny_model_dir, brown_corpus)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    port = free_port()
    process, _ = start(root / "out", port, [])
    try:
        queries = (root / "brown.txt").read_text().splitlines()
        records, done = load(port, queries, clients=16, seconds=25, timeout=30)
        time.sleep(5)
        victim = replica_pids(process.pid)[0]
        killed_at = time.perf_counter()
        os.kill(victim, signal.SIGKILL)
        assert done.wait(90), "the clients did not finish: a request hangs"
        report = judged(records, killed_at, timeout=30)
        assert replica_pids(process.pid) and victim not in replica_pids(process.pid)
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(120)
    assert all(report["met"].values()), report
    assert report["answers_again_after_s"] <= 15 and report["hangs"] == 0

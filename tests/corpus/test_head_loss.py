"""A lost head node: the driver of a corpus job ends saying the cluster is gone and how to
resume; the same command on a new cluster completes, keeping the parts written before."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time

import pyarrow.dataset as pads
import pytest
from conftest import HEALTH_CHECKS, ROOT, free_port, load_job

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def new_cluster():
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, connect=False, head_node_args={
        "num_cpus": 4, "node_ip_address": "127.0.0.1", "include_dashboard": False,
        "dashboard_agent_listen_port": free_port(), "_system_config": HEALTH_CHECKS})
    cluster.wait_for_nodes()
    return cluster


@pytest.mark.long
def test_a_lost_head_ends_the_driver_with_how_to_resume(tmp_path, tiny_model_dir, ray_cluster):
    corpus = tmp_path / "in.txt"
    corpus.write_text("".join(f"Row {i} of a job whose head node is lost.\n" for i in range(1500)))
    output = tmp_path / "out"
    args = ["--input", str(corpus), "--output", str(output), "--model", str(tiny_model_dir),
            "--pooling", "mean", "--actors", "2", "--rows-per-batch", "25",
            "--rows-per-file", "0"]  # a part per block: which survive the head's loss is checked
    cluster = new_cluster()
    driver = subprocess.Popen([sys.executable, str(ROOT / "jobs" / "embed.py"), *args,
                               "--address", cluster.address],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240
        while len(list(output.rglob("part-*.parquet"))) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        cluster.remove_node(cluster.head_node, allow_graceful=False)  # the head is lost
        log, _ = driver.communicate(timeout=120)
    finally:
        cluster.shutdown()
    assert driver.returncode == 75, log[-3000:]  # EX_TEMPFAIL: try again, on a new cluster
    assert "the Ray cluster at 127.0.0.1:" in log and "is gone" in log
    assert "Run the same command against a new cluster" in log
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in output.rglob("part-*")}
    assert 4 <= len(before) < 60, "the head was not lost mid-job"

    # the same command on a new cluster (here: the test session's) finishes the job
    summary = load_job("embed").main([*args, "--address", ray_cluster.address])
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in before} == before
    assert summary["rows_in"] == summary["rows_out"] == 1500
    ids = pads.dataset(output, format="parquet").to_table(columns=["id"]).column("id")
    assert sorted(ids.to_pylist()) == sorted(f"in.txt:{i}" for i in range(1500))

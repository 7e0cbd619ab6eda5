"""The private loopback Ray cluster step 4's jobs join, held by a helper process.

One cluster for every job saves a cluster start per job (tens of seconds each). A helper process
(`python -m bench.gpu_check --serve-ray-cluster CPUS GPUS`), rather than this one, makes a
failed start retryable and the teardown exact: closing its stdin shuts down the cluster it
started, and only that one. The helper's stdout carries one line, `RAY_ADDRESS=...`."""

from __future__ import annotations

import contextlib
import logging
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from bench.gpu_check.repo_io import ROOT, job_env, tail

logger = logging.getLogger(__name__)

# run from the repository root (cwd=ROOT); it answers --serve-ray-cluster
ENTRY_POINT = ["-m", "bench.gpu_check"]


@contextlib.contextmanager
def private_ray_cluster(out: Path, cpus: int, gpus: int, timeout: int) -> Iterator[str]:
    """A loopback Ray cluster for the duration of the block; yields its address for the jobs'
    --address."""
    log = out / "logs" / "ray-cluster.log"
    for attempt in (1, 2):  # a loaded 2-core machine can miss Ray's fixed 30 s start deadline
        with log.open("a") as stderr:
            helper = subprocess.Popen(
                [sys.executable, *ENTRY_POINT, "--serve-ray-cluster", str(cpus), str(gpus)],
                cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                text=True, env=job_env())
        ready, _, _ = select.select([helper.stdout], [], [], timeout)
        line = helper.stdout.readline().strip() if ready else ""  # the helper's only line
        if line.startswith("RAY_ADDRESS="):
            break
        stop_helper(helper)
        logger.warning("Ray cluster start failed (attempt %d); see %s", attempt, log)
    else:
        raise RuntimeError(f"could not start a local Ray cluster; see {log}:\n{tail(log)}")
    try:
        yield line.split("=", 1)[1]
    finally:
        stop_helper(helper)


def stop_helper(helper: subprocess.Popen) -> None:
    """Close the helper's stdin (it shuts its cluster down and exits); terminate it if not."""
    with contextlib.suppress(OSError):
        helper.stdin.close()
    try:
        helper.wait(timeout=60)
    except subprocess.TimeoutExpired:
        helper.terminate()
        helper.wait(timeout=30)


def serve_ray_cluster(cpus: int, gpus: int) -> None:
    """The helper: start the cluster, print its address, hold it until stdin closes."""
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything else printed goes to the log, not to the address line's pipe
    import ray

    from sentray.kit.ray_cluster import init_ray

    started = init_ray(num_cpus=cpus, num_gpus=gpus)
    print(f"RAY_ADDRESS={ray.get_runtime_context().gcs_address}", file=protocol, flush=True)
    sys.stdin.read()
    if started:
        ray.shutdown()

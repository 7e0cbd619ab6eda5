"""Connecting to Ray: an existing cluster when an address is given, else a private local one
bound to 127.0.0.1 only.

Ray's dashboard and job API have no authentication by default; one reachable from the network
lets anyone run code on the machine (CVE-2023-48022). A cluster a job starts for itself
therefore binds loopback and starts no dashboard at all.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os

logger = logging.getLogger(__name__)

# Set for a local cluster before Ray starts; child processes (raylet, workers) inherit them.
LOOPBACK_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # single-node mode: bind and advertise 127.0.0.1
    "RAY_USAGE_STATS_ENABLED": "0",
}


# Logical CPUs a job's own cluster gets beyond its actors' or workers': Ray Data's read and
# write tasks and Ray Train's controller need their own, or they starve behind the pool.
SPARE_CPUS = 2


def local_cpus(processes: int, cpus_each: float) -> int:
    """Logical CPUs of a local cluster for `processes` actors or workers of `cpus_each`: the
    one rule of every job (a cluster given by address keeps its own)."""
    return math.ceil(processes * cpus_each) + SPARE_CPUS


def init_ray(address: str | None = None, *, num_cpus: int | None = None,
             num_gpus: int | None = None) -> bool:
    """Connect to `address` (or $RAY_ADDRESS, as `ray job submit` sets it); with neither, start
    a local loopback-only cluster. Returns True when this call started a local cluster (the
    caller should `ray.shutdown()` it)."""
    import ray

    from sentray.progress import quiet_ray

    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        logger.info("connecting to Ray cluster at %s", address)
        ray.init(address=address, log_to_driver=True)
        quiet_ray()
        return False
    for key, value in LOOPBACK_ENV.items():
        os.environ.setdefault(key, value)
    # Ray reads the variable when it is imported; if that already happened, say it again.
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False
    logger.info("starting a local Ray cluster on 127.0.0.1 (num_cpus=%s, num_gpus=%s)",
                num_cpus, num_gpus)
    with _agent_on_any_port():
        ray.init(address="local", _node_ip_address="127.0.0.1", include_dashboard=False,
                 num_cpus=num_cpus, num_gpus=num_gpus, configure_logging=False)
    quiet_ray()
    return True


@contextlib.contextmanager
def _agent_on_any_port():
    """Start the node's dashboard agent on a port the OS picks, not Ray's fixed 52365.

    `ray.init` offers no option for it. With another Ray on the machine (a second job, a test
    cluster) holding 52365, the agent retries the bind for 3.5 s, logs a traceback, and the
    cluster starts that much later; a private job cluster has no dashboard and no use for that
    port. Ray reads the port from `RayParams` (pinned ray==2.60.0), so the default is set there
    for this one call."""
    from ray._private import parameter

    original = parameter.RayParams

    class RayParams(original):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("dashboard_agent_listen_port", 0)
            super().__init__(*args, **kwargs)

    parameter.RayParams = RayParams
    try:
        yield
    finally:
        parameter.RayParams = original


def train_worker_setup(expected_workers: int, cpus_per_worker: float):
    """Inside a Ray Train worker: (rank, world size, torch device), after checking the world size
    is the configured one and giving torch as many threads as the worker has CPUs (on CPU)."""
    import ray.train
    import ray.train.torch
    import torch

    context = ray.train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    if world != expected_workers:
        raise RuntimeError(f"expected {expected_workers} workers, got {world}")
    device = ray.train.torch.get_device()
    if device.type == "cpu":
        torch.set_num_threads(max(1, int(cpus_per_worker)))
    return rank, world, device


def step_seed(seed: int, rank: int, step: int) -> int:
    """The dropout seed of one worker's training step: a function of (seed, rank, step) only,
    so a run restarted from a checkpoint draws the same masks. Both trainers use it."""
    import numpy as np

    return int(np.random.SeedSequence([seed, rank, step]).generate_state(1)[0])

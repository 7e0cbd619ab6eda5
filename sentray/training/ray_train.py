"""The one Ray Train fit of both trainers (`sentray.contrastive.job`, `sentray.lstm.job`):
connect to Ray or start a private local cluster, run a `TorchTrainer` of the trainer's loop on
the configured workers, shut down a cluster it started, and hand back the `Result`; and what
every worker does first (`worker_setup`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from sentray.kit.ray_cluster import ClusterWatch, init_ray, local_cpus
from sentray.training.cluster import ClusterConfig

if TYPE_CHECKING:
    import pyarrow.fs
    from ray.train import Result

LoopConfig = TypeVar("LoopConfig")


def fit(
    loop: Callable[[LoopConfig], Any],
    loop_config: Callable[[], LoopConfig],
    cluster: ClusterConfig,
    *,
    name: str,
    storage_path: str,
    storage_filesystem: pyarrow.fs.FileSystem | None = None,
    datasets: Callable[[], dict] | None = None,
    keep_checkpoints: int | None = None,
    best_by: str | None = None,
) -> Result:
    """Run `loop(loop_config())` on `cluster.workers` Ray Train workers of `cpus_per_worker`
    CPUs (and one GPU each with `use_gpu`), restarted up to `max_failures` times from the last
    checkpoint; returns Ray's `Result`, or raises RuntimeError when the run failed.

    `loop_config` and `datasets` are called once Ray is up (they may put objects in its store
    or build Ray Datasets); the loop config is a typed object handed to every worker with the
    loop. Every worker reads each dataset whole and in order, not a split of it (the trainers
    slice each global batch themselves). The run's folder is `storage_path`/`name` (on
    `storage_filesystem`, for S3). `keep_checkpoints`: keep that many checkpoints, the
    best by the reported metric `best_by` (highest) when given, besides the latest (None:
    Ray's default, all).
    """
    import ray
    from ray.train import DataConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    started_cluster = init_ray(cluster.address, num_cpus=cluster.num_cpus or local_cpus(
        cluster.workers, cluster.cpus_per_worker))
    try:
        dataset_config = None
        if datasets is not None:
            execution = DataConfig.default_ingest_options()
            execution.preserve_order = True  # batches in the dataset's order, on every worker
            dataset_config = DataConfig(datasets_to_split=[], execution_options=execution)
        resources = {"CPU": cluster.cpus_per_worker, **({"GPU": 1} if cluster.use_gpu else {})}
        trainer = TorchTrainer(
            functools.partial(loop, loop_config()),
            scaling_config=ScalingConfig(num_workers=cluster.workers, use_gpu=cluster.use_gpu,
                                         resources_per_worker=resources),
            datasets=datasets() if datasets is not None else None,
            dataset_config=dataset_config,
            run_config=_run_config(name, storage_path, storage_filesystem, cluster.max_failures,
                                   keep_checkpoints, best_by))
        with ClusterWatch("Run the same command (the same --output and --name) against a new "
                          "cluster: it resumes from the last checkpoint (on storage every node "
                          "sees: shared or S3)."):
            result = trainer.fit()
    finally:
        if started_cluster:
            ray.shutdown()
    if result.error:
        raise RuntimeError(f"training failed: {result.error}") from result.error
    return result


def _run_config(name: str, storage_path: str, storage_filesystem, max_failures: int | None,
                keep_checkpoints: int | None, best_by: str | None):
    from ray.train import CheckpointConfig, FailureConfig, RunConfig

    return RunConfig(
        name=name, storage_path=storage_path, storage_filesystem=storage_filesystem,
        failure_config=(FailureConfig(max_failures=max_failures)
                        if max_failures is not None else None),
        checkpoint_config=(CheckpointConfig(
            num_to_keep=keep_checkpoints, checkpoint_score_attribute=best_by,
            checkpoint_score_order="max") if keep_checkpoints is not None else None))


def worker_setup(expected_workers: int, cpus_per_worker: float):
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

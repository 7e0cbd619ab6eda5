"""`ClusterConfig`: where a trainer's workers run, the one block of flags both trainers take
(`TrainConfig.cluster`, `LSTMConfig.cluster`) and the one thing `ray_train.fit` reads from a
trainer's config: the Ray cluster to join or start, the workers and their resources, and how
many times a lost worker group is restarted."""

from __future__ import annotations

from dataclasses import dataclass

from sentray.kit.validation import check_at_least


@dataclass(frozen=True)
class ClusterConfig:
    """The workers of a training run and the cluster they run on."""

    workers: int = 1  # Ray Train (DDP) workers (the SIFTER-LSTM also takes 0: its own process)
    use_gpu: bool = False  # one GPU per worker
    # CPUs per worker, also its torch threads on CPU. Default (SIFTER-SimCSE): on a cluster the
    # job starts itself (no address), CPU training, this machine's CPUs shared by the workers
    # (one worker of 1 leaves a 2-core machine half idle: docs/results.md's default run,
    # 6,797 s); else 1
    cpus_per_worker: float | None = None
    address: str | None = None  # Ray cluster (default: $RAY_ADDRESS, else a local one on 127.0.0.1)
    num_cpus: int | None = None  # logical CPUs of a local cluster (default: workers x cpus + 2)
    max_failures: int = 3  # worker-group restarts from the last checkpoint before giving up

    def __post_init__(self) -> None:
        check_at_least(0, workers=self.workers, max_failures=self.max_failures)
        check_at_least(1, num_cpus=self.num_cpus)
        if self.cpus_per_worker is not None and self.cpus_per_worker <= 0:
            raise ValueError(f"cpus_per_worker must be > 0, got {self.cpus_per_worker}")

"""The actor pool of a corpus job: `ActorPoolConfig`, its resources (how many actors, their CPUs
and GPUs, rows per call) and the cluster it runs on, from config, never from code; and
`ActorPlan`, the actor each of them is (built from one typed value)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import pyarrow as pa

from sentray.corpus.actor_count import ActorCount
from sentray.kit.ray_cluster import local_cpus


@dataclass(frozen=True)
class ActorPoolConfig:
    """Resources of a job's actor pool; from config, never from code."""

    # actors in the pool: N, or MIN-MAX for a pool that grows with its work and the cluster
    # (an autoscaling cluster: nodes that arrive later are used); sentray.corpus.actor_count
    actors: ActorCount = field(default_factory=lambda: ActorCount(2, 2))
    num_gpus: float = 0.0  # GPUs per actor (0: CPU)
    cpus_per_actor: float = 1.0  # CPUs per actor (its torch threads follow it)
    rows_per_batch: int = 1024  # rows per actor call
    address: str | None = None  # Ray cluster (default: $RAY_ADDRESS, else a local one on 127.0.0.1)
    # logical CPUs of a local cluster (default: actors x cpus_per_actor + 2, so readers never starve)
    num_cpus: int | None = None
    # at most this many rows to do and no cluster given (no --address, no $RAY_ADDRESS): the rows
    # run in the job's own process, no Ray (starting it costs more than it saves); 0: always Ray
    in_process_rows: int = 100_000

    def __post_init__(self) -> None:
        if not isinstance(self.actors, ActorCount):  # 2, "2" or "1-8", as code writes them
            object.__setattr__(self, "actors", ActorCount.parse(self.actors))
        if self.num_gpus < 0 or self.cpus_per_actor <= 0:
            raise ValueError("num_gpus must be >= 0 and cpus_per_actor > 0")
        if self.in_process_rows < 0:
            raise ValueError(f"in_process_rows must be >= 0 (0: always Ray), got "
                             f"{self.in_process_rows}")
        if self.rows_per_batch < 1:
            raise ValueError(f"rows_per_batch must be >= 1, got {self.rows_per_batch}")

    @property
    def local_cluster_cpus(self) -> int:
        """Logical CPUs of a cluster the job starts itself: `num_cpus`, else the pool's CPUs
        rounded up plus two (one rule for every job: `runtime.local_cpus`)."""
        return self.num_cpus or local_cpus(self.actors.maximum, self.cpus_per_actor)


S = TypeVar("S")
BlockFunction = Callable[[pa.Table], pa.Table]  # the reader's records -> the job's rows


@dataclass(frozen=True)
class ActorPlan(Generic[S]):
    """The actor every block of rows goes through: `kind(spec)`, built once per actor (on Ray,
    `kind` is the Ray Data callable class, and the actor's process is named after it), then
    called on each block. `spec` is the one typed value it is built from."""

    kind: Callable[[S], BlockFunction]
    spec: S

    def build(self) -> BlockFunction:
        return self.kind(self.spec)

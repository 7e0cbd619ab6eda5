"""The actor pool of a corpus job, in one place: how many actors (`ActorCount`), their resources
and the cluster they run on (`ActorPoolConfig`, from config, never from code), the actor each of
them is (`ActorPlan`, built from one typed value), the rows each actor call is handed
(`block_rows`), and the first moments each actor reports (`ActorClock`).

How many: one flag value, `N` (a fixed pool of N actors) or `MIN-MAX` (a pool that Ray Data
starts at MIN actors and grows up to MAX while it has work queued and the cluster has room for
another actor, shrinking again when actors sit idle; on an autoscaling cluster the autoscaler
adds nodes for the actors asked for, so nodes that arrive later are used). Either way every actor
runs the same callable class on the same settings, so the rows, their accounting and their
vectors do not depend on how many actors made them.

Where a job's first seconds go: when its actors' processes started, when they were ready (model
loaded) and when they made their first output, carried to the driver in the schema metadata of
the blocks they return (the part sink reads it and drops it), and set beside the driver's own
moments (its process start, Ray ready, the first part written) in the summary's
`timings.since_launch`:

    ray_ready       the cluster answers (None: the rows ran in the job's own process,
                    sentray.corpus.execution)
    actor_process   the first actor's process started (Ray's worker)
    actor_ready     the first actor constructed: its imports done and its model loaded
    first_row       the first actor's first forward pass returned: the first rows embedded
    first_part      the first part file written (a whole block done)

each in seconds since the job's process started (Linux, macOS: psutil; None where unknown).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import pyarrow as pa

from sentray.kit.ray_cluster import local_cpus
from sentray.kit.validation import check_at_least

# -- how many actors ------------------------------------------------------------------------------

_SPEC = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


@dataclass(frozen=True)
class ActorCount:
    minimum: int
    maximum: int

    METAVAR = "N|MIN-MAX"

    def __post_init__(self) -> None:
        if self.minimum < 1 or self.maximum < self.minimum:
            raise ValueError(f"actors must be N >= 1 or MIN-MAX with 1 <= MIN <= MAX, got "
                             f"{self.spec()}")

    @classmethod
    def parse(cls, spec: str | int) -> ActorCount:
        """'2' -> a fixed pool of 2; '1-8' -> a pool of 1 to 8 actors."""
        match = _SPEC.match(str(spec))
        if match is None:
            raise ValueError(f"actors must be N or MIN-MAX (e.g. 2 or 1-8), got {spec!r}")
        low = int(match.group(1))
        return cls(low, int(match.group(2)) if match.group(2) else low)

    def spec(self) -> str:
        return str(self.minimum) if self.fixed else f"{self.minimum}-{self.maximum}"

    @property
    def fixed(self) -> bool:
        return self.minimum == self.maximum

    def strategy(self):
        """Ray Data's `ActorPoolStrategy` for this count."""
        from ray.data import ActorPoolStrategy

        if self.fixed:
            return ActorPoolStrategy(size=self.minimum)
        return ActorPoolStrategy(min_size=self.minimum, max_size=self.maximum)


# -- the pool's resources -------------------------------------------------------------------------


@dataclass(frozen=True)
class ActorPoolConfig:
    """Resources of a job's actor pool; from config, never from code."""

    # actors in the pool: N, or MIN-MAX for a pool that grows with its work and the cluster
    # (an autoscaling cluster: nodes that arrive later are used); sentray.corpus.actor_pool
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
        check_at_least(0, in_process_rows=self.in_process_rows)  # 0: always Ray
        check_at_least(1, rows_per_batch=self.rows_per_batch)

    @property
    def local_cluster_cpus(self) -> int:
        """Logical CPUs of a cluster the job starts itself: `num_cpus`, else the pool's CPUs
        rounded up plus two (one rule for every job: `runtime.local_cpus`)."""
        return self.num_cpus or local_cpus(self.actors.maximum, self.cpus_per_actor)


S = TypeVar("S")
BlockFunction = Callable[[pa.Table], pa.Table]  # the reader's records -> the job's rows


@dataclass(frozen=True)
class CpuStep(Generic[S]):
    """A CPU step on Ray around a job's actors: `callable_class(spec)` called on each block.
    Ahead of the actors it runs in actors of its own (`execution.step_actors`, `num_cpus` each);
    after them, in the write tasks, built once per worker process (`run_step`)."""

    callable_class: Callable[[S], BlockFunction]
    spec: S
    num_cpus: float = 1.0
    # what a worker process keeps the built step under: one value per job (made in the driver)
    key: str = field(default_factory=lambda: uuid.uuid4().hex)

    def build(self) -> BlockFunction:
        return self.callable_class(self.spec)

    @property
    def name(self) -> str:
        return getattr(self.callable_class, "__name__", "step")


_BUILT_STEPS: dict[str, BlockFunction] = {}  # a Ray worker's built steps, by `CpuStep.key`


def run_step(batch: pa.Table, step: CpuStep) -> pa.Table:
    """`step` on one block, in a Ray task: built the first time this process meets it."""
    function = _BUILT_STEPS.get(step.key)
    if function is None:
        function = _BUILT_STEPS[step.key] = step.build()
    return function(batch)


@dataclass(frozen=True)
class ActorPlan(Generic[S]):
    """The actor every block of rows goes through: `callable_class(spec)` (Ray Data's callable
    class), built once per actor (on Ray, the actor's process is named after it), then called on
    each block. `spec` is the one typed value it is built from. On Ray, `before` and
    `after` are CPU steps of their own around it (Ray tasks: the embedding job's tokenizer and
    its vector store around an encoder actor that holds a GPU); in the job's own process the
    steps and the actor run one after the other (`build`)."""

    callable_class: Callable[[S], BlockFunction]
    spec: S
    before: tuple[CpuStep, ...] = ()
    after: tuple[CpuStep, ...] = ()

    def build(self) -> BlockFunction:
        """The steps and the actor as one function, in this process."""
        actor = self.callable_class(self.spec)
        if not self.before and not self.after:
            return actor
        return InOneProcess([s.build() for s in self.before], actor,
                            [s.build() for s in self.after])


class InOneProcess:
    """An `ActorPlan`'s steps and its actor, called in turn (its `clock`: the actor's)."""

    def __init__(self, before: list[BlockFunction], actor: BlockFunction,
                 after: list[BlockFunction]) -> None:
        self.functions = [*before, actor, *after]
        self.clock = getattr(actor, "clock", None)

    def __call__(self, batch: pa.Table) -> pa.Table:
        for function in self.functions:
            batch = function(batch)
        return batch


# -- the rows of each call ------------------------------------------------------------------------

# Every actor gets at least this many blocks, so that a small input keeps all of them busy.
BLOCKS_PER_ACTOR = 2
# Past this many rounds of blocks (one block per actor each) an uneven last round costs little.
ROUNDS_COUNTED = 8
# Rows per actor call in the job's own process: 8 of the pool's blocks (one process sorts more
# rows by length at once: less padding, and fewer parts to compact), but the first call takes one
# block of at most FIRST_CALL_ROWS, so that the first part lands within seconds of the first row
# embedded (1,024 rows: about 5 s at this project's 2-core CPU's 200 rows/s) and a kill early in
# a long input loses little.
BLOCKS_PER_CALL = 8
FIRST_CALL_ROWS = 1024


def in_process_calls(pool: ActorPoolConfig) -> tuple[int, int]:
    """Rows of the first actor call and of every later one in the job's own process."""
    return min(pool.rows_per_batch, FIRST_CALL_ROWS), pool.rows_per_batch * BLOCKS_PER_CALL


def block_rows(pending: Sequence, pool: ActorPoolConfig) -> int:
    """Rows per block handed to one actor call (`pending`: `source_runs.Pending`, the rows still
    to do): at most `pool.rows_per_batch`, and for an input of fewer than ROUNDS_COUNTED rounds,
    sized so that the blocks come out as whole rounds (a multiple of the actor count, at least
    BLOCKS_PER_ACTOR each) of equal size, so that the actors finish together. A 1,000-row input
    in blocks of 1,024 would keep one actor of two busy and the other idle; 10,000 rows in
    blocks of 1,024 leave a last round of one block. Rows are counted (text files estimated
    from their first MiB) only until there are enough."""
    actors = pool.actors.maximum  # a growing pool: enough blocks for all it may grow to
    enough = ROUNDS_COUNTED * actors * pool.rows_per_batch
    rows = 0
    for item in pending:
        rows += item.rows
        if rows >= enough:
            return pool.rows_per_batch
    rounds = max(BLOCKS_PER_ACTOR, math.ceil(rows / (actors * pool.rows_per_batch)))
    return max(1, math.ceil(rows / (actors * rounds)))


# -- the actors' first moments --------------------------------------------------------------------

TIMINGS_KEY = b"sentray.actor_timings"  # the blocks' schema metadata key of an actor's moments
MOMENTS = ("ray_ready", "actor_process", "actor_ready", "first_row", "first_part")


def process_started() -> float | None:
    """Unix time this process started."""
    try:
        import psutil

        return psutil.Process(os.getpid()).create_time()
    except Exception:  # noqa: BLE001 -- a figure for the summary, never worth a failure
        return None


class ActorClock:
    """An actor's moments: create it first thing in the actor's constructor, call `ready` at its
    end and `output` after each forward pass; `stamp` puts them on a returned table."""

    def __init__(self) -> None:
        self.moments = {"actor_process": process_started(), "actor_ready": None,
                        "first_row": None}

    def ready(self) -> None:
        self.moments["actor_ready"] = time.time()

    def output(self) -> None:
        if self.moments["first_row"] is None:
            self.moments["first_row"] = time.time()

    def stamp(self, table: pa.Table) -> pa.Table:
        metadata = dict(table.schema.metadata or {})
        metadata[TIMINGS_KEY] = json.dumps(self.moments).encode()
        return table.replace_schema_metadata(metadata)


def take(table: pa.Table) -> tuple[pa.Table, dict | None]:
    """The table without its actor moments, and the moments (None when it has none)."""
    metadata = dict(table.schema.metadata or {})
    moments = metadata.pop(TIMINGS_KEY, None)
    if moments is None:
        return table, None
    return table.replace_schema_metadata(metadata or None), json.loads(moments)


def earliest(moments: list[dict | None]) -> dict:
    """Each actor moment's earliest value over the actors' blocks."""
    found = {}
    for name in ("actor_process", "actor_ready", "first_row"):
        values = [m[name] for m in moments if m and m.get(name) is not None]
        found[name] = min(values, default=None)
    return found


def since_launch(ray_ready: float | None, first_part: float | None, actors: dict) -> dict:
    """The job's moments (Unix times) as seconds since its process started (ray_ready None:
    the rows ran in the job's own process, `sentray.corpus.execution`)."""
    launched = process_started()
    absolute = {"ray_ready": ray_ready, **actors, "first_part": first_part}
    return {name: (round(absolute[name] - launched, 2)
                   if launched is not None and absolute.get(name) is not None else None)
            for name in MOMENTS}

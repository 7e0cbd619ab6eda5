"""The shape every corpus job shares: numbered rows -> an actor pool on Ray Data -> parts.

    read (sentray.corpus) -> streaming repartition -> map_batches(callable class, actor pool)
      -> Datasink writing row-accounted parts (sentray.parts)
"""

from __future__ import annotations

import dataclasses
import json
import logging
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass

from sentray import parts, storage
from sentray.corpus import CorpusConfig, Source, corpus_datasource, read_tasks

logger = logging.getLogger(__name__)

SUMMARY_FILE = "_summary.json"


@dataclass(frozen=True)
class ActorPoolConfig:
    """Resources of a job's actor pool; from config, never from code."""

    actors: int = 1  # actors in the pool
    num_gpus: float = 0.0  # GPUs per actor
    cpus_per_actor: float = 1.0  # CPUs per actor (torch threads follow it)
    rows_per_batch: int = 1024  # rows per actor call
    address: str | None = None  # Ray address; None: $RAY_ADDRESS, else a local loopback cluster
    num_cpus: int | None = None  # logical CPUs of a local cluster

    def __post_init__(self) -> None:
        if self.actors < 1:
            raise ValueError(f"actors must be >= 1, got {self.actors}")
        if self.num_gpus < 0 or self.cpus_per_actor <= 0:
            raise ValueError("num_gpus must be >= 0 and cpus_per_actor > 0")
        if self.rows_per_batch < 1:
            raise ValueError(f"rows_per_batch must be >= 1, got {self.rows_per_batch}")


def pending_sources(sources: Sequence[Source],
                    folders: Sequence[storage.Location]) -> list[Source]:
    """The sources not yet complete in `folders`; the parts of half-done ones are deleted."""
    todo = []
    for source in sources:
        if parts.is_complete(folders, source):
            continue
        parts.remove_source_output(folders, source.key)
        todo.append(source)
    logger.info("%d input files, %d already done, %d to process", len(sources),
                len(sources) - len(todo), len(todo))
    return todo


def run_actor_pool(sources: Sequence[Source], corpus: CorpusConfig, actor_class: type,
                   actor_kwargs: dict, route: parts.Route, pool: ActorPoolConfig) -> None:
    """Stream every row of `sources` through `actor_class` and write what `route` says."""
    import ray
    from ray.data import ActorPoolStrategy

    from sentray.runtime import init_ray

    started_local = init_ray(pool.address, num_cpus=pool.num_cpus)
    try:
        # A read task's blocks all reach a single actor; the streaming repartition hands
        # blocks of rows_per_batch rows to whichever actor is free.
        corpus = dataclasses.replace(corpus, rows_per_block=pool.rows_per_batch)
        dataset = ray.data.read_datasource(corpus_datasource(list(sources), corpus),
                                           override_num_blocks=len(read_tasks(sources, corpus)))
        dataset = dataset.repartition(target_num_rows_per_block=pool.rows_per_batch)
        dataset = dataset.map_batches(
            actor_class,
            fn_constructor_kwargs=actor_kwargs,
            batch_size=pool.rows_per_batch,
            batch_format="pyarrow",
            compute=ActorPoolStrategy(size=pool.actors),
            num_gpus=pool.num_gpus or None,
            num_cpus=pool.cpus_per_actor,
        )
        dataset.write_datasink(parts.make_sink(route))
    finally:
        if started_local:
            ray.shutdown()


def write_summary(folder: storage.Location, summary: dict) -> None:
    with folder.filesystem.open_output_stream(posixpath.join(folder.path, SUMMARY_FILE)) as out:
        out.write(json.dumps(summary, indent=1, default=str).encode())

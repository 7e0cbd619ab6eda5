"""The shape every corpus job shares: numbered rows -> an actor pool on Ray Data -> parts.

    read (sentray.corpus.reading) -> streaming repartition -> map_batches(callable class,
      actor pool) -> Datasink writing row-accounted parts (sentray.corpus.part_files)

`run_corpus_job` is the one driver of the corpus jobs (embed, augment): discover and check the
input files, write OUTPUT/_config.yaml, skip the files already done, write the empty ones, run
the actor pool over the rest, account for every row and write OUTPUT/_summary.json. A job says
only what differs: its actor, its output folders and their routing, its summary.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import posixpath
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from sentray.corpus import part_files
from sentray.corpus.reading import corpus_datasource, read_tasks
from sentray.corpus.row_progress import RowProgress
from sentray.corpus.sources import CorpusConfig, Source, discover_sources, estimate_rows
from sentray.kit import config_files, storage
from sentray.kit.ray_cluster import local_cpus

logger = logging.getLogger(__name__)

SUMMARY_FILE = "_summary.json"


@dataclass(frozen=True)
class ActorPoolConfig:
    """Resources of a job's actor pool; from config, never from code."""

    actors: int = 2  # actors in the pool
    num_gpus: float = 0.0  # GPUs per actor (0: CPU)
    cpus_per_actor: float = 1.0  # CPUs per actor (its torch threads follow it)
    rows_per_batch: int = 1024  # rows per actor call
    address: str | None = None  # Ray cluster (default: $RAY_ADDRESS, else a local one on 127.0.0.1)
    # logical CPUs of a local cluster (default: actors x cpus_per_actor + 2, so readers never starve)
    num_cpus: int | None = None

    def __post_init__(self) -> None:
        if self.actors < 1:
            raise ValueError(f"actors must be >= 1, got {self.actors}")
        if self.num_gpus < 0 or self.cpus_per_actor <= 0:
            raise ValueError("num_gpus must be >= 0 and cpus_per_actor > 0")
        if self.rows_per_batch < 1:
            raise ValueError(f"rows_per_batch must be >= 1, got {self.rows_per_batch}")

    @property
    def local_cluster_cpus(self) -> int:
        """Logical CPUs of a cluster the job starts itself: `num_cpus`, else the pool's CPUs
        rounded up plus two (one rule for every job: `runtime.local_cpus`)."""
        return self.num_cpus or local_cpus(self.actors, self.cpus_per_actor)


def pending_sources(sources: Sequence[Source],
                    folders: Sequence[storage.Location]) -> list[Source]:
    """The sources not yet complete in `folders`; the parts of half-done ones are deleted."""
    todo = []
    for source in sources:
        if part_files.is_complete(folders, source):
            continue
        part_files.remove_source_output(folders, source.key)
        todo.append(source)
    logger.info("%d input files, %d already done, %d to process", len(sources),
                len(sources) - len(todo), len(todo))
    return todo


# Every actor gets at least this many blocks, so that a small input keeps all of them busy.
BLOCKS_PER_ACTOR = 2
# Past this many rounds of blocks (one block per actor each) an uneven last round costs little.
ROUNDS_COUNTED = 8


def block_rows(sources: Sequence[Source], pool: ActorPoolConfig) -> int:
    """Rows per block handed to one actor call: at most `pool.rows_per_batch`, and for an input
    of fewer than ROUNDS_COUNTED rounds, sized so that the blocks come out as whole rounds (a
    multiple of the actor count, at least BLOCKS_PER_ACTOR each) of equal size, so that the
    actors finish together. A 1,000-row input in blocks of 1,024 would keep one actor of two
    busy and the other idle; 10,000 rows in blocks of 1,024 leave a last round of one block.
    Rows are counted (text files estimated from their first MiB) only until there are enough."""
    enough = ROUNDS_COUNTED * pool.actors * pool.rows_per_batch
    rows = 0
    for source in sources:
        rows += estimate_rows(source)
        if rows >= enough:
            return pool.rows_per_batch
    rounds = max(BLOCKS_PER_ACTOR, math.ceil(rows / (pool.actors * pool.rows_per_batch)))
    return max(1, math.ceil(rows / (pool.actors * rounds)))


def run_actor_pool(sources: Sequence[Source], corpus: CorpusConfig, actor_class: type,
                   actor_kwargs: dict, route: part_files.Route, pool: ActorPoolConfig) -> dict:
    """Stream every row of `sources` through `actor_class` and write what `route` says.
    Returns where the time went, in seconds: `ray_start` (connecting or starting a cluster),
    `first_part` (from the call to the first part written: the fixed cost before the first
    batch is out) and `pipeline` (the call, in all)."""
    import ray
    from ray.data import ActorPoolStrategy

    from sentray.kit.ray_cluster import init_ray

    started = time.time()
    rows = block_rows(sources, pool)
    started_local = init_ray(pool.address, num_cpus=pool.local_cluster_cpus)
    ray_started = time.time()
    sink = part_files.make_sink(route)
    try:
        # A read task's blocks all reach a single actor; the streaming repartition hands
        # blocks of `rows` rows to whichever actor is free.
        corpus = dataclasses.replace(corpus, rows_per_block=rows)
        dataset = ray.data.read_datasource(corpus_datasource(list(sources), corpus),
                                           override_num_blocks=len(read_tasks(sources, corpus)))
        dataset = dataset.repartition(target_num_rows_per_block=rows)
        dataset = dataset.map_batches(
            actor_class,
            fn_constructor_kwargs=actor_kwargs,
            batch_size=rows,
            batch_format="pyarrow",
            compute=ActorPoolStrategy(size=pool.actors),
            num_gpus=pool.num_gpus or None,
            num_cpus=pool.cpus_per_actor,
        )
        dataset.write_datasink(sink)
    finally:
        if started_local:
            ray.shutdown()
    timings = {"rows_per_block": rows, "ray_start": round(ray_started - started, 2),
               "first_part": None, "pipeline": round(time.time() - started, 2),
               "first_part_at": sink.first_write}  # Unix time, for a caller's own clock
    if sink.first_write is not None:
        timings["first_part"] = round(sink.first_write - started, 2)
    logger.info("blocks of %d rows; Ray ready after %.1f s, first part written after %s s, "
                "%.1f s in all", rows, timings["ray_start"], timings["first_part"],
                timings["pipeline"])
    return timings


def write_summary(folder: storage.Location, summary: dict) -> None:
    with folder.filesystem.open_output_stream(posixpath.join(folder.path, SUMMARY_FILE)) as out:
        out.write(json.dumps(summary, indent=1, default=str).encode())


# -- the driver -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CorpusJob:
    """What one corpus job is; `run_corpus_job` does the rest."""

    name: str  # the job's script under jobs/ ("embed", "augment"), for OUTPUT/_config.yaml
    config: Any  # the job's whole config, written as OUTPUT/_config.yaml and into the summary
    corpus: CorpusConfig
    pool: ActorPoolConfig
    folders: tuple[str, ...]  # where rows go: the output folder first (it holds the summary)
    actor_class: type  # Ray Data callable class: pyarrow batch -> pyarrow batch
    actor_kwargs: dict
    # (located folders) -> the route from the actors' tables to the folders
    route: Callable[[list[storage.Location]], part_files.Route]
    empty_schema: Callable[[Source], pa.Schema]  # the output schema of a file with no rows
    # (located folders, sources) -> the summary's counts, with rows_in and incomplete_sources
    summarize: Callable[[list[storage.Location], list[Source]], dict]
    rows_out_keys: tuple[str, ...] = ("rows_out",)  # summary counts that add up to rows_in
    check_before_pool: Callable[[], None] | None = field(default=None)  # fail fast (a model)


def run_corpus_job(job: CorpusJob) -> dict:
    """Run `job` over every row of its corpus; return the summary (also OUTPUT/_summary.json).
    Files already complete in the output are skipped, so a rerun finishes what a stopped one
    left; a summary whose rows do not add up raises instead of being written."""
    started = time.perf_counter()
    # Every file is checked before Ray starts; the job's own folders are never read as input.
    sources = discover_sources(job.corpus, exclude=list(job.folders))
    folders = [storage.locate(folder, job.corpus.s3_endpoint) for folder in job.folders]
    for folder in folders:
        folder.filesystem.create_dir(folder.path, recursive=True)
    config_files.write_config(job.config, job.folders[0], job=job.name,
                            s3_endpoint=job.corpus.s3_endpoint)
    todo = pending_sources(sources, folders)
    empty = [s for s in todo if s.num_rows == 0]
    todo = [s for s in todo if s.num_rows != 0]
    for source in empty:
        part_files.write_empty_source(folders[0], source, job.empty_schema(source))
    timings = None
    if todo:
        if job.check_before_pool is not None:
            job.check_before_pool()
        with RowProgress(folders, todo):
            timings = run_actor_pool(todo, job.corpus, job.actor_class, job.actor_kwargs,
                                     job.route(folders), job.pool)
    seconds = time.perf_counter() - started
    summary = job.summarize(folders, sources)
    rows_this_run = sum(part_files.completed_rows(folders, s.key)[1] or 0 for s in todo)
    summary.update({
        "processed_this_run": [s.uri for s in empty + todo],
        "seconds": round(seconds, 2),
        "sentences_per_second": round(rows_this_run / seconds, 1) if todo else None,
        "timings": timings,
        "config": json.loads(json.dumps(dataclasses.asdict(job.config), default=str)),
    })
    rows_out = sum(summary[key] for key in job.rows_out_keys)
    if summary["incomplete_sources"] or summary["rows_in"] != rows_out:
        raise RuntimeError(f"row accounting failed: {json.dumps(summary, default=str)}")
    write_summary(folders[0], summary)
    return summary


"""The two ways a corpus job runs its blocks, side by side: a Ray actor pool (`run_actor_pool`,
on the cluster `ray_session` connects to or starts) and the job's own process
(`run_in_process`, for an input a Ray cluster would only slow down: `in_process_chosen`). Both
read the same numbered rows (`reading`), put them through the same actor (`ActorPlan`), write
the same parts (`part_files`) and return the same timings. And `release_frames`, which lets a
failed run's actor pool go.

In process: at most `--in-process-rows` rows to do (default 100,000) and no cluster to run on
(no --address, no $RAY_ADDRESS, no Ray already running in the process: the job would start a
private one on this machine for it). On this project's 2-core machine a private cluster put
the first row 13 s later (Ray's own processes, two actors importing torch and OpenVINO at once)
and its two one-thread actors ran the rows 5.6% slower than one process's two threads: the
Ray path was 0.82x the in-process run at 10,000 rows and 0.90x at 50,000
(`bench/bench_embed.py`, bench/results/embed-54-amd.json). There the same reader
(`reading.read_task`), the same actor class, built once, the same parts
(`part_files.write_block`), accounting and compaction run in this process, on every core its
torch uses. What it gives up: nothing an input this small needs (the pool, the actors'
restarts: a failed run is rerun and redoes only its missing rows, as after any stop).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
import time
import traceback
from collections.abc import Iterator, Sequence

import pyarrow as pa

from sentray.corpus import part_files
from sentray.corpus.actor_pool import (
    ActorPlan,
    ActorPoolConfig,
    CpuStep,
    block_rows,
    in_process_calls,
    run_step,
    take,
)
from sentray.corpus.reading import corpus_datasource, read_task, read_tasks
from sentray.corpus.sources import CorpusConfig

logger = logging.getLogger(__name__)

# Write tasks running at once: one per actor, and at least this many.
WRITE_TASKS_MIN = 2
# What a write task asks for (see `run_actor_pool`), and a step that runs with it.
WRITE_TASK_ARGS = {"num_cpus": 0}


# -- on Ray ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def ray_session(pool: ActorPoolConfig) -> Iterator[float]:
    """Ray for the job: the cluster at `pool.address` (or $RAY_ADDRESS), else a private one on
    127.0.0.1, shut down at the end if this job started it. Yields the seconds Ray took."""
    import ray

    from sentray.kit.ray_cluster import ClusterWatch, init_ray

    started = time.time()
    started_local = init_ray(pool.address, num_cpus=pool.local_cluster_cpus)
    try:
        with ClusterWatch("Run the same command against a new cluster: every part written so "
                          "far is kept, and only the rows still missing are redone."):
            yield round(time.time() - started, 2)
    finally:
        if started_local:
            ray.shutdown()


def run_actor_pool(pending: Sequence, corpus: CorpusConfig, actor: ActorPlan,
                   route: part_files.Route, pool: ActorPoolConfig) -> dict:
    """Stream every row still to do (`pending`: `source_runs.Pending`) through `actor` and write
    what `route` says (Ray up: `ray_session`). Returns where the time went, in seconds:
    `first_part` (from the call to the first part written: the fixed cost before the first
    batch is out) and `pipeline` (the call, in all)."""
    import ray

    started = time.time()
    rows = block_rows(pending, pool)
    sink = part_files.make_sink(route)
    # A read task's blocks all reach a single actor; the streaming repartition hands blocks of
    # `rows` rows to whichever actor is free.
    corpus = dataclasses.replace(corpus, rows_per_block=rows)
    work = [(item.source, item.runs) for item in pending]
    dataset = ray.data.read_datasource(corpus_datasource(work, corpus),
                                       override_num_blocks=len(read_tasks(work, corpus)))
    dataset = dataset.repartition(target_num_rows_per_block=rows)
    for step in actor.before:  # CPU steps ahead of the actors (tokenizing), in actors of their own
        dataset = dataset.map_batches(step.callable_class, fn_constructor_args=(step.spec,),
                                      batch_size=None, batch_format="pyarrow",
                                      num_cpus=step.num_cpus, compute=step_actors(pool))
    dataset = dataset.map_batches(
        actor.callable_class,
        fn_constructor_args=(actor.spec,),
        batch_size=rows,
        batch_format="pyarrow",
        compute=pool.actors.strategy(),
        num_gpus=pool.num_gpus or None,
        num_cpus=pool.cpus_per_actor,
    )
    for step in actor.after:  # and after them (the vectors as stored), with the writing
        dataset = _step_in_write_tasks(dataset, step)
    # The write tasks ask for no CPU. Ray Data reserves CPUs for operators upstream first and
    # lets the last ones wait "for upstream to finish": on a cluster with CPUs for the actors
    # and a couple more, reads and the repartition take the spare ones, and a 1-CPU write task
    # is not started until every row has been read (at 10M rows on 2 cores: no part in the
    # first 4.5 minutes, 1.4 GB of vectors queued in the object store). Writing is Parquet
    # encoding and I/O; their number is capped instead.
    dataset.write_datasink(sink, ray_remote_args=WRITE_TASK_ARGS,
                           concurrency=max(WRITE_TASKS_MIN, pool.actors.maximum))
    timings = {"rows_per_block": rows, "first_part": None,
               "pipeline": round(time.time() - started, 2),
               "first_part_at": sink.first_write,  # Unix time, for a caller's own clock
               "actors": sink.actor_moments or {}}  # the actors' first moments (Unix times)
    if sink.first_write is not None:
        timings["first_part"] = round(sink.first_write - started, 2)
    logger.info("blocks of %d rows; first part written after %s s, %.1f s in all", rows,
                timings["first_part"], timings["pipeline"])
    return timings


def step_actors(pool: ActorPoolConfig):
    """The pool of a CPU step ahead of the encoder actors (tokenizing): one actor, growing while
    it has blocks queued up to the cluster's CPUs the encoder actors leave (at least one).
    Actors, not tasks: each builds its step once (a tokenizer takes ~1 s of CPU to load), where
    tasks may land on a new worker process and build it again."""
    import ray
    from ray.data import ActorPoolStrategy

    spare = int(ray.cluster_resources().get("CPU", 1) - pool.actors.maximum * pool.cpus_per_actor)
    return ActorPoolStrategy(min_size=1, max_size=max(1, spare))


def _step_in_write_tasks(dataset, step: CpuStep):
    """`step` on every block of `dataset` in Ray tasks (`actor_pool.run_step`), block by block
    as they come (batch_size None: a block is never split or merged), asking what the write
    tasks ask: Ray Data runs it in them (the output's columns made where they are written)."""
    return dataset.map_batches(run_step, fn_args=(step,), batch_size=None,
                               batch_format="pyarrow", **WRITE_TASK_ARGS)


def release_frames(exc: BaseException) -> None:
    """Drop the local variables of the finished frames in `exc`'s tracebacks (its whole chain).
    A failed Ray Data execution lets go of its actor pool only when its last reference goes, and
    the frames of a caught error still hold the dataset: a caller that keeps the error (a test,
    a notebook, a loop that retries in the same process) would otherwise keep the dead job's
    actors and their CPUs, and its next run would wait for them forever. The traceback's text
    (files, lines, code) is kept."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)  # frames still running are skipped
        exc = exc.__cause__ or exc.__context__


# -- in the job's own process ---------------------------------------------------------------------


def in_process_chosen(pool: ActorPoolConfig, rows_to_do: int) -> bool:
    """Whether the rows go through this process rather than a Ray actor pool."""
    if pool.address or os.environ.get("RAY_ADDRESS") or pool.in_process_rows == 0:
        return False
    ray = sys.modules.get("ray")  # not imported: not connected (and no 0.3 s to import it)
    if ray is not None and ray.is_initialized():  # a cluster the caller connected to: use it
        return False
    return rows_to_do <= pool.in_process_rows


def run_in_process(pending: Sequence, corpus: CorpusConfig, plan: ActorPlan,
                   route: part_files.Route, pool: ActorPoolConfig) -> dict:
    """Every row still to do (`pending`: `source_runs.Pending`), read, passed through one actor
    built from `plan` in blocks (`actor_pool.in_process_calls`: the first one small, so that
    its part lands early) and written where `route` says. Returns the timings the Ray path
    gives (`run_actor_pool`)."""
    started = time.time()
    first, rows = in_process_calls(pool)
    corpus = dataclasses.replace(corpus, rows_per_block=rows)
    built = plan.build()

    def actor(block: pa.Table) -> pa.Table:  # its moments are read from its clock, below
        return take(built(block))[0]

    buffered: list[pa.Table] = []
    first_write = None
    work = [(item.source, item.runs) for item in pending]
    for source, row_groups, first_row, runs in read_tasks(work, corpus):
        for table in read_task(source, row_groups, first_row, runs, corpus):
            buffered.append(table)
            size = rows if first_write else first
            while sum(t.num_rows for t in buffered) >= size:
                block = pa.concat_tables(buffered, promote_options="permissive")
                buffered = [block.slice(size)]
                part_files.write_block(route, actor(block.slice(0, size)))
                first_write = first_write or time.time()
                size = rows
    block = [t for t in buffered if t.num_rows]
    if block:
        part_files.write_block(route, actor(pa.concat_tables(block,
                                                             promote_options="permissive")))
        first_write = first_write or time.time()
    clock = getattr(built, "clock", None)  # the actor's moments, where it keeps them
    timings = {"in_process": True, "rows_per_block": rows, "first_part_at": first_write,
               "first_part": round(first_write - started, 2) if first_write else None,
               "pipeline": round(time.time() - started, 2),
               "actors": dict(clock.moments) if clock is not None else {}}
    logger.info("in this process (no Ray: at most %d rows to do, --in-process-rows): blocks of "
                "%d rows; first part after %s s, %.1f s in all", pool.in_process_rows, rows,
                timings["first_part"], timings["pipeline"])
    return timings

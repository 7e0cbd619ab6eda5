"""The corpus job's row path in the job's own process, for an input a Ray cluster would only
slow down: at most `--in-process-rows` rows to do (default 100,000) and no cluster to run on
(no --address, no $RAY_ADDRESS, no Ray already running in the process: the job would start a
private one on this machine for it).

On this project's 2-core machine a private cluster cost 14 s before its first rows (Ray's own
processes and two actors importing torch at once) and its two one-thread actors embedded at
0.7x one process's two threads (`bench/bench_embed.py`, docs/benchmarks.md). Here the same
reader (`reading.read_task`), the same actor class, built once, the same parts
(`part_files.write_block`), accounting and compaction run in this process, on every core its
torch uses. What it gives up: nothing an input this small needs (the pool, the actors'
restarts: a failed run is rerun and redoes only its missing rows, as after any stop).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import time
from collections.abc import Sequence

import pyarrow as pa

from sentray.corpus import part_files
from sentray.corpus.actor_pool import ActorPlan, ActorPoolConfig
from sentray.corpus.reading import read_task, read_tasks
from sentray.corpus.sources import CorpusConfig

logger = logging.getLogger(__name__)

# Rows per actor call here: 8 of the pool's blocks (one process sorts more rows by length at
# once: less padding, and fewer parts to compact), but the first call takes one block, so that
# the first part lands within seconds of the first row embedded (1,024 rows: about 5 s at this
# project's 2-core CPU's 200 rows/s) and a kill early in a long input loses little.
BLOCKS_PER_CALL = 8


def chosen(pool: ActorPoolConfig, rows_to_do: int) -> bool:
    """Whether the rows go through this process rather than a Ray actor pool."""
    if pool.address or os.environ.get("RAY_ADDRESS") or pool.in_process_rows == 0:
        return False
    ray = sys.modules.get("ray")  # not imported: not connected (and no 0.3 s to import it)
    if ray is not None and ray.is_initialized():  # a cluster the caller connected to: use it
        return False
    return rows_to_do <= pool.in_process_rows


def run_rows(pending: Sequence, corpus: CorpusConfig, plan: ActorPlan, route: part_files.Route,
             pool: ActorPoolConfig) -> dict:
    """Every row still to do (`pending`: corpus_job.Pending), read, passed through one actor
    built from `plan` in blocks and written where `route` says. Returns
    the timings the Ray path gives (`corpus_job.run_actor_pool`)."""
    started = time.time()
    rows = pool.rows_per_batch * BLOCKS_PER_CALL
    corpus = dataclasses.replace(corpus, rows_per_block=rows)
    actor = plan.build()
    buffered: list[pa.Table] = []
    first_write = None
    work = [(item.source, item.runs) for item in pending]
    for source, row_groups, first_row, runs in read_tasks(work, corpus):
        for table in read_task(source, row_groups, first_row, runs, corpus):
            buffered.append(table)
            size = rows if first_write else pool.rows_per_batch
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
    clock = getattr(actor, "clock", None)  # the actor's moments, where it keeps them
    timings = {"in_process": True, "rows_per_block": rows, "first_part_at": first_write,
               "first_part": round(first_write - started, 2) if first_write else None,
               "pipeline": round(time.time() - started, 2),
               "actors": dict(clock.moments) if clock is not None else {}}
    logger.info("in this process (no Ray: at most %d rows to do, --in-process-rows): blocks of "
                "%d rows; first part after %s s, %.1f s in all", pool.in_process_rows, rows,
                timings["first_part"], timings["pipeline"])
    return timings

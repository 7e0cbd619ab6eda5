"""The shape every corpus job shares: numbered rows (sentray.corpus.reading) -> streaming
repartition -> map_batches(callable class, actor pool) -> row-accounted parts (part_files).
`run_corpus_job` is the one driver of the corpus jobs (embed, augment): take the input files
the job found and checked, skip the files already done, write the empty ones, run the actor pool
(or, for a small input, this process: `in_process`) over the rest, account for every row and
write OUTPUT/_summary.json and OUTPUT/_config.yaml. A job (`CorpusJob`) says only what differs:
its actor, its output folders and their routing, its summary.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import json
import logging
import math
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

import pyarrow as pa

from sentray.corpus import actor_timings, in_process, output_claims, part_files, run_record
from sentray.corpus.actor_pool import ActorPlan, ActorPoolConfig
from sentray.corpus.compaction import compact, needs_compaction
from sentray.corpus.reading import corpus_datasource, read_tasks
from sentray.corpus.row_progress import RowProgress
from sentray.corpus.source_runs import Run, remove_parts, remove_temporaries, source_runs
from sentray.corpus.sources import CorpusConfig, Source, estimate_rows
from sentray.kit import cluster_paths, config_files, storage
from sentray.kit.settings_record import write_settings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pending:
    """A source with rows still to do: `runs` of them, or all of it (None)."""

    source: Source
    runs: list[Run] | None

    @property
    def rows(self) -> int:
        """Rows to do (text files without parts: estimated from their first MiB)."""
        return (estimate_rows(self.source) if self.runs is None
                else sum(end - first for first, end in self.runs))


def pending_sources(sources: Sequence[Source],
                    folders: Sequence[storage.Location]) -> list[Pending]:
    """The sources not yet complete in `folders`, with the runs of rows still to do: the parts
    a stopped run finished are kept; parts of runs that died half-way (or of an input whose row
    count has changed) are deleted, and so are parts a stopped compaction left behind."""
    todo = []
    for source in sources:
        runs = source_runs(folders, source)
        remove_parts(runs.stale)
        if not runs.complete:
            remove_temporaries(folders, source.key)
        if not runs.complete:
            todo.append(Pending(source, runs.missing))
    partial = sum(1 for p in todo if p.runs is not None and p.runs != [(0, p.source.num_rows)])
    logger.info("%d input files, %d already done, %d to process (%d of them in part)",
                len(sources), len(sources) - len(todo), len(todo), partial)
    return todo


# Write tasks running at once: one per actor, and at least this many.
WRITE_TASKS_MIN = 2
# Every actor gets at least this many blocks, so that a small input keeps all of them busy.
BLOCKS_PER_ACTOR = 2
# Past this many rounds of blocks (one block per actor each) an uneven last round costs little.
ROUNDS_COUNTED = 8


def block_rows(pending: Sequence[Pending], pool: ActorPoolConfig) -> int:
    """Rows per block handed to one actor call: at most `pool.rows_per_batch`, and for an input
    of fewer than ROUNDS_COUNTED rounds, sized so that the blocks come out as whole rounds (a
    multiple of the actor count, at least BLOCKS_PER_ACTOR each) of equal size, so that the
    actors finish together. A 1,000-row input in blocks of 1,024 would keep one actor of two
    busy and the other idle; 10,000 rows in blocks of 1,024 leave a last round of one block.
    Rows are counted (text files estimated from their first MiB) only until there are enough."""
    actors = pool.actors.maximum  # a growing pool: enough blocks for all it may grow to
    enough = ROUNDS_COUNTED * actors * pool.rows_per_batch
    rows = 0
    for item in pending:
        rows += item.rows
        if rows >= enough:
            return pool.rows_per_batch
    rounds = max(BLOCKS_PER_ACTOR, math.ceil(rows / (actors * pool.rows_per_batch)))
    return max(1, math.ceil(rows / (actors * rounds)))


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


def run_actor_pool(pending: Sequence[Pending], corpus: CorpusConfig, actor: ActorPlan,
                   route: part_files.Route, pool: ActorPoolConfig) -> dict:
    """Stream every row still to do through `actor` and write what `route` says (Ray
    up: `ray_session`). Returns where the time went, in seconds: `first_part` (from the call to
    the first part written: the fixed cost before the first batch is out) and `pipeline` (the
    call, in all)."""
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
    dataset = dataset.map_batches(
        actor.kind,
        fn_constructor_args=(actor.spec,),
        batch_size=rows,
        batch_format="pyarrow",
        compute=pool.actors.strategy(),
        num_gpus=pool.num_gpus or None,
        num_cpus=pool.cpus_per_actor,
    )
    # The write tasks ask for no CPU. Ray Data reserves CPUs for operators upstream first and
    # lets the last ones wait "for upstream to finish": on a cluster with CPUs for the actors
    # and a couple more, reads and the repartition take the spare ones, and a 1-CPU write task
    # is not started until every row has been read (at 10M rows on 2 cores: no part in the
    # first 4.5 minutes, 1.4 GB of vectors queued in the object store). Writing is Parquet
    # encoding and I/O; their number is capped instead.
    dataset.write_datasink(sink, ray_remote_args={"num_cpus": 0},
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


# -- the driver -----------------------------------------------------------------------------------


class JobConfig(Protocol):
    """What `run_corpus_job` reads of a corpus job's config (EmbedConfig, AugmentConfig); the
    whole config is written as OUTPUT/_config.yaml and recorded in the summary."""

    @property
    def corpus(self) -> CorpusConfig: ...

    @property
    def pool(self) -> ActorPoolConfig: ...

    @property
    def overwrite(self) -> bool: ...  # delete the job's own files in its folders first


@dataclass(frozen=True, kw_only=True)
class CorpusJob(abc.ABC):
    """What one corpus job is; `run_corpus_job` does the rest. A job subclasses this as a frozen
    dataclass: its config, folders and settings, and its answers to four questions (which
    actor, which folder each row goes to, the schema of a file with no rows, the summary)."""

    name: ClassVar[str]  # the job's script under jobs/ ("embed"), for OUTPUT/_config.yaml
    rows_out_keys: ClassVar[tuple[str, ...]] = ("rows_out",)  # summary counts adding to rows_in

    config: JobConfig
    folders: tuple[str, ...]  # where rows go: the output folder first (it holds the summary)
    # what the rows depend on: recorded in OUTPUT/_settings.json by the first run, and a rerun
    # with other values stops before Ray starts (output_claims)
    settings: dict
    sources: Sequence[Source]  # the input files (`discover_sources`)
    # merge each finished source's parts into files of this many rows (single-folder jobs)
    rows_per_file: int | None = None

    @abc.abstractmethod
    def actor(self) -> ActorPlan:
        """The actor each block goes through: pyarrow records in, the job's rows out."""

    @abc.abstractmethod
    def route(self, folders: list[storage.Location]) -> part_files.Route:
        """Where the actors' rows go: (folder, table) pairs per block (`part_files`)."""

    @abc.abstractmethod
    def empty_schema(self, source: Source) -> pa.Schema:
        """The output schema of an input file with no rows."""

    @abc.abstractmethod
    def summarize(self, folders: list[storage.Location], sources: list[Source]) -> dict:
        """The summary's counts over the whole output, with rows_in and incomplete_sources."""

    def before_rows(self, folders: list[storage.Location]) -> None:  # noqa: B027 (optional)
        """Called once the run holds its claim, before any row is written (the embedding job
        records its quantization code book here); by default nothing."""

    def model_folders(self) -> tuple[str, ...]:
        """Local model folders every actor loads (checked like the input: `cluster_paths`)."""
        return ()

    def run_figures(self, summary: dict, run: dict) -> dict:  # embed: tokens/s, cost
        return {}


def run_corpus_job(job: CorpusJob) -> dict:
    """`_run_corpus_job`, with a storage failure (S3 past its retries, a full disk) anywhere in
    it, in the driver or in a Ray task, said as a `StorageError`: what failed, where, and that
    a rerun keeps what was written."""
    try:
        return _run_corpus_job(job)
    except Exception as exc:
        release_frames(exc)
        failure = storage.describe_failure(exc, ", ".join(job.folders))
        if failure is None:
            raise
        raise storage.StorageError(
            f"{failure}. Every part finished before it is kept: run the same command again "
            "once storage is back, and only the rows still missing are redone.") from exc


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


def _run_corpus_job(job: CorpusJob) -> dict:
    """Run `job` over every row of its corpus; return the summary (also OUTPUT/_summary.json).
    Files already complete in the output are skipped, so a rerun finishes what a stopped one
    left; a rerun with other settings stops before Ray starts; a summary whose rows do not add
    up raises instead of being written. OUTPUT/_config.yaml is written last, by a run whose
    rows all came out. A rerun that finds nothing to do writes nothing: the summary of the runs
    that did the work (and their config) stay as they were."""
    corpus = job.config.corpus
    cluster_paths.refuse_unshared_paths(job.config.pool.address, corpus.input, job.folders,
                                        corpus.shared_paths, job.model_folders())
    started = time.perf_counter()
    started_at = time.time()
    sources = list(job.sources)  # found and checked by the job (never in its own folders)
    folders = [storage.locate(folder, corpus.s3_endpoint) for folder in job.folders]
    if not job.config.overwrite:
        output_claims.check_settings(folders, job.settings)  # refuse before touching anything
    with output_claims.RunClaim(folders[0], job.settings) as claim:
        _prepare_folders(job, folders)
        todo = pending_sources(sources, folders)
        empty = [p.source for p in todo if p.source.num_rows == 0]
        todo = [p for p in todo if p.source.num_rows != 0]
        for source in empty:
            part_files.write_empty_source(folders[0], source, job.empty_schema(source))
        timings = _run_rows(job, folders, sources, todo, claim)
        counting = time.perf_counter()
        summary = job.summarize(folders, sources)
        seconds = time.perf_counter() - started
        if timings is not None:  # the row accounting: the parts' footers read
            timings["summary"] = round(time.perf_counter() - counting, 2)
        rows_this_run = sum(p.rows if p.runs is not None else
                            source_runs(folders, p.source).total or 0 for p in todo)
        run = run_record.this_run(started_at, [s.uri for s in empty + [p.source for p in todo]],
                                  rows_this_run if todo else 0, seconds, timings)
        run.update(job.run_figures(summary, run))
        rows_out = sum(summary[key] for key in job.rows_out_keys)
        if summary["incomplete_sources"] or summary["rows_in"] != rows_out:
            raise RuntimeError(f"row accounting failed: {json.dumps(summary, default=str)}")
        previous = run_record.read_summary(folders[0])
        if previous is not None and not empty and timings is None:
            logger.info("nothing to do: every row of the %d input files is in %s already; its "
                        "summary and config are kept as the runs that wrote them left them",
                        len(sources), folders[0].uri)
            return {**previous, **summary, **run}  # this run's figures, not written
        summary = run_record.recorded(
            previous, summary, run, job.settings,
            config_files.as_record(job.config), job.config.overwrite)
        run_record.write_summary(folders[0], summary)
        config_files.write_config(job.config, job.folders[0], job=job.name,
                                  s3_endpoint=corpus.s3_endpoint)
    return summary


def _run_rows(job: CorpusJob, folders: list[storage.Location], sources: list[Source],
              todo: list[Pending], claim: output_claims.RunClaim) -> dict | None:
    """The actor pool over the rows still to do, then (with `rows_per_file`) the compaction of
    every complete source, unless another run is writing the output beside this one (it may
    still write parts: the last run to finish merges them); returns the timings (None when
    there was nothing to do)."""
    compacting = (job.rows_per_file is not None and len(folders) == 1
                  and (todo or needs_compaction(folders[0], sources, job.rows_per_file)))
    if not todo and not compacting:
        return None
    local = in_process.chosen(job.config.pool, sum(p.rows for p in todo))
    with contextlib.nullcontext(None) if local else ray_session(job.config.pool) as ray_seconds:
        timings, ray_ready = {"ray_start": ray_seconds}, None if local else time.time()
        if todo:
            with RowProgress(folders, [p.source for p in todo]):
                run_rows = in_process.run_rows if local else run_actor_pool
                timings.update(run_rows(todo, job.config.corpus, job.actor(), job.route(folders),
                                        job.config.pool))
            timings["since_launch"] = actor_timings.since_launch(
                ray_ready, timings["first_part_at"], timings.pop("actors"))
        if compacting and (others := claim.others_running()):
            logger.info("compaction left to the run still writing %s: %s", folders[0].uri,
                        others[0].describe())
            timings["compaction"] = {"left_to_run": others[0].run}
        elif compacting:
            timings["compaction"] = compact(folders[0], sources, job.rows_per_file,
                                            in_driver=local)
    return timings


def _prepare_folders(job: CorpusJob, folders: list[storage.Location]) -> None:
    """Under the run's claim: --overwrite's deletion (or the settings checked again: another
    run may have written since), the folders, the settings record, the job's own first files."""
    if job.config.overwrite:
        deleted = output_claims.remove_job_files(folders)
        logger.info("--overwrite: deleted %d files of this job in %s", deleted,
                    ", ".join(f.uri for f in folders))
    else:
        output_claims.check_settings(folders, job.settings)
    for folder in folders:
        folder.filesystem.create_dir(folder.path, recursive=True)
    write_settings(folders[0], job.settings, job.name)
    job.before_rows(folders)

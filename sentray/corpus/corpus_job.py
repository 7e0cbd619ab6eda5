"""The corpus job's interface and its one driver. Every corpus job has one shape: numbered rows
(sentray.corpus.reading) -> streaming repartition -> map_batches(callable class, actor pool) ->
row-accounted parts (part_files). `run_corpus_job` is the one driver of the corpus jobs (embed,
augment): take the input files the job found and checked, skip the files already done
(`source_runs.pending_sources`), write the empty ones, run the actor pool (or, for a small
input, this process: `execution`) over the rest, account for every row and write
OUTPUT/_summary.json and OUTPUT/_config.yaml (`output_records`). A job (`CorpusJob`) says only
what differs: its actor, its output folders and their routing, its summary.
"""

from __future__ import annotations

import abc
import contextlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

import pyarrow as pa

from sentray.corpus import actor_pool, execution, output_records, part_files
from sentray.corpus.actor_pool import ActorPlan, ActorPoolConfig
from sentray.corpus.compaction import compact, needs_compaction
from sentray.corpus.duplicate_ids import count_duplicate_ids
from sentray.corpus.row_progress import RowProgress
from sentray.corpus.source_runs import Pending, pending_sources, source_runs
from sentray.corpus.sources import CorpusConfig, Source
from sentray.kit import cluster_paths, config_files, storage
from sentray.kit.settings_record import write_settings

logger = logging.getLogger(__name__)


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
    # with other values stops before Ray starts (output_records)
    settings: dict
    sources: Sequence[Source]  # the input files (`discover_sources`)
    # merge each finished source's parts into files of this many rows (single-folder jobs)
    rows_per_file: int | None = None
    # files the job keeps beside its rows at the top of the output folder, {name: bytes}
    # (the embedding job's code book and int8 model): written under the claim, after the
    # settings record, before any row
    files_beside_rows: Mapping[str, bytes] = field(default_factory=dict)
    # rows the job made before the driver ran, as stored (the embedding job's: those its code
    # book was measured on): written under the claim as the output's first parts, this run's
    # rows like the pool's, never made again
    first_rows: pa.Table | None = None
    # time.perf_counter() when this run's rows began, if before the driver (the embedding job:
    # before it made its `first_rows`)
    started: float | None = None
    # time.time() when the job wrote `first_rows` once already, before the driver
    # (`write_early_rows`): the run's first part, which the driver writes again as its own
    first_part_at: float | None = None
    # whether the rows go through this process, decided by the job where its actors' plan
    # depends on it (the embedding job's encoders); None: by the rows to do
    # (`execution.in_process_chosen`)
    in_process: bool | None = None
    # local model folders every actor loads (checked like the input: `cluster_paths`)
    model_folders: tuple[str, ...] = ()

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

    def run_figures(self, summary: dict, rows: int, seconds: float) -> dict:
        """The job's own figures of a run of `rows` rows in `seconds` (embed: tokens/s, cost),
        added to the run's record; by default none."""
        return {}


def write_early_rows(name: str, folders: Sequence[str], settings: dict, corpus: CorpusConfig,
                     route: Callable[[list[storage.Location]], part_files.Route],
                     rows: pa.Table, *, replacing: bool = False) -> float:
    """`rows` a job made before it could say all of what its driver needs (the embedding job's
    first rows, while its probe measures), written now as the first parts of output `folders`
    that hold no rows yet, under a claim of their own with `settings` (the rows' own), refused
    like any run where the folders hold rows of other settings. `replacing`: the same rows
    made again with other settings (the run's, once decided), written over them with the
    settings record. The job then hands them to its driver as its `first_rows` (written
    again, whole, with the run's metadata, and counted as the run's rows). Returns when they
    were written (time.time())."""
    locations = [storage.locate(folder, corpus.s3_endpoint) for folder in folders]
    if not replacing:
        output_records.check_settings(locations, settings)
    with output_records.RunClaim(locations[0], settings):
        if replacing:
            write_settings(locations[0], settings, name)
        else:
            output_records.prepare(locations, settings, name, False, {})
        part_files.write_block(route(locations), rows)
    return time.time()


def run_corpus_job(job: CorpusJob) -> dict:
    """`_run_corpus_job`, with a storage failure (S3 past its retries, a full disk) anywhere in
    it, in the driver or in a Ray task, said as a `StorageError`: what failed, where, and that
    a rerun keeps what was written."""
    try:
        return _run_corpus_job(job)
    except Exception as exc:
        execution.release_frames(exc)
        failure = storage.describe_failure(exc, ", ".join(job.folders))
        if failure is None:
            raise
        raise storage.StorageError(
            f"{failure}. Every part finished before it is kept: run the same command again "
            "once storage is back, and only the rows still missing are redone.") from exc


def _run_corpus_job(job: CorpusJob) -> dict:
    """Run `job` over every row of its corpus; return the summary (also OUTPUT/_summary.json).
    Files already complete in the output are skipped, so a rerun finishes what a stopped one
    left; a rerun with other settings stops before Ray starts; a summary whose rows do not add
    up raises instead of being written. OUTPUT/_config.yaml is written last, by a run whose
    rows all came out. A rerun that finds nothing to do writes nothing: the summary of the runs
    that did the work (and their config) stay as they were."""
    corpus = job.config.corpus
    cluster_paths.refuse_unshared_paths(job.config.pool.address, corpus.input, job.folders,
                                        corpus.shared_paths, job.model_folders)
    started = time.perf_counter() if job.started is None else job.started
    started_at = time.time() - (time.perf_counter() - started)
    sources = list(job.sources)  # found and checked by the job (never in its own folders)
    folders = [storage.locate(folder, corpus.s3_endpoint) for folder in job.folders]
    if not job.config.overwrite:
        output_records.check_settings(folders, job.settings)  # refuse before touching anything
    duplicates = count_duplicate_ids(sources, corpus.id_column)  # a warning, not a refusal
    with output_records.RunClaim(folders[0], job.settings) as claim:
        output_records.prepare(folders, job.settings, job.name, job.config.overwrite,
                               job.files_beside_rows)
        first = ({} if job.first_rows is None  # {source key: rows}
                 else part_files.write_block(job.route(folders), job.first_rows))
        todo = pending_sources(sources, folders)
        empty = [p.source for p in todo if p.source.num_rows == 0]
        todo = [p for p in todo if p.source.num_rows != 0]
        for source in empty:
            part_files.write_empty_source(folders[0], source, job.empty_schema(source))
        timings = _run_rows(job, folders, sources, todo, claim)
        counting = time.perf_counter()
        summary = {**job.summarize(folders, sources), "duplicate_ids": duplicates.rows}
        seconds = round(time.perf_counter() - started, 2)
        if timings is not None:  # the row accounting: the parts' footers read
            timings["summary"] = round(time.perf_counter() - counting, 2)
        rows_this_run = sum(first.values()) + sum(
            p.rows if p.runs is not None else source_runs(folders, p.source).total or 0
            for p in todo)
        done = {s.key for s in empty} | {p.source.key for p in todo} | set(first)
        processed = [s.uri for s in sources if s.key in done]
        figures = job.run_figures(summary, rows_this_run, seconds)  # embed: tokens/s, cost
        run = {**output_records.this_run(started_at, processed, rows_this_run, seconds, timings),
               **figures}
        rows_out = sum(summary[key] for key in job.rows_out_keys)
        if summary["incomplete_sources"] or summary["rows_in"] != rows_out:
            raise RuntimeError(f"row accounting failed: {json.dumps(summary, default=str)}")
        previous = output_records.read_summary(folders[0])
        if previous is not None and not empty and timings is None:
            logger.info("nothing to do: every row of the %d input files is in %s already; its "
                        "summary and config are kept as the runs that wrote them left them",
                        len(sources), folders[0].uri)
            return {**previous, **summary, **run}  # this run's figures, not written
        summary = output_records.recorded(
            previous, summary, run, job.settings,
            config_files.as_record(job.config), job.config.overwrite)
        output_records.write_summary(folders[0], summary)
        config_files.write_config(job.config, job.folders[0], job=job.name,
                                  s3_endpoint=corpus.s3_endpoint)
    return summary


def _run_rows(job: CorpusJob, folders: list[storage.Location], sources: list[Source],
              todo: list[Pending], claim: output_records.RunClaim) -> dict | None:
    """The actor pool over the rows still to do, then (with `rows_per_file`) the compaction of
    every complete source, unless another run is writing the output beside this one (it may
    still write parts: the last run to finish merges them); returns the timings (None when
    there was nothing to do)."""
    compacting = (job.rows_per_file is not None and len(folders) == 1
                  and (todo or needs_compaction(folders[0], sources, job.rows_per_file)))
    if not todo and not compacting:
        return None
    local = (job.in_process if todo and job.in_process is not None
             else execution.in_process_chosen(job.config.pool, sum(p.rows for p in todo)))
    session = contextlib.nullcontext(None) if local else execution.ray_session(job.config.pool)
    with session as ray_seconds:
        timings, ray_ready = {"ray_start": ray_seconds}, None if local else time.time()
        if todo:
            with RowProgress(folders, [p.source for p in todo]):
                run_rows = execution.run_in_process if local else execution.run_actor_pool
                timings.update(run_rows(todo, job.config.corpus, job.actor(), job.route(folders),
                                        job.config.pool))
            if job.first_part_at is not None:  # the run's first part came before the driver
                timings["first_part_at"] = job.first_part_at
            timings["since_launch"] = actor_pool.since_launch(
                ray_ready, timings["first_part_at"], timings.pop("actors"))
        if compacting and (others := claim.others_running()):
            logger.info("compaction left to the run still writing %s: %s", folders[0].uri,
                        others[0].describe())
            timings["compaction"] = {"left_to_run": others[0].run}
        elif compacting:
            timings["compaction"] = compact(folders[0], sources, job.rows_per_file,
                                            in_driver=local)
    return timings


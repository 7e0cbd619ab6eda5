"""The bulk embedding job on the corpus-job driver: corpus -> map_batches(EmbedBatch) on an actor
pool -> Parquet.

Output layout (OUTPUT is a folder, local or s3://; `EmbeddingOutput` reads and writes it):

    OUTPUT/<source key>/part-<first row>-<end row>-of-<source rows>.parquet
    OUTPUT/_summary.json       rows in/out, per status, rows not encoded (duplicates), settings,
                               the encoder's plan (precision, runtime, why)
    OUTPUT/_settings.json      what the vectors depend on; a rerun with other values stops
    OUTPUT/_quantization.json  int8/uint8: the code book every row (and query) is coded with
    OUTPUT/_int8_model.onnx    --precision int8: the model every row (and query) is encoded by
    OUTPUT/_config.yaml        the configuration, written by a run whose rows all came out

Each part holds a run of consecutive rows of one input file, so a file is done exactly when its
parts tile [0, rows). That is what makes a rerun resume: complete files are skipped, the parts
of incomplete ones are deleted and redone. Every input row comes out once, with its `status`
(`sentray.bulk_embedding.actor`). Columns: id, embedding (`fixed_size_list<dtype>[width]`), status
(windows with --long-text chunk), source, row; each file's Parquet schema metadata records the
model, pooling, dimension, normalization and dtype (`sentray.vectors`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sentray.bulk_embedding import vectors
from sentray.bulk_embedding.actor import STATUSES, EmbedBatch, EmbedSpec, EncodeTokens, Forward
from sentray.bulk_embedding.config import EmbedConfig, VectorConfig
from sentray.bulk_embedding.early_rows import EarlyRows
from sentray.bulk_embedding.output import EmbeddingOutput, embed_settings, output_schema
from sentray.bulk_embedding.storing import StoreVectors
from sentray.bulk_embedding.tokenizing import TokenizeRows
from sentray.corpus import corpus_job, execution, part_files
from sentray.corpus.actor_pool import ActorPlan, ActorPoolConfig, CpuStep
from sentray.corpus.reading import first_records, spread_texts
from sentray.corpus.source_runs import source_runs
from sentray.corpus.sources import (
    CorpusConfig,
    Source,
    discover_sources,
    estimate_all,
    input_settings,
)
from sentray.encode.plan import EncoderPlan
from sentray.kit import storage
from sentray.precision.plan import HERE, Where, plan_encoder

logger = logging.getLogger(__name__)


def stored_vector(vector: VectorConfig, plan: EncoderPlan) -> VectorConfig:
    """The vector as the plan's model makes it: normalized as the model does unless asked,
    a --truncate-dim checked against its width (one equal to it: no truncation)."""
    if vector.normalize is None:
        vector = dataclasses.replace(vector, normalize=plan.normalize)
    if vector.truncate_dim is not None and vector.truncate_dim > plan.dimension:
        raise ValueError(f"--truncate-dim {vector.truncate_dim} is more than model "
                         f"{plan.model.name!r} has: its vectors have {plan.dimension} dimensions")
    if vector.truncate_dim == plan.dimension:  # all of them: the same as no truncation
        vector = dataclasses.replace(vector, truncate_dim=None)
    return vector


def as_planned(config: EmbedConfig, plan: EncoderPlan) -> EmbedConfig:
    """The config as `plan` runs it, the flags that repeat this run (what `_config.yaml`
    records): the read-out the plan decided and the vector as stored (`stored_vector`), beside
    what was typed. Everything after the plan reads these, never the typed values."""
    return dataclasses.replace(config, vector=stored_vector(config.vector, plan),
                               encoder=dataclasses.replace(config.encoder, pooling=plan.pooling,
                                                           head=plan.head))


# The code book of int8/uint8 output (each dimension's range, which its codes divide) is fixed
# before any row is written: from a file the user gives, from the output's own code book (a
# rerun keeps the one its rows were written with), or measured on the first `code_book_rows`
# texts of the input (in file order), embedded by the same `EmbedBatch` the actors run, where
# they run (`Where.run`: in the driver, or in a Ray task with an actor's CPUs and GPUs on the
# cluster). The output records it beside the rows (`EmbeddingOutput.files_beside_rows`), so that
# queries are quantized the same way. The rows a measured code book embedded are not embedded
# again: coded with it where they were embedded (`coded_rows`), they are the output's first
# parts, which the corpus driver writes before any other (`CorpusJob.first_rows`).


def measure_code_book(plan: EncoderPlan, vector: VectorConfig, corpus: CorpusConfig,
                      sources: list[Source]) -> tuple[vectors.CodeBook, pa.Table | None]:
    """The code book of the vectors (truncated and normalized as `vector` says) of the input's
    first `vector.code_book_rows` records, read and embedded in this process (on its GPU if it has
    one; a plan for a GPU in a process without one runs in fp32 on its CPU), and those records
    as the output stores them (`coded_rows`: as `EmbedBatch` made them, coded with that code
    book), to be written as the output's first rows; None where they are not the job's vectors
    (that fp32 stand-in of a GPU plan)."""
    import torch

    ours = True
    if plan.device.startswith("cuda") and not torch.cuda.is_available():
        # a CPU driver of a GPU job: the same model in fp32
        plan, ours = dataclasses.replace(plan.running("fp32", why=plan.why), device="cpu"), False
    try:
        sample = first_records(sources, corpus, vector.code_book_rows)
    except OSError as exc:  # a Ray task on a node without the driver's files
        raise OSError(f"the int8/uint8 code book's texts could not be read here ({exc}): on a "
                      "cluster they are read where the actors run, so the input must be where "
                      "every node sees it (s3://, or a shared mount with --shared-paths)") from exc
    if not sample.num_rows:
        raise ValueError("int8/uint8 output needs texts to measure its code book on, and the "
                         "input has none; pass --quantization-ranges FILE")
    actor = EmbedBatch(EmbedSpec(plan, dataclasses.replace(vector, output_dtype="float32")))
    table = actor(sample)
    embedded = table.filter(table.column("embedding").is_valid())
    floats = np.stack(embedded.column("embedding").to_numpy(zero_copy_only=False))
    logger.info("int8/uint8 code book measured on the %d texts embedded of the input's first "
                "%d rows", len(floats), sample.num_rows)
    book = vectors.CodeBook.of(floats, source=f"the first {sample.num_rows} rows of the input")
    return book, coded_rows(table, vector, book) if ours else None


def code_book(plan: EncoderPlan, vector: VectorConfig, corpus: CorpusConfig,
              sources: list[Source], kept: vectors.CodeBook | None, may_measure: bool = True,
              where: Where = HERE) -> tuple[vectors.CodeBook | None, pa.Table | None]:
    """The code book of this run, and the rows it embedded when it was measured now, as the
    output stores them (`measure_code_book`; else None). The code book: None unless
    int8/uint8; the user's file; `kept`, the one the output's rows were written with; else, if
    `may_measure` (an output that holds no rows), measured now on the input's first rows, where
    the encoders run (`where`: a Ray task on a node of the cluster reads and encodes them
    there); else None (the rows were not quantized with one: the settings check refuses the
    run, naming what differs)."""
    if vector.output_dtype not in vectors.SCALAR:
        return None, None
    if not vector.quantization_ranges:  # a kept book that does not fit: the settings differ
        if kept is not None or not may_measure:
            return kept, None
        return where.run(measure_code_book, plan, vector, corpus, sources)
    ranges = vectors.CodeBook.read(vector.quantization_ranges)
    dimension = vector.output_dimension(plan.dimension)
    if ranges.dimension != dimension:
        raise ValueError(f"the quantization ranges have {ranges.dimension} dimensions, the "
                         f"vectors {dimension}")
    return ranges, None


def coded_rows(floats: pa.Table, vector: VectorConfig, ranges: vectors.CodeBook) -> pa.Table:
    """Rows `EmbedBatch` made as float32 (the code book's) as it makes them for this output:
    coded with `ranges` into `vector.output_dtype` (their schema metadata left out: the output
    files' is set by `run_embedding`, once the settings are known)."""
    column = floats.column("embedding").combine_chunks()  # fixed_size_list<float32>[D]
    width = column.type.list_size
    raw = column.values.slice(column.offset * width, len(column) * width).to_numpy(
        zero_copy_only=False).reshape(len(column), width)  # (N, D); a null row's are zeros
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    stored = vectors.arrow_vectors(vectors.to_output(raw, vector.output_dtype, ranges),
                                   vector.output_dtype, valid)
    return floats.set_column(floats.column_names.index("embedding"), "embedding",
                             stored).replace_schema_metadata(None)


# Output files of about this size by default (--rows-per-file unset): big enough for query
# engines and object stores (a billion 384-d float32 rows: ~6,000 files, not a million), small
# enough that one is written in seconds and a file's rows fit in a worker's memory.
TARGET_FILE_BYTES = 256 << 20


def default_rows_per_file(dimension: int, dtype: vectors.OutputDtype) -> int:
    """Rows per output file for files of about TARGET_FILE_BYTES: the stored vector's bytes plus
    ~32 bytes of id, status, source and row (compressed, they weigh little beside a vector)."""
    width = vectors.stored_width(dimension, dtype) * np.dtype(vectors.NUMPY_TYPES[dtype]).itemsize
    return max(1, TARGET_FILE_BYTES // (width + 32))


def summarize(output: storage.Location, sources: list[Source]) -> dict:
    """Row accounting over the whole output: per status, rows in == rows out per source, and
    the rows whose vector was a twin's (not encoded again)."""
    counts = dict.fromkeys(STATUSES, 0)
    rows_in = rows_out = copied = tokens = 0
    incomplete = []
    for source in sources:
        runs = source_runs([output], source)
        if not runs.complete:
            incomplete.append(source.uri)
            continue
        rows_in += runs.total
        totals = part_files.read_counts(runs.parts, columns=("status",))
        for status, count in totals["status"].items():
            counts[status] = counts.get(status, 0) + count
            rows_out += count
        copied += totals.get("copied", 0)
        tokens += totals.get("tokens", 0)
    return {"sources": len(sources), "incomplete_sources": incomplete, "rows_in": rows_in,
            "rows_out": rows_out, "status": counts, "rows_not_encoded": copied,
            "tokens_encoded": tokens}


def run_figures(summary: dict, rows: int, seconds: float, price_per_hour: float | None) -> dict:
    """tokens/s of a run that made every row of the output (`rows` this run, in `seconds`; a
    resumed run's earlier parts' tokens are not this run's), and with a price per hour, what
    the run cost per million rows and tokens."""
    whole = bool(rows) and rows == summary["rows_in"] and seconds > 0
    tokens = summary["tokens_encoded"] if whole else None
    figures = {"tokens_per_second": round(tokens / seconds, 1) if tokens else None}
    if price_per_hour is not None and rows and seconds > 0:
        cost = price_per_hour * seconds / 3600
        figures.update({"price_per_hour": price_per_hour, "cost": round(cost, 6),
                        "cost_per_million_rows": round(cost / rows * 1e6, 6),
                        "cost_per_million_tokens": round(cost / tokens * 1e6, 6)
                        if tokens else None})
    return figures


@dataclass(frozen=True, kw_only=True)
class EmbedJob(corpus_job.CorpusJob):
    """The embedding job on the corpus-job driver: `EmbedBatch` actors, one output folder."""

    name: ClassVar[str] = "embed"
    config: EmbedConfig  # as planned: the flags that repeat the run (`as_planned`)
    plan: EncoderPlan  # the encoder every actor builds, decided in the driver
    ranges: vectors.CodeBook | None  # int8/uint8: the code book
    metadata: dict  # every output file's schema metadata (`EmbeddingOutput.file_metadata`)
    stand_in: Forward | None = None  # benches and tests: a GPU of known speed (`EmbedSpec`)

    def actor(self) -> ActorPlan[EmbedSpec]:
        """On a GPU pool (`--tokenize`): tokenizing in CPU actors of its own and storing in the
        write tasks, around `EncodeTokens` actors that only run the model; else the three in
        `EmbedBatch`."""
        spec = EmbedSpec(self.plan, self.config.vector, self.ranges, self.metadata,
                         stand_in=self.stand_in)
        if not self.config.tokenizer_stage:
            return ActorPlan(EmbedBatch, spec)
        return ActorPlan(EncodeTokens, spec, before=(CpuStep(TokenizeRows, spec.tokenizer()),),
                         after=(CpuStep(StoreVectors, spec.store()),))

    def route(self, folders: list[storage.Location]) -> part_files.Route:
        return part_files.SingleFolder(folders[0])

    def empty_schema(self, source: Source) -> pa.Schema:
        config, id_type = self.config, pa.string()
        if config.corpus.id_column:
            with source.filesystem.open_input_file(source.path) as handle:
                id_type = pq.read_schema(handle).field(config.corpus.id_column).type
        return output_schema(self.settings["dimension"], id_type, config.vector.output_dtype,
                             config.vector.long_text == "chunk", self.metadata)

    def summarize(self, folders: list[storage.Location], sources: list[Source]) -> dict:
        return summarize(folders[0], sources)

    def run_figures(self, summary: dict, rows: int, seconds: float) -> dict:
        """tokens/s, cost, and the plan it ran (precision, runtime, why, what was measured)."""
        return {**run_figures(summary, rows, seconds, self.config.price_per_hour),
                "encoder": self.plan.record()}


def where_actors_run(pool: ActorPoolConfig, rows: int) -> Where:
    """Where this job's encoders run, decided once: in this process (a small input, no
    cluster), else in actors of the pool's CPUs and GPUs, each encoder on its actor's CPUs. The
    plan is made for it, and the corpus driver runs the rows there (`EmbedJob.in_process`)."""
    if execution.in_process_chosen(pool, rows):
        return Where()
    return Where(threads=max(1, int(pool.cpus_per_actor)), cpus=pool.cpus_per_actor,
                 gpus=pool.num_gpus, address=pool.address)


def run_embedding(config: EmbedConfig, *, stand_in: Forward | None = None) -> dict:
    """Embed every row of the corpus into `config.output`; returns the summary. `stand_in`
    (benches and tests, never a user's): a forward run instead of the plan's encoder
    (`sentray.testing.stand_in_gpu`)."""
    output = EmbeddingOutput.at(config.output, config.corpus.s3_endpoint)
    sources = discover_sources(config.corpus, exclude=[config.output])
    read_as = input_settings(config.corpus, sources)  # how it is read: settings of the rows
    sizes = estimate_all(sources)  # each file's rows, estimated
    rows = sum(sizes)
    kept = None if config.overwrite else output.kept()  # what its rows were made with
    where = where_actors_run(config.pool, rows)
    # its first rows written while the probe measures (`early_rows`): a job probed here (run
    # here, or on the private cluster it starts after the probe), into an output without rows
    # (and no --overwrite, which deletes first), whose precision the probe decides, stored as
    # floats or bits (int8/uint8 codes need their code book first)
    early = (EarlyRows(config, output, sources, read_as,
                       functools.partial(stored_vector, config.vector))
             if not where.on_cluster() and kept is None and not config.overwrite
             and stand_in is None and config.encoder.precision in ("fp32", "auto")
             and config.vector.output_dtype not in vectors.SCALAR else None)
    plan = plan_encoder(config.encoder, rows=rows, where=where, kept=kept, watcher=early,
                        corpus=lambda rows: spread_texts(sources, config.corpus, rows,
                                                         sizes=sizes))
    config = as_planned(config, plan)
    rows_per_file = config.rows_per_file
    if rows_per_file is None:
        rows_per_file = default_rows_per_file(config.vector.output_dimension(plan.dimension),
                                              config.vector.output_dtype)
    # int8/uint8: the code book the rows were written with, else one measured now (minutes of
    # encoding on a CPU), but never for an output that holds rows, which the settings check
    # then refuses (another dtype, or its code book lost)
    started = time.perf_counter()  # the code book's rows are this run's: timed from here
    ranges, first_rows = code_book(plan, config.vector, config.corpus, sources,
                                   kept=output.code_book() if kept else None,
                                   may_measure=kept is None, where=where)
    settings = embed_settings(plan, config.vector, read_as, ranges)
    metadata = output.file_metadata(settings, ranges)  # what every output file's rows are
    if first_rows is not None:
        first_rows = first_rows.replace_schema_metadata(metadata)
    elif early is not None and early.rows is not None:  # on disk already, the plan's
        first_rows, started = early.rows.replace_schema_metadata(metadata), early.started
    beside = output.files_beside_rows(  # int8: the very model the rows (and queries) are made by
        config.vector.output_dtype, ranges, plan.artefact if plan.precision == "int8" else None)
    return corpus_job.run_corpus_job(EmbedJob(
        config=config, plan=plan, folders=(config.output,), settings=settings,
        files_beside_rows=beside,
        sources=sources, rows_per_file=rows_per_file or None, ranges=ranges, metadata=metadata,
        in_process=where.cpus is None, first_rows=first_rows,
        started=started if first_rows is not None else None,
        first_part_at=early.written_at if early is not None else None,
        model_folders=(plan.model.location,) if plan.model.origin == "folder" else (),
        stand_in=stand_in))

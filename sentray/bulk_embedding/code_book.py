"""The code book of int8/uint8 output (each dimension's range, which its codes divide), fixed
before any row is written: from a file the user gives, from the output's own code book (a rerun
keeps the one its rows were written with), or measured in the driver on the first
`code_book_rows` texts of the input (in file order), embedded by the same `EmbedBatch` the
actors run. The output records it beside the rows (`EmbeddingOutput.write_code_book`), so that
queries are quantized the same way."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pyarrow as pa

from sentray.bulk_embedding import vectors
from sentray.bulk_embedding.config import VectorConfig
from sentray.corpus.reading import read_parquet_source, read_text_source
from sentray.corpus.sources import CorpusConfig, Source
from sentray.encode.plan import EncoderPlan

logger = logging.getLogger(__name__)

def sample_records(sources: list[Source], corpus: CorpusConfig, rows: int) -> pa.Table:
    """The first `rows` records of the input, in file order (as the reader numbers them)."""
    tables, held = [], 0
    block = dataclasses.replace(corpus, rows_per_block=min(rows, 4096))
    for source in sources:
        if source.num_rows == 0:
            continue
        records = (read_text_source(source, block.rows_per_block) if source.format == "text"
                   else read_parquet_source(source, list(range(len(source.row_groups))), 0,
                                            block))
        for table in records:
            tables.append(table.select(["id", "text", "read_error", "source", "row",
                                        "source_rows"]).slice(0, rows - held))
            held += tables[-1].num_rows
            if held >= rows:
                return pa.concat_tables(tables)
    return pa.concat_tables(tables) if tables else pa.table({})


def measure(plan: EncoderPlan, vector: VectorConfig, sample: pa.Table) -> vectors.Ranges:
    """Ranges of the vectors (truncated and normalized as `vector` says) of the `sample`
    records, embedded in this process (on its GPU if it has one)."""
    import torch

    from sentray.bulk_embedding.actor import EmbedBatch, EmbedSpec

    if plan.device.startswith("cuda") and not torch.cuda.is_available():
        # a CPU driver of a GPU job: the same model in fp32
        plan = dataclasses.replace(plan.running("fp32", why=plan.why), device="cpu")
    if not sample.num_rows:
        raise ValueError("int8/uint8 output needs texts to measure its code book on, and the "
                         "input has none; pass --quantization-ranges FILE")
    actor = EmbedBatch(EmbedSpec(plan, dataclasses.replace(vector, output_dtype="float32")))
    table = actor(sample)
    embedded = table.filter(table.column("embedding").is_valid())
    floats = np.stack(embedded.column("embedding").to_numpy(zero_copy_only=False))
    logger.info("int8/uint8 code book measured on the %d texts embedded of the input's first "
                "%d rows", len(floats), sample.num_rows)
    return vectors.Ranges.of(floats, source=f"the first {sample.num_rows} rows of the input")


def code_book(plan: EncoderPlan, vector: VectorConfig, corpus: CorpusConfig,
              sources: list[Source], kept: vectors.Ranges | None,
              may_measure: bool = True) -> vectors.Ranges | None:
    """The code book of this run: None unless int8/uint8; the user's file; `kept`, the one the
    output's rows were written with; else, if `may_measure` (an output that holds no rows),
    measured now on the input's first rows; else None (the rows were not quantized with one:
    the settings check refuses the run, naming what differs)."""
    if vector.output_dtype not in vectors.SCALAR:
        return None
    if not vector.quantization_ranges:  # a kept book that does not fit: the settings differ
        return kept if kept is not None or not may_measure else measure(
            plan, vector, sample_records(sources, corpus, vector.code_book_rows))
    ranges = vectors.Ranges.read(vector.quantization_ranges)
    dimension = vector.output_dimension(plan.dimension)
    if ranges.dimension != dimension:
        raise ValueError(f"the quantization ranges have {ranges.dimension} dimensions, the "
                         f"vectors {dimension}")
    return ranges

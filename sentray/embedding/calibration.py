"""The code book of int8/uint8 output, fixed before any row is written: from a file the user
gives, from the output's own `_quantization.json` (a rerun keeps the code book its rows were
written with), or calibrated in the driver on the first `calibration_rows` texts of the input
(in file order), embedded by the same `EmbedBatch` the actors run. `_quantization.json` beside
the rows records it, so that queries are quantized the same way."""

from __future__ import annotations

import dataclasses
import json
import logging

import numpy as np
import pyarrow as pa

from sentray.corpus.reading import read_parquet_source, read_text_source
from sentray.corpus.sources import CorpusConfig, Source
from sentray.embedding import vectors
from sentray.embedding.config import EmbedConfig
from sentray.encode.model_info import model_facts
from sentray.kit import storage

logger = logging.getLogger(__name__)

QUANTIZATION_FILE = "_quantization.json"


def ranges_digest(ranges: vectors.Ranges | None) -> str | None:
    """What the settings record of a code book (its values, not where it came from)."""
    if ranges is None:
        return None
    import hashlib

    return hashlib.sha256(ranges.as_array().astype(np.float32).tobytes()).hexdigest()[:16]


def read_stored(output: storage.Location) -> vectors.Ranges | None:
    """The ranges an output's rows were written with, if it records any."""
    try:
        with output.filesystem.open_input_stream(output.join(QUANTIZATION_FILE).path) as f:
            return vectors.Ranges.from_json(json.loads(f.read())["ranges"])
    except (FileNotFoundError, OSError):
        return None


def write_stored(output: storage.Location, dtype: str, ranges: vectors.Ranges) -> None:
    record = {
        "dtype": dtype, "dimension": ranges.dimension,
        "formula": "code = clip(floor((x - minimum) / step), 0, 255), step = (maximum - minimum)"
                   " / 255 (1 where that is 0), in float32; int8 subtracts 128 (sentence-"
                   "transformers' quantize_embeddings with ranges=[minimum, maximum])",
        "ranges": ranges.to_json()}
    storage.write_bytes(output.join(QUANTIZATION_FILE), json.dumps(record, indent=1).encode())


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


def calibrate(config: EmbedConfig, sources: list[Source]) -> vectors.Ranges:
    """Ranges of the vectors (truncated and normalized as configured) of the first
    `calibration_rows` texts, embedded in this process (on its GPU if it has one)."""
    import torch

    from sentray.embedding.actor import EmbedBatch, EmbedSpec

    encoder = config.encoder
    if encoder.device.startswith("cuda") and not torch.cuda.is_available():
        # a CPU driver of a GPU job: the same model in fp32
        encoder = dataclasses.replace(encoder, device="cpu", precision="fp32")
    sample = sample_records(sources, config.corpus, config.vector.calibration_rows)
    if not sample.num_rows:
        raise ValueError("int8/uint8 output needs calibration texts, and the input has none; "
                         "pass --quantization-ranges FILE")
    actor = EmbedBatch(EmbedSpec(encoder, dataclasses.replace(config.vector,
                                                              output_dtype="float32")))
    table = actor(sample)
    embedded = table.filter(table.column("embedding").is_valid())
    floats = np.stack(embedded.column("embedding").to_numpy(zero_copy_only=False))
    logger.info("int8/uint8 ranges calibrated on the %d texts embedded of the input's first %d "
                "rows", len(floats), sample.num_rows)
    return vectors.Ranges.of(floats, source=f"the first {sample.num_rows} rows of the input")


def resolve_ranges(config: EmbedConfig, output: storage.Location,
                   sources: list[Source]) -> vectors.Ranges | None:
    """The code book of this run: None unless int8/uint8; the user's file; the one the output's
    rows were written with (unless --overwrite); else calibrated now."""
    vector = config.vector
    if vector.output_dtype not in vectors.SCALAR:
        return None
    if vector.quantization_ranges:
        ranges = vectors.Ranges.read(vector.quantization_ranges)
    else:
        ranges = None if config.overwrite else read_stored(output)
        if ranges is None:
            ranges = calibrate(config, sources)
    dimension = vector.output_dimension(_model_dimension(config))
    if ranges.dimension != dimension:
        raise ValueError(f"the quantization ranges have {ranges.dimension} dimensions, the "
                         f"vectors {dimension}")
    return ranges


def _model_dimension(config: EmbedConfig) -> int:
    return model_facts(config.encoder.located().resolved_model).dimension

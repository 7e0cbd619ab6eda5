"""The first rows written while the probe measures (sentray/bulk_embedding/early_rows.py): on
disk as torch fp32 made them once the probe's reference is built, and the decided plan's once
it is: the same rows for an fp32 plan, replaced (the part's name kept, the settings record
with it) for another precision. The job around them, run as a user runs it, is
tests/bulk_embedding/test_probe_in_the_job.py."""

from __future__ import annotations

import dataclasses
import functools
import json
import logging

import numpy as np
import pyarrow.parquet as pq

from sentray.bulk_embedding.actor import EmbedBatch, EmbedSpec
from sentray.bulk_embedding.config import EmbedConfig
from sentray.bulk_embedding.early_rows import EARLY_ROWS, JOB, EarlyRows
from sentray.bulk_embedding.job import EmbedJob, stored_vector
from sentray.bulk_embedding.output import METADATA_KEY, EmbeddingOutput
from sentray.corpus.reading import first_records
from sentray.corpus.sources import CorpusConfig, discover_sources, input_settings
from sentray.encode.config import EncoderConfig
from sentray.encode.encoder import SentenceEncoder
from sentray.precision.plan import plan_encoder

ROWS = 45


def part_of(output) -> tuple[str, dict, np.ndarray]:
    """The output's one part: its name, the settings in its metadata, its vectors."""
    [part] = list(output.glob("*/part-*.parquet"))
    table = pq.read_table(part)
    return (part.name, json.loads(table.schema.metadata[METADATA_KEY]),
            np.asarray(table.column("embedding").to_pylist(), dtype=np.float32))


def test_the_first_rows_are_torch_fp32s_then_the_decided_plans(tmp_path, tiny_model_dir,
                                                               caplog):
    corpus = tmp_path / "in.txt"
    corpus.write_text("".join(f"line {i} of the corpus, about item {i % 7}\n"
                              for i in range(ROWS)))
    config = EmbedConfig(corpus=CorpusConfig(input=str(corpus)), output=str(tmp_path / "out"),
                         encoder=EncoderConfig(model=str(tiny_model_dir), pooling="mean",
                                               device="cpu", precision="auto"))
    sources = discover_sources(config.corpus)
    early = EarlyRows(config, EmbeddingOutput.at(config.output), sources,
                      input_settings(config.corpus, sources),
                      functools.partial(stored_vector, config.vector))

    def plan(precision: str, runtime: str):
        return plan_encoder(dataclasses.replace(config.encoder, precision=precision,
                                                runtime=runtime))

    fp32 = plan("fp32", "torch")
    with caplog.at_level(logging.INFO, logger="sentray.bulk_embedding.early_rows"):
        early.reference(SentenceEncoder(fp32))
    name, stored, written = part_of(tmp_path / "out")
    assert name == f"part-{0:012d}-{EARLY_ROWS:012d}-of-{ROWS:012d}.parquet"
    assert (stored["precision"], stored["runtime"]) == ("fp32", "torch")
    assert json.loads((tmp_path / "out" / "_settings.json").read_text())["settings"][
        "precision"] == "fp32"
    assert early.written_at is not None and "written by torch fp32" in caplog.text
    assert json.loads((tmp_path / "out" / "_settings.json").read_text())["job"] == JOB
    assert JOB == EmbedJob.name  # the job whose output they are

    # an fp32 plan on any runtime: the same rows (settings that compare equal), not rewritten
    early.decided(plan("fp32", "onnxruntime"))
    assert part_of(tmp_path / "out")[1]["runtime"] == "torch"
    assert "replaced" not in caplog.text

    # auto chose bf16: the same records as bf16 stores them, over the part, settings and all
    bf16 = plan("bf16", "torch")
    with caplog.at_level(logging.INFO, logger="sentray.bulk_embedding.early_rows"):
        early.decided(bf16)
    name_after, stored, replaced = part_of(tmp_path / "out")
    assert name_after == name and (stored["precision"], stored["runtime"]) == ("bf16", "torch")
    assert json.loads((tmp_path / "out" / "_settings.json").read_text())["settings"][
        "precision"] == "bf16"
    assert "the first 32 rows replaced by torch bf16's" in caplog.text
    expected = EmbedBatch(EmbedSpec(bf16, stored_vector(config.vector, bf16)))(
        first_records(sources, config.corpus, EARLY_ROWS))
    # the same plan on the same batches: bf16's vectors (within float32 rounding: another
    # allocation may order a reduction differently), and not fp32's (bf16 weights move a
    # component far past the 1e-5 an exact runtime keeps to)
    np.testing.assert_allclose(replaced, np.asarray(expected.column("embedding").to_pylist(),
                                                    dtype=np.float32), rtol=0, atol=1e-6)
    assert np.abs(replaced - written).max() > 1e-4


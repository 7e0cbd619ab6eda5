"""`EarlyRows`: an embedding job's first rows, on disk while its probe still measures.

A job whose encoders run in its own process, into an output that holds no rows, at fp32 (the
default: which exact runtime runs fastest is measured) or `auto` (which runtime and precision),
writes its first EARLY_ROWS rows as soon as the probe's reference encoder, torch fp32, is
loaded, before the probe times anything (`plan_encoder(on_reference=...)`): the output's first
part is on disk seconds after launch instead of after the probe (10,000 rows on this project's
2-core EPYC: the probe ends ~8 s after launch, the early part is written at ~4 s). They are
written like any run's rows, under a claim, with the settings of the reference's vectors.

Once the plan is decided they become the run's own (`as_run`), which the driver writes again
with the run's metadata as its `first_rows` (counted as this run's rows):

- the run's vectors are fp32 (any exact runtime: within 1e-5 of torch's, and the settings
  compare equal, `settings_record.comparable`): the same rows;
- else (`auto` chose bf16 or int8): the same records encoded by the run's plan (the probe's
  vectors of them ride on the plan: no forward pass, as a rule), and the output's settings
  record and the early part replaced by them, under a claim with the run's settings. The part
  keeps its name and is never absent (a part is replaced whole); its vectors are the reference's
  until then, and its metadata says so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from sentray.bulk_embedding import vectors
from sentray.bulk_embedding.actor import EmbedBatch, EmbedSpec
from sentray.bulk_embedding.config import EmbedConfig, VectorConfig
from sentray.bulk_embedding.output import EmbeddingOutput, embed_settings
from sentray.corpus import corpus_job, part_files
from sentray.corpus.reading import first_records
from sentray.corpus.sources import Source
from sentray.encode.plan import EncoderPlan
from sentray.kit.settings_record import differences

logger = logging.getLogger(__name__)

EARLY_ROWS = 32  # one batch at the default batch size
JOB = "embed"  # the job whose output they are (`EmbedJob.name`)


@dataclass
class EarlyRows:
    """The probe's hook that writes the early rows, and what it wrote."""

    config: EmbedConfig
    output: EmbeddingOutput
    sources: list[Source]
    read_as: dict  # the input's settings (`sources.input_settings`)
    vector_of: Callable[[EncoderPlan], VectorConfig]  # the vector as a plan stores it
    records: pa.Table | None = None  # the input's first records
    rows: pa.Table | None = None  # as written, once they are
    settings: dict | None = None  # theirs
    started: float | None = None  # time.perf_counter() when they began
    written_at: float | None = None  # time.time() when they were on disk

    @staticmethod
    def applies(config: EmbedConfig, in_process: bool, holds_rows: bool) -> bool:
        """Whether a job writes early rows: its encoders in this process, an output without
        rows (and no --overwrite, which deletes first), a precision the probe decides (fp32's
        runtime, or `auto`), a float or binary output (int8/uint8 codes need their code book
        first)."""
        return (in_process and not holds_rows and not config.overwrite
                and config.encoder.precision in ("fp32", "auto")
                and config.vector.output_dtype not in vectors.SCALAR)

    def __call__(self, reference) -> None:
        """Encode the first rows with `reference` (the probe's torch fp32 encoder, its model
        taken, not loaded again) and write them as the output's first part."""
        from sentray.encode.runtimes import registry

        self.started = time.perf_counter()
        plan = reference.plan
        self.records = first_records(self.sources, self.config.corpus, EARLY_ROWS)
        if not self.records.num_rows:
            return
        registry.keep_forward(plan, reference.forward)
        self.rows, self.settings, _ = self._encoded(plan)
        self.written_at = self._write(self.settings)
        logger.info("the first %d rows written by torch fp32 while the probe measures",
                    self.rows.num_rows)

    def as_run(self, plan: EncoderPlan, settings: dict, metadata: dict) -> pa.Table | None:
        """The early rows as the run of `plan` (its `settings`, its files' `metadata`) stores
        them, to hand to the driver as its first rows; None where none were written."""
        if self.rows is None:
            return None
        if differences(self.settings, settings):  # auto chose another precision
            from sentray.encode.runtimes import registry

            rows, _, actor = self._encoded(plan)
            if actor.encoder is not None:  # the probe kept it for the job's actor: kept again
                registry.keep_forward(plan, actor.encoder.forward)
            self.rows = rows
            self._write(settings, replacing=True)
            logger.info("the first %d rows replaced by %s %s's, as the run stores them",
                        rows.num_rows, plan.runtime, plan.precision)
        return self.rows.replace_schema_metadata(metadata)

    def _encoded(self, plan: EncoderPlan) -> tuple[pa.Table, dict, EmbedBatch]:
        """The first records through the actor of `plan` (which takes the forward the
        registry keeps for it), their settings, and that actor."""
        vector = self.vector_of(plan)
        settings = embed_settings(plan, vector, self.read_as, None)
        actor = EmbedBatch(EmbedSpec(plan, vector,
                                     metadata=self.output.file_metadata(settings, None)))
        return actor(self.records), settings, actor

    def _write(self, settings: dict, replacing: bool = False) -> float:
        return corpus_job.write_early_rows(
            JOB, (self.config.output,), settings, self.config.corpus,
            lambda folders: part_files.SingleFolder(folders[0]), self.rows, replacing=replacing)

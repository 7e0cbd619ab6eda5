"""`EarlyRows`: an embedding job's first rows, on disk while its probe still measures.

A job whose probe runs in its own process (its encoders run there, or in the actors of the
private Ray cluster it starts on this machine after the probe; not on a cluster it joins, whose
probe runs in a task on a node), into an output that holds no rows, at fp32 (the default: which
exact runtime runs fastest is measured) or `auto` (which runtime and precision), watches its
probe (`plan_encoder(watcher=...)`, `probe.ProbeWatcher`):

- **the reference built**: as soon as the probe's torch fp32 encoder is loaded, before it times
  anything, the input's first EARLY_ROWS records are encoded with it and written as the
  output's first part, like any run's rows, under a claim, with the settings of those vectors
  (fp32, torch). The first part is on disk seconds after launch instead of after the probe
  (10,000 rows on this project's 2-core EPYC: at ~4 s, where the probe ends at ~7-8 s; on the
  Ray path at 3.8 s, where the actors' first row came at 16 s: docs/benchmarks.md).
- **the plan decided**: they become the run's own. Where the run's vectors are fp32 (any exact
  runtime: within 1e-5 of torch's; the settings compare equal, `settings_record.comparable`)
  they are the same rows. Where `auto` chose bf16 or int8, the same records are encoded by the
  chosen plan (the probe's vectors of most of them ride on it, and its encoder is taken and
  given back for the job's actor: no second build) and written over the early part, with the
  output's settings record, under a claim with the run's settings. The part keeps its name and
  is replaced whole; until then its metadata says what its vectors are.

The job hands `rows` to its driver as its `first_rows`: written again with the run's metadata
and counted as this run's rows.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

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
    """The probe's watcher that writes the early rows (`probe.ProbeWatcher`), and what it
    wrote."""

    config: EmbedConfig
    output: EmbeddingOutput
    sources: list[Source]
    read_as: dict  # the input's settings (`sources.input_settings`)
    vector_of: Callable[[EncoderPlan], VectorConfig]  # the vector as a plan stores it
    records: pa.Table | None = None  # the input's first records
    rows: pa.Table | None = None  # as written, once they are
    settings: dict | None = None  # theirs
    started: float | None = None  # time.perf_counter() when they began
    written_at: float | None = None  # time.time() when they were first on disk

    def reference(self, encoder) -> None:
        """Encode the first records with the probe's torch fp32 `encoder` (its model taken, not
        loaded again) and write them as the output's first part."""
        self.started = time.perf_counter()
        self.records = first_records(self.sources, self.config.corpus, EARLY_ROWS)
        if not self.records.num_rows:
            return
        self.rows, self.settings, _ = self._encoded(encoder.plan, encoder.forward)
        self.written_at = self._write(self.settings)
        logger.info("the first %d rows written by torch fp32 while the probe measures",
                    self.rows.num_rows)

    def decided(self, plan: EncoderPlan) -> None:
        """Make the rows written `plan`'s: the same where its settings compare equal to theirs,
        else encoded again by it and written over them."""
        if self.rows is None:
            return
        from sentray.encode.runtimes import registry

        settings = embed_settings(plan, self.vector_of(plan), self.read_as, None)
        if not differences(self.settings, settings):
            return
        # the actor takes the probe's encoder of its choice, kept for the job: given back
        self.rows, self.settings, forward = self._encoded(plan, None)
        if forward is not None:
            registry.keep_forward(plan, forward)
        self._write(settings, replacing=True)
        logger.info("the first %d rows replaced by %s %s's, as the run stores them",
                    self.rows.num_rows, plan.runtime, plan.precision)

    def _encoded(self, plan: EncoderPlan, forward) -> tuple[pa.Table, dict, object]:
        """The first records through an actor of `plan` built on `forward` (None: its own),
        their settings, and the forward it ran."""
        from sentray.encode.runtimes import registry

        if forward is not None:
            registry.keep_forward(plan, forward)  # the actor's encoder takes it
        vector = self.vector_of(plan)
        settings = embed_settings(plan, vector, self.read_as, None)
        actor = EmbedBatch(EmbedSpec(plan, vector,
                                     metadata=self.output.file_metadata(settings, None)))
        return (actor(self.records), settings,
                None if actor.encoder is None else actor.encoder.forward)

    def _write(self, settings: dict, replacing: bool = False) -> float:
        return corpus_job.write_early_rows(
            JOB, (self.config.output,), settings, self.config.corpus,
            lambda folders: part_files.SingleFolder(folders[0]), self.rows, replacing=replacing)

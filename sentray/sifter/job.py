"""The SIFTER augmentation job behind `jobs/augment.py`, on the corpus-job driver: for every
sentence X, Y (X + its backbone) and Z (X without articles, conjunctions and pronouns), with the
paper's corpus filter; kept rows to the output, rejected ones (with their reason) to a rejects
folder, every input row in exactly one of the two.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from sentray.corpus import corpus_job, part_files
from sentray.corpus.sources import Source
from sentray.kit import storage
from sentray.sifter.actor import AugmentBatch
from sentray.sifter.config import AugmentConfig
from sentray.sifter.parsers import load_spacy

# -- the Ray Data job -----------------------------------------------------------------------------

OUTPUT_COLUMNS = ("id", "text", "backbone_text", "pruned_text", "subject", "relation", "object",
                  "backbone_source", "source", "row", "source_rows")
REJECT_COLUMNS = ("id", "text", "reject_reason", "source", "row", "source_rows")


class SplitOutputAndRejects:
    """Route: kept rows to the output folder, rejected ones (with their reason) to rejects."""

    def __init__(self, output: storage.Location, rejects: storage.Location) -> None:
        self.output, self.rejects = output, rejects

    def __call__(self, table: pa.Table):
        rejected = pc.is_valid(table.column("reject_reason"))
        return [(self.output, table.filter(pc.invert(rejected)).select(list(OUTPUT_COLUMNS))),
                (self.rejects, table.filter(rejected).select(list(REJECT_COLUMNS)))]


def output_schema(id_type: pa.DataType) -> pa.Schema:
    return pa.schema([("id", id_type)] + [(c, pa.string()) for c in OUTPUT_COLUMNS[1:-3]]
                     + [("source", pa.string()), ("row", pa.int64())])


def summarize(output: storage.Location, rejects: storage.Location,
              sources: Sequence[Source]) -> dict:
    """Rows in; rows out; rejected rows by reason; backbones by source; every row once."""
    incomplete = part_files.incomplete_sources([output, rejects], sources)
    rows_in = rows_out = 0
    rejected: dict[str, int] = {}
    backbones = {"openie": 0, "dependency": 0, "none": 0}
    for source in sources:
        if source.uri in incomplete:
            continue
        rows_in += part_files.completed_rows([output, rejects], source.key)[1]
        kept = part_files.read_column(output, source.key, "backbone_source")
        rows_out += len(kept)
        for value in kept:
            backbones[value] = backbones.get(value, 0) + 1
        for reason in part_files.read_column(rejects, source.key, "reject_reason"):
            rejected[reason] = rejected.get(reason, 0) + 1
    return {"sources": len(sources), "incomplete_sources": incomplete, "rows_in": rows_in,
            "rows_out": rows_out, "rows_rejected": sum(rejected.values()),
            "rejected_by_reason": rejected, "backbone_source": backbones,
            "triples_found": backbones["openie"]}


def check_backend(config: AugmentConfig) -> None:
    """Fail here, not in every actor, when the spaCy model or CoreNLP is missing."""
    load_spacy(config.spacy_model)
    if config.backend == "corenlp":
        from sentray.sifter.corenlp import corenlp_home

        corenlp_home()


def run_augmentation(config: AugmentConfig) -> dict:
    """X/Y/Z for every kept row of the corpus into `config.output`, rejects with their reason
    into `config.rejects`; returns the summary (also written as OUTPUT/_summary.json)."""
    config = config.resolved()
    return corpus_job.run_corpus_job(corpus_job.CorpusJob(
        name="augment", config=config, corpus=config.corpus, pool=config.pool,
        folders=(config.output, config.rejects), actor_class=AugmentBatch,
        actor_kwargs={"config": config}, route=lambda folders: SplitOutputAndRejects(*folders),
        empty_schema=lambda source: output_schema(pa.string()),
        summarize=lambda folders, sources: summarize(*folders, sources),
        rows_out_keys=("rows_out", "rows_rejected"),
        check_before_pool=lambda: check_backend(config)))

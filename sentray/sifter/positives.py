"""SIFTER's two positives of a sentence X, as pure functions
(Wang et al., "SIFTER: A Task-specific Alignment Strategy for Enhancing Sentence Embeddings",
section "Data augmentation"):

- Y, *add sentence backbone*: X followed by its backbone as a short sentence. The backbone is an
  OpenIE relation triple (subject, relation, object) of X, one picked at random (seeded) or the
  longest; where OpenIE finds none, the first two levels of X's dependency tree (the root and
  its direct children, in sentence order, punctuation dropped). Two rules of this project's
  (issue 36), not the paper's: a backbone never drops a negation that governs its relation or
  its arguments in X (`sentray.sifter.negation`): a triple that would is not chosen, and the
  dependency backbone carries the negation ("There is no reason to doubt it." -> "There is no
  reason.", not "There is reason."); and a backbone that is X repeated (the same letters and
  digits) is not appended. In either case the next source is tried; where none is left, Y = X
  (source "none"), which makes (X, Y) SimCSE's own positive pair.
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
  nothing would remain. The keep-list and the subordinators are this project's deviation from
  the paper, which deletes "conjunctions" and names no tags: read literally, it would delete
  "nor", "neither", "either" and "both" (all `CC`). The two halves of a correlative pair go
  or stay together: where the first ("either", "neither", "both", "whether", "not only") is
  kept, its second ("or", "nor", "and", "but") is too ("Either you go or I go." -> "Either go
  or go.", not "Either go go."). Examples (hand-checked, tests/sifter/test_positives.py):

      Nobody came to the party because it rained.  ->  Nobody came to party because rained.
      I saw nothing in his room.                   ->  saw nothing in room.
      Neither John nor Mary saw anyone.            ->  Neither John nor Mary saw anyone.
      She and I went to the market, but they stayed home.  ->  went to market, stayed home.

  The earlier rule (`z_rule="ud"`, kept to remake the first study's inputs byte for byte) deleted
  every UD `PRON`, `CCONJ` and `SCONJ` and the articles, which also took "nobody", "nothing",
  "anyone", "neither", "if" ("came to party rained.", "saw in room."), and joined the words
  around a deleted clitic ("Let's not" -> "Letnot"); experiments/z_audit.py measures both
  on Brown.
The functions take spaCy `Doc`s (or anything with the same token attributes) and triples; Y's
dependency backbone and negation rule read a `DependencyParse` (spaCy's, or CoreNLP's own). The
parsers are spaCy + triplet-extract (`sentray.sifter.parsers`) or CoreNLP
(`sentray.sifter.corenlp`), both above this module. The paper's corpus filter is in
`sentray.sifter.corpus_filter`. The rules, their reasons and their audit: docs/sifter-views.md.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sentray.sifter.dependency_parse import DependencyParse
from sentray.sifter.operator_lexicon import ARTICLES, DOWNWARD_WORDS, NEGATIONS, OWN_SUBJECT
from sentray.sifter.scope import (
    binds_article,
    carry_scopes,
    operator_words,
    own_clause,
    words,
)
from sentray.sifter.sentence_units import is_sentence, stranded
from sentray.sifter.triple_words import drops_scope, in_order, triple_positions

# Penn Treebank tags Z deletes: coordinating conjunction, personal and possessive pronoun
DELETED_TAGS = frozenset({"CC", "PRP", "PRP$"})
QUANTIFIERS = frozenset({"all", "any", "anybody", "anyone", "anything", "anywhere", "both", "each",
                         "either", "every", "everybody", "everyone", "everything", "everywhere",
                         "few", "fewer", "half", "least", "less", "many", "more", "most", "much",
                         "several", "some", "somebody", "someone", "something", "somewhere"})
# Z keeps these whatever they are tagged: deleting one changes what the sentence asserts
KEPT_WORDS = NEGATIONS | QUANTIFIERS | DOWNWARD_WORDS
# the first half of a correlative pair -> its second halves; Z keeps the second where it keeps
# the first ("not" counts only in "not only")
CORRELATIVES = {"either": frozenset({"or"}), "neither": frozenset({"nor", "or"}),
                "both": frozenset({"and"}), "whether": frozenset({"or"}),
                "not": frozenset({"but"})}
# The rule before issue 25 (`z_rule="ud"`): spaCy's UD parts of speech
UD_DELETED_POS = frozenset({"CCONJ", "SCONJ", "PRON"})
# The issue that last changed what Y or Z is for the same settings (36: negations kept in Y's
# backbone, no X repeated, correlative pairs in Z; 43: every operator's scope kept, "a few" in
# Z; 55: quantifier phrases and sentence units; "55b": a backbone is a sentence, its
# auxiliaries and object kept; "55f": a conditional's antecedent kept whole, a reporting
# clause with what it reports and verbs of speech as embeddings, quoted speech under its verb,
# an embedding's complement whole, a disjunction whole, a privative adjective with its noun, a
# hyphenated word whole); the job records it, so an output made before is never resumed by
# this code
VIEWS_REVISION = "55f"
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
    backbone: str = ""  # the sentence appended to X ('' when none: Y = X)


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


def correlative_partners(doc) -> set[int]:
    """Positions of the second halves of the correlative pairs in `doc` ("or" of "either ...
    or", "nor" of "neither ... nor", "and" of "both ... and", "or" of "whether ... or", "but" of
    "not only ... but"): for each first half, the first following second half of the same
    sentence whose head is in the subtree of the first half's head (a first half tagged `CC` or
    labelled `preconj`, "whether", "not only"), or is the first half's own head (a determiner:
    "both the platform and the language"). A pronoun opens no pair ("I like both, and ...")."""
    partners: set[int] = set()
    for opener in doc:
        word = opener.lower_
        following = doc[opener.i + 1:opener.sent.end]
        if word == "not" and not (len(following) and following[0].lower_ == "only"):
            continue
        if word not in CORRELATIVES:
            continue
        if opener.tag_ == "CC" or opener.dep_ == "preconj" or word in ("whether", "not"):
            reach = {t.i for t in opener.head.subtree}
        elif opener.dep_ in ("det", "predet", "advmod"):  # "both the platform and the
            reach = {opener.head.i}  # language": the "and" of its own word only
        else:  # a pronoun ("I like both, and she likes neither."): no pair
            continue
        partner = next((t for t in following if t.lower_ in CORRELATIVES[word]
                        and t.i not in partners and t.head.i in reach), None)
        if partner is not None:
            partners.add(partner.i)
    return partners


def prune_text(doc, rule: ZRule = "penn") -> str:
    """Z: the document without its useless words, spacing tidied; the original text when only
    punctuation or nothing would remain. Under the Penn rule the second half of a correlative
    pair stays (`correlative_partners`), and a deleted word leaves its trailing space, so the
    words around a deleted clitic stay apart ("Let's not" -> "Let not"); the UD rule keeps its
    old joining ("Letnot"), so that it remakes the first study's Zs exactly."""
    if rule not in ("penn", "ud"):
        raise ValueError(f"the Z rule must be penn or ud, got {rule!r}")
    if rule == "ud":
        deleted = [is_useless_ud(t) for t in doc]
    else:
        partners = correlative_partners(doc) if doc.has_annotation("DEP") else set()
        bound = {t.i - 1 for t in doc if t.i > 0 and binds_article(doc[t.i - 1].text, t.text)}
        deleted = [is_useless(t) and t.i not in partners | bound for t in doc]
    if all(d or t.is_punct or t.is_space for t, d in zip(doc, deleted, strict=True)):
        return doc.text
    if rule == "ud":
        return tidy_spacing("".join(t.text + t.whitespace_
                                    for t, d in zip(doc, deleted, strict=True) if not d))
    return tidy_spacing("".join(t.whitespace_ if d else t.text + t.whitespace_
                                for t, d in zip(doc, deleted, strict=True)))


# -- Y: add the sentence backbone -----------------------------------------------------------------


def dependency_backbone(doc) -> str:
    """The dependency backbone of a spaCy `Doc` (`parse_backbone`)."""
    return parse_backbone(DependencyParse.from_spacy(doc))


def parse_backbone(parse: DependencyParse) -> str:
    """The first two levels of the first sentence's dependency tree as a short sentence: the root
    and its direct children in sentence order, punctuation dropped, the subject of a conjoined
    clause among them added, and completed by the scope rule (`scope.carry_scopes`: every
    operator over the words kept, and under a negation or a downward word the scope whole).
    '' for an empty parse."""
    return backbone_of(parse, backbone_positions(parse))


def backbone_of(parse: DependencyParse, kept: set[int]) -> str:
    """The tokens `kept` of X, in X's order, as a short sentence; a hyphenated word split by
    the parser ("self", "-", "contained") written whole."""
    parts: list[str] = []
    for t in sorted(kept):
        if parts and (parse.tokens[t].tag == "HYPH"
                      or (t - 1 in kept and parse.tokens[t - 1].tag == "HYPH")):
            parts[-1] += parse.tokens[t].text
        else:
            parts.append(parse.tokens[t].text)
    return as_sentence(parts)


def backbone_positions(parse: DependencyParse) -> set[int]:
    """The tokens of X the dependency backbone keeps (`parse_backbone`); none for an empty
    parse."""
    root = parse.root()
    if root is None:
        return set()
    level = {c for c in parse.children[root] if not parse.tokens[c].punct}
    # a conjoined clause keeps its own subject: "He did not come, but she stayed." gives
    # "He did not come but she stayed.", not "... but stayed." (he stayed)
    level |= {s for c in level if own_clause(parse, c) for s in parse.children[c]
              if parse.tokens[s].dep.lower().startswith(OWN_SUBJECT)}
    # a preposition of the two levels with no object in X ("What are you looking at?") is
    # left out; one the scope rule brings back is kept: meaning first ("could be arrived at")
    level -= stranded(parse, level) - operator_words(parse)
    return carry_scopes(parse, {root} | level)


def repeats(backbone: str, text: str) -> bool:
    """The backbone is X repeated: the same letters and digits in the same order (case, spacing
    and punctuation aside: "does n't" and "got ta", as the parsers split them, are X's "doesn't"
    and "gotta")."""
    def letters(value: str) -> str:
        return re.sub(r"[\W_]", "", value.lower())

    return letters(backbone) == letters(text)


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


def choose_backbone(text: str, parse: DependencyParse, triples: Sequence[Triple],
                    choice: TripleChoice, rng: random.Random
                    ) -> tuple[str, Triple | None, BackboneSource]:
    """(backbone, triple, source) of sentence `text` with parse `parse`: an OpenIE triple that
    keeps every operator's scope (`triple_words.drops_scope`), keeps X's order
    (`triple_words.in_order`), reads as a sentence (`sentence_units.is_sentence`) and is not X
    repeated (`choose_triple` among them); else the dependency backbone (scopes carried) if it
    reads as a sentence and is not X repeated; else none."""
    usable = [t for t in triples
              if not drops_scope(parse, (t.subject, t.relation, t.object))
              and in_order(parse, (t.subject, t.relation, t.object))
              and triple_is_sentence(parse, t)
              and not repeats(t.as_sentence(), text)]
    triple = choose_triple(usable, choice, rng)
    if triple is not None:
        return triple.as_sentence(), triple, "openie"
    kept = backbone_positions(parse)
    backbone = backbone_of(parse, kept)
    if backbone and is_sentence(parse, kept) and not repeats(backbone, text):
        return backbone, None, "dependency"
    return "", None, "none"


def triple_is_sentence(parse: DependencyParse, triple: Triple) -> bool:
    """`is_sentence` of the tokens of X the triple is made of, with the words of its relation
    that X lacks (OpenIE's inserted "is")."""
    parts = (triple.subject, triple.relation, triple.object)
    in_x = {w for t in parse.tokens for w in words(t.text)}
    added = frozenset(w for w in words(triple.relation) if w not in in_x)
    return is_sentence(parse, triple_positions(parse, parts), added)


def augment(text: str, doc, triples: Sequence[Triple], *, choice: TripleChoice = "random",
            rng: random.Random | None = None, parse: DependencyParse | None = None,
            z_rule: ZRule = "penn") -> Augmented:
    """Y and Z for sentence `text` given its spaCy parse `doc` and its OpenIE triples. Y's
    negation rule and dependency backbone read `parse` (the CoreNLP backend's own) or else
    `doc`'s; Z follows `z_rule` (`prune_text`)."""
    parse = parse if parse is not None else DependencyParse.from_spacy(doc)
    backbone, triple, source = choose_backbone(text, parse, triples, choice,
                                               rng or random.Random(0))
    backbone_text = tidy_spacing(f"{text} {backbone}") if backbone else text
    return Augmented(backbone_text, prune_text(doc, z_rule), triple, source, backbone)

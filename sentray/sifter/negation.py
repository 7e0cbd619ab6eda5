"""The negation rule of Y (issue 36): a backbone never drops a negation that governs its
relation or its arguments in X. One implementation for every backend: it reads X's
`DependencyParse` (spaCy's or CoreNLP's) and a backbone as the set of X's tokens it keeps.

A *cue* is a word of `NEGATION_CUES` ("not", "n't", "no", "never", "none", "nobody", "nothing",
"neither", "nor", "nowhere", "without", ...), except an interjection ("No, I'll go.", tag `UH`),
the number sign ("a No. 43 hole") and the "not" of "not only ... but also", which adds rather
than denies. What a cue negates is
read off X's dependency tree:

- its *anchor*, the word it negates: the verb or adjective of "not", "n't", "never"; the noun
  of "no", "neither"; past an adverb or a comparative ("not precisely into the room" negates
  "into", "no better excuse" negates "excuse"); the conjunct that "nor" brings in; the object
  of "without" (or its head, where the parser hangs "without" under it, as Universal
  Dependencies does); a nominal cue ("nobody", "nothing", "none", ...) is its own anchor;
- its *scope*: the anchor's subtree, less the conjoined clauses that have a subject of their own
  ("He did not come, but she stayed": the "not" does not reach "stayed"), and, where the anchor
  is an argument or a complement ("nobody", "no reason", "neither John nor Mary", "are neither
  explicit nor precise"), the word it belongs to ("There is no reason" -> "is"; past a
  preposition: "conceive of no alternatives" -> "of", "conceive"). Subordinate clauses stay in
  scope ("I don't think you want to go" does not assert "you want to go"): the rule errs
  towards dropping a triple.

A backbone *drops* a cue when it keeps a content word of the cue's scope (not punctuation, not a
function word by its Penn tag, not another cue) and not the cue. An OpenIE triple that drops one
is discarded (`drops_negation`); the dependency backbone, which is built here from X's tokens,
carries the cues instead (`carry_negations`). Why the one is dropped and the other carried:
docs/sifter-views.md.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from sentray.sifter.dependency_parse import DependencyParse

# Z keeps these whatever their tag (sentray.sifter.positives)
NEGATIONS = frozenset({"not", "n't", "no", "nor", "neither", "never", "none", "nobody", "nothing",
                       "nowhere", "noone"})
# "cannot" for a tokenizer that keeps it whole (spaCy's and CoreNLP's split it: "can", "not")
NEGATION_CUES = NEGATIONS | {"without", "cannot"}
NOMINAL_CUES = frozenset({"nobody", "nothing", "none", "nowhere", "noone"})
CORRELATIVE_CUES = frozenset({"neither", "nor"})
# Penn tags of the words whose presence says nothing about which clause a backbone comes from
FUNCTION_TAGS = frozenset({"DT", "PDT", "WDT", "IN", "TO", "CC", "POS", "RP", "EX", "UH",
                           "LS", "SYM", "HYPH", "NFP"})
CLIMBED_TAGS = ("RB", "JJR", "JJS")  # adverbs, comparatives: a cue on one negates its head
NOMINAL_TAGS = ("NN", "PRP", "CD", "WP", "EX")  # prefixes: nouns, pronouns, numbers
OWN_SUBJECT = ("nsubj", "csubj", "expl")  # label prefixes, the same in ClearNLP and UD
WORD = re.compile(r"can(?=not\b)|[a-z0-9]+(?=n't\b)|n't\b|[a-z0-9]+")


def words(text: str) -> list[str]:
    """Lower-case words, split as the parsers split them ("doesn't" -> "does", "n't";
    "cannot" -> "can", "not"); punctuation dropped."""
    return WORD.findall(text.lower().replace("\u2019", "'"))


def _word(parse: DependencyParse, position: int) -> str:
    return parse.tokens[position].text.lower().replace("\u2019", "'")


def is_cue(parse: DependencyParse, position: int) -> bool:
    """A negation cue: a word of `NEGATION_CUES`, not an interjection, not "not only", not the
    number sign "No. 43"."""
    word = _word(parse, position)
    if word not in NEGATION_CUES or parse.tokens[position].tag == "UH":
        return False
    following = [_word(parse, p) for p in range(position + 1, min(position + 3, len(parse)))]
    if word == "no" and following[:1] == ["."] and following[1:2] != [] \
            and following[1][:1].isdigit():
        return False
    return not (word == "not" and following[:1] == ["only"])


def cue_positions(parse: DependencyParse) -> list[int]:
    return [i for i in range(len(parse)) if is_cue(parse, i)]


def anchor(parse: DependencyParse, cue: int) -> int:
    """The word the cue negates (module docstring)."""
    word, head = _word(parse, cue), parse.head(cue)
    if word in NOMINAL_CUES:
        return cue
    if word == "without":
        objects = [c for c in parse.children[cue] if not parse.tokens[c].punct]
        return objects[0] if objects else head
    if word == "nor":  # spaCy hangs "nor" on the first conjunct, UD on the one it brings in
        brought = [c for c in parse.children[head]
                   if c > cue and parse.tokens[c].dep.lower().startswith("conj")]
        return brought[0] if brought else head
    # "not precisely into the room", "no longer", "no better excuse": the adverb's or the
    # comparative's head
    while parse.tokens[head].tag.startswith(CLIMBED_TAGS) and parse.head(head) != head:
        head = parse.head(head)
    return head


def _own_clause(parse: DependencyParse, position: int) -> bool:
    """A conjoined clause with its own subject, or a parataxis: outside its head's negation."""
    dep = parse.tokens[position].dep.lower()
    if dep.startswith("parataxis"):
        return True
    return dep.startswith("conj") and any(
        parse.tokens[c].dep.lower().startswith(OWN_SUBJECT) for c in parse.children[position])


def scope(parse: DependencyParse, cue: int) -> set[int]:
    """The tokens the cue negates (module docstring), the cue included when below its anchor."""
    word, negated = _word(parse, cue), anchor(parse, cue)
    clauses = [c for c in parse.children[negated] if _own_clause(parse, c)]
    region = parse.subtree(negated, without=clauses)
    if word in NOMINAL_CUES or word in CORRELATIVE_CUES or (
            word == "no" and parse.tokens[negated].tag.startswith(NOMINAL_TAGS)):
        above = parse.head(negated)  # the word it is an argument or complement of, past a
        region.add(above)  # preposition ("conceive of no alternatives" -> "conceive")
        while not is_content(parse, above) and parse.head(above) != above:
            above = parse.head(above)
            region.add(above)
    return region


def is_content(parse: DependencyParse, position: int) -> bool:
    token = parse.tokens[position]
    return not (token.punct or token.tag in FUNCTION_TAGS or not words(token.text)
                or _word(parse, position) in NEGATION_CUES)


def dropped_negations(parse: DependencyParse, kept: set[int]) -> list[int]:
    """The cues a backbone made of the tokens `kept` drops: it keeps a content word of the
    cue's scope and not the cue."""
    return [cue for cue in cue_positions(parse) if cue not in kept
            and any(t in kept and is_content(parse, t) for t in scope(parse, cue) - {cue})]


def carry_negations(parse: DependencyParse, kept: set[int]) -> set[int]:
    """`kept` with every cue it would drop, and every kept cue's anchor: the cue, its anchor
    and the path from the anchor up to the kept tokens join ("There is reason" + "no";
    "Neither John saw film" + "nor Mary"; "He left without" + "saying")."""
    kept = set(kept)
    for _ in range(len(parse) + 1):  # each round adds a token: at most one per token
        missing = dropped_negations(parse, kept) + [
            cue for cue in cue_positions(parse) if cue in kept and anchor(parse, cue) not in kept]
        if not missing:
            return kept
        for cue in missing:
            kept.add(cue)
            kept.update(parse.path_up(anchor(parse, cue), kept))
    raise AssertionError("carry_negations did not settle")  # unreachable: kept only grows


def triple_positions(parse: DependencyParse, parts: Sequence[str]) -> set[int]:
    """The tokens of X an OpenIE triple (subject, relation, object; strings) is made of, found
    by their words. A word X has more than once is taken where it is nearest to the triple's
    words X has once; with no such word, every occurrence (the check then errs towards
    dropping the triple)."""
    places: dict[str, list[int]] = {}
    for position, token in enumerate(parse.tokens):
        for word in words(token.text):
            places.setdefault(word, []).append(position)
    wanted = Counter(words(" ".join(parts)))
    fixed = [places[w][0] for w in wanted if len(places.get(w, ())) == 1]
    chosen: set[int] = set()
    for word, count in wanted.items():
        candidates = places.get(word, [])
        if len(candidates) <= count or not fixed:
            chosen.update(candidates)
            continue
        nearest = sorted(candidates, key=lambda p: (min(abs(p - f) for f in fixed), p))
        chosen.update(nearest[:count])
    return chosen


def drops_negation(parse: DependencyParse, parts: Sequence[str]) -> bool:
    """Whether the triple `parts` drops a negation of X (`dropped_negations`)."""
    return bool(dropped_negations(parse, triple_positions(parse, parts)))

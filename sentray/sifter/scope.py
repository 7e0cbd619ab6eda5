"""What Y's backbone must keep of X (issues 36, 43 and 55): the *operators* over the words it
keeps. One implementation for every backend: it reads X's `DependencyParse` (spaCy's or
CoreNLP's) and a backbone as the set of X's tokens it keeps. X must entail the backbone.

An operator is a word that changes what the words under it assert (lexicon:
`sentray.sifter.operator_lexicon`). Four kinds:

- a *negation* ("not", "n't", "no", "never", "nobody", "without", ...; not an interjection
  "No, I'll go.", the number sign "a No. 43 hole" or the "not" of "not only ... but also");
- a *downward-entailing* word ("hardly", "rarely", ...; "few", "fewer", "little" as
  quantifiers, not "a few", "the little house"): "more words" make "a stronger claim";
- an *embedding*: a verb whose clausal complement is not a fact (wish, hope, doubt, deny, say,
  ...; the implicative forget, neglect, fail are downward in it, issue 55: "She forgot to lock
  the door" does not say she locked it), or "if", "unless", "whether", "lest" over its clause;
- a *quantifier phrase* (`sentray.sifter.quantifier_phrases`): "at most", "less than",
  "only", "exactly", ... (downward or not monotone: a "downward" operator) and "at least",
  "more than", "half", "most", ... (upward: a "quantifier" operator), with their numbers.

Each operator has an *anchor* (the word it operates on) and a *scope*, read off X's tree:

- negation and downward words: the anchor is the verb or adjective of "not", "never",
  "hardly", ...; the noun of "no", "few", "neither"; past an adverb or a comparative ("not
  precisely into the room" negates "into", "no better excuse" negates "excuse") and past a
  quantifier to its noun ("not all birds": "birds"); the conjunct that "nor" brings in; the
  object of "without"; a nominal cue ("nobody", "nothing") is its own anchor. The scope is the
  anchor's subtree, less conjoined clauses with their own subject ("He did not come, but she
  stayed"); where the operator quantifies an argument ("nobody", "no reason", "few students",
  "not all birds", "hardly anyone", "neither John nor Mary"), also the predicate it is an
  argument of, with its subtree, past a preposition ("conceive of no alternatives");
- an embedding verb: its complement's subtree; a subordinator: its clause, and, for an
  adverbial clause ("If it rains, the game is off"), the clause it conditions as well.

The rule: a backbone that keeps a content word of an operator's scope (for a quantifier
phrase: its noun's subtree, or any of its words) keeps the operator, all of a phrase's words, and
the path from its anchor up to the words kept ("Not all birds fly." never gives "All birds
fly." or "Birds fly."; "He wished ..." never gives the wished-for clause as a fact). A kept
negation keeps its anchor. Under a negation or a downward word, more words make a weaker claim
("did not buy a single red apple" does not entail "did not buy an apple"), so the backbone keeps
what it keeps of the scope whole: each kept word brings its dependents in the scope, except
articles, punctuation, and the modifiers of the subject of the scope's top when the operator is
not inside it, but for its quantifiers and numbers ("The old man did not buy a single red
apple." -> "Man did not buy single red apple.": negation scopes over the predicate, not over a
definite subject; "Some students did not pass" keeps "some").
Subordinate clauses stay in a negation's scope ("I don't think you want to go" does not
assert "you want to go"): the rule errs towards dropping a triple.

Operators read off a clause's shape (a conditional's antecedent, a report, quoted speech, a
privative adjective): `sentray.sifter.clause_operators`.
An OpenIE triple that needs words it lacks is discarded (`triple_words.drops_scope`); the
dependency backbone, built from X's tokens, is completed instead (`carry_scopes`). Why, and the
audit of what X entails: docs/sifter-views.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sentray.sifter import clause_operators as clauses
from sentray.sifter.dependency_parse import DependencyParse
from sentray.sifter.operator_lexicon import (
    ARTICLE_BOUND,
    ARTICLES,
    CLIMBED_TAGS,
    CORRELATIVE_CUES,
    DETERMINER_CUES,
    DOWNWARD_ADVERBS,
    DOWNWARD_QUANTIFIERS,
    EMBEDDING_MARKS,
    FUNCTION_TAGS,
    NEGATION_CUES,
    NEGATIVE_LEMMAS,
    NOMINAL_CUES,
    OWN_SUBJECT,
    QUANTIFIER_WORDS,
    WORD,
    is_nominal,
    is_noun,
    stems,
)
from sentray.sifter.quantifier_phrases import phrase_anchor, quantifier_phrases
from sentray.sifter.sentence_units import needed_words

Kind = Literal["negation", "downward", "embedding", "quantifier"]
CLOSED_KINDS = ("negation", "downward")  # the kinds whose scope a backbone keeps whole


@dataclass(frozen=True)
class Operator:
    trigger: int  # the operator's (first) word
    anchor: int  # the word it operates on
    kind: Kind
    words: tuple[int, ...] = ()  # a quantifier phrase's words, numbers included; () for one word


def words(text: str) -> list[str]:
    """Lower-case words, split as the parsers split them ("doesn't" -> "does", "n't";
    "cannot" -> "can", "not"); punctuation dropped."""
    return WORD.findall(text.lower().replace("\u2019", "'"))


def _word(parse: DependencyParse, position: int) -> str:
    return parse.word(position)


def _label(parse: DependencyParse, position: int) -> str:
    return parse.label(position)


def is_cue(parse: DependencyParse, position: int) -> bool:
    """A negation cue: a word of `NEGATION_CUES`, not an interjection, not "not only", not the
    "or not" of "whether or not", not the number sign "No. 43"."""
    word = _word(parse, position)
    if word not in NEGATION_CUES or parse.tokens[position].tag == "UH":
        return False
    following = [_word(parse, p) for p in range(position + 1, min(position + 3, len(parse)))]
    if word == "no" and following[:1] == ["."] and following[1:2] != [] \
            and following[1][:1].isdigit():
        return False
    if word == "not" and position and _word(parse, position - 1) == "or" and any(
            _word(parse, p) == "whether" for p in range(position)):
        return False  # "whether or not": no claim is denied
    return not (word == "not" and following[:1] == ["only"])


def is_downward(parse: DependencyParse, position: int) -> bool:
    """A downward-entailing word: "hardly", "rarely", ...; "few", "fewer", "little" unless an
    article or "quite" comes first ("a few", "the little house", "quite a few")."""
    word = _word(parse, position)
    if word in DOWNWARD_ADVERBS:
        return parse.tokens[position].tag != "UH"
    if word not in DOWNWARD_QUANTIFIERS:
        return False
    return position == 0 or _word(parse, position - 1) not in ARTICLES | {"quite"}


def anchor(parse: DependencyParse, cue: int) -> int:
    """The word a negation or downward word operates on (module docstring)."""
    word, head = _word(parse, cue), parse.head(cue)
    if word in NOMINAL_CUES or (word in DOWNWARD_QUANTIFIERS and not is_noun(parse, head)):
        return cue  # "nothing", "Little is known"
    if word == "without":
        objects = [c for c in parse.children[cue] if not parse.tokens[c].punct]
        return objects[0] if objects else head
    if word == "nor":  # spaCy hangs "nor" on the first conjunct, UD on the one it brings in
        brought = [c for c in parse.children[head]
                   if c > cue and _label(parse, c).startswith("conj")]
        return brought[0] if brought else head
    # "not precisely into the room", "no longer", "no better excuse": the adverb's or the
    # comparative's head; "not all birds" (UD hangs "not" on "all"), "not less than 0.5 mg":
    # the quantifier's or the number's noun; "was not adapted" (spaCy hangs "not" on "was"):
    # the auxiliary's verb; "is not decisive in everyday life": the copula's clause
    while parse.head(head) != head and (
            parse.tokens[head].tag.startswith(CLIMBED_TAGS)
            or ((_word(parse, head) in QUANTIFIER_WORDS or parse.tokens[head].tag == "CD")
                and is_noun(parse, parse.head(head)))
            or _label(parse, head).startswith(("aux", "cop"))
            or (_label(parse, head) in ("acomp", "attr") and word not in DETERMINER_CUES)):
        head = parse.head(head)
    return head


def operators(parse: DependencyParse) -> list[Operator]:
    """Every operator of X, in sentence order (module docstring)."""
    found, in_phrase = [], set()
    phrases = {span[0]: (span, downward) for span, downward in quantifier_phrases(parse)}
    for position, token in enumerate(parse.tokens):
        if position in phrases:
            span, downward = phrases[position]
            in_phrase.update(span)
            found.append(Operator(position, phrase_anchor(parse, span),
                                  "downward" if downward else "quantifier", tuple(span)))
        elif position in in_phrase:
            continue
        elif (verb := clauses.antecedent(parse, position)) is not None:  # "if", "Should ..."
            found += [Operator(position, verb, "embedding"), Operator(position, verb, "downward")]
        elif (reported := clauses.reported_clause(parse, position)) is not None:  # ", he said,"
            found.append(Operator(position, reported, "embedding"))
        elif clauses.is_privative(parse, position):  # "the former Judy Chapman"
            found.append(Operator(position, parse.head(position), "quantifier", (position,)))
        elif is_cue(parse, position):
            found.append(Operator(position, anchor(parse, position), "negation"))
        elif is_downward(parse, position):
            found.append(Operator(position, anchor(parse, position), "downward"))
        elif token.tag.startswith("VB") and (
                complements := clauses.clause_complements(parse, position)):
            kind = "downward" if stems(parse, position) & NEGATIVE_LEMMAS else "embedding"
            found.extend(Operator(position, c, kind) for c in complements)
        elif _word(parse, position) in EMBEDDING_MARKS and parse.head(position) != position \
                and _label(parse, position).startswith("mark"):
            found.append(Operator(position, parse.head(position), "embedding"))
    return found


def operator_words(parse: DependencyParse) -> set[int]:
    """The words of X's operators (a quantifier phrase's "at" is one, not a stranded preposition)."""
    return {w for op in operators(parse) for w in (op.trigger, *op.words)}


def own_clause(parse: DependencyParse, position: int) -> bool:
    """A conjoined clause with its own subject, or a parataxis: outside its head's operators."""
    label = _label(parse, position)
    if label.startswith("parataxis"):
        return True
    return label.startswith("conj") and any(
        _label(parse, c).startswith(OWN_SUBJECT) for c in parse.children[position])


def _clause(parse: DependencyParse, top: int) -> set[int]:
    """`top`'s subtree less its conjoined clauses with a subject of their own, and the
    conjunction before one ("but" of "He did not come, but she stayed"; UD hangs it on the
    conjunct already)."""
    own = [c for c in parse.children[top] if own_clause(parse, c)]
    links = [c for c in parse.children[top] if _label(parse, c) in ("cc", "punct")
             and any(o > c for o in own)]
    return parse.subtree(top, without=own + links)


def _quantifies_argument(parse: DependencyParse, op: Operator) -> bool:
    word = _word(parse, op.trigger)
    if word in NOMINAL_CUES | CORRELATIVE_CUES | DOWNWARD_QUANTIFIERS:
        return True
    if op.words:  # "at most three students", "only a handful of soldiers"
        return is_nominal(parse, op.anchor)
    following = _word(parse, op.trigger + 1) if op.trigger + 1 < len(parse) else ""
    return is_nominal(parse, op.anchor) and (
        word == "no" or (op.kind == "downward" and word in DOWNWARD_ADVERBS)
        or following in QUANTIFIER_WORDS | {"a", "an", "one", "single"})  # "not all", "not
    # every", "not many", "not a single letter": the predicate is negated too


def scope_top(parse: DependencyParse, op: Operator) -> int:
    """The highest word of the operator's scope: its anchor, or the predicate its argument
    belongs to (past a preposition), or the clause an adverbial clause conditions."""
    if op.kind == "quantifier":
        return op.anchor
    if op.kind == "embedding":
        conditions = (_label(parse, op.anchor).startswith("advcl")
                      and _word(parse, op.trigger) in EMBEDDING_MARKS) \
            or clauses.antecedent(parse, op.trigger) is not None
        return parse.head(op.anchor) if conditions else op.anchor
    top = op.anchor
    if _quantifies_argument(parse, op):
        while parse.head(top) != top:
            top = parse.head(top)
            if is_content(parse, top):
                break
    return top


def scope(parse: DependencyParse, op: Operator) -> set[int]:
    """The tokens under the operator (module docstring); an embedding's complement whole ("said
    the injury was severe but the youth was in good condition": both said)."""
    complement = op.kind == "embedding" or parse.head(op.anchor) == op.trigger != op.anchor
    region = (parse.subtree(op.anchor) if complement else _clause(parse, op.anchor)) | set(op.words)
    top = scope_top(parse, op)
    if top != op.anchor:
        region |= _clause(parse, top)
    return region


def _closed(parse: DependencyParse, op: Operator, region: set[int]) -> set[int]:
    """The words of a downward scope a kept word brings with it: all but articles,
    punctuation and the modifiers of the scope top's subject when the operator is not in it
    (its quantifiers and numbers aside)."""
    top = scope_top(parse, op)
    outside = set()
    for child in parse.children[top]:
        if _label(parse, child).startswith(OWN_SUBJECT):
            subject = parse.subtree(child)
            if not {op.trigger, *op.words} & subject:  # its head word, numbers and
                # quantifiers stay: "she" of "she did not come", "any water"; a quantifier
                # phrase in the subject ("At most two of the lamps") keeps it whole
                outside |= {t for t in subject - {child}
                            if not (is_content(parse, t) and _word(parse, t) in QUANTIFIER_WORDS
                                    or parse.tokens[t].tag == "CD")}
    return {t for t in region - outside if not parse.tokens[t].punct
            and not (_word(parse, t) in ARTICLES and parse.tokens[t].tag == "DT")}


def is_content(parse: DependencyParse, position: int) -> bool:
    token = parse.tokens[position]
    if _word(parse, position) in QUANTIFIER_WORDS:
        return True
    return not (token.punct or token.tag in FUNCTION_TAGS or not words(token.text)
                or _word(parse, position) in NEGATION_CUES)


def _connect(parse: DependencyParse, kept: set[int], positions) -> None:
    """Add to `kept` the path from each of `positions` up to the kept words."""
    for position in list(positions):
        if parse.head(position) != position:
            kept.update(parse.path_up(parse.head(position), kept))


def carry_scopes(parse: DependencyParse, kept: set[int]) -> set[int]:
    """`kept` with what the rule of the module docstring adds: for every operator whose scope
    it keeps a content word of (or, for a negation, the cue itself; for a quantifier phrase, any
    of its words), the operator and the path from its anchor up to the kept words; a quantifier
    phrase whole, each of its words and the kept words of its scope joined to the rest; under a
    negation or a downward word, the dependents of each kept word in the scope (`_closed`); and
    what the kept words need to make a sentence (`sentence_units.needed_words`)."""
    kept = set(kept) | bound_articles(parse, kept)
    found = [(op, scope(parse, op)) for op in operators(parse)]
    closed = {op: _closed(parse, op, region) for op, region in found if op.kind in CLOSED_KINDS}
    for _ in range(len(parse) + 1):  # each round adds a token: at most one per token
        before = len(kept)
        for op, region in found:
            touched = any(t in kept and t != op.trigger and is_content(parse, t) for t in region)
            if not touched and not (op.kind == "negation" and op.trigger in kept) \
                    and not kept & set(op.words):
                continue
            kept.add(op.trigger)
            kept.update(op.words)
            kept.update(parse.path_up(op.anchor, kept))
            if op.words:  # "At" hangs on the verb, "most" on the number: both joined
                _connect(parse, kept, set(op.words) | {t for t in region & kept
                                                       if is_content(parse, t)})
            if op.kind in CLOSED_KINDS:
                kept.update(c for t in kept & closed[op] for c in parse.children[t]
                            if c in closed[op])
        kept |= bound_articles(parse, kept)
        kept |= needed_words(parse, kept) | clauses.disjuncts(parse, kept)
        if len(kept) == before:
            return kept
    raise AssertionError("carry_scopes did not settle")  # unreachable: kept only grows


def binds_article(previous: str, word: str) -> bool:
    """Whether the article `previous` belongs to the quantifier `word` (`ARTICLE_BOUND`)."""
    return word.lower() in ARTICLE_BOUND.get(previous.lower(), ())


def bound_articles(parse: DependencyParse, kept: set[int]) -> set[int]:
    """The articles of the "a few", "a little" whose quantifier is in `kept`."""
    return {t - 1 for t in kept if t > 0 and binds_article(_word(parse, t - 1), _word(parse, t))}


def missing_words(parse: DependencyParse, kept: set[int]) -> list[int]:
    """The words a backbone made of the tokens `kept` lacks (`carry_scopes`), articles and
    punctuation aside ("did not go to store" lacks none of "He did not go to the store.";
    "never got business" lacks the "into" of "never got into the business")."""
    bound = bound_articles(parse, kept)
    return sorted(t for t in carry_scopes(parse, kept) - kept if not parse.tokens[t].punct
                  and (t in bound or not (_word(parse, t) in ARTICLES
                                          and parse.tokens[t].tag == "DT")))

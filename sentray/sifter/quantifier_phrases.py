"""Quantifier phrases (issue 55): several words that quantify one noun together, numbers
included ("at most three students", "less than half of the voters", "only a handful of
soldiers"), found in X's `DependencyParse` on its words and Penn tags, the same for spaCy's
parse and CoreNLP's. The scope rule (`sentray.sifter.scope`) makes each an operator: a backbone
that keeps its noun keeps all its words; a downward or non-monotone one keeps its scope whole.

Why this module exists: "at most" slipped past the rule of issue 43, which knew one-word
operators only and counted "most" as a content word. spaCy hangs the "At" of "At most three
students solved the final problem." on the verb as a `prep` with no object and "most" on the
number, and "at" is a function word (Penn `IN`), so the triple "most three students | solved |
the final problem" lacked nothing the rule knew of, and "Most three students solved the final
problem." (another claim) was appended.
"""

from __future__ import annotations

from sentray.sifter.dependency_parse import DependencyParse
from sentray.sifter.operator_lexicon import CLIMBED_TAGS, is_nominal, is_noun

# The downward and non-monotone ones keep their scope whole, like a
# negation ("At most three students solved the final problem." does not entail "At most three
# students solved a problem."); the upward ones are kept whole with their noun ("at least", not
# "least"). "only" and "exactly" are not monotone either way: more words or fewer, the claim
# changes, so their scope is kept whole.
DOWNWARD_PHRASES = frozenset({
    ("at", "most"), ("no", "more", "than"), ("not", "more", "than"), ("fewer", "than"),
    ("less", "than"), ("up", "to"), ("only",), ("exactly",)})
UPWARD_PHRASES = frozenset({
    ("at", "least"), ("no", "fewer", "than"), ("no", "less", "than"), ("not", "fewer", "than"),
    ("not", "less", "than"), ("more", "than"), ("half",), ("a", "third"), ("a", "quarter"),
    ("two", "thirds"), ("most",), ("almost", "all"), ("almost", "every"), ("nearly", "all"),
    ("nearly", "every"), ("almost", "half"), ("nearly", "half"),
    # approximators, quantifiers only before a quantity ("about half his legacy")
    ("about",), ("around",), ("roughly",), ("approximately",), ("nearly",), ("almost",)})
NEEDS_QUANTITY = frozenset({"than", "to", "about", "around", "roughly", "approximately",
                            "nearly", "almost"})
QUANTIFIER_PHRASES = DOWNWARD_PHRASES | UPWARD_PHRASES
NUMBER_NOUNS = frozenset({"dozen", "hundred", "thousand", "million", "billion", "score"})
LONGEST_PHRASE = max(map(len, QUANTIFIER_PHRASES))
def phrase_at(parse: DependencyParse, position: int) -> tuple[str, ...] | None:
    """The quantifier phrase (`QUANTIFIER_PHRASES`) that starts at `position`, the longest; None
    where none does, or where the words are not a quantifier there: "than" and "up to" need a
    number or a quantifier after them ("more than three", "less than half", "up to 20", not
    "taller than John", "walked up to the house"); "a third" and "two thirds" need "of"; "most"
    is not the superlative ("the most", "most beautiful"); "half", "only" and "exactly" are
    not an adverb of degree or an adjective ("half asleep", "the only child")."""
    following = [parse.word(p) for p in range(position, min(position + LONGEST_PHRASE + 2,
                                                               len(parse)))]
    for size in range(LONGEST_PHRASE, 0, -1):
        phrase = tuple(following[:size])
        if len(phrase) < size or phrase not in QUANTIFIER_PHRASES:
            continue
        after = position + size
        previous = parse.word(position - 1) if position else ""
        tag = parse.tokens[position].tag
        if phrase[-1] in NEEDS_QUANTITY and not _quantity_at(parse, after):
            continue
        if phrase in {("a", "third"), ("a", "quarter"), ("two", "thirds")} \
                and following[size:size + 1] != ["of"]:
            continue
        if phrase == ("most",) and (previous == "the" or not tag.startswith(("JJS", "DT",
                                                                                "NN", "PDT"))):
            continue
        if phrase == ("half",) and not tag.startswith(("NN", "PDT", "DT", "JJ")):
            continue
        if phrase in {("only",), ("exactly",)} and (not tag.startswith("RB")
                                                   or previous in ("not", "if")):
            continue
        return phrase
    return None


def _quantity_at(parse: DependencyParse, position: int) -> bool:
    """A number, a quantifier phrase, or "a"/"an" before a number, a noun or an adjective, at
    `position` ("more than a fair risk")."""
    if position >= len(parse):
        return False
    if parse.tokens[position].tag == "CD" or phrase_at(parse, position) is not None:
        return True
    return parse.word(position) in ("a", "an") and position + 1 < len(parse) and \
        parse.tokens[position + 1].tag.startswith(("CD", "NN", "JJ"))


def _number(parse: DependencyParse, position: int) -> bool:
    return parse.tokens[position].tag == "CD" or parse.label(position) == "nummod" \
        or parse.word(position) in NUMBER_NOUNS


def phrase_span(parse: DependencyParse, position: int, phrase: tuple[str, ...]) -> list[int]:
    """The words of the quantifier phrase `phrase` at `position`, with the phrases and numbers
    right after it ("less than" + "half", "at most" + "three", "more than" + "a hundred", "half"
    + "dozen")."""
    span = list(range(position, position + len(phrase)))
    while span[-1] + 1 < len(parse):
        after = span[-1] + 1
        more = phrase_at(parse, after)
        if more is not None:
            span.extend(range(after, after + len(more)))
        elif _number(parse, after) or (parse.word(after) in ("a", "an") and after + 1 < len(parse)
                                       and _number(parse, after + 1)):  # "a hundred", "a dozen"
            span.append(after)
        else:
            return span
    return span


def phrase_anchor(parse: DependencyParse, span: list[int]) -> int:
    """The word a quantifier phrase operates on: the noun one of its words modifies ("at most
    three students": "students"); else its own nominal word ("less than half of the voters":
    "half"); else the head of its top word, past adverbs ("only wanted", "only then did he
    decide": "decide")."""
    tops = [t for t in span if parse.head(t) not in span or parse.head(t) == t]
    for top in tops:
        if parse.head(top) != top and is_noun(parse, parse.head(top)):
            return parse.head(top)
    for top in tops:
        if is_nominal(parse, top):
            return top
    head = parse.head(tops[0])  # "Only then did he decide": past the adverb to "decide"
    while parse.head(head) != head and parse.tokens[head].tag.startswith(CLIMBED_TAGS):
        head = parse.head(head)
    return head


def quantifier_phrases(parse: DependencyParse) -> list[tuple[list[int], bool]]:
    """(the phrase's words, whether it is downward or not monotone) of every quantifier phrase
    of X, in sentence order; phrases that follow each other are one ("less than half")."""
    found, position = [], 0
    while position < len(parse):
        phrase = phrase_at(parse, position)
        if phrase is None:
            position += 1
            continue
        span = phrase_span(parse, position, phrase)
        found.append((span, phrase in DOWNWARD_PHRASES))
        position = span[-1] + 1
    return found

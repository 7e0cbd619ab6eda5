"""An OpenIE triple read as X's tokens, for Y's rules (issues 36 and 43): the tokens of X it is
made of (`triple_positions`), whether its parts keep X's order (`in_order`), and whether it
keeps what the scope rule needs (`drops_scope`, `sentray.sifter.scope`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from sentray.sifter.dependency_parse import DependencyParse
from sentray.sifter.scope import missing_words, words


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


def in_order(parse: DependencyParse, parts: Sequence[str]) -> bool:
    """Whether the triple's parts come in X's order: each part's first word of X no earlier
    than the part before's ("They can not be remembered | few students are so faceless" of
    "Few students are so faceless that they cannot be remembered" is not: it states the
    result clause on its own)."""
    chosen, used, firsts = sorted(triple_positions(parse, parts)), set(), []
    for part in parts:  # each word of X serves one part: the first free one from the last part on
        spots = []
        for word in words(part):
            free = [p for p in chosen if p not in used and word in words(parse.tokens[p].text)]
            later = [p for p in free if p >= (firsts[-1] if firsts else 0)]
            if later or free:
                spots.append((later or free)[0])
                used.add(spots[-1])
        if spots:
            firsts.append(min(spots))
    return firsts == sorted(firsts)


def drops_scope(parse: DependencyParse, parts: Sequence[str]) -> bool:
    """Whether the triple `parts` lacks words the rule needs (`missing_words`)."""
    return bool(missing_words(parse, triple_positions(parse, parts)))

"""The meaning audit's labeller (issues 43 and 55): the rubric of docs/sifter-views.md read on
surface words only, no parse, no tagger, no code of `sentray.sifter`. `label(x, backbone)` ->
(entailed / not entailed / contradicts, reasons). experiments/audit_meaning.py runs it on the
audit's rows; issue 55 added the quantifier phrases ("at most", "less than half", ...), the
implicative verbs (forget, manage, neglect) and the words a phrase splits."""

from __future__ import annotations

import re

TOKEN = re.compile(r"[a-z0-9]+(?=n't\b)|n't\b|[a-z0-9]+|[,;:!?()\[\]\"`]|--")
NEGATIONS = frozenset("not n't no never none nobody nothing neither nor nowhere noone without "
                      "cannot".split())
NOMINAL = frozenset("none nobody nothing nowhere noone".split())
DOWNWARD = frozenset("hardly scarcely barely seldom rarely few fewer little".split())
# forms of the verbs whose complement is not stated as a fact, written out (no lemmatizer)
EMBEDDING = frozenset(
    "wish wishes wished wishing hope hopes hoped hoping want wants wanted doubt doubts doubted "
    "deny denies denied fear fears feared believe believes believed think thinks thought suppose "
    "supposed imagine imagined pretend pretended claim claims claimed suspect suspected expect "
    "expects expected wonder wondered ask asked guess guessed dream dreamed assume assumed "
    "allege alleged say says said seem seems seemed appear appears appeared try tries tried "
    "plan planned intend intended refuse refused fail failed fails failing "
    # implicative verbs (issue 55): "forgot to lock the door" does not say it was locked
    "forget forgets forgot forgotten forgetting manage manages managed managing neglect "
    "neglects neglected neglecting".split())
# quantifier phrases (issue 55), written out: the downward or non-monotone ones are read like a
# downward word (their clause kept whole), the upward ones are kept whole with their noun
DOWNWARD_PHRASES = ("at most", "no more than", "not more than", "fewer than", "less than",
                    "up to", "only", "exactly")
UPWARD_PHRASES = ("at least", "no fewer than", "no less than", "not fewer than",
                  "not less than", "more than", "half", "a third", "a quarter", "two thirds",
                  "most", "almost all", "almost every", "nearly all", "nearly every",
                  "almost half", "nearly half")
NUMBER_WORDS = frozenset("a an one two three four five six seven eight nine ten eleven twelve "
                         "fifteen twenty thirty forty fifty hundred thousand million dozen half "
                         "third quarter".split())
DETERMINERS = frozenset("the a an his her their my our its your this that".split())
CONDITIONALS = frozenset("if unless whether lest".split())
BREAKS = frozenset("and but or so yet because although though while whereas when whenever where "
                   "if unless since until after before that which who whom whose than whether "
                   "lest".split())
HARD_BREAKS = frozenset({";", "but", "and", "or", "yet", "so", "--"})
ARTICLES = frozenset({"a", "an", "the"})
STOPWORDS = frozenset(
    "a an the of in on at to for by with from as is are was were be been being am do does did "
    "has have had it its he she they we i you him her them us me his their our my your this "
    "these those there here s".split())
INSERTABLE = frozenset("is are was were be has have had of".split())  # OpenIE's copulas
LABELS = ("entailed", "not entailed", "contradicts")  # from best to worst


def worse(verdict: str, other: str) -> str:
    return max(verdict, other, key=LABELS.index)


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text.lower().replace("\u2019", "'").replace("cannot", "can not"))


def is_word(token: str) -> bool:
    return token[0].isalnum() or token == "n't"


def segments(xs: list[str]) -> list[int]:
    """The clause segment of each token of X: a new one at punctuation and at clause words."""
    out, current = [], 0
    for token in xs:
        if not is_word(token) or token in BREAKS:
            current += 1
        out.append(current)
    return out


def align(xs: list[str], bs: list[str]) -> list[int] | None:
    """X's positions of the backbone's words, matched in order, one word allowed out of place
    ("Gilborn put again on his coat") and OpenIE's copulas allowed where X has none; None when
    they are not X's words in X's order."""
    for displaced in [None, *range(len(bs))]:
        kept, at = [], 0
        for j, word in enumerate(bs):
            if j == displaced:
                continue
            found = next((i for i in range(at, len(xs)) if xs[i] == word), None)
            if found is None:
                if word in INSERTABLE:
                    continue
                break
            kept.append(found)
            at = found + 1
        else:
            if displaced is not None:
                if bs[displaced] not in xs:
                    continue
                kept.append(next(i for i, w in enumerate(xs) if w == bs[displaced]
                                 and i not in kept))
            return kept
    return None


def _cue(xs: list[str], i: int) -> str | None:
    word = xs[i]
    before = xs[i - 1] if i else ""
    after = xs[i + 1] if i + 1 < len(xs) else ""
    if word in NEGATIONS and not (word == "no" and after[:1].isdigit()) and not (
            word == "not" and after == "only"):  # "not only ... but also" adds
        return "negation"
    if word in DOWNWARD and not (word in ("few", "little") and before in ("a", "the", "quite")):
        return "downward"
    return None


def phrases(xs: list[str]) -> list[tuple[int, int, str]]:
    """(start, end, "downward" | "upward") of X's quantifier phrases, longest first at each
    word, with the numbers after them; on surface words: "than" and "up to" need a number
    after them, "a third" "of", "only" no determiner before it ("the only child") nor "not" or
    "if", "most" no "the" or "at" before it."""
    found, i = [], 0
    written = [(tuple(p.split()), "downward") for p in DOWNWARD_PHRASES] + \
        [(tuple(p.split()), "upward") for p in UPWARD_PHRASES]
    while i < len(xs):
        before = xs[i - 1] if i else ""
        for words, kind in sorted(written, key=lambda w: -len(w[0])):
            end = i + len(words)
            after = xs[end] if end < len(xs) else ""
            if tuple(xs[i:end]) != words:
                continue
            if words[-1] in ("than", "to") and not (after[:1].isdigit() or after in NUMBER_WORDS):
                continue
            if words in (("a", "third"), ("a", "quarter"), ("two", "thirds")) and after != "of":
                continue
            if words == ("only",) and before in DETERMINERS | {"not", "if"}:
                continue
            if words == ("most",) and before in ("the", "at"):
                continue
            while end < len(xs) and (xs[end][:1].isdigit() or xs[end] in NUMBER_WORDS) and not (
                    xs[end] in ("a", "an") and not (end + 1 < len(xs) and (
                        xs[end + 1][:1].isdigit() or xs[end + 1] in NUMBER_WORDS))):
                end += 1
            found.append((i, end, kind))
            i = end - 1
            break
        i += 1
    return found


def phrase_verdicts(xs: list[str], keep: set[int], seg: list[int], content) -> list[tuple[str, str]]:
    """(label, reason) for each quantifier phrase of X the backbone (X's positions `keep`)
    splits, loses with its noun kept, or, downward, keeps with a word under it dropped."""
    found = []
    for start, end, kind in phrases(xs):
        span = range(start, end)
        whole, some = all(p in keep for p in span), any(p in keep for p in span)
        name = " ".join(xs[start:end])
        # "than" is a clause word: the phrase's clause runs on from its last word
        clause = [p for p in range(len(xs)) if seg[p] in (seg[start], seg[end - 1])
                  and is_word(xs[p])]
        if some and not whole:
            found.append(("not entailed", f"splits {name!r}"))
        elif kind == "upward" and not some:
            noun = next((p for p in clause if p >= end and xs[p] not in STOPWORDS), None)
            if noun is not None and noun in keep:
                found.append(("not entailed", f"loses {name!r}"))
        elif kind == "downward":
            first = clause[0] if clause else start
            region = clause if start <= first + 1 else [p for p in clause if p >= start]
            region = [p for p in region if p not in span]
            if not some and content(region):
                found.append(("not entailed", f"loses {name!r}"))
            elif whole:
                lost = [xs[p] for p in region if p not in keep and xs[p] not in ARTICLES | BREAKS]
                if lost:
                    found.append(("not entailed", f"drops {' '.join(lost)!r} under {name!r}"))
    return found


def label(x: str, backbone: str) -> tuple[str, list[str]]:
    """(label, reasons) of a backbone against X by the rubric (module docstring)."""
    if not backbone:
        return "entailed", ["no backbone: Y = X"]
    xs, bs = tokens(x), [t for t in tokens(backbone) if is_word(t)]
    kept = align(xs, bs)
    if kept is None:
        return "not entailed", ["words out of X's order or not in X"]
    keep, seg, reasons, verdict = set(kept), segments(xs), [], "entailed"

    def content(positions) -> bool:
        return any(p in keep and is_word(xs[p]) and xs[p] not in STOPWORDS | NEGATIONS
                   for p in positions)

    for i in range(len(xs)):
        kind = _cue(xs, i)
        if kind is None:
            continue
        clause = [p for p in range(len(xs)) if seg[p] == seg[i] and is_word(xs[p])]
        first = clause[0] if clause else i
        # a nominal cue, or one that opens its clause ("Not all ...", "Few ..."): all of it
        region = clause if xs[i] in NOMINAL or i <= first + 1 else [p for p in clause if p >= i]
        if i not in keep and content(region):
            verdict = worse(verdict, "contradicts" if kind == "negation" else "not entailed")
            reasons.append(f"loses {xs[i]!r}")
        elif i in keep:
            lost = [xs[p] for p in region if p not in keep and xs[p] not in ARTICLES | BREAKS]
            if lost:
                verdict = worse(verdict, "not entailed")
                reasons.append(f"drops {' '.join(lost)!r} under {xs[i]!r}")
    for verdict_here, reason in phrase_verdicts(xs, keep, seg, content):
        verdict = worse(verdict, verdict_here)
        reasons.append(reason)
    for i, word in enumerate(xs):
        if word not in EMBEDDING | CONDITIONALS or i in keep:
            continue
        if word in ("if", "unless", "lest"):  # the condition and what it conditions: up to
            hard = [p for p, t in enumerate(xs) if t in HARD_BREAKS]  # the nearest ";", "but"
            start = max([p for p in hard if p < i], default=-1) + 1
            end = min([p for p in hard if p > i], default=len(xs))
            region = range(start, end)
        else:  # the rest of its clause, and the next one after "that" ("doubt that it ...")
            follows = xs[i + 1] if i + 1 < len(xs) else ""
            region = [p for p in range(i + 1, len(xs))
                      if seg[p] == seg[i] or (follows == "that" and seg[p] == seg[i] + 1)]
        if content(region):
            verdict = worse(verdict, "not entailed")
            reasons.append(f"states what is under {word!r} as a fact")
    for i in range(len(xs) - 1):  # "not only": both or neither ("It is not Europe.")
        if xs[i:i + 2] == ["not", "only"] and (i in keep) != (i + 1 in keep):
            verdict = worse(verdict, "not entailed")
            reasons.append("splits 'not only'")
    return verdict, reasons



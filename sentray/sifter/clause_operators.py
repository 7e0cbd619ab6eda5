"""Operators read off the shape of X's tree rather than a cue's scope (issue 55's second
labellings): a conditional's antecedent, a reporting clause, a privative adjective. Read off X's
`DependencyParse` of either parser by `sentray.sifter.scope.operators`.

- *A conditional's antecedent is a downward context.* "If A and B, C" does not entail "If A, C"
  (the weaker condition makes the stronger claim), nor "If it rains heavily, the roof leaks" "If
  it rains, the roof leaks". The antecedent of an adverbial "if" clause, or of an inverted one
  ("Should any slave change his mind and request to leave, ...", "Had I known the truth, ...",
  "Were it not for the rain, ..."), is kept whole by a backbone that keeps any of it, as a
  negation's scope is; the conditioned clause stays an embedding's scope (kept with its "if").
  "unless" is not downward in its clause ("C unless A" is "if not A, C"; a weaker A, a weaker
  claim), nor "if" in a complement ("I wonder if he came"), nor "when".
- *A reporting clause set off inside, before or after what it reports* ("Mr. Kennedy, Mr. White
  believes, had mastered politics"; 'Ritter proceeded, "You now emerge into a new epoch"'; "...,
  Robinson related, he stopped the bus"; "..., Reama said here yesterday."): the parser hangs
  the reporting verb under the reported clause (`parataxis`, `ccomp` the wrong way round,
  `advcl`, `conj`), so no embedding verb is above it. A verb that governs nothing but its
  subject, adverbs, prepositional phrases and punctuation, set off by a comma or a quotation
  mark, whose head is a verb, is read as an embedding over its head's clause when it is a verb
  of speech or report or stands by quotation marks (after what it reports: a finite verb of
  speech, its subject not needed): a backbone that keeps the reported claim keeps who reports
  it.
- *A privative or modal adjective* ("the former Judy Chapman", "an alleged thief", "a possible
  cause") does not leave its noun's claim standing: "She is the former Judy Chapman" does not
  say she is Chapman. A backbone that keeps the noun keeps the adjective.
- *Speech in quotation marks* is under its verb, whatever the verb ("pronounced",
  "complained"): an embedding.
- *A disjunction* is kept whole by a backbone that keeps one of its disjuncts.
"""

from __future__ import annotations

from sentray.sifter.dependency_parse import DependencyParse
from sentray.sifter.operator_lexicon import (
    COMPLEMENT_LABELS,
    EMBEDDING_LEMMAS,
    SPEECH_LEMMAS,
    stems,
)

CONDITIONAL_MARKS = frozenset({"if"})
INVERTED_CONDITIONALS = frozenset({"should", "had", "were"})  # before their subject
CLAUSE_LABELS = ("advcl", "ccomp")  # spaCy labels an inverted conditional either way
SUBJECTS = ("nsubj", "expl")
PRIVATIVE_ADJECTIVES = frozenset({
    "former", "erstwhile", "onetime", "fake", "false", "counterfeit", "mock", "pseudo",
    "alleged", "supposed", "purported", "reputed", "ostensible", "apparent", "so-called",
    "would-be", "self-styled", "fictitious", "fictional", "imaginary", "possible", "potential",
    "prospective", "probable", "future", "hypothetical", "nominal", "pretended"})


def antecedent(parse: DependencyParse, position: int) -> int | None:
    """The verb of the conditional clause whose "if" or inverted auxiliary is at `position`,
    or None: an "if" marking an adverbial clause, or a "should", "had" or "were" that opens a
    clause before its head and before that clause's subject."""
    word, head = parse.word(position), parse.head(position)
    label = parse.label(position)
    if word in CONDITIONAL_MARKS:  # spaCy may label the clause a `ccomp` of a verb that has
        # its object already: "to consider the properties if the information is to be discussed"
        adverbial = parse.label(head).startswith("advcl") or (
            parse.label(head).startswith("ccomp") and any(
                parse.label(c) in ("dobj", "obj") for c in parse.children[parse.head(head)]))
        return head if label.startswith("mark") and head != position and adverbial else None
    if word not in INVERTED_CONDITIONALS:
        return None
    clause = head if label.startswith(("aux", "cop")) else position  # spaCy: "Were" heads
    if parse.head(clause) == clause or not parse.label(clause).startswith(CLAUSE_LABELS) \
            or parse.head(clause) < clause or min(parse.subtree(clause)) != position:
        return None
    subjects = [c for c in parse.children[clause] if parse.label(c).startswith(SUBJECTS)]
    return clause if subjects and subjects[0] > position else None


REPORTING_LABELS = ("parataxis", "ccomp")
TRAILING_LABELS = ("conj", "advcl")  # spaCy's other guesses: "..., Reama said here yesterday."
SET_OFF = frozenset({",", '"', "``", "''", "\u201c", "\u201d", "--"})
# what a reporting verb may govern besides its subject: "Mr. White firmly believes", "he did
# not say", "so the Court (in effect) now decides"
ONLY_MODIFIERS = ("nsubj", "advmod", "punct", "aux", "neg", "npadvmod", "prep", "obl")


def _only_modifies(parse: DependencyParse, verb: int) -> bool:
    """Whether the verb governs nothing but a subject, adverbs, punctuation, an "as" ("as he
    said") and a pronoun object ("she told him")."""
    return all(parse.label(c).startswith(ONLY_MODIFIERS)
               or (parse.label(c).startswith("mark") and parse.word(c) == "as")
               or (parse.label(c) in ("dobj", "obj", "dative", "iobj")
                   and parse.tokens[c].tag == "PRP") for c in parse.children[verb])


def reported_clause(parse: DependencyParse, position: int) -> int | None:
    """The head of the clause the verb at `position` reports (module docstring), or None."""
    head, label = parse.head(position), parse.label(position)
    if head == position or not label.startswith(REPORTING_LABELS + TRAILING_LABELS) \
            or not parse.tokens[position].tag.startswith("VB") \
            or not parse.tokens[head].tag.startswith(("VB", "MD")) \
            or not _only_modifies(parse, position):
        return None
    reach = parse.subtree(position)
    beside = [t for t in (min(reach) - 2, min(reach) - 1, max(reach) + 1, max(reach) + 2)
              if 0 <= t < len(parse) and parse.tokens[t].punct] + [
        c for c in parse.children[position] if parse.tokens[c].punct]
    set_off = any(parse.word(t) in SET_OFF for t in beside)
    speech = bool(stems(parse, position) & EMBEDDING_LEMMAS)
    if label.startswith(TRAILING_LABELS):  # a finite verb of speech only: "and he said nothing"
        # has an object, "he ran, and smiled" no speech, "Wait for me, I'll be dressed" no tense
        return head if set_off and stems(parse, position) & SPEECH_LEMMAS \
            and parse.tokens[position].tag in ("VBD", "VBZ", "VBP") else None
    if not any(parse.label(c).startswith("nsubj") for c in parse.children[position]):
        return None
    quoted = any(parse.word(t) in SET_OFF - {",", "--"} for t in beside)
    return head if set_off and (speech or quoted) else None


QUOTES = frozenset({'"', "``", "''", "\u201c", "\u201d"})


def quoted_complements(parse: DependencyParse, position: int) -> list[int]:
    """The clausal complements (`ccomp`, `parataxis`) of the verb at `position` that stand in
    quotation marks: what "pronounced", "complained", "cried" report is speech, whatever the
    verb ('"I called the station", Killpath's voice pronounced.')."""
    found = []
    for child in parse.children[position]:
        if not parse.label(child).startswith(REPORTING_LABELS):
            continue
        reach = parse.subtree(child)
        edges = {min(reach), min(reach) - 1, max(reach), max(reach) + 1, max(reach) + 2}
        if any(0 <= t < len(parse) and parse.word(t) in QUOTES for t in edges):
            found.append(child)
    return found


def clause_complements(parse: DependencyParse, verb: int) -> list[int]:
    """An embedding verb's clausal complements, and any verb's quoted speech."""
    quoted = quoted_complements(parse, verb)
    if not stems(parse, verb) & EMBEDDING_LEMMAS:
        return quoted
    return sorted(set(quoted) | {c for c in parse.children[verb]
                                 if parse.label(c).startswith(COMPLEMENT_LABELS)})


def disjuncts(parse: DependencyParse, kept: set[int]) -> set[int]:
    """The words of every disjunction of which `kept` keeps one disjunct: all its disjuncts
    and its "or" ("His bridgework or his plates feel loose" does not say his bridgework does).
    spaCy chains the conjuncts and hangs "or" on the first; UD hangs both on the first."""
    needed: set[int] = set()
    for first in range(len(parse)):
        if parse.label(first).startswith("conj"):
            continue
        members, frontier = {first}, [first]
        while frontier:
            nxt = [c for m in frontier for c in parse.children[m]
                   if parse.label(c).startswith("conj")]
            members.update(nxt)
            frontier = nxt
        links = {c for m in members for c in parse.children[m]
                 if parse.label(c).startswith(("cc", "preconj"))}
        ors = [c for c in links if parse.word(c) == "or" and any(m > c for m in members)]
        if len(members) > 1 and members & kept and ors:  # an "or" before a disjunct
            needed |= members | {c for c in links if parse.word(c) in ("or", "either")}
    return needed - kept


def is_privative(parse: DependencyParse, position: int) -> bool:
    """A privative or modal adjective (`PRIVATIVE_ADJECTIVES`) modifying a noun."""
    head = parse.head(position)
    return (parse.word(position) in PRIVATIVE_ADJECTIVES and head != position
            and parse.label(position) == "amod" and parse.tokens[head].tag.startswith("NN"))

"""Conditional antecedents and privative modifiers: two more operators of Y's backbone (issue
55's second labelling), read off X's `DependencyParse` of either parser by
`sentray.sifter.scope.operators`.

- *A conditional's antecedent is a downward context.* "If A and B, C" does not entail "If A, C"
  (the weaker condition makes the stronger claim), nor "If it rains heavily, the roof leaks" "If
  it rains, the roof leaks". The antecedent of an adverbial "if" clause, or of an inverted one
  ("Should any slave change his mind and request to leave, ...", "Had I known the truth, ...",
  "Were it not for the rain, ..."), is kept whole by a backbone that keeps any of it, as a
  negation's scope is; the conditioned clause stays an embedding's scope (kept with its "if").
  "unless" is not downward in its clause ("C unless A" is "if not A, C"; a weaker A, a weaker
  claim), nor "if" in a complement ("I wonder if he came"), nor "when".
- *A privative or modal adjective* ("the former Judy Chapman", "an alleged thief", "a possible
  cause") does not leave its noun's claim standing: "She is the former Judy Chapman" does not
  say she is Chapman. A backbone that keeps the noun keeps the adjective.
"""

from __future__ import annotations

from sentray.sifter.dependency_parse import DependencyParse

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
    if word in CONDITIONAL_MARKS:
        return head if label.startswith("mark") and head != position \
            and parse.label(head).startswith("advcl") else None
    if word not in INVERTED_CONDITIONALS:
        return None
    clause = head if label.startswith(("aux", "cop")) else position  # spaCy: "Were" heads
    if parse.head(clause) == clause or not parse.label(clause).startswith(CLAUSE_LABELS) \
            or parse.head(clause) < clause or min(parse.subtree(clause)) != position:
        return None
    subjects = [c for c in parse.children[clause] if parse.label(c).startswith(SUBJECTS)]
    return clause if subjects and subjects[0] > position else None


def is_privative(parse: DependencyParse, position: int) -> bool:
    """A privative or modal adjective (`PRIVATIVE_ADJECTIVES`) modifying a noun."""
    head = parse.head(position)
    return (parse.word(position) in PRIVATIVE_ADJECTIVES and head != position
            and parse.label(position) == "amod" and parse.tokens[head].tag.startswith("NN"))

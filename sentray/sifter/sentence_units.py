"""Words of X that stand or fall together in a backbone, so that the backbone is a sentence
(issue 55). One implementation for both parsers: it reads X's `DependencyParse` (spaCy's
ClearNLP labels or CoreNLP's Universal Dependencies) and a backbone as the set of X's tokens it
keeps.

The units, each read off the tree in both label schemes:

- *a preposition and its object*: spaCy hangs the object under the preposition (`pobj`,
  `pcomp`), UD the preposition under the object (`case`); a backbone keeps both or neither
  ("Cat sat on." and "Cat sat mat." become "Cat sat on mat."). A preposition with no object in
  X at all (a stranded "in" of "the house he lived in") is dropped from a dependency backbone
  (`stranded`);
- *an infinitive and its "to"*: the `TO` child (`aux` in spaCy, `mark` in UD) of a kept verb,
  and the verb of a kept "to" ("He pretended be." lacked it);
- *a control or raising verb and its complement* (`xcomp`: pretend to, forget to, seem to,
  manage to): a kept verb keeps its open complement, and that complement its "to" and its
  object ("They tried to reach." becomes "They tried to reach summit.");
- *a copula and its predicate*: spaCy's "be" keeps its `acomp`/`attr` ("He pretended to be
  asleep", not "... to be"), UD's predicate its `cop`;
- *a phrasal verb and its particle* ("picked up the telephone", not "picked the telephone":
  spaCy `prt`, UD `compound:prt`);
- *a comparative and its "than"*: a kept adjective or adverb keeps its "more"/"less" and a
  comparative its "than" phrase, whole ("more expensive than forced air systems", not
  "expensive"; not "more expensive than systems");
- *a subordinate clause, its subject and its subordinator*: a kept `mark` keeps the word it
  marks; a kept verb of a clause with a subject of its own (`advcl`, `ccomp`, `csubj`, `relcl`,
  `acl`, `parataxis`) keeps that subject, its `mark`, its auxiliaries and its wh-adverb ("I like
  apple is." becomes "I like apple because it is sweet.", "He hoped stop." "He hoped that rain
  would stop.", "came" of "when his mother came in" brings "when" and "mother").

- *a verb and its auxiliaries*: a kept auxiliary keeps its verb, and a verb that keeps one
  auxiliary keeps them all ("The process can be accelerated", not "can accelerated");
- *a verb and its direct object* ("He tied and gagged him.", not "He tied and gagged.");
- *a noun used as an adverb and its determiner* ("repairs the fence every spring", not
  "repairs fence spring");
- *"not only"*: a kept "not" of "not only ... but" keeps its "only" ("Six not had agreements
  but owned mines." negated what X adds to);
- *a hyphenated word*: spaCy splits "self-contained" into "self", "-", "contained" (tag
  `HYPH`); the parts stand together ("Satires are contained." said another thing, "non-violent"
  would lose its "non"). CoreNLP keeps such a word one token.

`needed_words` gives what a set of kept tokens lacks by these units; the scope rule
(`sentray.sifter.scope.carry_scopes`) adds it in the same fixed-point loop as the operators, so
an OpenIE triple that lacks such a word is not chosen and the dependency backbone is completed.

`is_sentence` is the last check, on what the units cannot add: a backbone needs a finite verb
(or an imperative's), the subject that verb has in X, no "and" without its second conjunct,
and no relative pronoun standing as its subject ("Which means it is safe."; "Report ending in
March." has no finite verb).
"""

from __future__ import annotations

from sentray.sifter.dependency_parse import DependencyParse

OBJECT_LABELS = ("pobj", "pcomp")  # spaCy: the object under its preposition
CASE_LABELS = ("case",)  # UD: the preposition under its object
PREPOSITION_LABELS = ("prep", "dative", "agent", "obl", "nmod")  # where a preposition may hang
PREDICATE_LABELS = ("acomp", "attr", "oprd")  # spaCy: what a copula or a small clause needs
PREPOSITION_TAGS = ("IN", "TO")
CLAUSE_LABELS = ("advcl", "ccomp", "csubj", "relcl", "acl")  # subordinate clauses
SUBJECT_LABELS = ("nsubj", "nsubjpass", "csubj", "csubjpass", "expl")
AUXILIARY_LABELS = ("aux", "auxpass")
OBJECT_OF_VERB = ("dobj", "obj")
FINITE_TAGS = ("VBD", "VBZ", "VBP", "MD")
# finite words an OpenIE relation may bring that X does not have ("She is Chapman." of "the
# former Judy Chapman")
FINITE_WORDS = frozenset({"is", "are", "was", "were", "am", "has", "have", "had", "does", "do",
                          "did", "'s"})


def _children(parse: DependencyParse, position: int, labels: tuple[str, ...]) -> list[int]:
    return [c for c in parse.children[position] if parse.label(c).split(":")[0] in labels]


def _is_to(parse: DependencyParse, position: int) -> bool:
    return parse.tokens[position].tag == "TO" and parse.label(position) in ("aux", "mark")


def needed_words(parse: DependencyParse, kept: set[int]) -> set[int]:
    """The tokens not in `kept` that the units of the module docstring need for the tokens
    in `kept`."""
    needed: set[int] = set()
    for position in kept:
        label = parse.label(position).split(":")[0]
        head = parse.head(position)
        # the heads a word cannot go without: a preposition's object (spaCy), the object of a
        # case marker (UD), the verb of "to", the clause of a subordinator, a copula's predicate
        if head != position and (label in OBJECT_LABELS or label in CASE_LABELS + ("cop", "mark")
                                 or _is_to(parse, position)):
            needed.add(head)
        needed.update(_children(parse, position, OBJECT_LABELS)[:1])  # "on" -> "on mat"
        needed.update(c for c in _children(parse, position, CASE_LABELS)
                      if parse.tokens[c].tag in PREPOSITION_TAGS)  # UD "mat" -> "on mat"
        needed.update(c for c in parse.children[position] if _is_to(parse, c))
        needed.update(_children(parse, position, ("xcomp", "cop")))
        if label == "xcomp":  # "tried to reach summit", not "tried to reach"
            needed.update(_children(parse, position, ("dobj", "obj"))[:1])
        if label not in ("aux", "auxpass"):  # a copula, not an auxiliary: "be asleep"
            needed.update(_children(parse, position, PREDICATE_LABELS)[:1])
        needed.update(c for c in parse.children[position]
                      if parse.label(c) in ("prt", "compound:prt"))
        needed.update(_comparison(parse, position))
        if parse.tokens[position].tag.startswith("VB") and label not in AUXILIARY_LABELS:
            auxiliaries = [c for c in _children(parse, position, AUXILIARY_LABELS)
                           if not _is_to(parse, c)]
            if set(auxiliaries) & kept:  # "can be accelerated", not "can accelerated"
                needed.update(auxiliaries)
            for obj in _children(parse, position, OBJECT_OF_VERB)[:1]:
                # one conjunct of a coordinated object will do: "Cats love mice." of "Cats
                # love milk and mice."
                if not {obj, *_children(parse, obj, ("conj",))} & kept:
                    needed.add(obj)
        elif label in AUXILIARY_LABELS and head != position:  # "can" without its verb
            needed.add(head)
        needed.update(_hyphenated(parse, position))
        if label in ("npadvmod", "obl:tmod", "nmod:tmod"):  # "every spring", not "spring"
            needed.update(_children(parse, position, ("det",)))
        if parse.word(position) in ("not", "only"):  # "not only": both or neither
            pair = position + 1 if parse.word(position) == "not" else position - 1
            if 0 <= pair < len(parse) and {parse.word(position), parse.word(pair)} == {"not",
                                                                                       "only"}:
                needed.add(pair)
        subjects = _children(parse, position, SUBJECT_LABELS)
        if label in CLAUSE_LABELS + ("parataxis",) and subjects:  # a finite subordinate clause
            needed.update(subjects[:1])
            needed.update(_children(parse, position, ("mark", "aux", "auxpass")))
            needed.update(c for c in _children(parse, position, ("advmod",))
                          if parse.tokens[c].tag.startswith("W"))
    return needed - kept


def _hyphenated(parse: DependencyParse, position: int) -> set[int]:
    """The other parts of a hyphenated word the token at `position` is part of."""
    parts: set[int] = set()
    for step in (-1, 1):
        at = position
        while 0 <= at + 2 * step < len(parse) and parse.tokens[at + step].tag == "HYPH":
            parts.update((at + step, at + 2 * step))
            at += 2 * step
    return parts


def _comparison(parse: DependencyParse, position: int) -> set[int]:
    """The "more"/"less" of a kept adjective or adverb, and the "than" phrase of a comparative
    (spaCy: a `prep` "than" child; UD: a child with a `case` "than")."""
    tag = parse.tokens[position].tag
    if not tag.startswith(("JJ", "RB")):
        return set()
    degree = {c for c in _children(parse, position, ("advmod",))
              if parse.word(c) in ("more", "less")}
    if not degree and tag not in ("JJR", "RBR"):
        return degree
    than = [c for c in parse.children[position] if parse.word(c) == "than"
            or any(parse.word(g) == "than" for g in _children(parse, c, CASE_LABELS))]
    # whole: "more expensive than forced air systems" says nothing of systems in general
    return degree.union(*(parse.subtree(c) for c in than))


def stranded(parse: DependencyParse, kept: set[int]) -> set[int]:
    """The prepositions of `kept` that have no object in X at all (no dependents): a backbone
    does not end on "in" ("The house he lived in")."""
    return {t for t in kept if parse.tokens[t].tag in PREPOSITION_TAGS
            and parse.label(t).split(":")[0] in PREPOSITION_LABELS
            and not [c for c in parse.children[t] if not parse.tokens[c].punct]}


def is_sentence(parse: DependencyParse, kept: set[int], added: frozenset[str] = frozenset()
                ) -> bool:
    """Whether the tokens `kept` of X (and `added`, words a triple brings that X lacks) read
    as a sentence by the module docstring's last check: a finite verb among them (or
    `added`'s), or X's subjectless root verb (an imperative); each kept verb's subject in X,
    kept; each kept "and" with its conjunct; no wh-pronoun as a relative clause's subject."""
    finite = [t for t in kept if parse.tokens[t].tag in FINITE_TAGS]
    root = parse.root()
    imperative = (root in kept and parse.tokens[root].tag == "VB"
                  and not _children(parse, root, SUBJECT_LABELS))
    if not finite and not imperative and not (added & FINITE_WORDS):
        return False
    for position in finite:
        verb = (parse.head(position) if parse.label(position).split(":")[0] in AUXILIARY_LABELS
                else position)
        subjects = _children(parse, verb, SUBJECT_LABELS)
        if subjects and not set(subjects) & kept:
            return False
    if any(parse.label(t) == "cc" and not _conjunct_kept(parse, t, kept) for t in kept):
        return False  # "The advantages of a fiscal year and are great."
    return not any(_relative_alone(parse, t, kept) for t in kept)


def _conjunct_kept(parse: DependencyParse, cc: int, kept: set[int]) -> bool:
    """Whether the conjunct a kept "and" joins is kept too (spaCy hangs both the "and" and
    the second conjunct on the first; UD the "and" on the second). A first word with no
    conjunct in X ("But I insist.", "Nor does it know.") joins X to the sentence before: kept."""
    head = parse.head(cc)
    if parse.label(head).startswith("conj"):
        return head in kept
    conjuncts = [c for c in parse.children[head] if parse.label(c).startswith("conj")]
    if conjuncts:
        return bool(set(conjuncts) & kept)
    first = next((i for i, t in enumerate(parse.tokens) if not t.punct), None)
    return cc == first


def _relative_alone(parse: DependencyParse, position: int, kept: set[int]) -> bool:
    """A wh-pronoun kept as the subject of a relative clause whose noun is not kept ("Which
    means it is safe."; "those who said" keeps "those")."""
    if parse.tokens[position].tag not in ("WDT", "WP") or \
            not parse.label(position).startswith("nsubj"):
        return False
    clause = parse.head(position)
    return (parse.label(clause) in ("relcl", "acl:relcl")
            and parse.head(clause) not in kept)

"""A sentence's dependency tree in one form for both parsers: spaCy's `Doc` and CoreNLP's JSON
(`sentray.sifter.corenlp` converts its own) both become a `DependencyParse`, so that the
dependency backbone and the negation rule of Y (`sentray.sifter.scope`) are written once.

Only what both parsers give is kept: the token's text, its head, its label, its Penn Treebank
tag (spaCy's `tag_`, CoreNLP's `pos`), its lemma and whether it is punctuation. The labels
differ (spaCy writes ClearNLP's, CoreNLP Universal Dependencies'); the rules built on this read
few of them, and those by a prefix both schemes share (`conj`, `nsubj`, `csubj`, `expl`,
`parataxis`, `ccomp`, `xcomp`, `advcl`, `mark`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class DepToken:
    text: str
    head: int  # the position of its head in the parse; its own position at a root
    dep: str  # the parser's label (spaCy: ClearNLP; CoreNLP: Universal Dependencies)
    tag: str  # Penn Treebank tag
    punct: bool = False
    lemma: str = ""  # the parser's lemma; '' where it gave none (then the word stands for it)


class DependencyParse:
    """Tokens in sentence order with their heads; one root per sentence (head = itself)."""

    def __init__(self, tokens: Sequence[DepToken]) -> None:
        self.tokens = tuple(tokens)
        self.children: list[list[int]] = [[] for _ in self.tokens]
        for position, token in enumerate(self.tokens):
            if not 0 <= token.head < len(self.tokens):
                raise ValueError(f"token {position} ({token.text!r}) has head {token.head}, "
                                 f"outside the sentence's {len(self.tokens)} tokens")
            if token.head != position:
                self.children[token.head].append(position)

    @classmethod
    def from_spacy(cls, doc) -> DependencyParse:
        """The parse of a spaCy `Doc` (all its sentences); an empty parse when the pipeline did
        not parse it."""
        if len(doc) == 0 or not doc.has_annotation("DEP"):
            return cls([])
        return cls([DepToken(t.text, t.head.i, t.dep_, t.tag_, t.is_punct or t.is_space,
                             t.lemma_.lower()) for t in doc])

    def __len__(self) -> int:
        return len(self.tokens)

    def word(self, position: int) -> str:
        """The token's text, lower-cased, with a typographic apostrophe as "'"."""
        return self.tokens[position].text.lower().replace("\u2019", "'")

    def label(self, position: int) -> str:
        """The token's dependency label, lower-cased."""
        return self.tokens[position].dep.lower()

    def head(self, position: int) -> int:
        return self.tokens[position].head

    def root(self) -> int | None:
        """The first sentence's root; None for an empty parse."""
        return next((i for i, t in enumerate(self.tokens) if t.head == i), None)

    def subtree(self, position: int, *, without: Sequence[int] = ()) -> set[int]:
        """`position` and everything below it, less the subtrees of the tokens in `without`."""
        found, stack = set(), [position]
        while stack:
            current = stack.pop()
            if current in found or current in without:
                continue
            found.add(current)
            stack.extend(self.children[current])
        return found

    def path_up(self, position: int, stop: set[int]) -> list[int]:
        """`position` and its heads, up to (not including) the first one in `stop`, or up to its
        root."""
        path, current = [], position
        while current not in stop and current not in path:
            path.append(current)
            current = self.head(current)
        return path

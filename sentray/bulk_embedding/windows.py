"""Long texts, cut or chunked, in bounded time and memory, as pure functions of token ids.

A model reads at most `max_length` tokens, its special tokens ([CLS], [SEP]) included, so a
window holds `room = max_length - specials` tokens of text. `truncate` embeds a text from its
first window. `chunk` splits the text's tokens into windows of `room` tokens, each starting
`room - overlap` after the one before, embeds each window with its special tokens and combines
them by a mean weighted by each window's real tokens (its special tokens included: what its
attention mask counts), up to `max_windows` windows (a longer text is embedded from its first
`max_windows` and counts as truncated).

The bound: no text is tokenized beyond `CHARS_PER_TOKEN` characters per token it can use, cut at
the last whitespace before that (so the words kept tokenize as they would in the whole text). A
50 MB line costs the tokenizer a few hundred kB. English runs 4-5 characters per token; a text
denser than 32 characters per token (long runs without spaces) is embedded from what the bound
kept, and counts as truncated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

CHARS_PER_TOKEN = 32


@dataclass(frozen=True)
class WindowPlan:
    """How texts become windows: `room` text tokens per window, `stride` between window
    starts, at most `max_windows` windows per text (1: truncate)."""

    room: int
    stride: int
    max_windows: int = 1

    def __post_init__(self) -> None:
        if self.room < 1 or not 1 <= self.stride <= self.room or self.max_windows < 1:
            raise ValueError(f"windows need room >= 1, 1 <= stride <= room and max_windows >= 1,"
                             f" got {self}")

    @classmethod
    def of(cls, max_length: int, specials: int, overlap: int = 0,
           max_windows: int = 1) -> WindowPlan:
        room = max_length - specials
        if not 0 <= overlap < room:
            raise ValueError(f"chunk_overlap must be >= 0 and below the {room} text tokens of a "
                             f"window (max_length {max_length}), got {overlap}")
        return cls(room, room - overlap, max_windows)

    @property
    def tokens_used(self) -> int:
        """The most text tokens the windows of one text can hold."""
        return self.room + (self.max_windows - 1) * self.stride

    @property
    def char_limit(self) -> int:
        return self.tokens_used * CHARS_PER_TOKEN


def bounded_text(text: str, char_limit: int) -> tuple[str, bool]:
    """(the text cut to at most `char_limit` characters at its last whitespace before that, or
    at the limit itself when there is none; whether anything was cut)."""
    if len(text) <= char_limit:
        return text, False
    cut = text.rfind(" ", 0, char_limit + 1)
    for space in ("\t", "\n", "\r"):
        cut = max(cut, text.rfind(space, 0, char_limit + 1))
    return text[:cut if cut > 0 else char_limit], True


def window_starts(tokens: int, plan: WindowPlan) -> list[int]:
    """Where each window of a text of `tokens` text tokens starts: 0, stride, 2 * stride, ...
    until a window reaches the end, at most `max_windows` of them."""
    starts = [0]
    while starts[-1] + plan.room < tokens and len(starts) < plan.max_windows:
        starts.append(starts[-1] + plan.stride)
    return starts


@dataclass(frozen=True)
class Windows:
    """The windows of one text: token ids with special tokens, their weights, and whether the
    text was embedded whole."""

    ids: list[list[int]]
    weights: list[int]  # real tokens per window (special tokens included)
    whole: bool  # every token of the text is in some window


def windows_of(text_ids: Sequence[int], prefix: Sequence[int], suffix: Sequence[int],
               plan: WindowPlan, text_was_cut: bool = False) -> Windows:
    """The windows of a text whose tokens (special tokens left out) are `text_ids`."""
    starts = window_starts(len(text_ids), plan)
    ids = [[*prefix, *text_ids[start:start + plan.room], *suffix] for start in starts]
    whole = not text_was_cut and starts[-1] + plan.room >= len(text_ids)
    return Windows(ids, [len(window) for window in ids], whole)

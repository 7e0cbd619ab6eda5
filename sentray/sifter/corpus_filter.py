"""The SIFTER paper's corpus filter, as pure functions: sentences of fewer than 3 words, and a
sentence whose last word is capitalized together with the sentence after it (likely a wrong
sentence split), are dropped; each rule is switchable."""

from __future__ import annotations

from collections.abc import Sequence

TOO_SHORT = "too_short"
CAPITALIZED_TAIL = "capitalized_last_word"
AFTER_CAPITALIZED_TAIL = "follows_capitalized_last_word"


def last_word_is_capitalized(text: str) -> bool:
    words = text.rsplit(None, 1)  # the last word only: a 50 MB line is not split whole
    if not words:
        return False
    word = words[-1].strip(".,;:!?\"')]}")
    return bool(word) and word[0].isupper()


def filter_reason(text: str | None, previous_text: str | None, *, min_words: int = 3,
                  drop_short: bool = True, drop_capitalized_tail: bool = True) -> str | None:
    """Why one sentence is dropped, given the sentence before it in file order, or None."""
    text = text or ""
    if drop_capitalized_tail and previous_text and last_word_is_capitalized(previous_text):
        return AFTER_CAPITALIZED_TAIL
    if drop_capitalized_tail and last_word_is_capitalized(text):
        return CAPITALIZED_TAIL
    if drop_short and len(text.split(None, min_words)) < min_words:  # counts to min_words
        return TOO_SHORT
    return None


def filter_reasons(texts: Sequence[str | None], **rules) -> list[str | None]:
    """Why each sentence (in file order) is dropped, or None to keep it. A sentence whose last
    word is capitalized is dropped with the one after it (likely a wrong sentence split)."""
    return [filter_reason(text, texts[i - 1] if i else None, **rules)
            for i, text in enumerate(texts)]

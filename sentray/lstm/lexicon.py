"""The sentiment word set of SIFTER-LSTM: words whose input gate is short-circuited to 1.

The SIFTER paper forces the input gate open for "words with positive and negative meanings"
without naming a lexicon. We take them from VADER's human-rated lexicon (Hutto & Gilbert 2014,
MIT, PyPI `vaderSentiment`): 7,506 entries, each the mean of ten ratings on [-4, 4]. A word
is a sentiment word when |mean valence| >= `threshold`; the default 1.5 keeps clearly polar
words ("good" 1.9, "bad" -2.5, "dull" -1.7, "like" 1.5) and drops weak ones ("okay" 0.9,
"boring" -1.3, "no" -1.2): 4,031 words.

Only entries that are words are kept: VADER also rates emoticons (":-)"), texting numbers
("143") and two-word phrases ("fed up"), none of which is one vocabulary item.

Words become WordPiece ids for the LSTM's per-token lookup. A word the tokenizer keeps whole is
its one id. A word it splits ("heartbreaking" -> heart ##break ##ing) is skipped: its pieces
mean other things on their own ("un", "de", "##able"), and forcing them would open the gate for
every word sharing a piece. With all-MiniLM-L6-v2's uncased vocabulary at threshold 1.5, 1,362
of the 4,031 words are single pieces, and they make 90% of the sentiment-word occurrences in
SST-2 train (46,484 of 51,764). Caveat: a kept id is forced wherever it occurs, also as the
first piece of a longer word ("love" in "lovelorn").
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from importlib import resources

logger = logging.getLogger(__name__)

VADER_PACKAGE = "vaderSentiment"
VADER_FILE = "vader_lexicon.txt"
DEFAULT_THRESHOLD = 1.5
VALENCE_LIMIT = 4.0  # VADER's rating scale is [-4, 4]
# letters, with inner apostrophes or hyphens ("don't", "well-made"): what a word looks like
WORD = re.compile(r"[^\W\d_]+(?:['-][^\W\d_]+)*")


def load_vader_lexicon() -> dict[str, float]:
    """VADER's lexicon: {entry: mean valence in [-4, 4]}, from the installed `vaderSentiment`
    package (the file is tab-separated: entry, mean, std, the ten ratings)."""
    try:
        text = (resources.files(VADER_PACKAGE) / VADER_FILE).read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise FileNotFoundError(
            f"the VADER sentiment lexicon is not installed ({VADER_PACKAGE}/{VADER_FILE}): "
            "pip install vaderSentiment==3.3.2") from exc
    lexicon = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        try:
            lexicon[fields[0]] = float(fields[1])
        except (IndexError, ValueError) as exc:
            raise ValueError(f"{VADER_PACKAGE}/{VADER_FILE} line {number} is not "
                             f"'entry<TAB>valence<TAB>...': {line[:80]!r}") from exc
    return lexicon


def sentiment_words(lexicon: dict[str, float],
                    threshold: float = DEFAULT_THRESHOLD) -> set[str]:
    """The entries of `lexicon` that are words (no emoticons, numbers or phrases) with
    |valence| >= `threshold`."""
    if not 0.0 <= threshold <= VALENCE_LIMIT:
        raise ValueError(f"lexicon threshold must be in [0, {VALENCE_LIMIT}] (VADER's valence "
                         f"scale), got {threshold}")
    return {entry for entry, valence in lexicon.items()
            if abs(valence) >= threshold and WORD.fullmatch(entry)}


def sentiment_token_ids(words: Iterable[str], tokenizer) -> set[int]:
    """The vocabulary ids of the words a (WordPiece) tokenizer keeps whole; words it splits
    into several pieces, or maps to a special token such as [UNK], are left out (see the
    module docstring for why)."""
    special = set(tokenizer.all_special_ids)
    ids: set[int] = set()
    ordered = sorted(words)
    multi_piece = special_only = 0
    for pieces in tokenizer(ordered, add_special_tokens=False)["input_ids"] if ordered else []:
        if len(pieces) != 1:
            multi_piece += 1
        elif pieces[0] in special:
            special_only += 1
        else:
            ids.add(pieces[0])
    logger.info("sentiment words: %d -> %d token ids; %d words skipped as several word pieces, "
                "%d as a special token", len(ordered), len(ids), multi_piece, special_only)
    return ids

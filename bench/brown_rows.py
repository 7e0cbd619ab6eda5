"""Real Brown rows at any count up to 1,000,000, and the held-out queries beside them, made the
same way every time (no randomness), for the index and serve benchmarks:

- the first 50,000 sentences of the Brown corpus (one a line) are the **base**; the other 5,042
  are **held out** (the queries: never a text of the index);
- row r = d * 50,000 + i (d = 0..19, i = 0..49,999) is base sentence i alone when d = 0, else
  base sentence i, a space, and base sentence (i + d) mod 50,000: the first 50,000 rows are the
  base itself, the next 950,000 are two real sentences read as one text (19 partners each), so
  every row is real text embedded by a real model.

    python bench/brown_rows.py --brown ../shared/data/corpus/brown.txt --rows 1000000 \\
        --output brown-1m.txt --heldout brown-heldout.txt
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

BASE = 50_000  # sentences that make the rows; the rest of the corpus is held out
PARTNERS = 19  # second sentences per base sentence: BASE * (1 + PARTNERS) = 1,000,000 rows


def brown_rows(sentences: list[str], rows: int) -> Iterator[str]:
    """The first `rows` rows (module docstring) of the corpus `sentences`."""
    base = sentences[:BASE]
    if rows > len(base) * (1 + PARTNERS):
        raise ValueError(f"at most {len(base) * (1 + PARTNERS)} rows, got {rows}")
    for row in range(rows):
        shift, i = divmod(row, len(base))
        yield base[i] if shift == 0 else f"{base[i]} {base[(i + shift) % len(base)]}"


def held_out(sentences: list[str]) -> list[str]:
    """The sentences after the base: no row is any of them."""
    return sentences[BASE:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brown", type=Path, required=True, help="brown.txt, one a line")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--output", type=Path, required=True, help="the rows, one a line")
    parser.add_argument("--heldout", type=Path, help="the held-out sentences, one a line")
    args = parser.parse_args()
    sentences = args.brown.read_text(encoding="utf-8").splitlines()
    with args.output.open("w", encoding="utf-8") as handle:
        for text in brown_rows(sentences, args.rows):
            handle.write(text + "\n")
    if args.heldout:
        args.heldout.write_text("\n".join(held_out(sentences)) + "\n", encoding="utf-8")
    print(f"wrote {args.rows} rows to {args.output}")


if __name__ == "__main__":
    main()

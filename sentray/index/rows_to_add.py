"""The rows an embedding output holds that its table lacks, and reading them: each part file of
the output (`OUTPUT/<source key>/part-FIRST-END-of-ROWS.parquet`) covers the rows [FIRST, END)
of one input file, so what a table holds is recorded as runs of rows per source key, which stay
true when the embedding job merges its parts into larger files. Reading those rows is
`sentray.index.table_writing`'s."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Runs = list[list[int]]  # sorted, disjoint [first, end) runs of rows


@dataclass(frozen=True)
class PartWork:
    """Rows of one part file still to add: `runs` of its rows [first, end)."""

    source_key: str
    path: str  # as the output's filesystem reads it
    first: int
    end: int
    runs: tuple[tuple[int, int], ...]

    @property
    def rows(self) -> int:
        return sum(b - a for a, b in self.runs)


def missing_runs(done: Runs, first: int, end: int) -> list[tuple[int, int]]:
    """The runs of [first, end) that `done` does not cover."""
    missing, position = [], first
    for a, b in done:
        if b <= position or a >= end:
            continue
        if a > position:
            missing.append((position, a))
        position = max(position, b)
    if position < end:
        missing.append((position, end))
    return missing


def parts_to_add(parts: Sequence[tuple[str, str, int, int]],
                 indexed: dict[str, Runs]) -> list[PartWork]:
    """The parts that hold rows the table lacks (`indexed`: source key -> runs it holds)."""
    work = []
    for key, path, first, end in parts:
        runs = missing_runs(indexed.get(key, []), first, end)
        if runs:
            work.append(PartWork(key, path, first, end, tuple(runs)))
    return work

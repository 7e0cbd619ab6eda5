"""The rows an embedding output holds that its table lacks, and reading them: each part file of
the output (`OUTPUT/<source key>/part-FIRST-END-of-ROWS.parquet`) covers the rows [FIRST, END)
of one input file, so what a table holds is recorded as runs of rows per source key, which stay
true when the embedding job merges its parts into larger files. Free of torch and LanceDB: Ray
Data's tasks run `part_rows`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from sentray.bulk_embedding.vectors import Ranges, scalar_dequantize
from sentray.corpus.reading import read_task
from sentray.corpus.sources import CorpusConfig, Source

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


def add_run(done: Runs, first: int, end: int) -> Runs:
    """`done` with [first, end) added, merged into sorted disjoint runs."""
    merged: Runs = []
    for a, b in sorted([*done, [first, end]]):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


def plan(parts: Sequence[tuple[str, str, int, int]], indexed: dict[str, Runs]) -> list[PartWork]:
    """The parts that hold rows the table lacks (`indexed`: source key -> runs it holds)."""
    work = []
    for key, path, first, end in parts:
        runs = missing_runs(indexed.get(key, []), first, end)
        if runs:
            work.append(PartWork(key, path, first, end, tuple(runs)))
    return work


def part_rows(work: PartWork, filesystem: pafs.FileSystem, vector_type: pa.DataType,
              text_source: Source | None = None, corpus: CorpusConfig | None = None,
              code_book: Ranges | None = None) -> tuple[pa.Table, int]:
    """(rows of the part with a vector, as the table stores them, rows without one) of the rows
    `work` still has to add: id, source, row, vector (packed bits as uint8 bytes; int8/uint8
    codes, given their `code_book`, as the float32 vectors they stand for), and the text of
    --text-from when given (joined by row)."""
    with filesystem.open_input_file(work.path) as handle:
        table = pq.read_table(handle, columns=["id", "source", "row", "embedding"])
    rows = table.column("row").to_numpy()
    keep = np.zeros(len(rows), dtype=bool)
    for a, b in work.runs:
        keep |= (rows >= a) & (rows < b)
    table = table.filter(pa.array(keep))
    read = table.num_rows
    table = table.filter(pc.is_valid(table.column("embedding")))
    vectors = table.column("embedding").combine_chunks()
    if code_book is not None:  # int8/uint8 codes (N, D) -> the floats they stand for
        codes = vectors.values.to_numpy(zero_copy_only=False).reshape(len(vectors), -1)
        floats = scalar_dequantize(codes, code_book).ravel()
        vectors = pa.FixedSizeListArray.from_arrays(pa.array(floats), vectors.type.list_size)
    elif pa.types.is_int8(vectors.type.value_type):  # binary: bits packed as int8 minus 128
        flat = vectors.values.to_numpy(zero_copy_only=False).view(np.uint8) ^ np.uint8(0x80)
        vectors = pa.FixedSizeListArray.from_arrays(pa.array(flat), vectors.type.list_size)
    columns = {"id": table.column("id"), "source": table.column("source"),
               "row": table.column("row"), "vector": vectors.cast(vector_type)}
    if text_source is not None:
        columns["text"] = texts_of(text_source, corpus, table.column("row").to_numpy())
    return pa.table(columns), read - table.num_rows


def texts_of(source: Source, corpus: CorpusConfig, rows: np.ndarray) -> pa.Array:
    """The texts of `rows` of the input file `source`, read as the embedding job read it."""
    first, end = (int(rows.min()), int(rows.max()) + 1) if len(rows) else (0, 0)
    groups = list(range(len(source.row_groups)))
    blocks = list(read_task(source, groups, 0, [(first, end)], corpus)) if len(rows) else []
    if not blocks:
        return pa.array([], pa.string())
    read = pa.concat_tables(blocks)
    by_row = dict(zip(read.column("row").to_pylist(), read.column("text").to_pylist(),
                      strict=True))
    return pa.array([by_row.get(int(r)) for r in rows], pa.string())

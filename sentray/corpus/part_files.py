"""Row-accounted Parquet output shared by the jobs: every input file (source) is written as
parts, each a run of its consecutive rows,

    <folder>/<source key>/part-<first row>-<end row>-of-<source rows>[-rows-<n>].parquet

A job that splits rows between folders (kept rows to the output, rejected ones to a rejects
folder) writes each run of rows once per folder, every part named by the whole run and `-rows-<n>`
saying how many of its rows that folder holds; so a filter does not shatter the output into a
file per gap. A source is done exactly when its runs tile [0, rows) and each run's rows add up
across the folders. That makes reruns resume: complete sources are skipped, incomplete ones have
their parts deleted and are redone. Writes are atomic: local parts are renamed into place, S3
objects appear whole.
"""

from __future__ import annotations

import logging
import posixpath
import re
import time
import uuid
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from sentray.corpus.sources import Source
from sentray.kit import storage

logger = logging.getLogger(__name__)

PART_NAME = re.compile(r"^part-(\d+)-(\d+)-of-(\d+)(?:-rows-(\d+))?\.parquet$")
# Columns every table handed to the sink carries: its source key, row and the source's rows.
ACCOUNTING_COLUMNS = ("source", "row", "source_rows")

# A route sends (part of) a block to the folders it belongs in.
Route = Callable[[pa.Table], Sequence[tuple[storage.Location, pa.Table]]]


def part_name(first_row: int, end_row: int, total: int, rows: int | None = None) -> str:
    """The name of a part covering the run [first_row, end_row) of a source of `total` rows, of
    which it holds `rows` (default: all of them)."""
    count = "" if rows is None or rows == end_row - first_row else f"-rows-{rows}"
    return f"part-{first_row:012d}-{end_row:012d}-of-{total:012d}{count}.parquet"


def write_part(folder: storage.Location, source_key: str, table: pa.Table,
               run: tuple[int, int] | None = None) -> None:
    """Write rows of one source that fall in the run [first, end) of its rows (default: the
    table is the whole run); `source_rows` is dropped."""
    rows = table.column("row")
    first, end = run or (rows[0].as_py(), rows[-1].as_py() + 1)
    total = table.column("source_rows")[0].as_py()
    assert first <= rows[0].as_py() and rows[-1].as_py() < end, "rows outside their run"
    target = folder.join(source_key)
    final = posixpath.join(target.path, part_name(first, end, total, table.num_rows))
    folder.filesystem.create_dir(target.path, recursive=True)
    table = table.drop_columns(["source_rows"])
    if folder.is_s3:
        pq.write_table(table, final, filesystem=folder.filesystem)
        return
    temporary = posixpath.join(target.path, f".tmp-{uuid.uuid4().hex}")
    pq.write_table(table, temporary, filesystem=folder.filesystem)
    folder.filesystem.move(temporary, final)


def consecutive_runs(rows: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) index ranges of `rows` (sorted) where each row is the previous + 1."""
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    bounds = [0, *breaks.tolist(), len(rows)]
    return [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


def write_block(route: Route, table: pa.Table) -> int:
    """Write a block (rows of any sources, any order): each run of consecutive rows of a source
    is routed, and each folder gets one part of the run's rows it holds. Returns rows written."""
    written = 0
    for key in table.column("source").unique().to_pylist():
        part = table.filter(pc.equal(table.column("source"), key)).sort_by("row")
        rows = part.column("row").to_numpy()
        for start, stop in consecutive_runs(rows):
            run = (int(rows[start]), int(rows[stop - 1]) + 1)
            for folder, routed in route(part.slice(start, stop - start)):
                if routed.num_rows:
                    write_part(folder, key, routed, run)
                    written += routed.num_rows
    return written


class SingleFolder:
    """Route: everything to one folder."""

    def __init__(self, folder: storage.Location) -> None:
        self.folder = folder

    def __call__(self, table: pa.Table):
        return [(self.folder, table)]


def make_sink(route: Route):
    """A Ray Data Datasink writing each block where `route` sends it."""
    from ray.data import Datasink

    class PartSink(Datasink):
        first_write: float | None = None  # wall-clock time the first part was written

        def write(self, blocks, ctx) -> tuple[int, float | None]:
            written, first = 0, None
            for block in blocks:
                table = block if isinstance(block, pa.Table) else pa.table(block)
                if table.num_rows:
                    written += write_block(route, table)
                    first = first or time.time()
            return written, first

        def on_write_complete(self, write_result) -> None:
            times = [first for _, first in write_result.write_returns if first is not None]
            self.first_write = min(times, default=None)
            logger.info("wrote %d rows", write_result.num_rows)

    return PartSink()


def row_ranges(folder: storage.Location, source_key: str) -> list[tuple[int, int, int, int]]:
    """(first, end, total, rows held) of every part of one source in `folder`."""
    target = folder.join(source_key)
    try:
        infos = folder.filesystem.get_file_info(pafs.FileSelector(target.path))
    except FileNotFoundError:
        return []
    ranges = []
    for info in infos:
        match = PART_NAME.match(posixpath.basename(info.path))
        if match:
            first, end, total, rows = match.groups()
            first, end, total = int(first), int(end), int(total)
            ranges.append((first, end, total, end - first if rows is None else int(rows)))
    return ranges


def completed_rows(folders: Sequence[storage.Location],
                   source_key: str) -> tuple[int, int | None]:
    """(rows covered, source rows) from the part names of one source in all `folders`; rows
    covered is -1 when the runs do not tile [0, rows) exactly or a run's rows do not add up
    across the folders (a run that died half-way)."""
    held: dict[tuple[int, int, int], int] = {}
    for folder in folders:
        for first, end, total, rows in row_ranges(folder, source_key):
            held[(first, end, total)] = held.get((first, end, total), 0) + rows
    if not held:
        return 0, None
    totals = {total for _, _, total in held}
    position = 0
    for (first, end, total) in sorted(held):
        if first != position or held[(first, end, total)] != end - first:
            return -1, None
        position = end
    if len(totals) != 1:
        return -1, None
    return position, totals.pop()


def is_complete(folders: Sequence[storage.Location], source: Source) -> bool:
    covered, total = completed_rows(folders, source.key)
    if total is None or covered != total:
        return False
    return source.num_rows is None or source.num_rows == total


def remove_source_output(folders: Sequence[storage.Location], source_key: str) -> None:
    for folder in folders:
        target = folder.join(source_key)
        if storage.exists(target):
            folder.filesystem.delete_dir(target.path)


def write_empty_source(folder: storage.Location, source: Source, schema: pa.Schema) -> None:
    """A 0-row input still gets its (empty) part, so that it counts as done."""
    target = folder.join(source.key)
    folder.filesystem.create_dir(target.path, recursive=True)
    pq.write_table(schema.empty_table(), posixpath.join(target.path, part_name(0, 0, 0)),
                   filesystem=folder.filesystem)


def read_column(folder: storage.Location, source_key: str, column: str) -> list:
    """One column of one source's parts in `folder` ([] when it has none)."""
    target = folder.join(source_key)
    if not storage.exists(target):
        return []
    dataset = pq.ParquetDataset(target.path, filesystem=folder.filesystem)
    return dataset.read(columns=[column]).column(column).to_pylist()


def incomplete_sources(folders: Sequence[storage.Location], sources: Sequence[Source]) -> list:
    return [s.uri for s in sources if not is_complete(folders, s)]

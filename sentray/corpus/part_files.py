"""Row-accounted Parquet output shared by the jobs: every input file (source) is written as
parts, each a run of its consecutive rows,

    <folder>/<source key>/part-<first row>-<end row>-of-<source rows>[-rows-<n>].parquet

A job that splits rows between folders (kept rows to the output, rejected ones to a rejects
folder) writes each run of rows once per folder, every part named by the whole run and `-rows-<n>`
saying how many of its rows that folder holds; so a filter does not shatter the output into a
file per gap. Which runs are done, and what a rerun still has to write, is read from the names
alone (`sentray.corpus.source_runs`). A part is written whole (`storage.written_whole`: local
parts are renamed into place, S3 objects appear whole).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sentray.corpus import actor_pool
from sentray.corpus.sources import Source
from sentray.kit import storage

logger = logging.getLogger(__name__)

COUNTS_KEY = b"sentray.counts"  # a part's counts of flagged rows, in its Parquet metadata
# Columns whose value counts each part also keeps in its metadata, so that a job's summary reads
# only the parts' footers: embed's `status`, augment's `backbone_source` and `reject_reason`.
COUNTED_COLUMNS = ("status", "backbone_source", "reject_reason")
# The embedding actors' per-row counters (a copied twin's vector, tokens encoded): each part
# keeps their sums as its counts (`read_counts`: "copied", "tokens") and not the columns. They
# are named here, not by a prefix: any other column is written as it is, whatever its name (a
# column `_x` of a user's is data like any other).
SUMMED_COLUMNS = {"_copied": "copied", "_tokens": "tokens"}
# Footers read at once by `read_counts` (S3: a HEAD and a ranged GET each: latency, not bytes).
READ_THREADS = 16
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
    table is the whole run); `source_rows` is dropped, and so are the SUMMED_COLUMNS, whose sums
    go into the file's metadata as counts (`read_counts`), next to the value counts of its
    COUNTED_COLUMNS; every other column is written. The table's own schema metadata is
    kept."""
    rows = table.column("row")
    first, end = run or (rows[0].as_py(), rows[-1].as_py() + 1)
    total = table.column("source_rows")[0].as_py()
    assert first <= rows[0].as_py() and rows[-1].as_py() < end, "rows outside their run"
    file_name = part_name(first, end, total, table.num_rows)
    flags = [name for name in SUMMED_COLUMNS if name in table.column_names]
    counts: dict = {SUMMED_COLUMNS[name]: int(pc.sum(table.column(name)).as_py() or 0)
                    for name in flags}
    for name in COUNTED_COLUMNS:
        if name in table.column_names:
            counts[name] = value_counts(table.column(name))
    table = table.drop_columns(["source_rows", *flags])
    if counts:
        metadata = dict(table.schema.metadata or {})
        metadata[COUNTS_KEY] = json.dumps(counts).encode()
        table = table.replace_schema_metadata(metadata)
    _write(folder, source_key, file_name, table)


def _write(folder: storage.Location, source_key: str, file_name: str, table: pa.Table) -> None:
    """`table` as the part `file_name` of the source `source_key` in `folder`, written whole
    (`storage.written_whole`)."""
    target = folder.join(source_key)
    folder.filesystem.create_dir(target.path, recursive=True)
    with storage.written_whole(target.join(file_name)) as path:
        pq.write_table(table, path, filesystem=folder.filesystem)


def consecutive_runs(rows: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) index ranges of `rows` (sorted) where each row is the previous + 1."""
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    bounds = [0, *breaks.tolist(), len(rows)]
    return [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


def write_block(route: Route, table: pa.Table) -> dict[str, int]:
    """Write a block (rows of any sources, any order): each run of consecutive rows of a source
    is routed, and each folder gets one part of the run's rows it holds. Returns the rows
    written, {source key: rows}."""
    written: dict[str, int] = {}
    for key in table.column("source").unique().to_pylist():
        part = table.filter(pc.equal(table.column("source"), key)).sort_by("row")
        rows = part.column("row").to_numpy()
        for start, stop in consecutive_runs(rows):
            run = (int(rows[start]), int(rows[stop - 1]) + 1)
            for folder, routed in route(part.slice(start, stop - start)):
                if routed.num_rows:
                    write_part(folder, key, routed, run)
                    written[key] = written.get(key, 0) + routed.num_rows
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
        actor_moments: dict | None = None  # the actors' earliest moments (actor_pool)

        def write(self, blocks, ctx) -> tuple[int, float | None, list]:
            written, first, moments = 0, None, []
            for block in blocks:
                table = block if isinstance(block, pa.Table) else pa.table(block)
                table, block_moments = actor_pool.take(table)
                moments.append(block_moments)
                if table.num_rows:
                    written += sum(write_block(route, table).values())
                    first = first or time.time()
            return written, first, moments

        def on_write_complete(self, write_result) -> None:
            returns = write_result.write_returns
            times = [first for _, first, _ in returns if first is not None]
            self.first_write = min(times, default=None)
            self.actor_moments = actor_pool.earliest([m for _, _, ms in returns for m in ms])
            logger.info("wrote %d rows", write_result.num_rows)

    return PartSink()


def write_empty_source(folder: storage.Location, source: Source, schema: pa.Schema) -> None:
    """A 0-row input still gets its (empty) part, so that it counts as done."""
    _write(folder, source.key, part_name(0, 0, 0), schema.empty_table())


def value_counts(values: pa.ChunkedArray | pa.Array) -> dict[str, int]:
    """{value: rows holding it} of a string column without nulls."""
    counts = {entry["values"]: entry["counts"] for entry in pc.value_counts(values).to_pylist()}
    if None in counts:
        raise ValueError("a counted column holds nulls")
    return counts


def read_column(part, column: str) -> pa.ChunkedArray:
    with part.folder.filesystem.open_input_file(part.path) as handle:
        return pq.read_table(handle, columns=[column]).column(column)


def read_metadata(part) -> dict:
    with part.folder.filesystem.open_input_file(part.path) as handle:
        return pq.read_metadata(handle).metadata or {}


def part_counts(part, columns: Sequence[str] = ()) -> dict:
    """One part's counts (`write_part`), from its footer; the value counts of `columns` too,
    read from the column itself for a part whose footer lacks them (written before they were
    kept there)."""
    metadata = storage.with_retries(lambda: read_metadata(part))
    counts = json.loads(metadata.get(COUNTS_KEY, b"{}"))
    for column in columns:
        if column not in counts:
            values = storage.with_retries(lambda column=column: read_column(part, column))
            counts[column] = value_counts(values)
    return counts


def read_counts(parts, columns: Sequence[str] = ()) -> dict:
    """The counts over the given parts (`source_runs.Part`s): summed flags, `{column: {value:
    rows}}` for `columns`. Footers only, READ_THREADS at a time: memory per footer, not per
    row, and on S3 time per part / READ_THREADS."""
    from concurrent.futures import ThreadPoolExecutor

    totals: dict = {column: {} for column in columns}
    with ThreadPoolExecutor(READ_THREADS) as pool:
        for counts in pool.map(lambda part: part_counts(part, columns), parts):
            merge_counts(totals, counts)
    return totals


def merge_counts(totals: dict, counts: dict) -> None:
    """Add `counts` into `totals`: numbers summed, value counts summed per value."""
    for name, count in counts.items():
        if isinstance(count, dict):
            merged = totals.setdefault(name, {})
            for value, rows in count.items():
                merged[value] = merged.get(value, 0) + rows
        else:
            totals[name] = totals.get(name, 0) + count

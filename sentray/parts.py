"""Row-accounted Parquet output shared by the jobs: every input file (source) is written as
parts, each a run of its consecutive rows,

    <folder>/<source key>/part-<first row>-<end row>-of-<source rows>.parquet

so a source is done exactly when its parts tile [0, rows) — across every folder the job writes
(e.g. an output and a rejects folder). That makes reruns resume: complete sources are skipped,
incomplete ones have their parts deleted and are redone. Writes are atomic: local parts are
renamed into place, S3 objects appear whole.
"""

from __future__ import annotations

import logging
import posixpath
import re
import uuid
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from sentray import storage
from sentray.corpus import Source

logger = logging.getLogger(__name__)

PART_NAME = re.compile(r"^part-(\d+)-(\d+)-of-(\d+)\.parquet$")
# Columns every table handed to the sink carries: its source key, row and the source's rows.
ACCOUNTING_COLUMNS = ("source", "row", "source_rows")

# A route sends (part of) a block to the folders it belongs in.
Route = Callable[[pa.Table], Sequence[tuple[storage.Location, pa.Table]]]


def part_name(first_row: int, end_row: int, total: int) -> str:
    return f"part-{first_row:012d}-{end_row:012d}-of-{total:012d}.parquet"


def write_part(folder: storage.Location, source_key: str, table: pa.Table) -> None:
    """Write one run of consecutive rows of one source (`source_rows` is dropped)."""
    rows = table.column("row")
    first, end = rows[0].as_py(), rows[-1].as_py() + 1
    total = table.column("source_rows")[0].as_py()
    assert end - first == table.num_rows, "a part must be a run of consecutive rows"
    target = folder.join(source_key)
    final = posixpath.join(target.path, part_name(first, end, total))
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


def write_block(folder: storage.Location, table: pa.Table) -> int:
    """Write a block (rows of any sources, any order) as per-source runs; returns rows."""
    written = 0
    for key in table.column("source").unique().to_pylist():
        part = table.filter(pc.equal(table.column("source"), key)).sort_by("row")
        for start, stop in consecutive_runs(part.column("row").to_numpy()):
            write_part(folder, key, part.slice(start, stop - start))
            written += stop - start
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
        def write(self, blocks, ctx) -> int:
            written = 0
            for block in blocks:
                table = block if isinstance(block, pa.Table) else pa.table(block)
                if table.num_rows:
                    for folder, part in route(table):
                        if part.num_rows:
                            written += write_block(folder, part)
            return written

        def on_write_complete(self, write_result) -> None:
            logger.info("wrote %d rows", write_result.num_rows)

    return PartSink()


def _ranges(folder: storage.Location, source_key: str) -> list[tuple[int, int, int]]:
    target = folder.join(source_key)
    try:
        infos = folder.filesystem.get_file_info(pafs.FileSelector(target.path))
    except FileNotFoundError:
        return []
    ranges = []
    for info in infos:
        match = PART_NAME.match(posixpath.basename(info.path))
        if match:
            ranges.append(tuple(map(int, match.groups())))
    return ranges


def completed_rows(folders: Sequence[storage.Location],
                   source_key: str) -> tuple[int, int | None]:
    """(rows covered, source rows) from the part names of one source in all `folders`; rows
    covered is -1 when the parts do not tile [0, rows) exactly (a run that died half-way)."""
    ranges = sorted(r for folder in folders for r in _ranges(folder, source_key))
    if not ranges:
        return 0, None
    totals = {total for _, _, total in ranges}
    position = 0
    for first, end, _ in ranges:
        if first != position:
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

"""Output files of a sensible size, decoupled from the actors' blocks: once an input file is
done, its parts (a block each) are merged into files of `rows_per_file` rows, as Ray tasks (one
per output file, spread over the cluster), or in the driver when there are few rows to merge. A merged file is named by the run of rows it holds,
like any part, and written atomically (renamed into place; an S3 object appears whole); only then
are the parts it merged deleted. A compaction stopped in between leaves parts inside a bigger
part, which the next run deletes (`source_runs`): no row is ever counted twice or lost.
"""

from __future__ import annotations

import json
import logging
import posixpath
import time
from collections.abc import Sequence

import pyarrow.parquet as pq

from sentray.corpus.part_files import COUNTED_COLUMNS, COUNTS_KEY, part_name, read_counts
from sentray.corpus.source_runs import Part, remove_parts, source_runs
from sentray.corpus.sources import Source
from sentray.kit import storage

logger = logging.getLogger(__name__)


# Up to this many rows to merge (~30 MB of 384-d float32 vectors), the driver merges them
# itself: a Ray task would first wait seconds for a worker process to start and import.
DRIVER_MERGE_ROWS = 20_000


def groups_of(parts: Sequence[Part], rows_per_file: int) -> list[list[Part]]:
    """Consecutive parts (in row order) grouped into files: a group closes once it holds
    `rows_per_file` rows (a part is never split; the last group may be smaller)."""
    groups: list[list[Part]] = []
    current: list[Part] = []
    for part in parts:
        current.append(part)
        if sum(p.rows for p in current) >= rows_per_file:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def merge_parts(parts: list[Part]) -> str:
    """Write `parts` (consecutive, in one folder) as one file named by their whole run, then
    delete them; returns its path. Reads and writes one part at a time (memory: one part)."""
    folder, first, end = parts[0].folder, parts[0].first, parts[-1].end
    final = posixpath.join(posixpath.dirname(parts[0].path),
                           part_name(first, end, parts[0].total))
    whole = storage.written_whole(storage.Location(folder.filesystem, final, final))
    with whole as path, folder.filesystem.open_output_stream(path) as out:
        writer = None
        for part in parts:
            with folder.filesystem.open_input_file(part.path) as handle:
                table = pq.read_table(handle)
            metadata = {k: v for k, v in (table.schema.metadata or {}).items()
                        if k != COUNTS_KEY}  # what the rows are, without one part's counts
            table = table.replace_schema_metadata(metadata)
            if writer is None:
                writer = pq.ParquetWriter(out, table.schema)
            writer.write_table(table)
        counted = [name for name in COUNTED_COLUMNS if name in writer.schema.names]
        writer.add_key_value_metadata({COUNTS_KEY: json.dumps(read_counts(parts, counted))})
        writer.close()
    remove_parts(parts)
    return final


def needs_compaction(folder: storage.Location, sources: Sequence[Source],
                     rows_per_file: int) -> bool:
    """Whether some complete source has parts that `compact` would merge (names only)."""
    for source in sources:
        runs = source_runs([folder], source)
        if runs.complete and any(len(g) > 1 for g in groups_of(runs.parts, rows_per_file)):
            return True
    return False


def compact(folder: storage.Location, sources: Sequence[Source], rows_per_file: int, *,
            in_driver: bool = False) -> dict:
    """Merge the parts of every complete source in `folder` into files of `rows_per_file`
    rows, one Ray task per file (`in_driver`, or a few MB in all: here); returns the files
    before and after and the seconds."""
    started = time.perf_counter()
    groups, before = [], 0
    for source in sources:
        runs = source_runs([folder], source)
        if not runs.complete:
            continue
        before += len(runs.parts)
        groups += groups_of(runs.parts, rows_per_file)
    merging = [group for group in groups if len(group) > 1]
    if in_driver or sum(part.rows for group in merging for part in group) <= DRIVER_MERGE_ROWS:
        for group in merging:  # a few MB: here, sooner than a Ray worker starts and imports
            merge_parts(group)
    elif merging:
        import ray

        task = ray.remote(num_cpus=1, max_retries=3)(merge_parts)
        ray.get([task.remote(group) for group in merging])
    stats = {"files_before": before, "files_after": len(groups),
             "seconds": round(time.perf_counter() - started, 2)}
    logger.info("compaction: %d parts -> %d files of up to %d rows in %.1f s", before,
                len(groups), rows_per_file, stats["seconds"])
    return stats

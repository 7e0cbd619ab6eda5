"""Ids that more than one input row holds, in a Parquet `--id-column`.

The choice: a warning with the count, not a refusal. Every row is still processed and comes out
once (nothing is lost, and a corpus whose ids repeat on purpose, a document's id on each of its
passages, still runs), but search hits name rows by id, so the driver says, before any row is
processed, how many rows share an id with an earlier one and which ids, and the summary records
the count as `duplicate_ids`. The driver reads the id column of every input file for it (one
column, not the texts): memory of the order of the ids themselves.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sentray.corpus.sources import Source

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DuplicateIds:
    rows: int  # rows whose id an earlier row holds: rows - distinct ids (nulls left out)
    examples: tuple[str, ...]  # a few of those ids, as text


def count_duplicate_ids(sources: Sequence[Source], id_column: str | None,
                        examples: int = 3) -> DuplicateIds:
    """The rows of the Parquet `sources` whose `id_column` value another row holds too (none
    without an id column); a warning naming their count and a few of the ids when there are
    any."""
    columns = []
    for source in sources:
        if id_column is None or source.format != "parquet" or not source.num_rows:
            continue
        with source.filesystem.open_input_file(source.path) as handle:
            column = pq.read_table(handle, columns=[id_column]).column(0)
        columns += [pc.cast(chunk, pa.string()) for chunk in column.chunks]  # ints and texts
    if not columns:
        return DuplicateIds(0, ())
    counts = pc.value_counts(pc.drop_null(pa.concat_arrays(columns)))  # {values, counts}
    repeated = pc.filter(counts, pc.greater(counts.field("counts"), 1))
    found = DuplicateIds(
        int(pc.sum(repeated.field("counts")).as_py() or 0) - len(repeated),
        tuple(repeated.field("values")[:examples].to_pylist()))
    if found.rows:
        logger.warning(
            "%d rows share their --id-column %r value with an earlier row (%d ids repeat, e.g. "
            "%s): every row is processed, but search hits name rows by id; give a column of "
            "unique ids, or none for <file>:<row> ids", found.rows, id_column, len(repeated),
            ", ".join(map(repr, found.examples)))
    return found

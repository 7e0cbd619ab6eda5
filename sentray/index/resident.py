"""`ResidentVectors`: a float table's vectors held in memory and searched there (one exact
matrix product for a batch of queries, or a projected first pass from 20,000 rows), the hits'
other columns (id, source, row, text) held in memory beside them (an Arrow table: its texts in
one buffer) and taken by position.

Why: below a few hundred thousand rows that product costs less than the ANN index's search, and
its recall is 1. Measured for issue 56 (AMD EPYC, 2 CPUs, 384-d, batches of 16 queries, CPU time
a query; bench/bench_search_modes.py, bench/results/search-modes-*.json): 50,000 rows 2.6 ms
exact in memory against 6.4 ms for Lance's IVF_HNSW_SQ search; 1,000,000 rows 43 ms exact
against 18.9 ms at 41 of 244 partitions (docs/index-and-search.md). Taking a hit's columns
from the Lance table cost 1.8 ms for one query's 10 hits and 4.6 ms for 16 queries' (issue 67,
the same machine, one thread): a third of a lone query's search; from memory, a few µs.

From 20,000 rows a `Projection` (projection.py) makes the first pass: the rows' first 128
principal axes, the best few hundred rows re-ranked at full dimension (recall@10 0.996 against
the product at 50,000 rows, a third of its time). From 200,000 rows the projected rows are held
in k-means lists and a query reads the nearest sixth (lists.py); with them the search in memory
beat the table's index at a million rows (the same AMD EPYC, one thread: 6.3 against 17.4 ms a
lone query), and the line below moved from 256 MiB to 2 GiB (docs/index-and-search.md).

`search_mode` is the rule behind --search-mode: `memory` holds the vectors (with the projected
first pass where it pays), `exact` holds them and compares every row at full dimension (recall
1), `table` searches the table (its ANN index, or Lance's exact scan), `auto` is `memory` when
their float32 copy takes at most MEMORY_SEARCH_MIB (1,398,101 rows of 384 dimensions),
else `table`. Packed-bit tables stay with the table's hamming search."""

from __future__ import annotations

import typing

import numpy as np
import pyarrow as pa

from sentray.index.config import SearchMode
from sentray.index.embedding_record import VECTOR_COLUMN
from sentray.index.projection import Projection, projects

SEARCH_MODES = typing.get_args(SearchMode)
MEMORY_SEARCH_MIB = 2048
UNIT_CHUNK_ROWS = 65_536  # rows scaled at a time (np.linalg.norm's temporaries stay small)
QUERIES_PER_PRODUCT = 16  # the (queries, rows) score matrix of one product stays small


def search_mode(requested: str, *, rows: int, dimension: int, binary: bool) -> str:
    """`memory`, `exact` or `table`: how a table of `rows` vectors of `dimension` is
    searched."""
    if requested not in SEARCH_MODES:
        raise ValueError(f"search mode must be one of {', '.join(SEARCH_MODES)}, got "
                         f"{requested!r}")
    if binary:
        if requested in ("memory", "exact"):
            raise ValueError("a packed-bit (binary) table is searched by hamming distance in "
                             "the table, exactly: use --search-mode table (or auto)")
        return "table"
    if requested != "auto":
        return requested
    return "memory" if resident_mib(rows, dimension) <= MEMORY_SEARCH_MIB else "table"


def resident_mib(rows: int, dimension: int) -> float:
    """MiB the vectors take held in memory (float32)."""
    return rows * dimension * 4 / 2**20


class ResidentVectors:
    """The vectors of `dataset` (a Lance dataset at one version) held as unit float32 rows.

    nearest(queries (Q, D), k) -> per query, its k rows nearest by cosine, nearest first
    (equal scores: the earlier row first), each a dict of `columns` and "score" (cosine):
    `rank` (the product) then `hits` (the columns), which a caller may time apart.
    `projected`: a `Projection` makes the first pass where `projects` says it pays (its
    candidates' scores and order are the exact ones); `projection` is it, or None."""

    def __init__(self, dataset, columns: list[str], *, projected: bool = False) -> None:
        self.columns = columns
        # the vectors read batch by batch into one float32 matrix and scaled in place, then the
        # hits' columns in a second scan. A million 384-d rows with their projection and lists,
        # by hand: read as one table, its vectors combined, cast and scaled, 6.2 GiB at the peak
        # and 3.8 after; this way 3.7 and 2.5 (the vectors alone: 2.0 and 1.8)
        rows = dataset.count_rows()
        width = dataset.schema.field(VECTOR_COLUMN).type.list_size
        self.matrix = np.empty((rows, width), dtype=np.float32)
        at = 0
        for batch in dataset.to_batches(columns=[VECTOR_COLUMN], scan_in_order=True):
            vectors = batch.column(VECTOR_COLUMN)
            self.matrix[at:at + len(vectors)] = (vectors.flatten().to_numpy(zero_copy_only=False)
                                                 .reshape(len(vectors), width))
            at += len(vectors)
        unit_rows(self.matrix, in_place=True)
        # the hits' columns, by position (the same version, in the same order)
        self.held = dataset.to_table(columns=columns, scan_in_order=True).combine_chunks()
        if at != rows or self.held.num_rows != rows:
            raise RuntimeError(f"the table's version holds {rows} rows; {at} vectors and "
                               f"{self.held.num_rows} rows of {columns} were read")
        pa.default_memory_pool().release_unused()  # the batches' buffers back to the system
        self.projection = (Projection(self.matrix)
                           if projected and projects(*self.matrix.shape) else None)

    @property
    def rows(self) -> int:
        return len(self.matrix)

    def nearest(self, queries: np.ndarray, k: int) -> list[list[dict]]:
        return self.hits(self.rank(queries, k))

    def rank(self, queries: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query (Q, D), the positions of its k nearest rows and their cosines."""
        queries = unit_rows(np.asarray(queries, dtype=np.float32).reshape(len(queries), -1))
        k = min(k, self.rows)
        ranked: list[tuple[np.ndarray, np.ndarray]] = []  # per query: positions, scores
        if k == 0:
            return [(np.zeros(0, np.int64), np.zeros(0, np.float32)) for _ in queries]
        if self.projection is not None:
            for query, shortlist in zip(queries, self.projection.shortlist(queries, k),
                                        strict=True):
                scores = self.matrix[shortlist] @ query  # the candidates' exact cosines
                top = nearest_first(scores, k, shortlist)
                ranked.append((shortlist[top], scores[top]))
            return ranked
        for start in range(0, len(queries), QUERIES_PER_PRODUCT):
            scores = queries[start:start + QUERIES_PER_PRODUCT] @ self.matrix.T  # (q, rows)
            for row in scores:
                top = nearest_first(row, k)
                ranked.append((top, row[top]))
        return ranked

    def hits(self, ranked: list[tuple[np.ndarray, np.ndarray]]) -> list[list[dict]]:
        """The rows `rank` found, as dicts of `columns` and "score"."""
        positions = sorted({int(p) for order, _ in ranked for p in order})
        taken = self.held.take(positions).to_pylist()
        by_position = dict(zip(positions, taken, strict=True))
        return [[{**by_position[int(p)], "score": float(s)} for p, s in zip(*found, strict=True)]
                for found in ranked]


def nearest_first(scores: np.ndarray, k: int, positions: np.ndarray | None = None
                  ) -> np.ndarray:
    """Indices into `scores` of its k highest, highest first; equal scores by their row
    (`positions[i]`, default i), the earlier first, also where the k-th score ties with rows
    past the k (which of those make the k is decided by row, not by the selection)."""
    positions = np.arange(len(scores)) if positions is None else positions
    picked = np.argpartition(-scores, k - 1)[:k]
    kth = scores[picked].min()
    above = np.flatnonzero(scores > kth)
    tied = np.flatnonzero(scores == kth)
    tied = tied[np.argsort(positions[tied], kind="stable")][:k - len(above)]
    chosen = np.concatenate([above, tied])
    return chosen[np.lexsort((positions[chosen], -scores[chosen]))]


def unit_rows(matrix: np.ndarray, in_place: bool = False) -> np.ndarray:
    """Each row scaled to length 1 (a zero row stays zero); `in_place`: `matrix` itself, a
    chunk of rows at a time (np.linalg.norm makes two temporaries of its input's size: on a
    million 384-d rows, 2.9 GiB more at once)."""
    if not in_place:
        matrix = matrix.copy()
    for start in range(0, len(matrix), UNIT_CHUNK_ROWS):
        chunk = matrix[start:start + UNIT_CHUNK_ROWS]
        norms = np.linalg.norm(chunk, axis=1, keepdims=True)
        norms[norms == 0] = 1
        chunk /= norms
    return matrix

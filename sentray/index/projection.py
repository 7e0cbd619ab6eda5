"""`Projection`: the first pass of a search over vectors held in memory. The rows are held a
second time, projected onto their first PROJECTED_DIMENSION principal axes; a query's
CANDIDATES best rows by that product are re-ranked at full dimension, exactly.

Why: the exact product over every row reads the whole float32 copy for each batch (50,000 x
384 x 4 bytes = 77 MB), most of a lone query's search stage in the service; the projection is a
third of it and the re-ranking a few hundred rows. Measured for issue 67
(bench/bench_search_modes.py, record bench/results/search-projection-50k-amd.json: 50,000
Brown rows, MiniLM mean pooling, 480 held-out queries, this project's AMD EPYC, 2 CPUs):
recall@10 against the exact product 0.996 at 128 dimensions and 400 candidates; a lone query
0.70 ms against 1.73, batches of 16 0.61 ms of CPU a query against 1.09. An IVF split of the
same 50,000 rows held in memory (k-means lists, the best few searched), tried by hand, found
fewer of the true neighbours in the same time: Brown's sentences are not clustered, and the
projection keeps what the rows vary in. At a million rows reading every projected row costs
about what the table's index does (15 ms a lone query against its 17-21 ms, the same machine),
so from LISTS_FROM_ROWS rows the projected rows are split into k-means lists and a query reads
the nearest sixth (lists.py).

Where it pays: from PROJECT_FROM_ROWS rows (below, the exact product is a fraction of a
millisecond) and for vectors wider than the projection. The candidates grow with k (at least
CANDIDATES_PER_K each). Equal scores keep the earlier row first, as in the exact product, while
fewer rows tie than the candidates (more identical vectors than that: which of them are
re-ranked is the projection's pick)."""

from __future__ import annotations

import numpy as np

from sentray.index import lists as inverted_lists
from sentray.index.lists import Lists, listed

PROJECTED_DIMENSION = 128
CANDIDATES = 400  # rows re-ranked at full dimension for each query (at least)
CANDIDATES_PER_K = 20
PROJECT_FROM_ROWS = 20_000
FIT_ROWS = 10_000  # rows the principal axes are fitted on (spread over the table)
CHECK_ROWS = 64  # the table's own rows searched both ways at build, for `recall`


def projects(rows: int, dimension: int) -> bool:
    """Whether a table of `rows` vectors of `dimension` gets a projected first pass."""
    return rows >= PROJECT_FROM_ROWS and dimension > PROJECTED_DIMENSION


def candidates(k: int, rows: int) -> int:
    """Rows re-ranked for each query: more where the rows are in lists (what the lists miss,
    more candidates buy back: a million Brown rows, a sixth of the lists read, recall@10
    0.9683 at 1,000, 0.9725 at 1,500, by hand; docs/index-and-search.md)."""
    least = inverted_lists.CANDIDATES if listed(rows) else CANDIDATES
    return min(rows, max(least, CANDIDATES_PER_K * k))


class Projection:
    """The rows of `matrix` (N, D: unit rows) projected onto their first principal axes.

    shortlist(queries (Q, D), k) -> per query, the positions of its best C rows by the
    projected product (C = `candidates(k, N)`, unordered; from LISTS_FROM_ROWS rows, the best
    C of the rows in the lists nearest it: lists.py), for an exact re-ranking. `recall`:
    recall@10 of projection + re-ranking against the exact product, on CHECK_ROWS of the
    table's rows (measured when built)."""

    def __init__(self, matrix: np.ndarray, dimension: int | None = None) -> None:
        dimension = dimension or PROJECTED_DIMENSION
        step = max(1, len(matrix) // FIT_ROWS)
        sample = matrix[::step]
        self.mean = sample.mean(axis=0)
        # the principal axes of the sample: the right singular vectors, largest first
        _, _, axes = np.linalg.svd(sample - self.mean, full_matrices=False)
        self.axes = np.ascontiguousarray(axes[:dimension].T, dtype=np.float32)  # (D, d)
        rows = matrix @ self.axes  # (N, d), less the mean's projection in place
        rows -= self.mean @ self.axes
        self.count = len(rows)
        # from LISTS_FROM_ROWS rows the projected rows are held in k-means lists (lists.py)
        self.lists = Lists(rows) if listed(len(rows)) else None
        self.rows = rows if self.lists is None else None
        self.recall = self._recall(matrix)

    def shortlist(self, queries: np.ndarray, k: int) -> list[np.ndarray]:
        count = candidates(k, self.count)
        # the query's product with the mean is the same for every row: left out
        projected = queries @ self.axes
        if self.lists is not None:
            return self.lists.shortlist(projected, count)
        scores = projected @ self.rows.T  # (Q, N)
        if count >= self.count:
            return list(np.broadcast_to(np.arange(self.count), scores.shape))
        return list(np.argpartition(-scores, count - 1, axis=1)[:, :count])

    def _recall(self, matrix: np.ndarray, k: int = 10) -> float:
        picked = np.linspace(0, len(matrix) - 1, min(CHECK_ROWS, len(matrix))).astype(int)
        queries = matrix[picked]
        exact = np.argpartition(-(queries @ matrix.T), k - 1, axis=1)[:, :k]
        found = 0
        for query, shortlist, truth in zip(queries, self.shortlist(queries, k), exact,
                                           strict=True):
            scores = matrix[shortlist] @ query
            best = shortlist[np.argpartition(-scores, k - 1)[:k]]
            found += len(set(best.tolist()) & set(truth.tolist()))
        return found / (len(queries) * k)

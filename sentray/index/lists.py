"""`Lists`: the projected rows of a large table split into k-means lists (an inverted file held
in memory), so a query's first pass reads the lists nearest it, not every row.

Why: the projected first pass (projection.py) reads every projected row for each query: at
1,000,000 rows of 128 dimensions that is 512 MB, 15 ms for a lone query on this project's AMD
EPYC (2 CPUs, by hand), near the table's own ANN search. Split into about sqrt(rows) lists, a
query reads its PROBED_SHARE nearest. Measured for issue 67 on 1,000,000 Brown rows (MiniLM mean
pooling, 480 held-out queries, one BLAS thread; bench/bench_search_modes.py, record
bench/results/search-lists-1m-amd.json): recall@10 against the exact product 0.9713 (the
table's index at its defaults: 0.9748), a lone query 6.3 ms (17.4), batches of 16 3.24 ms of
CPU a query (14.9); docs/index-and-search.md.

Where it applies: from LISTS_FROM_ROWS rows (below, reading every projected row costs ~3 ms
or less by the 1,000,000-row figure, and its recall is the higher). The lists are fitted on
FIT_ROWS rows spread over the table (KMEANS_ROUNDS rounds of Lloyd's k-means from distinct rows
picked with a fixed seed: the same table gives the same lists), then every row is put in its
nearest list. A query is compared to the lists' centres by the same distance, and reads the
rows of its `probes` nearest lists (more while they hold fewer rows than it needs)."""

from __future__ import annotations

import numpy as np

LISTS_FROM_ROWS = 200_000
PROBED_SHARE = 1 / 6  # of the lists, read for each query
CANDIDATES = 1_500  # rows re-ranked at full dimension for each query (at least)
FIT_ROWS = 100_000
KMEANS_ROUNDS = 10
ASSIGN_CHUNK = 50_000  # rows put in their lists at a time (a chunk x lists score matrix)


def listed(rows: int) -> bool:
    """Whether a table of `rows` vectors gets lists."""
    return rows >= LISTS_FROM_ROWS


def list_count(rows: int) -> int:
    """About sqrt(rows) lists, at least one."""
    return max(1, round(rows ** 0.5))


class Lists:
    """The rows of `rows` (N, d) grouped by nearest k-means centre (lists left empty dropped).

    shortlist(queries (Q, d), count) -> per query, the positions (into `rows`) of its `count`
    best rows by the product (unordered), among the rows of its `probes` nearest lists, and of
    the next nearest while those hold fewer than `count` rows (duplicated or lopsided rows
    still give a query its k hits). `probes` defaults to PROBED_SHARE of the lists."""

    def __init__(self, rows: np.ndarray, lists: int | None = None,
                 probes: int | None = None) -> None:
        centres = fit_centres(rows, min(len(rows), lists or list_count(len(rows))))
        assigned = nearest_centre(rows, centres)
        filled, assigned = np.unique(assigned, return_inverse=True)
        self.centres = centres[filled]
        self.order = np.argsort(assigned, kind="stable")  # list by list, row order within
        self.rows = np.ascontiguousarray(rows[self.order])
        self.sizes = np.bincount(assigned, minlength=len(filled))
        self.bounds = np.concatenate([[0], np.cumsum(self.sizes)])
        self._spans = list(zip(self.bounds[:-1].tolist(), self.bounds[1:].tolist(), strict=True))
        self._places = np.arange(len(rows))
        self.probes = min(len(filled), probes or max(1, round(len(filled) * PROBED_SHARE)))

    def probed(self, queries: np.ndarray, count: int) -> list[np.ndarray]:
        """Per query, the lists it reads, nearest first."""
        nearest = np.argsort(-centre_scores(queries, self.centres), axis=1, kind="stable")
        held = np.cumsum(self.sizes[nearest], axis=1)
        enough = (held >= count).argmax(axis=1) + 1  # the fewest nearest lists holding count
        enough[held[:, -1] < count] = len(self.centres)
        return [row[:reach] for row, reach in zip(nearest, np.maximum(enough, self.probes),
                                                  strict=True)]

    def shortlist(self, queries: np.ndarray, count: int) -> list[np.ndarray]:
        probed = self.probed(queries, count)
        # list by list, one product with every query that reads it: a batch reads each list
        # once, not once a query
        readers = np.repeat(np.arange(len(queries)), [len(p) for p in probed])
        flat = np.concatenate(probed)
        by_list = np.argsort(flat, kind="stable")
        read, starts = np.unique(flat[by_list], return_index=True)
        scores: list[list[np.ndarray]] = [[] for _ in queries]
        places: list[list[np.ndarray]] = [[] for _ in queries]
        for centre, group in zip(read.tolist(), np.split(readers[by_list], starts[1:]),
                                 strict=True):
            a, b = self._spans[centre]
            block = self.rows[a:b] @ queries[group].T  # (rows of the list, its readers)
            for column, query in enumerate(group.tolist()):
                scores[query].append(block[:, column])
                places[query].append(self._places[a:b])
        found = []
        for own_scores, own_places in zip(scores, places, strict=True):
            joined, at = np.concatenate(own_scores), np.concatenate(own_places)
            if count < len(joined):
                at = at[np.argpartition(-joined, count - 1)[:count]]
            found.append(self.order[at])
        return found


def centre_scores(rows: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """(N, lists): higher is nearer by Euclidean distance (-|r - c|^2 / 2, less |r|^2 / 2, which
    is the same for every centre)."""
    return rows @ centres.T - 0.5 * np.einsum("ij,ij->i", centres, centres)


def nearest_centre(rows: np.ndarray, centres: np.ndarray) -> np.ndarray:
    return np.concatenate([np.argmax(centre_scores(rows[start:start + ASSIGN_CHUNK], centres),
                                     axis=1)
                           for start in range(0, len(rows), ASSIGN_CHUNK)])


def fit_centres(rows: np.ndarray, lists: int) -> np.ndarray:
    """Lloyd's k-means on up to FIT_ROWS rows spread over `rows`, started from distinct rows
    picked with a fixed seed (fewer lists where fewer rows differ); a list left empty in a
    round keeps its centre."""
    generator = np.random.default_rng(0)
    sample = rows[::max(1, len(rows) // FIT_ROWS)]
    _, distinct = np.unique(sample, axis=0, return_index=True)
    picked = generator.choice(np.sort(distinct), min(lists, len(distinct)), replace=False)
    centres = sample[picked].astype(np.float32)
    lists = len(centres)
    for _ in range(KMEANS_ROUNDS):
        assigned = nearest_centre(sample, centres)
        order = np.argsort(assigned, kind="stable")
        filled, starts, sizes = np.unique(assigned[order], return_index=True,
                                          return_counts=True)
        centres[filled] = np.add.reduceat(sample[order], starts, axis=0) / sizes[:, None]
    return centres

"""The k-means lists of a large table's projected rows (`lists`): each query's shortlist
against a naive reference (every row's list and every list's distance computed one by one, the
probed rows' products sorted), all lists probed is the full scan, the same rows give the same
lists, and the projected search built on lists (from LISTS_FROM_ROWS rows) still finds the
naive neighbours with their exact scores."""

from __future__ import annotations

import numpy as np

from sentray.index import lists, projection
from sentray.index.lists import Lists
from sentray.index.resident import ResidentVectors, unit_rows
from sentray.serve.service import resident_search
from tests.index.test_projection import sentence_like
from tests.index.test_resident import dataset, naive


def clustered(rows: int, dimension: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((12, dimension)) * 3
    return (centres[rng.integers(0, 12, rows)]
            + rng.standard_normal((rows, dimension))).astype(np.float32)


def clear(values: list[float], at: int, margin: float) -> None:
    """The data's own precondition for comparing a float32 fast path with a float64 reference
    by set or order: the `at`-th smallest of `values` is more than `margin` from the next one,
    far past float32's rounding here (~1e-5 on these magnitudes), so the comparisons below hold
    on any CPU's kernels; the data is fixed by its seed, so this holds or fails everywhere."""
    ordered = sorted(values)
    assert ordered[at] - ordered[at - 1] > margin


def naive_shortlist(built: Lists, rows: np.ndarray, query: np.ndarray, count: int) -> set:
    def distance(a, b):
        return float(sum((float(x) - float(y)) ** 2 for x, y in zip(a, b, strict=True)))
    home = []
    for row in rows:
        distances = [distance(row, centre) for centre in built.centres]
        clear(distances, 1, 1e-2)  # no row about as near two centres
        home.append(int(np.argmin(distances)))
    to_centres = [distance(query, centre) for centre in built.centres]
    clear(to_centres, built.probes, 1e-2)
    probed = sorted(range(len(built.centres)), key=lambda c: to_centres[c])[:built.probes]
    inside = [i for i in range(len(rows)) if home[i] in probed]
    products = {i: float(np.dot(rows[i].astype(np.float64), query)) for i in inside}
    clear([-v for v in products.values()], count, 1e-3)
    return set(sorted(inside, key=lambda i: -products[i])[:count])


def test_each_shortlist_is_the_naive_one():
    rows = clustered(600, 8)
    built = Lists(rows, lists=12, probes=3)
    assert built.bounds[0] == 0 and built.bounds[-1] == len(rows)
    assert sorted(built.order.tolist()) == list(range(len(rows)))
    queries = clustered(6, 8, seed=1)
    for query, found in zip(queries, built.shortlist(queries, 40), strict=True):
        assert set(found.tolist()) == naive_shortlist(built, rows, query, 40)


def list_of(built: Lists, rows: int) -> np.ndarray:
    """Each row's list (its index among `built.centres`)."""
    labels = np.empty(rows, dtype=np.int64)
    for number, (start, end) in enumerate(zip(built.bounds[:-1], built.bounds[1:],
                                              strict=True)):
        labels[built.order[start:end]] = number
    return labels


def test_every_list_probed_is_the_full_scan_and_the_same_rows_give_the_same_lists():
    rows = clustered(2_000, 16)
    built = Lists(rows, lists=40, probes=40)
    queries = clustered(5, 16, seed=2)
    for query, found in zip(queries, built.shortlist(queries, 25), strict=True):
        products = rows.astype(np.float64) @ query
        clear((-products).tolist(), 25, 1e-3)
        assert set(found.tolist()) == set(np.argsort(-products)[:25].tolist())
    again = Lists(rows, lists=40)
    # built twice from the same rows (what a replica replaced after a loss rebuilds): the same
    # centres, and each row in the same list, but for a row whose two nearest centres tie
    # within float32 rounding (another allocation's alignment may sum a centre in another
    # order, and such a row may go either way)
    np.testing.assert_allclose(again.centres, built.centres, rtol=1e-5, atol=1e-6)
    first, second = list_of(built, len(rows)), list_of(again, len(rows))
    scores = lists.centre_scores(rows, again.centres)
    moved = np.flatnonzero(first != second)
    gaps = scores[moved, second[moved]] - scores[moved, first[moved]]
    assert len(moved) <= len(rows) // 100 and (np.abs(gaps) <= 1e-4).all(), (moved, gaps)
    assert Lists(rows, lists=42).probes == 7  # a sixth of the lists by default


def test_the_listed_projected_search_finds_the_naive_neighbours(tmp_path, monkeypatch):
    monkeypatch.setattr(projection, "PROJECT_FROM_ROWS", 1_000)
    monkeypatch.setattr(lists, "LISTS_FROM_ROWS", 2_000)
    monkeypatch.setattr(projection, "PROJECTED_DIMENSION", 32)
    monkeypatch.setattr(lists, "CANDIDATES", 150)
    vectors = sentence_like(3_000, 96)
    queries = sentence_like(40, 96, seed=1)
    held = ResidentVectors(dataset(tmp_path / "l.lance", vectors), ["id", "text"],
                           projected=True)
    assert held.projection is not None and held.projection.lists is not None
    assert len(held.projection.lists.centres) == 55  # about sqrt(3,000)
    found = 0
    # the shortlists `nearest` reads: the same call on the same unit rows, in this process
    shortlists = held.projection.shortlist(unit_rows(queries), 10)
    for query, hits, shortlist in zip(queries, held.nearest(queries, 10), shortlists,
                                      strict=True):
        expected = dict(naive(vectors, query, len(vectors)))
        found += len({h["id"] for h in hits} & {i for i, _ in naive(vectors, query, 10)})
        # the hits are the shortlist's best 10 by exact cosine, up to rows within 2e-6 of its
        # 10th (past the float32 scores' error, 96 products of unit rows: under ~6e-7, on any
        # CPU; one query here has its 10th and 11th 9e-7 apart): every row clearly above the
        # 10th is a hit, no hit is clearly below it; nearest first by their own scores, each
        # the exact cosine (float32 products against float64 sums)
        ranked = naive(vectors[shortlist], query, len(shortlist))
        tenth = ranked[9][1]
        got = {h["id"] for h in hits}
        scored = {f"row{shortlist[int(i[3:])]}": score for i, score in ranked}
        assert {i for i, score in scored.items() if score > tenth + 2e-6} <= got
        assert all(scored[i] >= tenth - 2e-6 for i in got) and len(got) == 10
        assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
        np.testing.assert_allclose([h["score"] for h in hits],
                                   [expected[h["id"]] for h in hits], atol=1e-5)
    # a sixth of 55 lists of random rows (no clusters to follow): measured 0.62 of the true
    # neighbours found (the table's own rows, each in its own list: 0.99); sentence vectors
    # are kinder (0.97 at a million Brown rows)
    assert found / (len(queries) * 10) >= 0.5
    assert 0.9 <= held.projection.recall <= 1.0
    # what the service's GET /info says of it
    assert resident_search(held).startswith(
        "in memory: a 32-d projection first in 55 k-means lists, the nearest 9 read, the best "
        "rows re-ranked exactly (recall@10 ")


def test_duplicated_rows_still_give_every_query_its_rows():
    # 3,000 copies of one row and 30 others: one list holds nearly all of them, the lists the
    # same copies would have started from are one, and a query near the copies reads past its
    # probes until it has `count` rows
    rng = np.random.default_rng(4)
    rows = np.concatenate([np.tile(rng.standard_normal((1, 16)), (3_000, 1)),
                           rng.standard_normal((30, 16))]).astype(np.float32)
    built = Lists(rows, lists=40, probes=1)
    assert len(built.centres) <= 31 and built.sizes.min() >= 1
    queries = np.concatenate([rows[:1], rows[-3:]])
    for found in built.shortlist(queries, 50):
        assert len(found) == 50 and len(set(found.tolist())) == 50
    same = np.ones((500, 8), np.float32)  # every row the same: one list, every query its rows
    only = Lists(same, lists=20)
    assert len(only.centres) == 1
    assert [len(f) for f in only.shortlist(same[:2], 10)] == [10, 10]

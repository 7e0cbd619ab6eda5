"""The k-means lists of a large table's projected rows (`lists`): each query's shortlist
against a naive reference (every row's list and every list's distance computed one by one, the
probed rows' products sorted), all lists probed is the full scan, the same rows give the same
lists, and the projected search built on lists (from LISTS_FROM_ROWS rows) still finds the
naive neighbours with their exact scores."""

from __future__ import annotations

import numpy as np

from sentray.index import lists, projection
from sentray.index.lists import Lists
from sentray.index.resident import ResidentVectors
from tests.index.test_projection import sentence_like
from tests.index.test_resident import dataset, naive


def clustered(rows: int, dimension: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((12, dimension)) * 3
    return (centres[rng.integers(0, 12, rows)]
            + rng.standard_normal((rows, dimension))).astype(np.float32)


def naive_shortlist(built: Lists, rows: np.ndarray, query: np.ndarray, count: int) -> set:
    def distance(a, b):
        return float(sum((float(x) - float(y)) ** 2 for x, y in zip(a, b, strict=True)))
    home = [min(range(len(built.centres)), key=lambda c: distance(row, built.centres[c]))
            for row in rows]
    probed = sorted(range(len(built.centres)),
                    key=lambda c: distance(query, built.centres[c]))[:built.probes]
    inside = [i for i in range(len(rows)) if home[i] in probed]
    best = sorted(inside, key=lambda i: -float(np.dot(rows[i].astype(np.float64), query)))
    return set(best[:count])


def test_each_shortlist_is_the_naive_one():
    rows = clustered(600, 8)
    built = Lists(rows, lists=12, probes=3)
    assert built.bounds[0] == 0 and built.bounds[-1] == len(rows)
    assert sorted(built.order.tolist()) == list(range(len(rows)))
    queries = clustered(6, 8, seed=1)
    for query, found in zip(queries, built.shortlist(queries, 40), strict=True):
        # random float rows: no two products tie, so the sets are the same on any CPU
        assert set(found.tolist()) == naive_shortlist(built, rows, query, 40)


def test_every_list_probed_is_the_full_scan_and_the_same_rows_give_the_same_lists():
    rows = clustered(2_000, 16)
    built = Lists(rows, lists=40, probes=40)
    queries = clustered(5, 16, seed=2)
    for query, found in zip(queries, built.shortlist(queries, 25), strict=True):
        assert set(found.tolist()) == set(np.argsort(-(rows @ query))[:25].tolist())
    np.testing.assert_array_equal(Lists(rows, lists=40).centres, built.centres)
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
    for query, hits in zip(queries, held.nearest(queries, 10), strict=True):
        expected = dict(naive(vectors, query, len(vectors)))
        found += len({h["id"] for h in hits} & {i for i, _ in naive(vectors, query, 10)})
        # the hits are the shortlist's best 10 by exact cosine, nearest first (random rows: no
        # ties); each score the exact cosine (float32 products against float64 sums)
        shortlist = held.projection.shortlist(query[None], 10)[0]
        best = naive(vectors[shortlist], query, 10)
        assert [h["id"] for h in hits] == [f"row{shortlist[int(i[3:])]}" for i, _ in best]
        np.testing.assert_allclose([h["score"] for h in hits],
                                   [expected[h["id"]] for h in hits], atol=1e-5)
    # a sixth of 55 lists of random rows (no clusters to follow): measured 0.62 of the true
    # neighbours found (the table's own rows, each in its own list: 0.99); sentence vectors
    # are kinder (0.97 at a million Brown rows)
    assert found / (len(queries) * 10) >= 0.5
    assert 0.9 <= held.projection.recall <= 1.0


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

"""The projected first pass of a search held in memory (`projection`): on rows shaped like
sentence vectors (a decaying spectrum), its hits against the naive reference (every cosine
computed and sorted): nearly all found, each found hit's score the exact cosine, ties in row
order; what it measures of itself when built; where it applies (`projects`); and that
`ResidentVectors(projected=True)` takes it only from PROJECT_FROM_ROWS rows."""

from __future__ import annotations

import numpy as np
import pytest

from sentray.index import projection, resident
from sentray.index.projection import Projection, candidates, projects
from sentray.index.resident import ResidentVectors
from tests.index.test_resident import dataset, naive


def sentence_like(rows: int, dimension: int, seed: int = 0) -> np.ndarray:
    """Unit rows whose variance falls off over the axes, as sentence vectors' does: most of it
    in the first few dozen directions (a random rotation of a decaying diagonal)."""
    rng = np.random.default_rng(seed)
    scales = 1.0 / np.arange(1, dimension + 1) ** 0.8
    rotation, _ = np.linalg.qr(rng.standard_normal((dimension, dimension)))
    matrix = (rng.standard_normal((rows, dimension)) * scales) @ rotation
    return (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)


def test_the_projected_search_finds_the_naive_neighbours_with_their_exact_scores(tmp_path,
                                                                                  monkeypatch):
    monkeypatch.setattr(projection, "PROJECT_FROM_ROWS", 1_000)
    vectors = sentence_like(3_000, 96)
    queries = sentence_like(40, 96, seed=1)
    monkeypatch.setattr(projection, "PROJECTED_DIMENSION", 32)
    monkeypatch.setattr(projection, "CANDIDATES", 150)
    held = ResidentVectors(dataset(tmp_path / "p.lance", vectors), ["id", "text"],
                           projected=True)
    assert held.projection is not None and held.projection.axes.shape == (96, 32)
    found, total = 0, 0
    for query, hits in zip(queries, held.nearest(queries, 10), strict=True):
        expected = dict(naive(vectors, query, len(vectors)))
        truth = [i for i, _ in naive(vectors, query, 10)]
        found += len({h["id"] for h in hits} & set(truth))
        total += len(truth)
        # every hit's score is its exact cosine (float32 products against float64 sums: a few
        # float32 steps), nearest first
        np.testing.assert_allclose([h["score"] for h in hits],
                                   [expected[h["id"]] for h in hits], atol=1e-5)
        assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
        assert all(h["text"] == f"text of {h['id']}" for h in hits)
    # 150 of 3,000 rows re-ranked: the rows' spread is in the first axes; measured 0.99+
    assert found / total >= 0.95
    # what it measured of itself when built: the same kind of recall, on its own rows
    assert 0.9 <= held.projection.recall <= 1.0


def test_ties_keep_row_order_and_a_shortlist_of_every_row_is_the_exact_search(tmp_path,
                                                                           monkeypatch):
    monkeypatch.setattr(projection, "PROJECT_FROM_ROWS", 100)
    monkeypatch.setattr(projection, "PROJECTED_DIMENSION", 2)
    monkeypatch.setattr(projection, "CANDIDATES", 200)  # more than the 150 rows that tie
    vectors = np.zeros((300, 4), dtype=np.float32)
    vectors[:, 0] = 1.0
    vectors[::2, 1] = 1.0  # even rows: (1, 1, 0, 0); odd rows: (1, 0, 0, 0)
    vectors[299] = (0, 0, 1, 0)
    held = ResidentVectors(dataset(tmp_path / "t.lance", vectors), ["id"], projected=True)
    assert held.projection is not None
    [hits] = held.nearest(np.array([[1, 1, 0, 0]], dtype=np.float32), 4)
    assert [h["id"] for h in hits] == ["row0", "row2", "row4", "row6"]
    # k past the candidates' share: every row compared, the exact search's answer
    monkeypatch.setattr(projection, "CANDIDATES", 10**6)
    query = np.array([[0.1, 0.2, 0.9, 0.0]], dtype=np.float32)
    [everything] = held.nearest(query, 300)
    assert [h["id"] for h in everything] == [i for i, _ in naive(vectors, query[0], 300)]


def test_where_the_projection_applies():
    assert projects(projection.PROJECT_FROM_ROWS, 384)
    assert not projects(projection.PROJECT_FROM_ROWS - 1, 384)
    assert not projects(10**6, projection.PROJECTED_DIMENSION)  # no narrower than the rows
    assert candidates(10, 50_000) == projection.CANDIDATES
    assert candidates(100, 50_000) == 100 * projection.CANDIDATES_PER_K
    assert candidates(10, 300) == 300


@pytest.mark.parametrize("projected", [False, True])
def test_below_its_rows_or_asked_exact_every_row_is_compared(tmp_path, projected):
    vectors = sentence_like(500, 200)
    held = ResidentVectors(dataset(tmp_path / "s.lance", vectors), ["id"], projected=projected)
    assert held.projection is None  # 500 rows < PROJECT_FROM_ROWS
    assert resident.search_mode("exact", rows=10**6, dimension=384, binary=False) == "exact"


def test_the_projection_is_fitted_on_a_spread_sample(monkeypatch):
    monkeypatch.setattr(projection, "FIT_ROWS", 100)
    matrix = sentence_like(1_000, 16)
    fitted = Projection(matrix, dimension=4)
    assert fitted.rows.shape == (1_000, 4) and fitted.axes.shape == (16, 4)
    # the axes are orthonormal columns
    np.testing.assert_allclose(fitted.axes.T @ fitted.axes, np.eye(4), atol=1e-5)

"""Vectors held in memory and searched exactly (`resident`): the k nearest rows against a
naive reference (every cosine computed and sorted), their columns taken from the right rows
(also after a deletion), ties in row order, k past the rows, float16 tables; and the rule
behind --search-mode."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

from sentray.index.resident import MEMORY_SEARCH_MIB, ResidentVectors, resident_mib, search_mode


def dataset(path, vectors: np.ndarray, value_type=None):
    value_type = value_type or pa.float32()
    ids = [f"row{i}" for i in range(len(vectors))]
    flat = pa.array(vectors.ravel(), type=value_type)
    table = pa.table({"id": ids, "text": [f"text of {i}" for i in ids],
                      "vector": pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1])})
    return lance.write_dataset(table, str(path), max_rows_per_file=64)  # several fragments


def naive(vectors: np.ndarray, query: np.ndarray, k: int) -> list[tuple[str, float]]:
    scores = [float(v @ query / (np.linalg.norm(v) * np.linalg.norm(query))) for v in vectors]
    order = sorted(range(len(vectors)), key=lambda i: (-scores[i], i))[:k]
    return [(f"row{i}", scores[i]) for i in order]


def test_the_nearest_rows_are_the_naive_references(tmp_path):
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((300, 24)).astype(np.float32)
    queries = rng.standard_normal((37, 24)).astype(np.float32)  # more than one product's batch
    resident = ResidentVectors(dataset(tmp_path / "t.lance", vectors), ["id", "text"])
    found = resident.nearest(queries, 7)
    for query, hits in zip(queries, found, strict=True):
        expected = naive(vectors, query, 7)
        assert [h["id"] for h in hits] == [i for i, _ in expected]
        assert all(h["text"] == f"text of {h['id']}" for h in hits)
        # float32 products (BLAS) against float64 sums: a few float32 steps of a cosine
        np.testing.assert_allclose([h["score"] for h in hits], [s for _, s in expected],
                                   atol=1e-5)


def test_rows_are_taken_by_position_after_a_deletion_and_ties_keep_row_order(tmp_path):
    vectors = np.zeros((200, 4), dtype=np.float32)
    vectors[:, 0] = 1.0
    vectors[::2, 1] = 1.0  # even rows: (1, 1, 0, 0); odd rows: (1, 0, 0, 0)
    table = dataset(tmp_path / "t.lance", vectors)
    table.delete("id = 'row0' OR id = 'row100'")
    resident = ResidentVectors(lance.dataset(str(tmp_path / "t.lance")), ["id", "text"])
    assert resident.rows == 198
    [hits] = resident.nearest(np.array([[1, 1, 0, 0]], dtype=np.float32), 4)
    assert [h["id"] for h in hits] == ["row2", "row4", "row6", "row8"]
    assert [h["text"] for h in hits] == [f"text of row{i}" for i in (2, 4, 6, 8)]
    [everything] = resident.nearest(np.array([[0, 1, 0, 0]], dtype=np.float32), 1000)
    assert len(everything) == 198 and len({h["id"] for h in everything}) == 198


def test_a_float16_table_is_searched_as_float32(tmp_path):
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((90, 16)).astype(np.float16)
    resident = ResidentVectors(dataset(tmp_path / "h.lance", vectors, pa.float16()), ["id"])
    query = rng.standard_normal(16).astype(np.float32)
    [hits] = resident.nearest(query[None], 5)
    assert [h["id"] for h in hits] == [i for i, _ in naive(vectors.astype(np.float32), query, 5)]


def test_the_rule_behind_search_mode():
    rows_that_fit = int(MEMORY_SEARCH_MIB * 2**20 / (384 * 4))
    assert resident_mib(rows_that_fit, 384) <= MEMORY_SEARCH_MIB
    assert search_mode("auto", rows=rows_that_fit, dimension=384, binary=False) == "memory"
    assert search_mode("auto", rows=rows_that_fit + 1, dimension=384, binary=False) == "table"
    assert search_mode("memory", rows=10**7, dimension=768, binary=False) == "memory"
    assert search_mode("exact", rows=10**7, dimension=768, binary=False) == "exact"
    assert search_mode("table", rows=10, dimension=8, binary=False) == "table"
    assert search_mode("auto", rows=10, dimension=8, binary=True) == "table"
    for held in ("memory", "exact"):
        with pytest.raises(ValueError, match="hamming"):
            search_mode(held, rows=10, dimension=8, binary=True)
    with pytest.raises(ValueError, match="auto, memory, exact, table"):
        search_mode("ram", rows=10, dimension=8, binary=False)


def test_rows_are_scaled_a_chunk_at_a_time_as_all_at_once(monkeypatch):
    from sentray.index import resident

    monkeypatch.setattr(resident, "UNIT_CHUNK_ROWS", 7)  # 50 rows: chunks of 7, the last of 1
    rng = np.random.default_rng(5)
    matrix = rng.standard_normal((50, 24)).astype(np.float32)
    matrix[10] = 0  # a zero row stays zero
    naive = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-30)
    copied = resident.unit_rows(matrix)
    scaled = resident.unit_rows(matrix.copy(), in_place=True)
    # each row's norm is the same reduction over the same row whichever chunk holds it; the
    # reference divides in another expression: float32 steps apart at most
    np.testing.assert_allclose(copied, naive, rtol=1e-6, atol=0)
    # the copy and the in-place call run the same chunked loop on the same numbers (two
    # allocations, whose alignment may order a SIMD reduction differently: float32 rounding)
    np.testing.assert_allclose(scaled, copied, rtol=1e-6, atol=0)
    assert not copied[10].any() and copied is not matrix

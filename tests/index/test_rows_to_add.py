"""The rows an index run adds (sentray.index.rows_to_add): what a table holds is runs of rows
per source, so a part's rows are added once however the embedding job cut or merged its parts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sentray.index.ann import default_nprobes, default_sub_vectors, index_action
from sentray.index.config import IndexConfig
from sentray.index.index_state import add_run
from sentray.index.rows_to_add import missing_runs, parts_to_add


def test_missing_runs_are_what_the_done_runs_leave():
    assert missing_runs([], 0, 10) == [(0, 10)]
    assert missing_runs([[0, 4], [6, 8]], 0, 10) == [(4, 6), (8, 10)]
    assert missing_runs([[0, 10]], 2, 5) == []
    assert missing_runs([[3, 5]], 0, 4) == [(0, 3)]


@settings(max_examples=60)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 10)), max_size=8),
       st.integers(0, 40), st.integers(1, 20))
def test_added_and_missing_runs_partition_every_row(runs, first, length):
    done: list[list[int]] = []
    for start, size in runs:
        done = add_run(done, start, start + size)
    assert all(a < b for a, b in done) and all(b < c for (_, b), (c, _) in zip(done, done[1:], strict=False))
    covered = {r for a, b in done for r in range(a, b)}
    assert covered == {r for start, size in runs for r in range(start, start + size)}
    missing = {r for a, b in missing_runs(done, first, first + length) for r in range(a, b)}
    assert missing == set(range(first, first + length)) - covered


def test_the_rows_to_add_skip_what_the_table_holds_even_after_parts_are_merged():
    # the table read a.txt's rows [0, 64) from a part; the embedding job later merged its
    # parts into one file of [0, 100): only [64, 100) of that file is still to add
    parts = [("a-1", "/o/a-1/part-0-100", 0, 100), ("b-2", "/o/b-2/part-0-5", 0, 5)]
    work = parts_to_add(parts, {"a-1": [[0, 64]], "b-2": [[0, 5]]})
    assert [(w.source_key, w.runs, w.rows) for w in work] == [("a-1", ((64, 100),), 36)]
    assert parts_to_add(parts, {"a-1": [[0, 100]], "b-2": [[0, 5]]}) == []


def test_the_ann_rule():
    from sentray.bulk_embedding.output import EmbeddingDescription

    floats = EmbeddingDescription({"output_dtype": "float32", "dimension": 32,
                                   "truncate_dim": None}, None, "out")
    bits = EmbeddingDescription({"output_dtype": "binary", "dimension": 32,
                                 "truncate_dim": None}, None, "out")
    config = IndexConfig(min_index_rows=100, retrain_growth=0.5)
    assert index_action(config, floats, 99, 0, 0) is None  # small: exact search
    assert index_action(config, floats, 100, 0, 0) == "train"
    assert index_action(config, floats, 150, 100, 50) == "extend"
    assert index_action(config, floats, 151, 100, 51) == "train"
    assert index_action(config, floats, 120, 100, 0) is None
    assert index_action(config, bits, 10_000, 0, 0) is None  # hamming: exact
    assert default_sub_vectors(384) == 48 and default_sub_vectors(36) == 4
    # a sixth of the partitions, at least 20 (all of a small index's): 41 of 1M rows' 244
    assert [default_nprobes(p) for p in (0, 12, 120, 121, 244, 2441)] == [20, 20, 20, 21, 41, 407]


def test_a_table_written_under_the_old_metadata_key_is_still_read():
    """Index tables once said what their vectors are under `sentray.embedding`, nested; the
    description reads that as it reads the shared key, and writes the shared key."""
    import json

    from sentray.bulk_embedding.output import METADATA_KEY, EmbeddingDescription

    settings = {"output_dtype": "float32", "dimension": 32, "truncate_dim": None}
    old = {b"sentray.embedding": json.dumps({"settings": settings, "code_book": None,
                                             "embeddings": "out/emb", "digest": "x"}).encode()}
    described = EmbeddingDescription.from_metadata(old, "out/emb/_index.lance")
    assert described == EmbeddingDescription(settings, None, "out/emb")
    assert set(described.to_metadata()) == {METADATA_KEY}
    assert EmbeddingDescription.from_metadata(described.to_metadata(), "elsewhere") == described
    with pytest.raises(ValueError, match="no sentray.vectors metadata"):
        EmbeddingDescription.from_metadata({}, "t.lance")

"""Duplicate ids in a Parquet --id-column: a warning with the count, every row still processed
(the choice: sentray/corpus/duplicate_ids.py)."""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.parquet as pq

from sentray.corpus.duplicate_ids import count_duplicate_ids
from sentray.corpus.sources import CorpusConfig, discover_sources


def test_duplicates_across_files_are_counted_and_named(tmp_path, caplog):
    pq.write_table(pa.table({"text": ["a", "b", "c"], "id": ["x", "y", "x"]}),
                   tmp_path / "one.parquet")
    pq.write_table(pa.table({"text": ["d", "e", "f"], "id": ["y", "z", None]}),
                   tmp_path / "two.parquet")
    sources = discover_sources(CorpusConfig(input=str(tmp_path), id_column="id"))
    with caplog.at_level(logging.WARNING):
        found = count_duplicate_ids(sources, "id")
    assert found.rows == 2 and sorted(found.examples) == ["x", "y"]  # x twice, y twice
    assert "2 rows share their --id-column 'id' value" in caplog.text


def test_unique_ids_or_no_id_column_say_nothing(tmp_path, caplog):
    pq.write_table(pa.table({"text": ["a", "b"], "id": [1, 2]}), tmp_path / "one.parquet")
    sources = discover_sources(CorpusConfig(input=str(tmp_path), id_column="id"))
    with caplog.at_level(logging.WARNING):
        assert count_duplicate_ids(sources, "id").rows == 0
        assert count_duplicate_ids(sources, None).rows == 0
    assert caplog.text == ""

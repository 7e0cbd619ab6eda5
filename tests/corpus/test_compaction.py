"""Output files decoupled from the actors' blocks: a finished source's parts merged into files
of N rows, named by their row runs, the rows and their counts unchanged, the merged parts gone;
a compaction stopped half-way leaves nothing counted twice."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from sentray.corpus import part_files
from sentray.corpus.compaction import groups_of, merge_parts
from sentray.corpus.source_runs import source_runs
from sentray.corpus.sources import Source
from sentray.kit import storage


def block(first: int, end: int, total: int, copied: int = 0) -> pa.Table:
    rows = list(range(first, end))
    return pa.table({"id": [f"s:{r}" for r in rows], "row": rows, "source": ["k"] * len(rows),
                     "source_rows": [total] * len(rows),
                     "_copied": [i < copied for i in range(len(rows))]}).replace_schema_metadata(
        {b"sentray.vectors": b'{"dtype": "int8"}'})


def keyed_source(total: int) -> Source:
    class Keyed(Source):
        @property
        def key(self) -> str:
            return "k"

    return Keyed("s", "s", None, "s", "parquet", num_rows=total)


def test_parts_are_merged_into_files_of_n_rows_named_by_their_runs(tmp_path):
    out = storage.locate(str(tmp_path))
    for first, end, copied in [(0, 10, 2), (10, 20, 0), (20, 25, 1), (25, 40, 3)]:
        part_files.write_part(out, "k", block(first, end, 40, copied))
    runs = source_runs([out], keyed_source(40))
    groups = groups_of(runs.parts, rows_per_file=20)
    assert [[(p.first, p.end) for p in g] for g in groups] == [
        [(0, 10), (10, 20)], [(20, 25), (25, 40)]]
    for group in groups:
        merge_parts(group)
    names = sorted(p.name for p in (tmp_path / "k").iterdir())
    assert names == [part_files.part_name(0, 20, 40), part_files.part_name(20, 40, 40)]
    merged = source_runs([out], keyed_source(40))
    assert merged.complete and merged.done == ((0, 20), (20, 40))
    table = pq.read_table(tmp_path / "k" / names[0])
    assert table.column("row").to_pylist() == list(range(20))
    assert table.schema.metadata[b"sentray.vectors"] == b'{"dtype": "int8"}'
    assert part_files.read_counts(merged.parts) == {"copied": 6}
    assert json.loads(pq.read_metadata(tmp_path / "k" / names[1]).metadata[
        part_files.COUNTS_KEY]) == {"copied": 4}


def test_a_compaction_stopped_before_deleting_leaves_its_parts_as_stale(tmp_path):
    out = storage.locate(str(tmp_path))
    for first, end in [(0, 10), (10, 20)]:
        part_files.write_part(out, "k", block(first, end, 20))
    runs = source_runs([out], keyed_source(20))
    parts = list(runs.parts)
    merged = merge_parts(parts)
    for part in parts:  # as if the task died after writing the merged file
        part_files.write_part(out, "k", block(part.first, part.end, 20))
    again = source_runs([out], keyed_source(20))
    assert again.complete and again.done == ((0, 20),)
    assert [p.path for p in again.parts] == [merged]
    assert sorted((p.first, p.end) for p in again.stale) == [(0, 10), (10, 20)]


def with_status(table: pa.Table, statuses: list[str]) -> pa.Table:
    return table.append_column("status", pa.array(statuses))


def test_a_summary_reads_value_counts_from_footers_and_counts_older_parts_itself(tmp_path,
                                                                                 monkeypatch):
    """A part keeps the value counts of its counted columns in its footer, so a summary reads
    footers only; a part written before they were kept there is counted from its column, and
    compacting a mix keeps every count."""
    out = storage.locate(str(tmp_path))
    part_files.write_part(out, "k", with_status(block(0, 4, 8, copied=1),
                                                ["ok", "ok", "truncated", "ok"]))
    old = with_status(block(4, 8, 8), ["ok", "empty", "empty", "ok"]).drop_columns(["_copied"])
    monkeypatch.setattr(part_files, "COUNTED_COLUMNS", ())  # as older sentray wrote it
    part_files.write_part(out, "k", old)
    monkeypatch.undo()
    parts = source_runs([out], keyed_source(8)).parts
    assert json.loads(pq.read_metadata(parts[0].path).metadata[part_files.COUNTS_KEY]) == {
        "copied": 1, "status": {"ok": 3, "truncated": 1}}
    expected = {"copied": 1, "status": {"ok": 5, "truncated": 1, "empty": 2}}
    assert part_files.read_counts(parts, columns=("status",)) == expected
    read = []
    monkeypatch.setattr(part_files, "read_column",
                        lambda part, column: read.append(part.first) or pq.read_table(
                            part.path, columns=[column]).column(column))
    part_files.read_counts(parts, columns=("status",))
    assert read == [4]  # only the older part's column was read
    merge_parts(parts)
    merged = source_runs([out], keyed_source(8)).parts
    read.clear()
    assert part_files.read_counts(merged, columns=("status",)) == expected
    assert read == []


def test_few_rows_merge_in_the_driver_many_in_ray_tasks(tmp_path, monkeypatch):
    """`compact` merges a few rows in the driver (no Ray task to wait for) and more as Ray tasks
    (here: the threshold set to 0, with Ray's remote replaced by an in-process stand-in that
    records the calls); both give the same files."""
    import ray

    from sentray.corpus import compaction

    calls = []

    class Remote:
        def __init__(self, function):
            self.function = function

        def remote(self, group):
            calls.append(len(group))
            return self.function(group)

    monkeypatch.setattr(ray, "remote", lambda **options: Remote)
    monkeypatch.setattr(ray, "get", lambda results: results)
    names = []
    for threshold, folder in ((compaction.DRIVER_MERGE_ROWS, "driver"), (0, "tasks")):
        monkeypatch.setattr(compaction, "DRIVER_MERGE_ROWS", threshold)
        out = storage.locate(str(tmp_path / folder))
        for first, end in [(0, 10), (10, 20), (20, 25), (25, 40)]:
            part_files.write_part(out, "k", block(first, end, 40))
        stats = compaction.compact(out, [keyed_source(40)], rows_per_file=20)
        assert (stats["files_before"], stats["files_after"]) == (4, 2)
        names.append(sorted(p.name for p in (tmp_path / folder / "k").iterdir()))
    assert names[0] == names[1] == [part_files.part_name(0, 20, 40),
                                    part_files.part_name(20, 40, 40)]
    assert calls == [2, 2]  # only the second compaction used tasks


def test_a_column_named_like_a_counter_is_written_as_it_is(tmp_path):
    """Only the embedding actors' counters (`part_files.SUMMED_COLUMNS`) become counts: any other
    column, `_x` included, is data and comes out whole."""
    out = storage.locate(str(tmp_path))
    table = block(0, 4, 4, copied=1).append_column("_x", pa.array([1, 2, 3, 4]))
    part_files.write_part(out, "k", table)
    (part,) = (tmp_path / "k").glob("part-*.parquet")
    written = pq.read_table(part)
    assert written.column("_x").to_pylist() == [1, 2, 3, 4]
    assert "_copied" not in written.column_names and "source_rows" not in written.column_names
    assert json.loads(written.schema.metadata[part_files.COUNTS_KEY]) == {"copied": 1}

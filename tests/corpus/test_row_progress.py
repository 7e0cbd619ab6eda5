"""Progress a person can read: rows written, counted from the part names."""

from __future__ import annotations

import logging
import time

from sentray.corpus import part_files
from sentray.corpus.row_progress import RowProgress, rows_written
from sentray.corpus.sources import Source
from sentray.kit import storage


def touch_part(folder, key, first, end, total):
    (folder / key).mkdir(parents=True, exist_ok=True)
    (folder / key / part_files.part_name(first, end, total)).write_bytes(b"")


def test_rows_are_counted_once_across_folders(tmp_path):
    out, rejects = tmp_path / "out", tmp_path / "rejects"
    touch_part(out, "a", 0, 100, 300)
    touch_part(rejects, "a", 0, 100, 300)  # the same range's rejected rows
    touch_part(out, "a", 100, 250, 300)
    folders = [storage.locate(str(out)), storage.locate(str(rejects))]
    assert rows_written(folders, "a") == 250
    assert rows_written(folders, "missing") == 0


def test_a_log_gets_progress_lines_and_one_closing_line(tmp_path, caplog):
    out = tmp_path / "out"
    source = Source(uri="a.parquet", path="a.parquet", filesystem=None, name="a",
                    format="parquet", num_rows=300)
    folders = [storage.locate(str(out))]
    caplog.set_level(logging.INFO, logger="sentray.corpus.row_progress")
    with RowProgress(folders, [source], every=0.05, poll=0.02) as bar:
        assert bar.total == 300 and bar.exact
        touch_part(out, source.key, 0, 100, 300)
        time.sleep(0.3)
        touch_part(out, source.key, 100, 300, 300)
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("100/300 rows, ") for line in lines), lines
    assert lines[-1].startswith("300/300 rows"), lines


def test_the_start_is_said_and_the_time_left_counts_down_between_blocks(tmp_path, monkeypatch):
    """Before the first rows: how long the start has taken, no "0 rows/s"; the rate from the
    first block to the last; between blocks the time left shrinks, never grows."""
    source = Source(uri="a.parquet", path="a.parquet", filesystem=None, name="a",
                    format="parquet", num_rows=400)
    progress = RowProgress([storage.locate(str(tmp_path))], [source])
    start = progress._started
    assert progress.line(start + 30) == "0/400 rows: starting (30 s: model, plan, actors)"
    progress.count = lambda: 100  # the first block lands 20 s in
    monkeypatch.setattr(time, "monotonic", lambda: start + 20)
    progress._update()
    progress.count = lambda: 200  # the next 10 s later: 10 rows/s
    monkeypatch.setattr(time, "monotonic", lambda: start + 30)
    progress._update()
    assert progress.rate() == 10.0
    early, later = progress.line(start + 32), progress.line(start + 38)
    assert early == "200/400 rows, 10 rows/s, about 18 s left", early
    assert later == "200/400 rows, 10 rows/s, about 12 s left", later


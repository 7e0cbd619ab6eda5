"""Progress a person can read: rows written, counted from the part names."""

from __future__ import annotations

import logging

from sentray import parts, progress, storage
from sentray.corpus import Source


def touch_part(folder, key, first, end, total):
    (folder / key).mkdir(parents=True, exist_ok=True)
    (folder / key / parts.part_name(first, end, total)).write_bytes(b"")


def test_rows_are_counted_once_across_folders(tmp_path):
    out, rejects = tmp_path / "out", tmp_path / "rejects"
    touch_part(out, "a", 0, 100, 300)
    touch_part(rejects, "a", 0, 100, 300)  # the same range's rejected rows
    touch_part(out, "a", 100, 250, 300)
    folders = [storage.locate(str(out)), storage.locate(str(rejects))]
    assert progress.rows_written(folders, "a") == 250
    assert progress.rows_written(folders, "missing") == 0


def test_a_log_gets_progress_lines_and_one_closing_line(tmp_path, caplog):
    out = tmp_path / "out"
    source = Source(uri="a.parquet", path="a.parquet", filesystem=None, name="a",
                    format="parquet", num_rows=300)
    folders = [storage.locate(str(out))]
    caplog.set_level(logging.INFO, logger="sentray.progress")
    with progress.RowProgress(folders, [source], every=0.05, poll=0.02) as bar:
        assert bar.total == 300 and bar.exact
        touch_part(out, source.key, 0, 100, 300)
        import time

        time.sleep(0.3)
        touch_part(out, source.key, 100, 300, 300)
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("100/300 rows") and "left" in line for line in lines), lines
    assert lines[-1].startswith("300/300 rows"), lines


def test_steps_pass_items_through_in_a_log():
    assert list(progress.steps(range(3), desc="x")) == [0, 1, 2]


def test_ray_noise_is_dropped_from_forwarded_worker_logs(capsys):
    """The driver's handler of forwarded worker lines drops Ray's noise and prints the rest
    as Ray does (ray._private, pinned ray==2.60.0: this test breaks if that hook moves)."""
    from ray._private import worker

    dispatcher = worker.global_worker_stdstream_dispatcher
    saved = list(dispatcher.handlers)
    try:
        dispatcher.add_handler("ray_print_logs", lambda data: None)
        progress._filter_worker_logs(progress.RAY_NOISE)
        dispatcher.emit({"ip": "127.0.0.1", "pid": 1234, "job": "01000000", "is_err": False,
                         "task_name": "", "actor_name": "RayTrainWorker", "localhost": "x",
                         "lines": ["step 10 loss 0.5",
                                   "Failed to query Ray Train Controller actor state. ...",
                                   "Loading weights: 100%|####| 103/103"]})
    finally:
        dispatcher.handlers = saved
    out = capsys.readouterr().out
    assert "step 10 loss 0.5" in out
    assert "Failed to query" not in out and "Loading weights" not in out

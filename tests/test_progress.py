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
    """Both ways Ray prints forwarded lines on the driver, the log dispatcher's handler and
    `print_to_stdstream` (the raylet's notes), drop Ray's noise and print the rest as Ray does
    (ray._private, pinned ray==2.60.0: this test breaks if those hooks move)."""
    from ray._private import worker

    dispatcher = worker.global_worker_stdstream_dispatcher
    saved, saved_print = list(dispatcher.handlers), worker.print_to_stdstream
    try:
        dispatcher.add_handler("ray_print_logs", lambda data: None)
        progress._filter_worker_logs(progress.RAY_NOISE)
        dispatcher.emit({"ip": "127.0.0.1", "pid": 1234, "job": "01000000", "is_err": False,
                         "task_name": "", "actor_name": "RayTrainWorker", "localhost": "x",
                         "lines": ["step 10 loss 0.5",
                                   "Failed to query Ray Train Controller actor state. ...",
                                   "Loading weights: 100%|####| 103/103"]})
        worker.print_to_stdstream({"pid": "raylet", "is_err": False, "lines": [
            "WARNING: 8 PYTHON worker processes have been started on node: x"]},
            ignore_prefix=False)
        worker.print_to_stdstream({"pid": "raylet", "is_err": False, "lines": [
            "A worker died or was killed while executing a task"]}, ignore_prefix=False)
    finally:
        dispatcher.handlers = saved
        worker.print_to_stdstream = saved_print
    out = capsys.readouterr().out
    assert "step 10 loss 0.5" in out and "A worker died" in out
    assert "Failed to query" not in out and "Loading weights" not in out
    assert "PYTHON worker processes" not in out


def test_noise_and_the_traceback_after_it_are_dropped_across_batches():
    """A Ray warning with a traceback, split over two forwarded batches of one process, goes
    whole; the job's next line stays; Ray's internal actors and the raylet say nothing."""
    skipping: dict = {}
    keep = progress.keep_lines
    assert keep({"pid": 1, "lines": ["Failed to send resource request for train-1. If ...",
                                     "Traceback (most recent call last):"]},
                progress.RAY_NOISE, skipping) == []
    assert keep({"pid": 1, "lines": ['  File "x.py", line 3, in get', "    ray.get(",
                                     "ray.exceptions.GetTimeoutError: Get timed out",
                                     "step 1/4 epoch 0 loss 0.1"]},
                progress.RAY_NOISE, skipping) == ["step 1/4 epoch 0 loss 0.1"]
    assert keep({"pid": 2, "lines": ["  indented output of the job"]},
                progress.RAY_NOISE, skipping) == ["  indented output of the job"]
    assert keep({"pid": 3, "actor_name": "PlacementGroupCleaner",
                 "lines": ["Found multiple active Ray instances"]}, progress.RAY_NOISE) == []
    assert keep({"pid": "autoscaler", "lines": ["Resized to 2 CPUs."]}, progress.RAY_NOISE) == []

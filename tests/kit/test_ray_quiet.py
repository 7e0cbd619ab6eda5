"""Ray's noise dropped from forwarded worker logs, the job's lines and real failures kept; the
private hooks behind a guard that fails open; progress bars only on a terminal."""

from __future__ import annotations

from sentray.kit.progress_bars import steps
from sentray.kit.ray_quiet import RAY_NOISE, filter_worker_logs, keep_lines


def test_steps_pass_items_through_in_a_log():
    assert list(steps(range(3), desc="x")) == [0, 1, 2]


def test_ray_noise_is_dropped_from_forwarded_worker_logs(capsys):
    """Both ways Ray prints forwarded lines on the driver, the log dispatcher's handler and
    `print_to_stdstream` (the raylet's notes), drop Ray's noise and print the rest as Ray does
    (ray._private, pinned ray==2.60.0: this test breaks if those hooks move)."""
    from ray._private import worker

    dispatcher = worker.global_worker_stdstream_dispatcher
    saved, saved_print = list(dispatcher.handlers), worker.print_to_stdstream
    try:
        dispatcher.add_handler("ray_print_logs", lambda data: None)
        filter_worker_logs(RAY_NOISE)
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
    keep = keep_lines
    assert keep({"pid": 1, "lines": ["Failed to send resource request for train-1. If ...",
                                     "Traceback (most recent call last):"]},
                RAY_NOISE, skipping) == []
    assert keep({"pid": 1, "lines": ['  File "x.py", line 3, in get', "    ray.get(",
                                     "ray.exceptions.GetTimeoutError: Get timed out",
                                     "step 1/4 epoch 0 loss 0.1"]},
                RAY_NOISE, skipping) == ["step 1/4 epoch 0 loss 0.1"]
    assert keep({"pid": 2, "lines": ["  indented output of the job"]},
                RAY_NOISE, skipping) == ["  indented output of the job"]
    assert keep({"pid": 3, "actor_name": "PlacementGroupCleaner",
                 "lines": ["Found multiple active Ray instances"]}, RAY_NOISE) == []
    assert keep({"pid": "autoscaler", "lines": ["Resized to 2 CPUs."]}, RAY_NOISE) == []


def test_a_missing_private_hook_warns_once_and_leaves_rays_output_alone(monkeypatch, caplog):
    """If Ray moves the private printers the log filter replaces, the job still starts: one
    warning says the filter is off, and Ray's own printer stays in place (output unfiltered)."""
    from ray._private import worker

    from sentray.kit import ray_quiet

    printer = worker.print_to_stdstream
    monkeypatch.delattr(worker, "global_worker_stdstream_dispatcher")
    monkeypatch.setattr(ray_quiet, "_warned", set())
    with caplog.at_level("WARNING", logger="sentray.kit.ray_quiet"):
        ray_quiet.quiet_ray()
        ray_quiet.quiet_ray()  # a second job in the same process: no second warning
    warnings = [r.getMessage() for r in caplog.records if "is off" in r.getMessage()]
    assert len(warnings) == 1 and "filtering Ray's forwarded log lines" in warnings[0]
    assert worker.print_to_stdstream is printer  # nothing half-replaced


def test_a_missing_agent_port_hook_starts_ray_as_ray_would(monkeypatch, caplog):
    """The free port for the node agent rides on a private Ray class; without it the cluster
    starts on Ray's own settings, after one warning."""
    from ray._private import parameter

    from sentray.kit import ray_cluster, ray_quiet

    monkeypatch.setattr(ray_quiet, "_warned", set())
    with monkeypatch.context() as patch, caplog.at_level("WARNING",
                                                        logger="sentray.kit.ray_quiet"):
        patch.delattr(parameter, "RayParams")
        with ray_cluster._agent_on_any_port():
            assert not hasattr(parameter, "RayParams")  # nothing patched in its place
    assert any("node agent" in r.getMessage() for r in caplog.records)
    with ray_cluster._agent_on_any_port():  # with the hook: the default port is 0, for one call
        assert parameter.RayParams(node_ip_address="127.0.0.1").dashboard_agent_listen_port == 0
    assert parameter.RayParams(node_ip_address="127.0.0.1").dashboard_agent_listen_port != 0


def test_hugging_face_progress_bars_are_off_without_importing_transformers():
    """quiet_libraries sets the environment both libraries read when imported (it no longer
    imports transformers, 0.7 s of every command's start): imported after it, their bars are
    off; in a fresh interpreter, so that neither is imported already."""
    import os
    import subprocess
    import sys

    code = ("import sys; from sentray.kit.ray_quiet import quiet_libraries; quiet_libraries(); "
            "print('transformers' in sys.modules); import transformers.utils.logging as t; "
            "import huggingface_hub.utils as h; "
            "print(t.is_progress_bar_enabled(), h.are_progress_bars_disabled())")
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_DISABLE_PROGRESS_BARS", "SENTRAY_VERBOSE")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False", "True"]

"""A job's own local Ray cluster when it does not come up: Ray's raylet gives its node agents
fixed times to start (ray-project/ray#65983), and on a busy machine it exits; Ray then says only
"The current node timed out during startup". The job tries once more, names the raylet's reason,
and ends what the failed start left running. Ray itself is stood in for (no cluster starts)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray

from sentray.kit import ray_cluster

RAYLET_FATAL = (
    "[2026-12-01 18:09:39,040 C 24379 24379] (raylet) node_manager.cc:3576:  An unexpected "
    "system state has occurred. You have likely discovered a bug in Ray. Please report this "
    "issue at https://github.com/ray-project/ray/issues and we'll work with you to fix it. "
    "Check failed: statussetor3576.has_value() Timed out waiting for file {session}/"
    "metrics_agent_port_d1b1313094e6")
RAY_WORDS = ("The current node timed out during startup. This could happen because some of the "
             "raylet failed to startup or the GCS has become overloaded.")


def running(process: subprocess.Popen, named: Path) -> subprocess.Popen:
    """`process` once /proc shows its command line naming `named`, as a Ray process that has
    run for the 15-30 s before a start times out does: one spawned a moment ago can still show
    an empty command line (seen in about one full-suite run in three), and then nothing could
    find it by its session folder, the code under test included."""
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            if str(named).encode() in Path(f"/proc/{process.pid}/cmdline").read_bytes():
                return process
        except OSError:
            pass
        time.sleep(0.01)
    raise AssertionError(f"the stand-in process {process.pid} never showed its command line")


@pytest.fixture
def failing_ray(tmp_path, monkeypatch):
    """ray.init fails as a busy machine makes it fail, `fails` times: each failed start leaves
    a session folder with the raylet's log and a process that names it (as Ray's GCS does)."""
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray.util, "get_node_ip_address", lambda: ray_cluster.LOOPBACK)
    monkeypatch.setattr(ray_cluster, "quiet_ray", lambda: None)
    state = {"fails": 0, "calls": 0, "leftovers": []}

    def init(**kwargs):
        state["calls"] += 1
        if state["calls"] > state["fails"]:
            return None
        session = (tmp_path / "ray"
                   / f"session_2026-12-01_18-08-{state['calls']:02d}_000000_{os.getpid()}")
        (session / "logs").mkdir(parents=True)
        (session / "logs" / "raylet.out").write_text(
            "starting\n" + RAYLET_FATAL.format(session=session) + "\n*** StackTrace ***\n")
        state["leftovers"].append(running(subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(120)", f"--log_dir={session}/logs"]),
            session))
        raise Exception(RAY_WORDS)

    monkeypatch.setattr(ray, "init", init)
    yield state
    for process in state["leftovers"]:
        process.kill()


def test_a_local_start_that_times_out_is_tried_again(failing_ray, caplog, tmp_path):
    failing_ray["fails"] = 1
    # another job's cluster, started beside this one (its folder named after its own pid):
    # never taken for this start's, never stopped
    other = tmp_path / "ray" / "session_2026-12-01_18-09-00_000000_1"
    (other / "logs").mkdir(parents=True)
    os.utime(other, (time.time() + 60, time.time() + 60))  # the newest folder of all
    neighbour = running(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)",
                                          f"--log_dir={other}/logs"]), other)
    failing_ray["leftovers"].append(neighbour)
    assert ray_cluster.init_ray(num_cpus=3) is True
    assert failing_ray["calls"] == 2
    # the warning gives the raylet's reason, which Ray's own exception leaves out
    assert "Timed out waiting for file" in caplog.text and "metrics_agent_port" in caplog.text
    # what the failed start left running is ended, not kept for the job's life
    assert failing_ray["leftovers"][1].wait(timeout=30) != 0
    assert neighbour.poll() is None  # the other job's is still running


def test_a_local_start_that_keeps_timing_out_stops_with_the_reason(failing_ray):
    failing_ray["fails"] = ray_cluster.LOCAL_START_ATTEMPTS
    with pytest.raises(RuntimeError) as error:
        ray_cluster.init_ray(num_cpus=3)
    message = str(error.value)
    assert f"({ray_cluster.LOCAL_START_ATTEMPTS} tries)" in message
    assert "Ray's raylet: Timed out waiting for file" in message and "metrics_agent_port" in message
    assert "ray-project/ray#65983" in message and "--address 127.0.0.1:6379" in message
    assert failing_ray["calls"] == ray_cluster.LOCAL_START_ATTEMPTS
    assert all(p.wait(timeout=30) != 0 for p in failing_ray["leftovers"])


def test_other_start_errors_are_not_retried(monkeypatch):
    calls = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)

    def init(**kwargs):
        calls.append(time.time())
        raise ValueError("num_cpus must be a positive integer")

    monkeypatch.setattr(ray, "init", init)
    with pytest.raises(ValueError, match="num_cpus"):
        ray_cluster.init_ray(num_cpus=3)
    assert len(calls) == 1

"""bench/bench_embed.py end to end on a few rows (the long tier): the bench that shows issue 54's
figures keeps running as the code under it moves (a function moved by a restructure once broke
its `measure` unnoticed until the next benchmark run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.long
def test_bench_embed_times_the_job_and_a_peer_and_judges_the_goals(tmp_path, data_dir,
                                                                    brown_corpus):
    record = tmp_path / "bench.json"
    run = subprocess.run(
        [sys.executable, "bench/bench_embed.py", "--corpus", str(brown_corpus), "--sizes", "64",
         "--jobs", "default", "--no-candidates", "--no-ray-path", "--peers", "torch",
         "--json", str(record)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
        env={**os.environ, "SENTRAY_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    runs = json.loads(record.read_text())["sizes"]["64"]["runs"]
    job = next(r for r in runs if r.get("job") == "default")
    peer = next(r for r in runs if r["peer"])
    # the job's own run (a first run: 64 rows measure nothing, torch fp32), its STS-B scored,
    # and the peer's, each timed from launch to exit
    assert (job["runtime"], job["precision"]) == ("torch", "fp32") and job["seconds"] > 0
    assert job["stsb"] > 75 and peer["seconds"] > 0
    assert "goal: best FLOP ratio" in run.stdout


def test_a_row_its_runtime_does_not_run_as_asked_is_no_candidate(monkeypatch):
    """OpenVINO's bf16 hint runs f32 on a CPU without bf16: the fp32 candidate timed again (7%
    apart in one run). The probe never times such a row (`runs_as_itself`), so the bench does not
    hold `auto`'s choice to it."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import bench_embed

    rows = [{"runtime": "openvino", "precision": "fp32", "rate": 229.0, "max_difference": 1e-6,
             "cosine_min": 1.0, "runs_as_asked": True},
            {"runtime": "openvino", "precision": "bf16", "rate": 245.0, "max_difference": 1e-6,
             "cosine_min": 1.0, "runs_as_asked": False}]
    chosen = [{"run": "auto", "job": "auto", "runtime": "openvino", "precision": "fp32"}]
    table = bench_embed.candidates_table(rows, chosen)
    assert "not a candidate" in table
    assert "candidate's (openvino fp32): 1.00x (goal >= 0.95): met" in table
    rows[1]["runs_as_asked"] = True  # a bf16 that runs as itself is held to
    assert "(openvino bf16): 0.93x (goal >= 0.95): NOT met" in bench_embed.candidates_table(
        rows, chosen)
    # what the job's probe logged of its choice, against that candidate's steady rate
    chosen[0]["measured"] = [{"runtime": "openvino", "precision": "fp32", "rate": 270.0}]
    assert ("the probe's logged rate of its choice (270/s) / that candidate's steady rate here "
            "(229/s): 1.18 (goal within 15%): NOT met") in bench_embed.candidates_table(
                rows, chosen)

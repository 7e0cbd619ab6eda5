"""bench/gpu_check.sh must work the first time a GPU appears: its dry run (every step on CPU at
tiny sizes) runs here, and its report is checked for every step's figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STEPS = ["gpu_tests", "embed", "ditto_memory", "train"]


@pytest.mark.slow
def test_dry_run_reports_every_step(tmp_path):
    out = tmp_path / "gpu_check"
    # tests and training are skipped (minutes of Ray on 2 cores); the full dry run is
    # `bash bench/gpu_check.sh --dry-run`
    done = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu_check.sh"), "--dry-run", "--skip-tests",
         "--skip-train", "--out", str(out), "--sentences", "16", "--batch-size", "8",
         "--memory-batch", "2", "--memory-tokens", "8"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert list(report["steps"]) == STEPS and report["failed_steps"] == []
    assert report["dry_run"] and report["environment"]["torch"]
    steps = report["steps"]
    assert steps["gpu_tests"]["status"] == steps["train"]["status"] == "skipped"
    assert steps["embed"]["status"] == steps["ditto_memory"]["status"] == "ok"

    embed = steps["embed"]["runs"]
    assert [(r["pooling"], r["precision"]) for r in embed] == [
        ("mean", "fp32"), ("ditto fast", "fp32"), ("ditto eager", "fp32")]
    for run in embed:
        assert "error" not in run
        for key in ("encode_sentences_per_s", "forward_sentences_per_s", "real_tokens_per_s",
                    "model_tflops_per_s", "matmul_tflops_per_s", "fraction_of_matmul"):
            assert run[key] > 0, (run["pooling"], key)
        assert 0 < run["real_tokens"] <= run["padded_tokens"]
        assert run["sentences"] == 16 and run["fraction_of_peak"] is None  # CPU: no peak
    assert [r["fast_ditto"] for r in embed] == [False, True, False]

    memory = steps["ditto_memory"]["runs"]
    assert [r["ditto_impl"] for r in memory] == ["fast", "eager"]
    for run in memory:
        assert "error" not in run and run["forward_seconds"] > 0
        assert run["embedding_shape"] == [2, 384]
        assert run["peak_allocated_mib"] is None  # not measurable on CPU, said so in the note
    assert "CPU" in steps["ditto_memory"]["note"]

    table = (out / "gpu_check.md").read_text()
    assert "| ditto eager | fp32 |" in table and "| embed | ok |" in table
    assert table.strip() in done.stdout  # the wrapper prints it
    again = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--markdown",
                            str(out / "gpu_check.json")], capture_output=True, text=True,
                           check=True)
    assert again.stdout.strip() == table.strip()


def test_markdown_shows_a_failed_step(tmp_path):
    """The table is built from the JSON alone; a step's error shows in it, partial figures
    too."""
    report = {
        "dry_run": False, "started": "2026-01-01T00:00:00", "seconds": 12.0,
        "environment": {"device_name": "NVIDIA H200", "torch": "2.13.0"},
        "failed_steps": ["train"],
        "steps": {
            "gpu_tests": {"status": "ok", "seconds": 1.0, "collected": 6, "passed": 6,
                          "skipped": 0, "failed": 0, "errors": 0},
            "embed": {"status": "skipped", "note": "--skip-embed", "seconds": 0.0},
            "train": {"status": "error", "seconds": 3.0, "error": "StepFailed: failed: simcse",
                      "runs": [{"objective": "sifter", "batch_size": 64, "device": "cuda",
                                "precision": "bf16", "steps": 60, "steps_per_s": 9.5,
                                "sentences_per_s": 608.0, "wall_seconds": 40.0},
                               {"objective": "simcse", "batch_size": 64, "device": "cuda",
                                "precision": "bf16", "error": "RuntimeError: exited 1\nlog"}]},
        }}
    path = tmp_path / "gpu_check.json"
    path.write_text(json.dumps(report))
    table = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--markdown",
                            str(path)], capture_output=True, text=True, check=True).stdout
    assert "| train | error | 3.0 | StepFailed: failed: simcse |" in table
    assert "| ditto_memory | not run | | |" in table
    assert "6 passed, 0 skipped, 0 failed, 0 errors of 6" in table
    assert "| sifter | 64 | cuda | bf16 | 60 | 9.500 | 608 | 40.0 |" in table
    assert "| simcse | 64 | cuda | bf16 | error: RuntimeError: exited 1 |" in table
    assert "Failed steps: train" in table

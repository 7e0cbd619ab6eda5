"""`python jobs/embed.py --precision auto` on a corpus large enough to be measured (SMALL_JOB
rows), in a fresh cache, as a user runs it: the probe times the corpus's own first rows, the
job keeps the rows it encoded with its choice (counted as not encoded: the corpus has no twin),
logs what the probe cost against what it saves, and every row's vector is the plan's (cosine to
the exact torch job's within the gate of whatever this CPU's probe chose)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.dataset as pads
import pytest

from sentray.precision.plan import SMALL_JOB
from sentray.precision.probe import GATES, PROBE_SAMPLE_ROWS

ROOT = Path(__file__).resolve().parents[2]


def embed(corpus: Path, output: Path, model: Path, cache: Path, *flags: str):
    run = subprocess.run(
        [sys.executable, "jobs/embed.py", "--input", str(corpus), "--output", str(output),
         "--model", str(model), "--pooling", "mean", "--max-length", "32", *flags],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "SENTRAY_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    table = pads.dataset(str(output), format="parquet").to_table(columns=["row", "embedding"])
    vectors = np.asarray(table.column("embedding").to_pylist(), dtype=np.float32)
    order = np.argsort(table.column("row").to_numpy())
    return run, json.loads((output / "_summary.json").read_text()), vectors[order]


@pytest.mark.slow
def test_auto_probes_the_corpus_rows_and_keeps_what_its_choice_encoded(tiny_model_dir,
                                                                      tmp_path):
    corpus = tmp_path / "corpus.txt"
    words = ["cat", "dog", "market", "river", "song", "storm", "court", "letter"]
    corpus.write_text("".join(f"row {i} says the {words[i % 8]} and the {words[i // 8 % 8]} "
                              f"met {i % 13} times\n" for i in range(SMALL_JOB + 52)))
    run, summary, vectors = embed(corpus, tmp_path / "auto", tiny_model_dir, tmp_path / "cache",
                                  "--precision", "auto")
    encoder = summary["encoder"]
    assert encoder["measured"] and all(m["rows"] <= PROBE_SAMPLE_ROWS
                                       for m in encoder["measured"])
    assert "the probe took" in run.stderr and "rows take about" in run.stderr
    # no text repeats: every row not encoded by the job is one the probe's choice encoded
    assert 0 < summary["rows_not_encoded"] <= PROBE_SAMPLE_ROWS
    assert summary["rows_out"] == SMALL_JOB + 52
    _, _, exact = embed(corpus, tmp_path / "exact", tiny_model_dir, tmp_path / "cache",
                        "--runtime", "torch")
    cosines = (vectors * exact).sum(1) / (np.linalg.norm(vectors, axis=1)
                                          * np.linalg.norm(exact, axis=1))
    # the gate of what the probe chose on this CPU (an exact runtime's 1e-5 of a component is
    # far tighter than this cosine)
    assert cosines.min() >= GATES.get(encoder["precision"], 0.99999), encoder["precision"]

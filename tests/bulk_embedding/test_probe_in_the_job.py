"""`python jobs/embed.py --precision auto` on a corpus large enough to be measured (SMALL_JOB
rows), in a fresh cache, as a user runs it: the probe times the corpus's own first rows, the
job keeps the rows it encoded with its choice (counted as not encoded: the corpus has no twin),
logs what the probe cost against what it saves, and every row's vector is the plan's (cosine to
the exact job's within the gate of whatever this CPU's probe chose). The exact job, the default
fp32, run on its Ray path (a private cluster on this machine, whose actors start after the
probe), writes its first rows with the probe's torch fp32 while the probe measures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from sentray.bulk_embedding.early_rows import EARLY_ROWS
from sentray.bulk_embedding.output import METADATA_KEY
from sentray.precision.plan import SMALL_JOB
from sentray.precision.probe import GATES, PROBE_SAMPLE_ROWS

ROOT = Path(__file__).resolve().parents[2]


def embed(corpus: Path, output: Path, model: Path, cache: Path, *flags: str,
          env: dict | None = None):
    run = subprocess.run(
        [sys.executable, "jobs/embed.py", "--input", str(corpus), "--output", str(output),
         "--model", str(model), "--pooling", "mean", "--max-length", "32", *flags],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**(os.environ if env is None else env), "SENTRAY_CACHE_DIR": str(cache),
             "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    table = pads.dataset(str(output), format="parquet").to_table(columns=["row", "embedding"])
    vectors = np.asarray(table.column("embedding").to_pylist(), dtype=np.float32)
    order = np.argsort(table.column("row").to_numpy())
    return run, json.loads((output / "_summary.json").read_text()), vectors[order]


def first_part_settings(output: Path) -> dict:
    """The settings in the schema metadata of an output's first part, the early rows'."""
    first = sorted(output.glob("*/part-*.parquet"))[0]
    assert first.name.startswith(f"part-{0:012d}-{EARLY_ROWS:012d}-")
    return json.loads(pq.read_schema(first).metadata[METADATA_KEY])


@pytest.mark.slow
def test_auto_probes_the_corpus_rows_and_keeps_what_its_choice_encoded(tiny_model_dir,
                                                                      tmp_path):
    corpus = tmp_path / "corpus.txt"
    words = ["cat", "dog", "market", "river", "song", "storm", "court", "letter"]
    corpus.write_text("".join(f"row {i} says the {words[i % 8]} and the {words[i // 8 % 8]} "
                              f"met {i % 13} times\n" for i in range(SMALL_JOB + 52)))
    run, summary, vectors = embed(corpus, tmp_path / "auto", tiny_model_dir, tmp_path / "cache",
                                  "--precision", "auto", "--rows-per-file", "0")
    encoder = summary["encoder"]
    # its first rows were on disk before the probe ended, and are its own now: torch fp32's
    # where it chose an exact runtime, else encoded again by its choice, part and settings
    # record replaced (its vectors are checked with every row's below)
    early = f"the first {EARLY_ROWS} rows written by torch fp32 while the probe measures"
    assert early in run.stderr and run.stderr.index(early) < run.stderr.index("the probe took")
    assert ("the first 32 rows replaced" in run.stderr) == (encoder["precision"] != "fp32")
    assert first_part_settings(tmp_path / "auto")["precision"] == encoder["precision"]
    assert json.loads((tmp_path / "auto" / "_settings.json").read_text())["settings"][
        "precision"] == encoder["precision"]
    assert encoder["measured"] and all(m["rows"] <= PROBE_SAMPLE_ROWS
                                       for m in encoder["measured"])
    assert "the probe took" in run.stderr and "rows take about" in run.stderr
    # no text repeats: every row not encoded by the job is one the probe's choice encoded
    assert 0 < summary["rows_not_encoded"] <= PROBE_SAMPLE_ROWS
    assert summary["rows_out"] == SMALL_JOB + 52
    # the default, fp32 on the exact runtime measured fastest, on its Ray path (the private
    # cluster it starts: the probe runs here, at an actor's threads): its first rows are on
    # disk, encoded by torch fp32, before the probe ends and before Ray starts, and are this
    # run's rows like the others, which the actors encoded
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # none: it starts one
    run, summary, exact = embed(corpus, tmp_path / "exact", tiny_model_dir, tmp_path / "cache",
                                "--rows-per-file", "0", "--in-process-rows", "0", "--actors",
                                "1", env=env)
    early = f"the first {EARLY_ROWS} rows written by torch fp32 while the probe measures"
    assert early in run.stderr and run.stderr.index(early) < run.stderr.index("the probe took")
    assert run.stderr.index("the probe took") < run.stderr.index("starting a local Ray cluster")
    assert summary["encoder"]["measured"] and summary["rows_this_run"] == SMALL_JOB + 52
    assert summary["timings"]["ray_start"] is not None  # on Ray
    moments = summary["timings"]["since_launch"]
    assert moments["first_part"] < moments["ray_ready"], moments  # the early rows
    # written again, as the run's: its metadata names the runtime that ran the rest
    assert first_part_settings(tmp_path / "exact")["runtime"] == summary["encoder"]["runtime"]
    cosines = (vectors * exact).sum(1) / (np.linalg.norm(vectors, axis=1)
                                          * np.linalg.norm(exact, axis=1))
    # the gate of what the probe chose on this CPU (an exact runtime's 1e-5 of a component is
    # far tighter than this cosine; the early rows are torch's own)
    assert cosines.min() >= GATES.get(encoder["precision"], 0.99999), encoder["precision"]

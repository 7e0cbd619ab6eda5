"""The GPU layout of the embedding job on a real local Ray cluster, without a GPU: tokenizing and
storing in Ray tasks of their own around an encoder actor (`--tokenize own-stage`, what a GPU
pool runs), with the real encoder (the same rows and vectors as the one-actor layout) and with a
stand-in GPU (each row out once, the real job's ids and statuses, the stand-in's vector)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.dataset as pads
import pytest

from sentray.testing.stand_in_gpu import StandInGPU, busy_fraction, fixed_vector

ROWS = 300
FLAGS = ["--actors", "1", "--rows-per-batch", "64", "--rows-per-file", "0", "--pooling", "mean",
         "--normalize", "true"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Sentences with twins, blanks and an undecodable line, several blocks of 64."""
    folder = tmp_path_factory.mktemp("feed")
    lines = []
    for i in range(ROWS):
        lines.append([f"Sentence {i % 97} about the weather in town.".encode(), b"", b"   ",
                      b"caf\xe9", b"\x00\x01"][0 if i % 11 else (i // 11) % 5])
    (folder / "rows.txt").write_bytes(b"\n".join(lines) + b"\n")
    return folder / "rows.txt"


def output_rows(folder: Path):
    return pads.dataset(folder, format="parquet").to_table().sort_by("row")


@pytest.fixture(scope="module")
def one_actor_rows(ray_cluster, tiny_model_dir, corpus, tmp_path_factory):
    """The job's rows on Ray with the three stages in one actor (`--tokenize in-actor`)."""
    from sentray.cli import job_entry_points

    _, main = job_entry_points("embed")
    output = tmp_path_factory.mktemp("feed-out") / "in-actor"
    summary = main(["--input", str(corpus), "--output", str(output), *FLAGS,
                    "--model", str(tiny_model_dir), "--tokenize", "in-actor"])
    assert summary["rows_in"] == summary["rows_out"] == ROWS
    return output_rows(output)


@pytest.mark.ray
@pytest.mark.slow
def test_own_stage_layout_gives_the_one_actor_rows(one_actor_rows, tiny_model_dir, corpus,
                                                   tmp_path):
    from sentray.cli import job_entry_points

    _, main = job_entry_points("embed")
    summary = main(["--input", str(corpus), "--output", str(tmp_path / "own"), *FLAGS,
                    "--model", str(tiny_model_dir), "--tokenize", "own-stage"])
    assert summary["rows_in"] == summary["rows_out"] == ROWS
    one, apart = one_actor_rows, output_rows(tmp_path / "own")
    for column in ("id", "status", "row", "source"):
        assert apart.column(column).equals(one.column(column)), column
    # the same blocks, windows and batches through the same kernels in other processes
    np.testing.assert_allclose(np.stack(apart.filter(apart["embedding"].is_valid())["embedding"]
                                        .to_numpy(zero_copy_only=False)),
                               np.stack(one.filter(one["embedding"].is_valid())["embedding"]
                                        .to_numpy(zero_copy_only=False)), rtol=0, atol=1e-6)


@pytest.mark.ray
@pytest.mark.slow
def test_a_stand_in_gpu_puts_each_row_out_once_with_the_real_ids(one_actor_rows, tiny_model_dir,
                                                                 corpus, tmp_path):
    from sentray.bulk_embedding.job import run_embedding
    from sentray.cli import job_entry_points

    parse_config, _ = job_entry_points("embed")
    real = one_actor_rows
    log = tmp_path / "gpu.jsonl"
    config, _ = parse_config(["--input", str(corpus), "--output", str(tmp_path / "stand-in"),
                              *FLAGS, "--model", str(tiny_model_dir), "--tokenize", "own-stage"])
    summary = run_embedding(config, stand_in=StandInGPU(32, rows_per_second=50_000,
                                                        log=str(log)))
    assert summary["rows_in"] == summary["rows_out"] == ROWS
    stood = output_rows(tmp_path / "stand-in")
    ids = stood.column("id").to_pylist()
    assert len(ids) == len(set(ids)) == ROWS  # each row out exactly once
    for column in ("id", "status", "row"):
        assert stood.column(column).equals(real.column(column)), column
    embedded = stood.filter(stood["embedding"].is_valid())["embedding"].to_numpy(
        zero_copy_only=False)
    assert len(embedded) == sum(s == "ok" for s in real.column("status").to_pylist())
    np.testing.assert_allclose(np.stack(embedded), np.tile(fixed_vector(32, True),
                                                           (len(embedded), 1)), rtol=1e-6)
    # the stand-in encoded each distinct text once (one actor, its cache holds them all)
    distinct = {line for line in corpus.read_bytes().split(b"\n")[:ROWS]
                if line.startswith(b"Sentence")}
    assert busy_fraction(log)["rows"] == len(distinct) == ROWS - summary["rows_not_encoded"] - sum(
        s != "ok" for s in real.column("status").to_pylist())

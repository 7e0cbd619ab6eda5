"""The embedding job's rows in its own process (sentray.corpus.execution): when it is chosen,
and that it writes what the Ray actor pool writes, row for row."""

from __future__ import annotations

import json
import sys
import types

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import load_job

from sentray.corpus import execution
from sentray.corpus.actor_pool import ActorPoolConfig


@pytest.fixture
def no_ray(monkeypatch):
    """No Ray connected in this process (the test session's cluster may be)."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(is_initialized=lambda: False))


def test_chosen_only_for_a_small_input_and_no_cluster(no_ray, monkeypatch):
    pool = ActorPoolConfig()
    assert pool.in_process_rows == 100_000
    assert execution.in_process_chosen(pool, 100_000)
    assert not execution.in_process_chosen(pool, 100_001)
    assert not execution.in_process_chosen(ActorPoolConfig(in_process_rows=0), 1)  # always Ray
    assert not execution.in_process_chosen(ActorPoolConfig(address="127.0.0.1:6379"), 1)
    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(is_initialized=lambda: True))
    assert not execution.in_process_chosen(pool, 1)  # a cluster this process is connected to: used
    monkeypatch.delitem(sys.modules, "ray")
    assert execution.in_process_chosen(pool, 1)  # Ray not even imported: not connected
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")  # as `ray job submit` sets it
    assert not execution.in_process_chosen(pool, 1)
    with pytest.raises(ValueError, match="in_process_rows must be >= 0"):
        ActorPoolConfig(in_process_rows=-1)


def read_output(output) -> pa.Table:
    parts = sorted(output.glob("*/part-*.parquet"))
    return pa.concat_tables([pq.read_table(p) for p in parts]).sort_by("row")


@pytest.mark.ray
def test_in_process_rows_equal_the_actor_pools(ray_cluster, tiny_model_dir, brown_corpus,
                                               tmp_path, monkeypatch):
    """The same corpus (blank lines, repeats, a line longer than the model reads) through the
    Ray actor pool and in this process: every row once, the same statuses and copied counts,
    the same vectors (1e-5: the two cut their blocks differently, so their batches pad
    differently), and the in-process run's summary says so and where its seconds went."""
    lines = brown_corpus.read_text(encoding="utf-8").splitlines()[:300]
    lines += ["", "   ", lines[3], lines[7], "word " * 400]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    embed = load_job("embed")
    # one actor: its cache sees every repeat, as the one process does, so the copied counts
    # are comparable (with two, a repeat in the other actor's block is encoded again)
    common = ["--input", str(corpus), "--model", str(tiny_model_dir), "--pooling", "mean",
              "--rows-per-batch", "64", "--actors", "1"]
    embed.main([*common, "--output", str(tmp_path / "ray"), "--in-process-rows", "0"])
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(sys.modules["ray"], "is_initialized", lambda: False)
    embed.main([*common, "--output", str(tmp_path / "local")])
    on_ray, local = read_output(tmp_path / "ray"), read_output(tmp_path / "local")
    assert local.column("row").to_pylist() == list(range(len(lines)))
    assert local.column("id").to_pylist() == on_ray.column("id").to_pylist()
    assert local.column("status").to_pylist() == on_ray.column("status").to_pylist()
    for got, expected in zip(local.column("embedding").to_pylist(),
                             on_ray.column("embedding").to_pylist(), strict=True):
        assert (got is None) == (expected is None)
        if got is not None:
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
    summaries = [json.loads((tmp_path / name / "_summary.json").read_text())
                 for name in ("ray", "local")]
    assert summaries[0]["status"] == summaries[1]["status"]
    assert summaries[0]["rows_not_encoded"] == summaries[1]["rows_not_encoded"] >= 2
    timings = summaries[1]["timings"]
    assert timings["in_process"] and timings["ray_start"] is None
    moments = timings["since_launch"]
    assert moments["ray_ready"] is None
    assert moments["actor_ready"] <= moments["first_row"] <= moments["first_part"], moments


def test_the_first_part_is_one_block_so_it_lands_early(no_ray, tiny_model_dir, brown_corpus,
                                                       tmp_path):
    """In process, the first call takes one block (`--rows-per-batch`) and later ones eight:
    the first part lands seconds after the first row embedded, and a kill early in a long
    input loses at most that block (issue 44: 36,000 rows killed at 40 s had no part)."""
    lines = brown_corpus.read_text(encoding="utf-8").splitlines()[:600]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    load_job("embed").main(["--input", str(corpus), "--model", str(tiny_model_dir),
                            "--pooling", "mean", "--rows-per-batch", "64", "--rows-per-file", "0",
                            "--output", str(tmp_path / "out")])
    sizes = [pq.ParquetFile(p).metadata.num_rows
             for p in sorted((tmp_path / "out").glob("*/part-*.parquet"),
                             key=lambda p: int(p.name.split("-")[1]))]
    assert sizes == [64, 512, 24]
    assert read_output(tmp_path / "out").column("row").to_pylist() == list(range(600))


def test_in_process_calls_start_small_whatever_the_block():
    """The embed job's blocks are 4,096 rows (less padding on Ray); in process its first call
    still takes at most FIRST_CALL_ROWS, so the first part lands as early as with 1,024-row
    blocks, and later calls take BLOCKS_PER_CALL blocks."""
    from sentray.bulk_embedding.config import EmbedConfig
    from sentray.corpus.actor_pool import BLOCKS_PER_CALL, FIRST_CALL_ROWS, in_process_calls

    pool = EmbedConfig().pool
    assert pool.rows_per_batch == 4096
    assert in_process_calls(pool) == (FIRST_CALL_ROWS, 4096 * BLOCKS_PER_CALL)
    assert in_process_calls(ActorPoolConfig(rows_per_batch=64)) == (64, 64 * BLOCKS_PER_CALL)


@pytest.mark.parametrize(("in_process_rows", "here"), [(100, True), (0, False)])
def test_the_rows_run_where_the_plan_was_made_for(no_ray, tiny_model_dir, tmp_path, monkeypatch,
                                                  in_process_rows, here):
    """Where the encoders run is decided once (`where_actors_run`): the plan is made for it,
    and the corpus driver runs the rows there, not by a second count of its own."""
    from sentray.bulk_embedding import job as embed_job

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"Sentence {i}.\n" for i in range(40)))
    config, _ = load_job("embed").parse_config([
        "--input", str(corpus), "--output", str(tmp_path / "out"), "--model",
        str(tiny_model_dir), "--pooling", "mean", "--in-process-rows", str(in_process_rows)])
    seen = {}
    monkeypatch.setattr(embed_job.corpus_job, "run_corpus_job",
                        lambda job: seen.setdefault("job", job))
    embed_job.run_embedding(config)
    assert seen["job"].in_process is here
    assert seen["job"].plan.device == "cpu"

"""Faults of the storage and the input under the corpus jobs, on this machine: an output disk
that fills up mid-job (a small tmpfs), a 50 MB line, and two runs started at once into one
output."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
from conftest import ROOT, encoder_of, load_job, small_disk_at

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def tiny_embed(corpus: Path, output: Path, model_dir: Path, *extra: str) -> list[str]:
    return ["--input", str(corpus), "--output", str(output), "--model", str(model_dir),
            "--pooling", "mean", "--actors", "2", *extra]


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs."""
    with small_disk_at(tmp_path / "disk", "1m") as mount:
        yield mount


@pytest.mark.long
def test_a_full_disk_stops_the_job_naming_it_and_a_rerun_completes(
        ray_cluster, tiny_model_dir, tmp_path, small_disk, exit_message):
    corpus = tmp_path / "in.txt"
    corpus.write_text("".join(f"Line {i} of a corpus too big for its disk.\n" for i in range(800)))
    filler = small_disk / "filler"
    filler.write_bytes(b"x" * (1024 * 1024 - 96 * 1024))  # leaves ~96 kB: a few parts' worth
    output = small_disk / "out"
    args = tiny_embed(corpus, output, tiny_model_dir, "--rows-per-batch", "25")
    with pytest.raises(SystemExit) as info:
        load_job("embed").main(args)
    message = exit_message(info)
    assert "the disk is full while the job wrote to" in message and str(output) in message
    assert "No space left on device" in message and "run the same command again" in message
    written = sorted(output.rglob("part-*.parquet"))
    for part in written:  # every part that exists is whole: a half-written one has no name
        assert pq.read_metadata(part).num_rows > 0
    filler.unlink()  # space freed
    summary = load_job("embed").main(args)
    assert summary["rows_in"] == summary["rows_out"] == 800
    ids = pads.dataset(output, format="parquet").to_table(columns=["id"]).column("id")
    assert sorted(ids.to_pylist()) == sorted(f"in.txt:{i}" for i in range(800))
    assert not list(output.rglob(".tmp-*"))  # what the full disk cut off is gone


@pytest.mark.long
def test_a_50_mb_line_is_cut_in_bounded_time_and_the_rest_is_untouched(
        ray_cluster, tiny_model_dir, tmp_path):
    huge = "a log dump " * (50 * 1024 * 1024 // 11)
    text_in = tmp_path / "text"
    text_in.mkdir()
    (text_in / "dump.txt").write_text(f"First line.\n{huge}\nLast line.\n")
    pq.write_table(pa.table({"text": ["First value.", huge, "Last value."]}),
                   text_in / "dump.parquet")
    output = tmp_path / "out"
    started = time.perf_counter()
    summary = load_job("embed").main(tiny_embed(text_in, output, tiny_model_dir))
    seconds = time.perf_counter() - started
    from sentray.corpus.sources import CorpusConfig, discover_sources
    from sentray.encode.config import EncoderConfig

    assert summary["rows_in"] == summary["rows_out"] == 6
    plain = encoder_of(EncoderConfig(model=str(tiny_model_dir), pooling="mean",
                                          device="cpu"))
    table = pads.dataset(output, format="parquet").to_table()
    for source in discover_sources(CorpusConfig(input=str(text_in))):
        rows = table.filter(pa.compute.equal(table.column("source"), source.key)).sort_by("row")
        assert rows.column("status").to_pylist() == ["ok", "truncated", "ok"], source.name
        ends = ("First line.", "Last line.") if source.format == "text" else (
            "First value.", "Last value.")
        got = np.stack([rows.column("embedding")[i].as_py() for i in (0, 2)])
        # the ordinary rows get what the model gives them alone (other batches: 1e-5)
        np.testing.assert_allclose(got, plain.encode(list(ends)), atol=1e-5)
    augmented = load_job("augment").main([
        "--input", str(text_in / "dump.txt"), "--output", str(tmp_path / "aug"), "--actors", "2",
        "--keep-capitalized-tail", "--keep-short"])
    assert augmented["rows_in"] == augmented["rows_out"] == 3  # the dump line too, kept whole
    kept = pads.dataset(tmp_path / "aug", format="parquet").to_table(columns=["row", "text"])
    assert sorted(len(t) for t in kept.column("text").to_pylist())[-1] == len(huge)
    # a bound, not a benchmark: the line is read and passed on, never tokenized whole (that
    # alone takes minutes here); the job's fixed cost is most of this
    assert seconds < 240, seconds


@pytest.mark.long
def test_two_runs_at_once_with_other_settings_one_stops_before_writing(
        ray_cluster, tiny_model_dir, tmp_path, exit_message):
    corpus = tmp_path / "in.txt"
    corpus.write_text("".join(f"Sentence {i} written twice at once.\n" for i in range(600)))
    output = tmp_path / "out"
    args = tiny_embed(corpus, output, tiny_model_dir, "--rows-per-batch", "25", "--address",
                      ray_cluster.address)
    first = subprocess.Popen([sys.executable, str(ROOT / "jobs" / "embed.py"), *args],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while not list((output / "_runs").glob("*.json")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert list((output / "_runs").glob("*.json")), "the first run never claimed the output"
        before = {p for p in output.rglob("*") if p.is_file() and "_runs" not in p.parts}
        with pytest.raises(SystemExit) as info:
            load_job("embed").main([*args, "--output-dtype", "float16"])
        message = exit_message(info)
        assert "is writing" in message and "with other settings" in message
        after = {p for p in output.rglob("*") if p.is_file() and "_runs" not in p.parts}
        assert not {p for p in after - before if "float16" in p.read_bytes().decode(
            "latin-1")}  # nothing of the refused run
        # a run with the same settings proceeds beside it, to the same parts
        same = load_job("embed").main(args)
        assert same["rows_in"] == same["rows_out"] == 600
    finally:
        _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err[-2000:]
    ids = pads.dataset(output, format="parquet").to_table(columns=["id"]).column("id")
    assert sorted(ids.to_pylist()) == sorted(f"in.txt:{i}" for i in range(600))
    assert not (output / "_runs").exists()  # both released their claims

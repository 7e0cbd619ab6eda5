"""Faults a cluster actually has, and the jobs' promise under them: every input row once in the
output (or once in the rejects), none twice.

On the session's loopback cluster (conftest.LoopbackCluster: a head and two worker nodes):
- a worker node killed while jobs/embed.py runs, and while jobs/augment.py runs;
- one embed actor process killed mid-job;
- the driver killed mid-job and the same command run again: only the files not finished are
  redone, and the output is what an uninterrupted run writes (every row once, each embedding
  the model's).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pytest
from conftest import ROOT, encoder_of, load_job

from sentray.encode.config import EncoderConfig

pytestmark = [pytest.mark.ray, pytest.mark.slow]

EMBED_ACTOR = "EmbedBatch"  # in the title Ray gives the actor's process
AUGMENT_ACTOR = "AugmentBatch"


def write_corpus(folder: Path, files: int, lines: int) -> list[str]:
    """`files` text files of `lines` distinct sentences; returns every row id the jobs give."""
    folder.mkdir(parents=True, exist_ok=True)
    ids = []
    for f in range(files):
        name = f"f{f}.txt"
        words = ("river", "market", "engine", "garden", "letter", "window", "silver", "castle")
        (folder / name).write_text("".join(
            f"The {words[i % 8]} number {i} of file {f} was seen by {i % 7 + 2} people.\n"
            for i in range(lines)))
        ids += [f"{name}:{i}" for i in range(lines)]
    return ids


def read_rows(folder: Path, columns: list[str]) -> pa.Table:
    return pads.dataset(str(folder), format="parquet").to_table(columns=columns)


class Background:
    """Run a job's main() in a thread of this process (the driver), keeping its result."""

    def __init__(self, main, argv: list[str]) -> None:
        self.result: dict | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(main, argv), daemon=True)
        self.thread.start()

    def _run(self, main, argv) -> None:
        try:
            self.result = main(argv)
        except BaseException as exc:  # noqa: BLE001 - reported by join()
            self.error = exc

    def join(self, timeout: float) -> dict:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the job did not finish within {timeout} s"
        if self.error is not None:
            raise self.error
        return self.result


def wait_for(predicate, timeout: float, what: str, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError(f"waited {timeout} s for {what}")


def parts_written(*folders: Path) -> int:
    return sum(len(list(f.rglob("part-*.parquet"))) for f in folders if f.exists())


def assert_each_row_once(table: pa.Table, expected_ids: list[str]) -> None:
    ids = table.column("id").to_pylist()
    assert len(ids) == len(set(ids)), "a row is in the output twice"
    assert sorted(ids) == sorted(expected_ids)


def assert_embeddings_match(table: pa.Table, model_dir: Path, texts: dict[str, str]) -> None:
    """Each embedding equals an in-process encoder's for its row. 1e-5: float32 sums over other
    batch compositions (padding, order) differ in the last bits, not more."""
    encoder = encoder_of(EncoderConfig(model=str(model_dir), pooling="mean"))
    ids = table.column("id").to_pylist()
    got = np.asarray(table.column("embedding").to_pylist(), dtype=np.float32)
    expected = encoder.encode([texts[i] for i in ids])
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)


def corpus_texts(folder: Path) -> dict[str, str]:
    return {f"{p.name}:{i}": line for p in sorted(folder.glob("*.txt"))
            for i, line in enumerate(p.read_text().splitlines())}


def assert_complete_embedding(summary: dict, output: Path, expected: list[str],
                              model_dir: Path, corpus: Path) -> None:
    """The job's own accounting, then the output read back: each row once, its embedding
    right."""
    assert summary["rows_in"] == summary["rows_out"] == len(expected)
    table = read_rows(output, ["id", "embedding"])
    assert_each_row_once(table, expected)
    assert_embeddings_match(table, model_dir, corpus_texts(corpus))


def embed_args(corpus: Path, output: Path, model_dir: Path, *extra: str) -> list[str]:
    """A part per block (--rows-per-file 0): the drills check which parts survive a fault."""
    return ["--input", str(corpus), "--output", str(output), "--model", str(model_dir),
            "--pooling", "mean", "--actors", "2", "--rows-per-batch", "50",
            "--rows-per-file", "0", *extra]


def kill_a_node_hosting(cluster, marker: str) -> int:
    """Kill a worker node on which an actor of `marker` runs; returns its index."""
    hosts = wait_for(lambda: cluster.processes_named(marker), 120, f"a {marker} actor")
    victim = min(hosts)
    cluster.kill_worker(victim)
    return victim


@pytest.fixture(scope="module")
def embed_job():
    return load_job("embed")


def start_embedding(embed_job, model_dir: Path, tmp_path: Path, files: int):
    """jobs/embed.py on `files` x 1,000 rows, run in the background until its first parts are
    written: (job, corpus, output, every row id). Batches of 25 rows, so that the job outlasts
    the fault that follows by many batches, however fast the machine."""
    corpus, output = tmp_path / "corpus", tmp_path / "out"
    expected = write_corpus(corpus, files=files, lines=1000)
    job = Background(embed_job.main, embed_args(corpus, output, model_dir,
                                                 "--rows-per-batch", "25"))
    wait_for(lambda: parts_written(output) >= 2, 180, "the first parts")
    return job, corpus, output, expected


@pytest.mark.long
def test_embed_survives_a_lost_worker_node(ray_cluster, embed_job, tiny_model_dir, tmp_path):
    job, corpus, output, expected = start_embedding(embed_job, tiny_model_dir, tmp_path, 3)
    kill_a_node_hosting(ray_cluster, EMBED_ACTOR)
    assert not (output / "_summary.json").exists(), "the job ended before the node was lost"
    assert_complete_embedding(job.join(300), output, expected, tiny_model_dir, corpus)


@pytest.mark.long
def test_embed_survives_a_killed_actor(ray_cluster, embed_job, tiny_model_dir, tmp_path):
    job, corpus, output, expected = start_embedding(embed_job, tiny_model_dir, tmp_path, 2)
    actors = wait_for(lambda: ray_cluster.processes_named(EMBED_ACTOR), 60, "an embed actor")
    os.kill(min(actors.values())[0], signal.SIGKILL)
    assert not (output / "_summary.json").exists(), "the job ended before the actor died"
    assert_complete_embedding(job.join(300), output, expected, tiny_model_dir, corpus)


@pytest.mark.long
def test_augment_survives_a_lost_worker_node(ray_cluster, brown_corpus, tmp_path):
    pytest.importorskip("spacy", reason="the openie extra is not installed")
    corpus = tmp_path / "brown.txt"
    lines = brown_corpus.read_text(encoding="utf-8").splitlines()[:240]
    corpus.write_text("\n".join(lines) + "\n")
    output, rejects = tmp_path / "out", tmp_path / "rejects"
    job = Background(load_job("augment").main, [
        "--input", str(corpus), "--output", str(output), "--rejects", str(rejects),
        "--actors", "2", "--rows-per-batch", "12"])
    wait_for(lambda: parts_written(output, rejects) >= 2, 240, "the first parts")
    kill_a_node_hosting(ray_cluster, AUGMENT_ACTOR)
    assert not (output / "_summary.json").exists(), "the job ended before the node was lost"
    summary = job.join(400)
    kept = read_rows(output, ["id"]).column("id").to_pylist()
    rejected = read_rows(rejects, ["id"]).column("id").to_pylist()
    assert summary["rows_in"] == len(lines) == summary["rows_out"] + summary["rows_rejected"]
    assert len(kept) + len(rejected) == len(set(kept) | set(rejected)) == len(lines)
    assert set(kept) | set(rejected) == {f"brown.txt:{i}" for i in range(len(lines))}


@pytest.mark.long
def test_rerun_after_a_killed_driver_keeps_every_finished_part(ray_cluster, embed_job,
                                                               tiny_model_dir, tmp_path):
    """The driver is killed while one large file is half done; the rerun keeps the parts
    written before the kill (same files, same bytes) and fills in only the rows missing."""
    import hashlib

    corpus, output = tmp_path / "corpus", tmp_path / "out"
    expected = write_corpus(corpus, files=1, lines=2000)
    argv = embed_args(corpus, output, tiny_model_dir, "--address", ray_cluster.address,
                      "--rows-per-batch", "25")
    driver = subprocess.Popen([sys.executable, str(ROOT / "jobs" / "embed.py"), *argv],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: parts_written(output) >= 6, 240, "some parts", every=0.05)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
    before = {p: (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
              for p in output.rglob("part-*.parquet")}
    assert 6 <= len(before) < 80, "the driver was not killed mid-file"

    rerun = embed_job.main(argv)
    assert {p: (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in before} == before  # every finished part kept as it was
    assert len(list(output.rglob("part-*.parquet"))) > len(before)  # the rest filled in
    # what an uninterrupted run writes: every row once, each embedding the model's for its text
    assert_complete_embedding(rerun, output, expected, tiny_model_dir, corpus)

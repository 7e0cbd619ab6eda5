"""Every job as a user runs it: the installed `sentray` console script in a subprocess. A job
that succeeded exits 0 with its result on stdout (the brief JSON line of a corpus, training or
index job, nothing printed after it). `python jobs/X.py` runs the same `command`. Bad input and
failed jobs: tests/test_exit_statuses.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from sentray.cli import JOBS

SENTRAY = str(Path(sys.executable).parent / "sentray")  # what `pip install` put beside python
TEXTS = [f"Sentence number {i} tells of {w}." for i, w in
         enumerate(["cats", "dogs", "rain", "markets", "a song"] * 4)]


def run(*argv: str, cwd: Path = ROOT, timeout: int = 300) -> subprocess.CompletedProcess:
    """A command with its output as one stream (so that what comes last is known)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run(list(argv), cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)


def brief(done: subprocess.CompletedProcess, job: str) -> dict:
    """The job's brief JSON line: exit status 0, the line last in the combined output (nothing
    after it, on stdout or stderr), holding the job's brief keys."""
    assert done.returncode == 0, done.stdout[-3000:]
    last = done.stdout.rstrip("\n").splitlines()[-1]
    result = json.loads(last)
    assert list(result) == list(JOBS[job].brief), last
    return result


@pytest.fixture(scope="module")
def work(tmp_path_factory, tiny_model_dir) -> dict:
    folder = tmp_path_factory.mktemp("commands")
    corpus = folder / "corpus.txt"
    corpus.write_text("".join(t + "\n" for t in TEXTS))
    return {"folder": folder, "corpus": str(corpus), "model": str(tiny_model_dir)}


@pytest.fixture(scope="module")
def embedded(work) -> str:
    output = str(work["folder"] / "emb")
    result = brief(run(SENTRAY, "embed", "--input", work["corpus"], "--output", output,
                       "--model", work["model"], "--pooling", "mean"), "embed")
    assert result["rows_out"] == len(TEXTS)
    return output


def test_embed_then_index_then_search_chain_like_unix_tools(work, embedded):
    """`sentray embed ... && sentray index ... && sentray search ...`: each step exits 0."""
    indexed = brief(run(SENTRAY, "index", embedded, "--text-from", work["corpus"]), "index")
    assert indexed["rows"] == len(TEXTS)
    done = run(SENTRAY, "search", embedded, "--query", "a dog", "-k", "2", "--json")
    assert done.returncode == 0, done.stdout[-3000:]
    answer = json.loads(done.stdout.rstrip("\n").splitlines()[-1])  # a JSON line per query
    assert answer["query"] == "a dog" and len(answer["hits"]) == 2
    # the vectors held in memory (the default for a table this small) and the table's own
    # exact scan find the same rows
    modes = {}
    for mode in ("memory", "table"):
        done = run(SENTRAY, "search", embedded, "--query", "a dog", "-k", "5", "--json",
                   "--search-mode", mode)
        assert done.returncode == 0, done.stdout[-3000:]
        modes[mode] = [h["id"] for h in json.loads(done.stdout.splitlines()[-1])["hits"]]
    assert modes["memory"] == modes["table"] and modes["memory"][:2] == \
        [h["id"] for h in answer["hits"]]
    wrong = run(SENTRAY, "search", embedded, "--query", "a dog", "--search-mode", "ram")
    assert wrong.returncode != 0 and "--search-mode" in wrong.stdout


def test_the_job_scripts_exit_as_the_console_script_does(work, embedded):
    """`python jobs/embed.py` runs the same command: a rerun with nothing to do exits 0."""
    again = brief(run(sys.executable, "jobs/embed.py", "--input", work["corpus"], "--output",
                      embedded, "--model", work["model"], "--pooling", "mean"), "embed")
    assert again["rows_out"] == len(TEXTS)


def test_augment_train_evaluate_and_the_lstm_exit_0(work, data_dir):
    folder = work["folder"]
    augmented = brief(run(SENTRAY, "augment", "--input", work["corpus"], "--output",
                          str(folder / "aug"), "--keep-short"), "augment")
    assert augmented["rows_out"] + augmented["rows_rejected"] == len(TEXTS)
    trained = brief(run(SENTRAY, "train", "--input", str(folder / "aug"), "--output",
                        str(folder / "train"), "--model", work["model"], "--max-steps", "2",
                        "--eval-steps", "2", "--batch-size", "4", "--workers", "1",
                        "--num-cpus", "3", "--data-dir", str(data_dir)), "train")
    assert trained["steps"] == 2
    done = run(SENTRAY, "evaluate", "--model", str(folder / "train" / "best"), "--tasks",
               "STS12", "--max-pairs", "20", "--data-dir", str(data_dir), "--output",
               str(folder / "eval"))
    assert done.returncode == 0 and "| STS12 |" in done.stdout, done.stdout[-3000:]
    lstm = brief(run(SENTRAY, "train_lstm", "--cell", "sifter", "--limit-train", "64",
                     "--limit-eval", "32", "--max-steps", "2", "--data-dir", str(data_dir),
                     "--output", str(folder / "lstm")), "train_lstm")
    assert lstm["steps"] == 2

"""Every job's exit status as a user meets it, through the installed `sentray` console script
and `python jobs/X.py` in a subprocess: bad input exits 2 and a failed job 1, each with exactly
one `error: ...` line on stderr and nothing on stdout (sentray/cli.py's module docstring).

The cases that fail before a model loads run on no model; those that need an embedding output
share one, made once by the module's fixture with the tiny in-process model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import ROOT, small_disk_at

SENTRAY = str(Path(sys.executable).parent / "sentray")  # what `pip install` put beside python
BAD_INPUT, FAILED = 2, 1


def run(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def error_line(done: subprocess.CompletedProcess) -> str:
    """The one `error: ...` line a command that did not succeed ends with: the only such line on
    stderr, its last, and no result on stdout."""
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr[-3000:]
    assert done.stderr.rstrip("\n").splitlines()[-1] == errors[0]
    assert "Traceback" not in done.stderr and not done.stdout.strip(), done.stdout
    return errors[0]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A Parquet corpus whose text is in `body` and whose ids repeat (rows 0 and 3)."""
    folder = tmp_path_factory.mktemp("exit-statuses")
    texts = ["A dog runs\nin the park.", "Rain falls on the town.", "Markets rose today.",
             "A cat sleeps in the sun.", "The song was long."]
    pq.write_table(pa.table({"body": texts, "id": ["a", "b", "c", "a", "e"]}),
                   folder / "corpus.parquet")
    return folder / "corpus.parquet"


@pytest.fixture(scope="module")
def embedded(corpus, tiny_model_dir) -> dict:
    """The corpus embedded once (`--text-column body --id-column id`): its output and the
    flags that made it."""
    flags = ["--input", str(corpus), "--text-column", "body", "--id-column", "id",
             "--model", str(tiny_model_dir), "--pooling", "mean"]
    output = corpus.parent / "emb"
    done = run(SENTRAY, "embed", *flags, "--output", str(output))
    assert done.returncode == 0, done.stderr[-3000:]
    return {"output": output, "flags": flags, "stderr": done.stderr,
            "result": json.loads(done.stdout.splitlines()[-1])}


COMMANDS = {"sentray": lambda job: [SENTRAY, job],
            "script": lambda job: [sys.executable, f"jobs/{job}.py"]}


# each case through one of the two commands (both run `sentray.cli.command`), alternately
@pytest.mark.parametrize(("how", "job", "flags", "said"), [
    ("sentray", "embed", ["--input", "{tmp}/absent.txt"], "absent.txt does not exist"),
    ("script", "embed", ["--input", "{corpus}"],
     "has no column 'text'; its columns are ['body', 'id'] (choose another with --text-column)"),
    ("sentray", "embed", ["--input", "{corpus}", "--text-column", "body", "--model", "no-such"],
     "could not load model 'no-such'"),
    ("script", "embed", ["--config", "{tmp}/absent.yaml"], "--config {tmp}/absent.yaml"),
    ("sentray", "embed", ["--batch-size", "0"], "error: batch_size must be >= 1, got 0"),
    ("script", "embed", ["--batch-size", "x"], "error: --batch-size: invalid literal"),
    ("sentray", "embed", ["--precision", "int4"], "error: --precision must be one of fp32"),
    ("script", "embed", ["--bogus"], "error: unrecognized arguments: --bogus"),
    ("script", "index", ["{tmp}/absent"], "absent"),
    ("sentray", "search", ["{tmp}/absent", "--query", "x"],
     "no index at {tmp}/absent/_index.lance"),
    ("script", "search", ["{tmp}/absent", "--query", "x", "-k", "0"],
     "error: k must be >= 1, got 0"),
], ids=["missing-input", "missing-column", "unknown-model", "missing-config", "bad-value",
        "unparsed-value", "unknown-choice", "unknown-flag", "index-missing-output",
        "search-missing-index", "search-k-0"])
def test_bad_input_exits_2_with_one_error_line(how, job, flags, said, corpus, tmp_path):
    def filled(text: str) -> str:
        return text.replace("{tmp}", str(tmp_path)).replace("{corpus}", str(corpus))

    output = ["--output", str(tmp_path / "out")] if job == "embed" else []
    done = run(*COMMANDS[how](job), *map(filled, flags), *output)
    assert done.returncode == BAD_INPUT, done.stderr[-3000:]
    assert filled(said) in error_line(done)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing left behind


def test_an_unknown_job_or_none_exits_2():
    for argv in (["nosuchjob"], []):
        done = run(SENTRAY, *argv)
        assert done.returncode == BAD_INPUT
        assert error_line(done).startswith("error: " + ("unknown job 'nosuchjob'" if argv
                                                        else "no job given"))
        assert "jobs:" in done.stderr  # the usage, before the error line


def test_an_output_written_with_other_settings_exits_2(embedded):
    done = run(SENTRAY, "embed", *embedded["flags"], "--output", str(embedded["output"]),
               "--pooling", "cls")
    assert done.returncode == BAD_INPUT
    line = error_line(done)
    assert "holds what was made with other settings" in line and "'cls' (this run)" in line


def test_duplicate_ids_are_counted_and_said(embedded):
    """The choice (sentray/corpus/duplicate_ids.py): a warning with the count; every row out."""
    assert "1 rows share their --id-column 'id' value with an earlier row" in embedded["stderr"]
    assert embedded["result"]["rows_out"] == 5
    summary = json.loads((embedded["output"] / "_summary.json").read_text())
    assert summary["duplicate_ids"] == 1


def test_index_reads_the_text_column_the_embedding_recorded(embedded, corpus):
    """`--text-column body` typed once, at embed time: the index joins the texts from it; the
    search prints them one line a hit."""
    done = run(SENTRAY, "index", str(embedded["output"]), "--text-from", str(corpus))
    assert done.returncode == 0, done.stderr[-3000:]
    # the table: the query's line first (no blank line before it), then one line a hit, with
    # its text (joined from the corpus's body; its newline read as a space)
    table = run(SENTRAY, "search", str(embedded["output"]), "--query", "a dog", "-k", "5")
    assert table.returncode == 0, table.stderr[-3000:]
    lines = table.stdout.splitlines()
    assert lines[0] == "query: a dog" and len(lines) == 6, table.stdout
    assert any(line.endswith("A dog runs in the park.") for line in lines[1:]), table.stdout


@pytest.fixture
def small_disk(tmp_path):
    """A 256 KiB tmpfs."""
    with small_disk_at(tmp_path / "disk", "256k") as mount:
        yield mount


def test_a_failed_job_exits_1_with_one_error_line(embedded, small_disk):
    """Storage that fails under the job (a full disk) is a failed job, not bad input."""
    (small_disk / "filler").write_bytes(b"x" * (256 * 1024 - 8 * 1024))
    done = run(*COMMANDS["script"]("embed"), *embedded["flags"], "--output", str(small_disk / "o"))
    assert done.returncode == FAILED, done.stderr[-3000:]
    assert "the disk is full" in error_line(done)

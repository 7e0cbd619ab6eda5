"""bench/gpu_check.sh must work the first time a GPU appears: its dry run (every step on CPU at
tiny sizes) runs here, and its report is checked for every step's figures, and those figures
against an independent count: the tokens of the same sentences, the padding of length-sorted
batches, the FLOPs of a BERT forward pass over them, and the rates and fractions made of
those and the reported seconds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GPU_CHECK = [sys.executable, "-m", "bench.gpu_check"]  # run from ROOT
STEPS = ["gpu_tests", "embed", "ditto_memory", "train", "feed"]
MODEL = "all-MiniLM-L6-v2"  # gpu_check's default --model
SENTENCES, BATCH_SIZE, MEMORY_BATCH, MEMORY_TOKENS = 16, 8, 2, 8  # the dry run's sizes here

# The corpus of the dry run: long and short sentences alternate, so batches cut in file order
# would pad every short one to a long one's length, and length-sorted batches do not; the blank
# lines are no sentences; the last two lines lie beyond --sentences.
CORPUS_SENTENCES = [
    "The committee met on a wet Tuesday in March to review the budget for the new library, the "
    "repairs to the old bridge and the long list of complaints about the bus timetable.",
    "Rain fell.",
    "After three hours of debate the members agreed that the bridge could wait another year, "
    "but that the library would open in the autumn whatever the weather did.",
    "She laughed.",
    "Nobody in the village remembered a summer so dry that the river could be crossed on foot "
    "from the mill to the church without wetting one's ankles.",
    "It is late.",
    "The new timetable, printed in small grey letters on thin paper, was pinned to every "
    "shelter along the valley road before anyone had read it through.",
    "Come in, please.",
    "A surveyor from the county arrived in a borrowed car, measured the arches twice, and "
    "declared in a letter of four pages that they would stand for a century.",
    "Dogs bark.",
    "The librarian ordered two hundred books on gardening, local history and navigation, "
    "because those were the subjects people had asked for at the meeting.",
    "Why not?",
    "By the first frost the shelves were full, the heating worked in every room but one, and "
    "the children had taken over the reading corner beside the tall window.",
    "Thank you.",
    "Everyone agreed, when the first year's accounts were read aloud at the spring meeting, "
    "that the money had been better spent than anyone had dared to expect.",
    "The end.",
    "This sentence is the seventeenth, beyond the dry run's sixteen.",
    "So is this one.",
]


def write_corpus(path: Path) -> None:
    lines = ["", *CORPUS_SENTENCES[:4], "   ", *CORPUS_SENTENCES[4:10], "", "",
             *CORPUS_SENTENCES[10:]]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> tuple[dict, str, str]:
    """The report, the markdown table and the wrapper's stdout of one dry run."""
    tmp_path = tmp_path_factory.mktemp("gpu_check")
    out, corpus = tmp_path / "gpu_check", tmp_path / "corpus.txt"
    write_corpus(corpus)
    # tests and training are skipped (minutes of Ray on 2 cores); the full dry run is
    # `bash bench/gpu_check.sh --dry-run`
    done = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu_check.sh"), "--dry-run", "--skip-tests",
         "--skip-train", "--out", str(out), "--corpus", str(corpus), "--sentences",
         str(SENTENCES), "--batch-size", str(BATCH_SIZE), "--memory-batch", str(MEMORY_BATCH),
         "--memory-tokens", str(MEMORY_TOKENS)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    return report, (out / "gpu_check.md").read_text(), done.stdout


@pytest.mark.long
@pytest.mark.slow
def test_dry_run_reports_every_step(dry_run):
    report, table, stdout = dry_run
    assert list(report["steps"]) == STEPS and report["failed_steps"] == []
    assert report["dry_run"] and report["environment"]["torch"]
    steps = report["steps"]
    assert steps["gpu_tests"]["status"] == steps["train"]["status"] == "skipped"
    assert steps["embed"]["status"] == steps["ditto_memory"]["status"] == "ok"

    embed = steps["embed"]["runs"]
    assert [(r["pooling"], r["precision"]) for r in embed] == [
        ("mean", "fp32"), ("ditto fast", "fp32"), ("ditto eager", "fp32")]
    assert [r["fast_ditto"] for r in embed] == [False, True, False]
    for run in embed:
        assert "error" not in run and run["device"] == "cpu"
        assert run["sentences"] == SENTENCES and run["batch_size"] == BATCH_SIZE
        assert run["fraction_of_peak"] is None and run["peak_tflops"] is None  # CPU: no peak
        assert run["peak_basis"] == "CPU: no peak table"

    memory = steps["ditto_memory"]["runs"]
    assert [r["ditto_impl"] for r in memory] == ["fast", "eager"]
    for run in memory:
        assert "error" not in run and run["forward_seconds"] > 0
        assert run["embedding_shape"] == [MEMORY_BATCH, 384]  # all-MiniLM-L6-v2: 384 wide
        assert run["peak_allocated_mib"] is None  # not measurable on CPU, said so in the note
    assert "CPU" in steps["ditto_memory"]["note"]

    assert "| ditto eager | fp32 |" in table and "| embed | ok |" in table
    for run in embed:  # the table shows the JSON's figures
        assert (f"| {run['pooling']} | fp32 | {run['encode_sentences_per_s']:,.0f} | "
                f"{run['forward_sentences_per_s']:,.0f} |") in table
    assert table.strip() in stdout  # the wrapper prints it
    again = subprocess.run([*GPU_CHECK, "--markdown",
                            str(Path(report["config"]["out"]) / "gpu_check.json")],
                           cwd=ROOT, capture_output=True, text=True, check=True)
    assert again.stdout.strip() == table.strip()


def bert_forward_flops(config, shapes: list[tuple[int, int]]) -> int:
    """2 FLOPs per multiply-add of every matrix product of a BERT encoder over padded (B, T)
    batches, written out product by product as (rows, inner, columns) for one sentence: the
    Q, K, V and output projections, the feed-forward pair, the scores Q K^T and their product
    with V. Embeddings, norms and the softmax are left out, as gpu_check documents."""
    d, inner = config.hidden_size, config.intermediate_size
    total = 0
    for batch, tokens in shapes:
        products = [(tokens, d, d)] * 4 + [(tokens, d, inner), (tokens, inner, d),
                                           (tokens, d, tokens), (tokens, tokens, d)]
        total += config.num_hidden_layers * batch * sum(2 * m * k * n for m, k, n in products)
    return total


def rounding_span(value: float, decimals: int) -> tuple[float, float]:
    """Where the exact value of a figure the JSON rounded to `decimals` lies."""
    half = 0.5 * 10 ** -decimals
    return value - half, value + half


def assert_quotient(reported: float, numerator: float, denominator: tuple[float, float],
                    decimals: int, what: str) -> None:
    """`reported` is numerator / d rounded to `decimals`, for some d in the `denominator` span
    (the exact seconds and TFLOP/s behind the rounded ones in the JSON). The span, not a
    relative tolerance, is the allowance: it is exactly what the rounding can account for."""
    low, high = denominator
    assert low > 0, what
    smallest, largest = rounding_span(numerator / high, decimals)[0], rounding_span(
        numerator / low, decimals)[1]
    slack = 1e-9 * abs(reported)  # float error of the quotients above, not of gpu_check's
    assert smallest - slack <= reported <= largest + slack, (what, reported, smallest, largest)


@pytest.mark.long
@pytest.mark.slow
def test_dry_run_embed_figures_match_an_independent_count(dry_run, tokenizer):
    from sentray.encode.model_files import default_max_length
    from sentray.encode.model_loading import load_config
    from sentray.encode.model_lookup import resolve_model

    model = resolve_model(MODEL)
    report = dry_run[0]
    # the first --sentences non-blank corpus lines, truncated as SentenceEncoder truncates
    sentences = CORPUS_SENTENCES[:SENTENCES]
    ids = tokenizer(sentences, truncation=True, max_length=default_max_length(model, tokenizer))
    lengths = sorted((len(row) for row in ids["input_ids"]), reverse=True)
    batches = [lengths[i:i + BATCH_SIZE] for i in range(0, len(lengths), BATCH_SIZE)]
    shapes = [(len(batch), batch[0]) for batch in batches]  # (B, T): longest first, no more pad
    tflop = bert_forward_flops(load_config(model), shapes) / 1e12
    runs = report["steps"]["embed"]["runs"]
    # one matrix product measured per precision, set against all three poolings
    assert len({run["matmul_tflops_per_s"] for run in runs}) == 1
    for run in runs:
        name = run["pooling"]
        assert run["forward_passes"] == len(shapes), name
        assert run["real_tokens"] == sum(lengths), name
        assert run["padded_tokens"] == sum(b * t for b, t in shapes), name
        assert abs(run["model_tflop"] - tflop) <= 0.5e-4 + 1e-12, name  # 4 decimals
        forward = rounding_span(run["forward_seconds"], 4)
        matmul = rounding_span(run["matmul_tflops_per_s"], 3)
        assert_quotient(run["forward_sentences_per_s"], SENTENCES, forward, 1, name)
        assert_quotient(run["encode_sentences_per_s"], SENTENCES,
                        rounding_span(run["encode_seconds"], 4), 1, name)
        assert_quotient(run["real_tokens_per_s"], sum(lengths), forward, 1, name)
        assert_quotient(run["model_tflops_per_s"], tflop, forward, 4, name)
        # model TFLOP/s over the matmul's: seconds x matmul TFLOP/s is the denominator
        assert_quotient(run["fraction_of_matmul"], tflop,
                        (forward[0] * matmul[0], forward[1] * matmul[1]), 4, name)


@pytest.mark.long
@pytest.mark.slow
def test_dry_run_memory_figures_match_an_independent_count(dry_run):
    from sentray.encode.model_loading import load_config
    from sentray.encode.model_lookup import resolve_model

    runs = dry_run[0]["steps"]["ditto_memory"]["runs"]
    # one synthetic (batch, tokens) batch with an all-ones mask: no padding to leave out
    config = load_config(resolve_model(MODEL))
    tflop = bert_forward_flops(config, [(MEMORY_BATCH, MEMORY_TOKENS)]) / 1e12
    for run in runs:
        assert (run["batch"], run["tokens"]) == (MEMORY_BATCH, MEMORY_TOKENS)
        assert_quotient(run["model_tflops_per_s"], tflop, rounding_span(run["forward_seconds"], 4),
                        4, run["ditto_impl"])


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
    table = subprocess.run([*GPU_CHECK, "--markdown", str(path)], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout
    assert "| train | error | 3.0 | StepFailed: failed: simcse |" in table
    assert "| ditto_memory | not run | | |" in table
    assert "6 passed, 0 skipped, 0 failed, 0 errors of 6" in table
    assert "| sifter | 64 | cuda | bf16 | 60 | 9.500 | 608 | 40.0 |" in table
    assert "| simcse | 64 | cuda | bf16 | error: RuntimeError: exited 1 |" in table
    assert "Failed steps: train" in table


@pytest.mark.ray
@pytest.mark.slow
def test_dry_run_feed_step_measures_the_job_against_the_forward(ray_cluster, tmp_path):
    """Step 5 alone (`--only feed`), as bench/gpu_check.sh runs it: the job on its Ray path with
    tokenizing in a stage of its own puts out every row, and busy is its steady rate over the
    forward-only rate on the same rows. The job joins the session's cluster ($RAY_ADDRESS, as
    `ray job submit` sets it) rather than starting one."""
    corpus = tmp_path / "corpus.txt"
    write_corpus(corpus)
    out = tmp_path / "out"
    result = subprocess.run([*GPU_CHECK, "--dry-run", "--only", "feed", "--out", str(out),
                             "--corpus", str(corpus), "--feed-rows", "30"],
                            cwd=ROOT, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "RAY_ADDRESS": ray_cluster.address})
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    steps = report["steps"]
    assert [steps[name]["status"] for name in STEPS] == ["skipped"] * 4 + ["ok"]
    feed = steps["feed"]
    rows = (out / "feed-rows.txt").read_text().splitlines()
    assert feed["rows"] == feed["job_rows_out"] == len(rows) == 30  # 18 sentences, 12 pairs
    assert rows[:18] == CORPUS_SENTENCES and rows[18] == " ".join(CORPUS_SENTENCES[:2])
    assert "own-stage" in feed["job_flags"]
    assert feed["forward_rows_per_s"] == pytest.approx(30 / feed["forward_seconds"], rel=1e-3)
    # the record's rates are rounded to 0.1 rows/s, a few rows/s here: 1% of rounding
    assert feed["busy_fraction"] == pytest.approx(
        feed["job_steady_rows_per_s"] / feed["forward_rows_per_s"], rel=1e-2)
    assert "**Feeding the GPU**" in (out / "gpu_check.md").read_text()

"""STS loaders, metrics against scipy/torch, and the evaluator against sentence-transformers."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import encoder_of, load_job
from scipy.stats import spearmanr

from sentray.evaluation import head_search, senteval
from sentray.evaluation.head_search import best_head, search_head
from sentray.evaluation.metrics import cosine_rows, spearman
from sentray.evaluation.senteval import load_sts_benchmark
from sentray.evaluation.sts import markdown_table


def test_spearman_matches_scipy_including_ties():
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 6, size=200).astype(float)  # many ties, like STS gold scores
    predicted = rng.normal(size=(3, 200))
    predicted[1] = np.round(predicted[1], 1)  # ties in the prediction too
    ours = spearman(predicted, gold)
    for row, value in zip(predicted, ours, strict=True):
        assert value == pytest.approx(spearmanr(row, gold).statistic, abs=1e-12)


def test_cosine_matches_torch():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(2, 4, 10, 8))
    expected = torch.nn.functional.cosine_similarity(torch.tensor(a), torch.tensor(b), dim=-1)
    np.testing.assert_allclose(cosine_rows(a, b), expected.numpy(), rtol=1e-12)


@pytest.mark.parametrize("task,pairs", [
    ("STS12", 3108), ("STS13", 1500), ("STS14", 3750), ("STS15", 3000), ("STS16", 1186),
    ("STSBenchmark", 1379), ("SICKRelatedness", 4927)])
def test_loaders_read_the_official_counts(data_dir, task, pairs):
    loaded = senteval.load_task(task, data_dir)
    assert len(loaded.gold) == len(loaded.first) == pairs
    assert np.isfinite(loaded.gold).all() and loaded.gold.min() >= 0 and loaded.gold.max() <= 5
    assert all(s and s == " ".join(s.split()) for s in loaded.first[:50])


def test_sts_benchmark_dev_and_parent_folder(data_dir):
    assert len(senteval.load_sts_benchmark(data_dir, "dev").gold) == 1500
    assert senteval.resolve_data_dir(data_dir.parent) == data_dir  # a folder holding senteval/


def test_missing_data_is_explained(tmp_path, monkeypatch):
    monkeypatch.delenv(senteval.DATA_DIR_ENV, raising=False)
    with pytest.raises(FileNotFoundError, match="--data-dir or set SENTRAY_DATA_DIR"):
        senteval.resolve_data_dir(None)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        senteval.resolve_data_dir(tmp_path / "nope")
    (tmp_path / "STS").mkdir()
    with pytest.raises(FileNotFoundError, match="STS.input.MSRpar.txt"):
        senteval.load_task("STS12", tmp_path)
    monkeypatch.setenv(senteval.DATA_DIR_ENV, str(tmp_path))
    assert senteval.resolve_data_dir(None) == tmp_path


def test_task_names():
    assert senteval.parse_tasks("STS12, STSB,SICK-R") == ["STS12", "STSBenchmark", "SICKRelatedness"]
    assert senteval.parse_tasks(None) == list(senteval.TASKS)
    with pytest.raises(ValueError, match="valid: STS12"):
        senteval.parse_tasks("STS11")


def test_markdown_table():
    table = markdown_table({"STS12": 70.123, "STSBenchmark": 80.0, "avg": 75.06}, "m")
    assert table.splitlines()[0] == "| model | STS12 | STS-B | Avg. |"
    assert table.splitlines()[2] == "| m | 70.12 | 80.00 | 75.06 |"


def test_head_search_on_tiny_model(tokenizer, tiny_bert, data_dir, monkeypatch):
    from sentray.encode.config import EncoderConfig

    original = load_sts_benchmark
    monkeypatch.setattr(head_search, "load_sts_benchmark",
                        lambda root, split: _first_pairs(original(root, split), 40))
    encoder = encoder_of(EncoderConfig(pooling="ditto", head="0-0"), model=tiny_bert,
                              tokenizer=tokenizer)
    grid = search_head(encoder, data_dir)
    assert grid.shape == (2, 4)
    # Each cell against its own one-head encoder (the head's diagonal read from the eager
    # attention maps), scored by torch's cosine and scipy's Spearman: the grid pools every
    # head from one pass, the reference one head at a time. Both run the same eager forward
    # on the same length-sorted batches in this process, so their embeddings agree to the
    # bit; the cosines then differ by float64 rounding (~1e-16), a million times less than
    # the closest two of these 40 cosines (~1e-6), so the ranks and the scores are the same.
    # A swapped rank would move a score by ~0.1; any two heads here differ by 0.04 or more.
    dev = _first_pairs(original(data_dir, "dev"), 40)
    for layer in range(2):
        for head in range(4):
            single = encoder_of(EncoderConfig(pooling="ditto", head=f"{layer}-{head}",
                                                   ditto_impl="eager"),
                                     model=tiny_bert, tokenizer=tokenizer)
            cosine = torch.nn.functional.cosine_similarity(
                torch.from_numpy(single.encode(dev.first)).double(),
                torch.from_numpy(single.encode(dev.second)).double(), dim=-1)
            expected = spearmanr(cosine.numpy(), dev.gold).statistic * 100
            assert grid[layer, head] == pytest.approx(expected, abs=1e-9), (layer, head)
    assert len(set(grid.ravel().round(6))) == 8  # no two heads alike: a mixed-up cell shows


def test_best_head_is_the_highest_cell_by_hand():
    grid = np.array([[10.0, 12.5, np.nan, 3.0],
                     [11.0, 12.0, 12.75, -5.0]])  # the best in row 1, a NaN (a failed head)
    assert best_head(grid) == "1-2"
    assert best_head(np.array([[5.0, 7.0], [7.0, 1.0]])) == "0-1"  # first of a tie


def _first_pairs(pairs, n):
    return senteval.PairSet(pairs.name, pairs.first[:n], pairs.second[:n], pairs.gold[:n])


@pytest.mark.long
@pytest.mark.slow
def test_evaluate_job_reproduces_sentence_transformers(data_dir, tmp_path):
    """all-MiniLM-L6-v2 + mean: every task equals sentence-transformers' own encode + scipy, on
    each task's first 100 pairs (--max-pairs; the whole files take minutes on 2 cores, and
    `python bench/bench_evaluate.py` compares them whole)."""
    from sentence_transformers import SentenceTransformer

    from sentray.encode.model_lookup import resolve_model

    results = load_job("evaluate").main(["--pooling", "mean", "--data-dir", str(data_dir),
                                         "--output", str(tmp_path), "--max-pairs", "100"])
    assert json.loads((tmp_path / "results.json").read_text()) == pytest.approx(results)
    peer = SentenceTransformer(resolve_model("all-MiniLM-L6-v2").path, device="cpu")
    for task in senteval.TASKS:
        pairs = _first_pairs(senteval.load_task(task, data_dir), 100)
        a = peer.encode(pairs.first, batch_size=64, convert_to_numpy=True)
        b = peer.encode(pairs.second, batch_size=64, convert_to_numpy=True)
        cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        expected = spearmanr(cosine, pairs.gold).statistic * 100
        assert results[task] == pytest.approx(expected, abs=0.01), task
    assert results["avg"] == pytest.approx(np.mean([results[t] for t in senteval.TASKS]))


@pytest.mark.slow
def test_evaluate_job_searches_the_head_on_dev(data_dir, tmp_path):
    results = load_job("evaluate").main([
        "--pooling", "ditto", "--search-head", "--tasks", "STSBenchmark", "--max-pairs", "150",
        "--data-dir", str(data_dir), "--output", str(tmp_path)])
    grid = json.loads((tmp_path / "head_grid.json").read_text())
    assert grid["split"] == "STSBenchmark dev"
    assert np.array(grid["grid"]).shape == (6, 12)  # all-MiniLM-L6-v2: 6 layers x 12 heads
    assert (tmp_path / "head_grid.png").stat().st_size > 1000
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["head"] == grid["best_head"]
    layer, head = map(int, grid["best_head"].split("-"))
    assert grid["grid"][layer][head] == max(max(row) for row in grid["grid"])
    # the test score is the chosen head's: its own encoder, cosines and scipy's Spearman
    from sentray.encode.config import EncoderConfig

    chosen = encoder_of(EncoderConfig(pooling="ditto", head=grid["best_head"]))
    pairs = _first_pairs(senteval.load_task("STSBenchmark", data_dir), 150)
    a, b = chosen.encode(pairs.first), chosen.encode(pairs.second)
    cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    expected = spearmanr(cosine, pairs.gold).statistic * 100
    assert results["STSBenchmark"] == pytest.approx(expected, abs=0.01)


def test_search_head_needs_a_ditto_pooling(data_dir, tmp_path, exit_message):
    with pytest.raises(SystemExit) as info:
        load_job("evaluate").main(["--pooling", "mean", "--search-head",
                                   "--data-dir", str(data_dir), "--output", str(tmp_path)])
    assert "--search-head chooses a Ditto head" in exit_message(info)

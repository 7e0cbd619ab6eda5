"""STS evaluation as SentEval (and SimCSE, Ditto) run it: cosine similarity of the two sentence
embeddings, Spearman correlation x 100, and the tables the jobs print.

STS12-16 use the "all" setting (the subsets of a year concatenated, one correlation);
STSBenchmark and SICKRelatedness their test split. STS-B dev is the only split used to choose
anything (the Ditto head search, a checkpoint, a learning rate).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import numpy as np

from sentray.evaluation.metrics import cosine_rows, spearman
from sentray.evaluation.senteval import PairSet, load_task, parse_tasks
from sentray.kit.progress_bars import steps

logger = logging.getLogger(__name__)


def score_pairs(encoder, pairs: PairSet, batch_size: int | None = None) -> float:
    """Spearman x 100 of cosine(encoder(first), encoder(second)) against the gold scores."""
    first = encoder.encode(pairs.first, batch_size)
    second = encoder.encode(pairs.second, batch_size)
    return float(spearman(cosine_rows(first, second), pairs.gold) * 100.0)


def evaluate(encoder, tasks: Sequence[str] | str | None = None,
             data_dir: str | os.PathLike | None = None,
             batch_size: int | None = None, max_pairs: int | None = None) -> dict[str, float]:
    """{task: Spearman x 100, ..., "avg": mean over the tasks}, in the order of `tasks`; with
    `max_pairs`, each task scored on its first `max_pairs` pairs only."""
    results: dict[str, float] = {}
    for task in steps(parse_tasks(tasks), desc="STS tasks"):
        pairs = load_task(task, data_dir).head(max_pairs)
        results[task] = score_pairs(encoder, pairs, batch_size)
        logger.info("%s: %.2f (%d pairs)", task, results[task], len(pairs.gold))
    results["avg"] = float(np.mean([results[t] for t in results]))
    return results


SHORT_NAMES = {"STSBenchmark": "STS-B", "SICKRelatedness": "SICK-R", "avg": "Avg."}


def markdown_table(results: dict[str, float], label: str = "") -> str:
    names = [n for n in results if n != "avg"] + (["avg"] if "avg" in results else [])
    head = "| " + " | ".join(["model"] * bool(label) + [SHORT_NAMES.get(n, n) for n in names])
    rule = "|" + "---|" * (len(names) + bool(label))
    row = "| " + " | ".join([label] * bool(label) + [f"{results[n]:.2f}" for n in names]) + " |"
    return "\n".join([head + " |", rule, row])


def mean_std_table(runs: dict[str, Sequence[dict[str, float]]]) -> str:
    """Markdown table, one row per label: each task's mean +- sample std over that label's
    runs (a single run prints its value alone)."""
    names = list(next(iter(runs.values()))[0])
    lines = ["| model | runs | " + " | ".join(SHORT_NAMES.get(n, n) for n in names) + " |",
             "|" + "---|" * (len(names) + 2)]
    for label, results in runs.items():
        cells = []
        for name in names:
            values = np.array([r[name] for r in results])
            cells.append(f"{values.mean():.2f} ± {values.std(ddof=1):.2f}" if len(values) > 1
                         else f"{values[0]:.2f}")
        lines.append(f"| {label} | {len(results)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)

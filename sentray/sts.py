"""STS evaluation as SentEval (and SimCSE, Ditto) run it: cosine similarity of the two sentence
embeddings, Spearman correlation x 100.

STS12-16 use the "all" setting (the subsets of a year concatenated, one correlation);
STSBenchmark and SICKRelatedness their test split. STS-B dev is the only split used to choose
anything (the Ditto head search below).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import rankdata

from sentray.encoder import EncoderConfig
from sentray.pooling import DITTO_POOLINGS
from sentray.progress import steps
from sentray.senteval import (
    PairSet,
    load_sts_benchmark,
    load_task,
    parse_tasks,
    resolve_data_dir,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvaluateConfig:
    """One STS evaluation (jobs/evaluate.py): an encoder scored on the 7 tasks."""

    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    tasks: str = "all"  # comma-separated, from STS12, ..., STSBenchmark, SICKRelatedness
    data_dir: str | None = None  # SentEval data/downstream folder (default: $SENTRAY_DATA_DIR)
    out: str = "out/evaluate"  # folder for results.json (and the head grid)
    search_head: bool = False  # score every layer-head on STS-B dev, keep the best, then evaluate
    # score each task (and the head search) on its first N pairs only: a quick check of a
    # set-up, not the tasks' scores
    max_pairs: int | None = None
    # also write the model with this pooling (and Ditto head, searched or given) as a
    # sentence-transformers directory: SentenceTransformer(DIR, trust_remote_code=True) for Ditto
    export_st: str | None = None

    def __post_init__(self) -> None:
        parse_tasks(self.tasks)
        if self.max_pairs is not None and self.max_pairs < 3:
            raise ValueError(f"max_pairs must be at least 3, got {self.max_pairs}")
        if self.search_head and self.encoder.pooling not in DITTO_POOLINGS:
            raise ValueError(f"--search-head chooses a Ditto head; use --pooling ditto (or "
                             f"ditto_last, ...), not {self.encoder.pooling!r}")
        if not self.search_head:  # the head search decides the head; else decide it now
            object.__setattr__(self, "encoder", self.encoder.resolved())

# -- metrics --------------------------------------------------------------------------------------


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity over the last axis: (..., N, D) x (..., N, D) -> (..., N)."""
    a = a.astype(np.float64, copy=False)
    b = b.astype(np.float64, copy=False)
    dot = (a * b).sum(-1)
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return dot / np.maximum(norms, 1e-12)


def spearman(predicted: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Spearman correlation of each row of `predicted` (..., N) with `gold` (N,): the Pearson
    correlation of average ranks (ties share their mean rank, as in scipy)."""
    ranks = rankdata(predicted, axis=-1)
    gold_ranks = rankdata(gold)
    ranks = ranks - ranks.mean(-1, keepdims=True)
    gold_ranks = gold_ranks - gold_ranks.mean()
    numerator = (ranks * gold_ranks).sum(-1)
    denominator = np.sqrt((ranks ** 2).sum(-1) * (gold_ranks ** 2).sum())
    return numerator / np.where(denominator == 0, np.nan, denominator)


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


# -- Ditto head search ----------------------------------------------------------------------------


def search_head(encoder, data_dir: str | os.PathLike | None = None,
                batch_size: int | None = None, max_pairs: int | None = None) -> np.ndarray:
    """Spearman x 100 on STS-B **dev** (its first `max_pairs` pairs if given) for every head:
    (L, H). The encoder's pooling must be a Ditto pooling; its own head is ignored."""
    pairs = load_sts_benchmark(resolve_data_dir(data_dir), "dev").head(max_pairs)
    first = encoder.encode_every_head(pairs.first, batch_size)  # (L, H, N, D)
    second = encoder.encode_every_head(pairs.second, batch_size)
    return spearman(cosine_rows(first, second), pairs.gold) * 100.0  # (L, H)


def best_head(grid: np.ndarray) -> str:
    layer, head = np.unravel_index(int(np.nanargmax(grid)), grid.shape)
    return f"{layer}-{head}"


def save_head_heatmap(grid: np.ndarray, path: str | os.PathLike, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1 + 0.55 * grid.shape[1], 1 + 0.45 * grid.shape[0]))
    image = ax.imshow(grid, cmap="viridis", aspect="auto")
    for (layer, head), value in np.ndenumerate(grid):
        ax.text(head, layer, f"{value:.1f}", ha="center", va="center", fontsize=7, color="w")
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_xticks(range(grid.shape[1]))
    ax.set_yticks(range(grid.shape[0]))
    ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, label="STS-B dev Spearman x 100")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)

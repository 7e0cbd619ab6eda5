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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import rankdata

logger = logging.getLogger(__name__)

DATA_DIR_ENV = "SENTRAY_DATA_DIR"
SENTEVAL_URL = "https://github.com/facebookresearch/SentEval (data/downstream/get_transfer_data.bash)"

# year -> its subsets, as SentEval lists them
STS_YEARS: dict[str, tuple[str, ...]] = {
    "STS12": ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    "STS13": ("FNWN", "headlines", "OnWN"),
    "STS14": ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    "STS15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "STS16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}
TASKS: tuple[str, ...] = (*STS_YEARS, "STSBenchmark", "SICKRelatedness")
TASK_ALIASES = {"STSB": "STSBenchmark", "STS-B": "STSBenchmark", "SICK-R": "SICKRelatedness",
                "SICKR": "SICKRelatedness"}


@dataclass(frozen=True)
class PairSet:
    """Sentence pairs with gold similarity scores."""

    name: str
    first: list[str]
    second: list[str]
    gold: np.ndarray  # (N,) float64

    def __post_init__(self) -> None:
        assert len(self.first) == len(self.second) == len(self.gold), self.name

    def head(self, n: int | None) -> PairSet:
        """The first `n` pairs (all of them for None): a quick check, not the task's score."""
        if n is None or n >= len(self.gold):
            return self
        return PairSet(self.name, self.first[:n], self.second[:n], self.gold[:n])


def parse_tasks(spec: str | Sequence[str] | None) -> list[str]:
    """'STS12,STSB' -> ['STS12', 'STSBenchmark']; None or 'all' -> all 7 tasks."""
    if spec is None or spec == "all":
        return list(TASKS)
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    tasks = []
    for name in (n.strip() for n in names if n.strip()):
        name = TASK_ALIASES.get(name, name)
        if name not in TASKS:
            raise ValueError(f"unknown STS task {name!r}; valid: {', '.join(TASKS)} "
                             f"(aliases: {', '.join(TASK_ALIASES)})")
        tasks.append(name)
    if not tasks:
        raise ValueError("no STS task given")
    return tasks


def resolve_data_dir(data_dir: str | os.PathLike | None) -> Path:
    """The SentEval `downstream` folder (holding STS/ and SICK/): the argument, else
    $SENTRAY_DATA_DIR. A folder holding `senteval/` is accepted too."""
    raw = data_dir or os.environ.get(DATA_DIR_ENV)
    if not raw:
        raise FileNotFoundError(
            f"no STS data directory: pass --data-dir or set {DATA_DIR_ENV} to the SentEval "
            f"data/downstream folder (with STS/ and SICK/ inside); get it from {SENTEVAL_URL}")
    path = Path(raw).expanduser()
    if (path / "senteval").is_dir():
        path = path / "senteval"
    if not path.is_dir():
        raise FileNotFoundError(f"STS data directory {path} does not exist; get the SentEval "
                                f"data from {SENTEVAL_URL}")
    return path


def _need(path: Path) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"missing STS data file {path}; the data directory must have "
                                f"SentEval's layout (STS/STS12-en-test/..., SICK/...), see "
                                f"{SENTEVAL_URL}")
    return path


def _words(sentence: str) -> str:
    # SentEval splits on whitespace and the SimCSE/Ditto batchers join with one space.
    return " ".join(sentence.split())


def load_sts_year(data_dir: Path, year: str) -> PairSet:
    """STS12-16 "all": every subset of the year, pairs with an empty gold line skipped."""
    folder = data_dir / "STS" / f"{year}-en-test"
    first, second, gold = [], [], []
    for subset in STS_YEARS[year]:
        inputs = _need(folder / f"STS.input.{subset}.txt").read_text(encoding="utf-8").splitlines()
        scores = _need(folder / f"STS.gs.{subset}.txt").read_text(encoding="utf-8").splitlines()
        if len(inputs) != len(scores):
            raise ValueError(f"{folder}/STS.input.{subset}.txt has {len(inputs)} lines but its "
                             f"gold file has {len(scores)}")
        for line, score in zip(inputs, scores, strict=True):
            if not score.strip():
                continue
            a, b = line.split("\t")[:2]
            first.append(_words(a))
            second.append(_words(b))
            gold.append(float(score))
    return PairSet(year, first, second, np.asarray(gold))


def _tab_separated_pairs(name: str, path: Path, columns: tuple[int, int, int],
                         skip_header: bool) -> PairSet:
    """Pairs from a tab-separated file; `columns` = (first, second, gold) field indices."""
    a, b, g = columns
    first, second, gold = [], [], []
    lines = path.read_text(encoding="utf-8").splitlines()[int(skip_header):]
    for fields in (line.strip().split("\t") for line in lines):
        if len(fields) > max(columns):
            first.append(_words(fields[a]))
            second.append(_words(fields[b]))
            gold.append(float(fields[g]))
    return PairSet(name, first, second, np.asarray(gold))


def load_sts_benchmark(data_dir: Path, split: str = "test") -> PairSet:
    """sts-{split}.csv: genre, file, year, id, score, sentence1, sentence2."""
    path = _need(data_dir / "STS" / "STSBenchmark" / f"sts-{split}.csv")
    return _tab_separated_pairs(f"STSBenchmark-{split}", path, (5, 6, 4), skip_header=False)


def load_sick_relatedness(data_dir: Path, split: str = "test") -> PairSet:
    """SICK: pair_ID, sentence_A, sentence_B, relatedness_score, ... (with a header)."""
    name = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}
    path = _need(data_dir / "SICK" / name[split])
    return _tab_separated_pairs(f"SICKRelatedness-{split}", path, (1, 2, 3), skip_header=True)


def load_task(task: str, data_dir: str | os.PathLike | None) -> PairSet:
    """The evaluation pairs of one of TASKS."""
    root = resolve_data_dir(data_dir)
    task = parse_tasks(task)[0]
    if task in STS_YEARS:
        return load_sts_year(root, task)
    if task == "STSBenchmark":
        return load_sts_benchmark(root, "test")
    return load_sick_relatedness(root, "test")


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
    for task in parse_tasks(tasks):
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

"""SentEval's data, as SentEval ships it (data/downstream): the STS and SICK pairs that
`sentray.evaluation.sts` scores, and SST-2, which `sentray.lstm` trains on. The folder is the
argument, else $SENTRAY_DATA_DIR; every loader says which file is missing and where to get it.

STS12-16 use the "all" setting (the subsets of a year concatenated); STSBenchmark and
SICKRelatedness their test split (STS-B dev is loaded for choosing settings). SST-2 is
SST/binary/sentiment-{train,dev,test}, one `sentence<TAB>label` per line (label 0 negative, 1
positive); train holds the labelled phrases of the training trees (67,349), dev and test whole
sentences (872, 1,821).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

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


# -- SST-2 --------------------------------------------------------------------------------------


Split = Literal["train", "dev", "test"]
SPLITS: tuple[str, ...] = ("train", "dev", "test")
SPLIT_ROWS = {"train": 67_349, "dev": 872, "test": 1_821}  # SentEval's files


@dataclass(frozen=True)
class LabelledSentences:
    """Sentences with their 0/1 sentiment labels."""

    name: str
    sentences: list[str]
    labels: np.ndarray  # (N,) int64

    def __post_init__(self) -> None:
        assert len(self.sentences) == len(self.labels), self.name

    def __len__(self) -> int:
        return len(self.sentences)

    def head(self, rows: int | None) -> LabelledSentences:
        """The first `rows` rows (all of them for None)."""
        if rows is None:
            return self
        return LabelledSentences(self.name, self.sentences[:rows], self.labels[:rows])


def load_sst2(data_dir: str | os.PathLike | None, split: Split) -> LabelledSentences:
    """One split of SST-2 from the SentEval folder (the argument, else $SENTRAY_DATA_DIR)."""
    if split not in SPLITS:
        raise ValueError(f"SST-2 split must be one of {SPLITS}, got {split!r}")
    path = resolve_data_dir(data_dir) / "SST" / "binary" / f"sentiment-{split}"
    if not path.is_file():
        raise FileNotFoundError(f"missing SST-2 file {path}; the data directory must have "
                                f"SentEval's layout (SST/binary/sentiment-{{train,dev,test}}), "
                                f"see {SENTEVAL_URL}")
    sentences, labels = [], []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        sentence, _, label = line.rpartition("\t")
        if label.strip() not in ("0", "1") or not sentence.strip():
            raise ValueError(f"{path} line {number} is not 'sentence<TAB>0|1': {line[:80]!r}")
        sentences.append(" ".join(sentence.split()))
        labels.append(int(label))
    return LabelledSentences(f"SST-2-{split}", sentences, np.asarray(labels, dtype=np.int64))

"""SST-2, the binary Stanford Sentiment Treebank, as SentEval ships it: SST/binary/sentiment-
{train,dev,test}, one `sentence<TAB>label` per line (label 0 negative, 1 positive); train holds
the labelled phrases of the training trees (67,349), dev and test whole sentences (872, 1,821).
The data folder is found like the STS data (`sentray.sts.resolve_data_dir`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

import numpy as np

from sentray.sts import SENTEVAL_URL, resolve_data_dir

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


__all__ = ["SPLITS", "SPLIT_ROWS", "LabelledSentences", "load_sst2"]

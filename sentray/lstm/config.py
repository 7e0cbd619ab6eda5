"""`LSTMConfig`: one SST-2 run of the SIFTER-LSTM or LSTM classifier, validated on
construction."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from sentray.encode.model_lookup import DEFAULT_MODEL
from sentray.kit.validation import check_at_least, check_choices
from sentray.lstm import lexicon
from sentray.training.cluster import ClusterConfig

Cell = Literal["lstm", "sifter"]
CELLS: tuple[str, ...] = ("lstm", "sifter")


@dataclass(frozen=True)
class LSTMConfig:
    """One SST-2 run. Defaults are the SIFTER paper's where it gives them."""

    cell: Cell = "sifter"  # sifter: input gate = 1 on sentiment words; lstm: torch.nn.LSTM
    # encoder whose tokenizer and input word embeddings initialise the classifier: HF id, local
    # dir or packaged name (LSTM hidden size = embedding size / 2)
    model: str = DEFAULT_MODEL
    # SentEval folder with SST/binary/sentiment-{train,dev,test}, or a folder holding senteval/
    # (default: $SENTRAY_DATA_DIR)
    data_dir: str | None = None
    output: str = "out/lstm"  # writes OUTPUT/metrics.json (and OUTPUT/_config.yaml); was --out
    lexicon_threshold: float = lexicon.DEFAULT_THRESHOLD  # |VADER valence| of a sentiment word
    batch_size: int = 32  # global: split evenly over the workers
    lr: float = 1e-5  # Adam
    l2: float = 1e-7  # loss += l2 * sum of squared parameters
    epochs: int = 3  # passes over SST-2 train; the paper does not say
    max_steps: int | None = None  # stop early at this many optimizer steps
    eval_steps: int = 50  # dev accuracy every this many steps (and at the last)
    eval_batch_size: int = 256  # sentences per forward pass when scoring
    seed: int = 42  # initial weights, dropout and the batch order
    max_length: int = 64  # word pieces per sentence (SST-2's longest has 64: none is cut)
    dropout: float = 0.2  # on the embeddings and on the LSTM output
    # the workers (0: this process; >= 1: Ray Train, DDP) and their cluster; a GPU with
    # --use-gpu is also the plain process's; CPUs per worker default to 1
    cluster: ClusterConfig = field(default_factory=lambda: ClusterConfig(
        workers=0, cpus_per_worker=1.0, max_failures=0))
    threads: int = 0  # torch threads of the plain process; 0: torch's default
    limit_train: int | None = None  # only the first N train rows (quick checks)
    limit_eval: int | None = None  # only the first N dev and test rows (quick checks)
    log_steps: int = 100  # one log line every N steps

    def __post_init__(self) -> None:
        check_choices(self)
        check_at_least(1, batch_size=self.batch_size, epochs=self.epochs,
                       eval_steps=self.eval_steps, eval_batch_size=self.eval_batch_size,
                       max_length=self.max_length, log_steps=self.log_steps,
                       max_steps=self.max_steps, limit_train=self.limit_train,
                       limit_eval=self.limit_eval)
        check_at_least(0, threads=self.threads)
        if self.cluster.cpus_per_worker is None:  # `none` given: this trainer's default
            object.__setattr__(self, "cluster", dataclasses.replace(self.cluster,
                                                                    cpus_per_worker=1.0))
        if self.batch_size % self.world_size:
            raise ValueError(f"the global batch size {self.batch_size} must be divisible by the "
                             f"number of workers {self.cluster.workers}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.lr <= 0 or self.l2 < 0:
            raise ValueError(f"lr must be > 0 and l2 >= 0, got {self.lr}, {self.l2}")
        if not 0.0 <= self.lexicon_threshold <= lexicon.VALENCE_LIMIT:
            raise ValueError(f"lexicon_threshold must be in [0, {lexicon.VALENCE_LIMIT}] "
                             f"(VADER's valence scale), got {self.lexicon_threshold}")

    @property
    def world_size(self) -> int:
        return max(1, self.cluster.workers)

"""SIFTER-LSTM and the LSTM baseline: SST-2 sentiment classification (the SIFTER paper, section
"SIFTER-LSTM" and its SST-2 experiment).

SIFTER-LSTM is a standard LSTM whose input gate is short-circuited to an all-one vector when the
input word belongs to a task-relevant set (here: sentiment words, `sentray.lexicon`):

    i_t = 1                                                if x_t is in the set (SIFTER)
    i_t = sigmoid(W_ii x_t + b_ii + W_hi h_{t-1} + b_hi)   otherwise
    f_t, g_t, o_t as in any LSTM;  c_t = f_t * c_{t-1} + i_t * g_t;  h_t = o_t * tanh(c_t)

The classifier (both cells): WordPiece embeddings initialised from a pretrained encoder's input
embedding matrix and trained, dropout 0.2 on the embeddings and on the LSTM output, one LSTM
layer of half the embedding size, the last real token's hidden state -> Linear -> 2 logits.
Training as the paper's: Adam, lr 1e-5, batch 32, cross-entropy + 1e-7 * sum of squared
parameters, dev accuracy every 50 steps. Unlike the paper, which picked the checkpoint on the
*test* set, the best step is chosen on dev and only that state is scored on test.

Design choices:
- Sentences are tokenized *without* [CLS]/[SEP]: the LSTM reads the words x_1..x_T the paper
  describes, and its last state sits on the last word piece, not on a constant [SEP].
- Batches are right-padded; padded steps leave h and c unchanged (and output zeros, as
  `pad_packed_sequence` does), so the result does not depend on the padding. The baseline runs
  torch.nn.LSTM on packed sequences (cuDNN on GPU).
- The L2 penalty is an explicit loss term, l2 * sum(p^2) over all trainable parameters
  (embeddings included), as the paper's loss writes it; Adam's weight_decay=2*l2 would give
  the same gradients.
- One loop (`train_loop`) serves both a plain process (`workers=0`) and Ray Train
  (`workers>=1`, DDP via `prepare_model`): every rank takes its slice of each seeded global
  batch, rank 0 scores dev and keeps the best state, and returns the metrics.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence

from sentray import lexicon, models, senteval
from sentray.runtime import step_seed, train_worker_setup

logger = logging.getLogger(__name__)

Cell = Literal["lstm", "sifter"]
CELLS: tuple[str, ...] = ("lstm", "sifter")
NUM_CLASSES = 2


# -- the cell -----------------------------------------------------------------------------------


def lstm_cell_step(
    gates_x: torch.Tensor,
    h: torch.Tensor,
    c: torch.Tensor,
    weight_hh: torch.Tensor,
    force_input: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One LSTM step, gates in torch.nn.LSTM's order (i, f, g, o), with the SIFTER input gate.

    gates_x: (B, 4H) x_t W_ih^T + b_ih + b_hh (computed for the whole sequence at once);
    h, c: (B, H) the previous state; weight_hh: (4H, H); force_input: (B,) bool, True where
    x_t is in the SIFTER set (i_t = 1 there), or None for a plain LSTM. Returns (h_t, c_t).
    """
    gates = torch.addmm(gates_x, h, weight_hh.t())  # (B, 4H): all four gates in one product
    i, f, g, o = gates.chunk(4, dim=1)  # each (B, H)
    i = torch.sigmoid(i)
    if force_input is not None:
        i = torch.where(force_input[:, None], 1.0, i)  # the short circuit: no gradient there
    c = torch.sigmoid(f) * c + i * torch.tanh(g)  # (B, H)
    h = torch.sigmoid(o) * torch.tanh(c)  # (B, H)
    return h, c


def sifter_lstm(
    x: torch.Tensor,
    weight_ih: torch.Tensor,
    weight_hh: torch.Tensor,
    bias_ih: torch.Tensor,
    bias_hh: torch.Tensor,
    force_input: torch.Tensor | None = None,
    lengths: torch.Tensor | None = None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """A one-layer LSTM over a right-padded batch from the zero state.

    x: (B, T, E); weights and biases as torch.nn.LSTM's layer 0; force_input: (B, T) bool or
    None; lengths: (B,) real tokens per row, or None for all T. Returns outputs (B, T, H),
    zero past each row's length, and (h, c), each (B, H), the state after each row's last real
    token.
    """
    batch, steps, _ = x.shape
    hidden = weight_hh.shape[1]
    gates_x = torch.addmm(bias_ih + bias_hh, x.reshape(batch * steps, -1),
                          weight_ih.t()).view(batch, steps, 4 * hidden)  # (B, T, 4H)
    h = x.new_zeros(batch, hidden)  # (B, H)
    c = x.new_zeros(batch, hidden)
    real = None
    if lengths is not None:
        real = torch.arange(steps, device=x.device)[None, :] < lengths[:, None]  # (B, T)
    outputs = []
    for t in range(steps):
        force = force_input[:, t] if force_input is not None else None
        h_t, c_t = lstm_cell_step(gates_x[:, t], h, c, weight_hh, force)
        if real is None:
            h, c = h_t, c_t
            outputs.append(h_t)
        else:
            keep = real[:, t, None]  # (B, 1): padded rows keep their state
            h, c = torch.where(keep, h_t, h), torch.where(keep, c_t, c)
            outputs.append(torch.where(keep, h_t, 0.0))
    return torch.stack(outputs, dim=1), (h, c)  # (B, T, H), ((B, H), (B, H))


class SifterLSTM(nn.Module):
    """One batch-first LSTM layer with the SIFTER input gate. Its parameters have
    torch.nn.LSTM's names and shapes, so an nn.LSTM's state dict loads unchanged; with an
    empty set it computes what nn.LSTM computes.

    The set is a (vocab_size,) bool lookup table, a non-persistent buffer: it moves with
    `.to(device)` and stays out of the state dict.
    """

    def __init__(self, input_size: int, hidden_size: int, *, vocab_size: int,
                 sentiment_ids: Iterable[int] = ()) -> None:
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        # registered in nn.LSTM's order, so reset_parameters draws the same numbers
        self.weight_ih_l0 = nn.Parameter(torch.empty(4 * hidden_size, input_size))
        self.weight_hh_l0 = nn.Parameter(torch.empty(4 * hidden_size, hidden_size))
        self.bias_ih_l0 = nn.Parameter(torch.empty(4 * hidden_size))
        self.bias_hh_l0 = nn.Parameter(torch.empty(4 * hidden_size))
        ids = sorted(set(sentiment_ids))
        if ids and not 0 <= ids[0] <= ids[-1] < vocab_size:
            raise ValueError(f"sentiment token ids must be in [0, {vocab_size}), got "
                             f"{ids[0]}..{ids[-1]}")
        table = torch.zeros(vocab_size, dtype=torch.bool)
        table[ids] = True
        self.register_buffer("sentiment_table", table, persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)  # torch.nn.LSTM's initialisation
        for weight in self.parameters():
            nn.init.uniform_(weight, -bound, bound)

    def forward(self, embeddings: torch.Tensor, token_ids: torch.Tensor | None = None,
                lengths: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """embeddings (B, T, E), token_ids (B, T) (None: no forcing), lengths (B,) for a
        right-padded batch -> outputs (B, T, H), (h, c) each (B, H) at each row's last real
        token."""
        force = self.sentiment_table[token_ids] if token_ids is not None else None  # (B, T)
        return sifter_lstm(embeddings, self.weight_ih_l0, self.weight_hh_l0, self.bias_ih_l0,
                           self.bias_hh_l0, force, lengths)

    def extra_repr(self) -> str:
        return (f"{self.input_size}, {self.hidden_size}, "
                f"sentiment_ids={int(self.sentiment_table.sum())}")


# -- the classifier -----------------------------------------------------------------------------


class LSTMClassifier(nn.Module):
    """Word pieces (B, T) + lengths (B,) -> logits (B, 2): trainable embeddings, dropout, one
    LSTM layer (`cell`), dropout on its last real hidden state, Linear."""

    def __init__(self, embedding_weight: torch.Tensor, *, cell: Cell = "lstm",
                 sentiment_ids: Iterable[int] = (), dropout: float = 0.2,
                 hidden_size: int | None = None, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        if cell not in CELLS:
            raise ValueError(f"cell must be one of {CELLS}, got {cell!r}")
        sentiment_ids = tuple(sentiment_ids)
        if cell == "lstm" and sentiment_ids:
            raise ValueError("sentiment_ids are read by the sifter cell only; the lstm baseline "
                             "takes none")
        vocab_size, embedding_size = embedding_weight.shape
        hidden_size = hidden_size or embedding_size // 2
        self.cell = cell
        self.embeddings = nn.Embedding.from_pretrained(embedding_weight.detach().clone(),
                                                       freeze=False)
        # SifterLSTM draws its initial weights as nn.LSTM does: one seed, one start, both cells.
        if cell == "sifter":
            self.rnn = SifterLSTM(embedding_size, hidden_size, vocab_size=vocab_size,
                                  sentiment_ids=sentiment_ids)
        else:
            self.rnn = nn.LSTM(embedding_size, hidden_size, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden_size, num_classes)

    def forward(self, input_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """input_ids (B, T) right-padded, lengths (B,) (best on the CPU: packing reads them
        there) -> logits (B, 2)."""
        x = self.dropout(self.embeddings(input_ids))  # (B, T, E)
        if self.cell == "sifter":
            _, (last, _) = self.rnn(x, input_ids, lengths.to(x.device))  # (B, H)
        else:
            packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True,
                                          enforce_sorted=False)
            _, (last, _) = self.rnn(packed)  # (1, B, H), in the batch's order
            last = last[0]
        return self.classifier(self.dropout(last))  # (B, 2)


# -- config -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LSTMConfig:
    """One SST-2 run. Defaults are the SIFTER paper's where it gives them."""

    cell: Cell = "sifter"
    model: str = models.DEFAULT_MODEL  # word embeddings and tokenizer: HF id, dir or packaged
    data_dir: str | None = None  # SentEval folder with SST/binary (default: $SENTRAY_DATA_DIR)
    out: str = "out/lstm"  # OUT/metrics.json
    lexicon_threshold: float = lexicon.DEFAULT_THRESHOLD  # |VADER valence| of a sentiment word
    batch_size: int = 32  # global: split evenly over the workers
    lr: float = 1e-5  # Adam
    l2: float = 1e-7  # loss += l2 * sum of squared parameters
    epochs: int = 3  # the paper does not say
    max_steps: int | None = None  # stop early at this many optimizer steps
    eval_steps: int = 50  # dev accuracy every this many steps (and at the last)
    eval_batch_size: int = 256
    seed: int = 42
    max_length: int = 64  # word pieces per sentence (SST-2's longest has 64: none is cut)
    dropout: float = 0.2  # on the embeddings and on the LSTM output
    workers: int = 0  # 0: this process; >= 1: Ray Train (DDP) with that many workers
    use_gpu: bool = False  # one GPU per worker (or for the plain process)
    cpus_per_worker: float = 1.0  # also the worker's torch threads on CPU
    threads: int = 0  # torch threads of the plain process; 0: torch's default
    address: str | None = None  # Ray cluster; None: $RAY_ADDRESS or a private local one
    num_cpus: int | None = None  # logical CPUs of a local cluster
    limit_train: int | None = None  # only the first N train rows (quick checks)
    limit_eval: int | None = None  # only the first N dev and test rows (quick checks)
    log_steps: int = 100

    def __post_init__(self) -> None:
        if self.cell not in CELLS:
            raise ValueError(f"cell must be one of {CELLS}, got {self.cell!r}")
        positive = {"batch_size": self.batch_size, "epochs": self.epochs,
                    "eval_steps": self.eval_steps, "eval_batch_size": self.eval_batch_size,
                    "max_length": self.max_length, "log_steps": self.log_steps,
                    "max_steps": self.max_steps, "limit_train": self.limit_train,
                    "limit_eval": self.limit_eval}
        for name, value in positive.items():
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.workers < 0:
            raise ValueError(f"workers must be 0 (this process) or >= 1 (Ray Train), got "
                             f"{self.workers}")
        if self.batch_size % max(1, self.workers):
            raise ValueError(f"the global batch size {self.batch_size} must be divisible by the "
                             f"number of workers {self.workers}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.lr <= 0 or self.l2 < 0:
            raise ValueError(f"lr must be > 0 and l2 >= 0, got {self.lr}, {self.l2}")
        if not 0.0 <= self.lexicon_threshold <= lexicon.VALENCE_LIMIT:
            raise ValueError(f"lexicon_threshold must be in [0, {lexicon.VALENCE_LIMIT}] "
                             f"(VADER's valence scale), got {self.lexicon_threshold}")
        if self.cpus_per_worker <= 0 or self.threads < 0:
            raise ValueError(f"cpus_per_worker must be > 0 and threads >= 0, got "
                             f"{self.cpus_per_worker}, {self.threads}")

    @property
    def world_size(self) -> int:
        return max(1, self.workers)


# -- data ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EncodedSplit:
    """Word-piece ids of a split, right-padded to its longest row."""

    name: str
    ids: np.ndarray  # (N, L) int64, padded with the tokenizer's pad id
    lengths: np.ndarray  # (N,) int64, >= 1
    labels: np.ndarray  # (N,) int64

    def __len__(self) -> int:
        return len(self.labels)

    def batch(self, rows: np.ndarray | slice) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """ids (b, T) cut to the batch's longest row, lengths (b,), labels (b,)."""
        lengths = self.lengths[rows]
        ids = self.ids[rows, :int(lengths.max())]
        return (torch.from_numpy(np.ascontiguousarray(ids)), torch.from_numpy(lengths),
                torch.from_numpy(self.labels[rows]))


def encode_sentences(tokenizer, data: senteval.LabelledSentences, max_length: int) -> EncodedSplit:
    """Tokenize without [CLS]/[SEP], truncated to `max_length`; a sentence with no word piece
    becomes one [UNK] (the LSTM needs a last token)."""
    pieces = tokenizer(data.sentences, add_special_tokens=False, truncation=True,
                       max_length=max_length)["input_ids"]
    pieces = [p or [tokenizer.unk_token_id] for p in pieces]
    lengths = np.array([len(p) for p in pieces], dtype=np.int64)
    ids = np.full((len(pieces), int(lengths.max())), tokenizer.pad_token_id, dtype=np.int64)
    for row, p in enumerate(pieces):
        ids[row, :len(p)] = p
    return EncodedSplit(data.name, ids, lengths, data.labels.astype(np.int64))


@dataclass(frozen=True)
class LSTMData:
    """Everything a worker needs, prepared once on the driver."""

    train: EncodedSplit
    dev: EncodedSplit
    test: EncodedSplit
    embeddings: torch.Tensor  # (V, E) the encoder's input word embeddings
    sentiment_ids: tuple[int, ...]
    sentiment_words: int


def input_embeddings(model: str) -> torch.Tensor:
    """The encoder's input word-embedding matrix (V, E), as float32 on the CPU."""
    encoder = models.load_encoder(model)
    return encoder.get_input_embeddings().weight.detach().float().cpu().clone()


def prepare_data(config: LSTMConfig) -> LSTMData:
    """Load SST-2, the tokenizer, the embedding matrix and, for SIFTER, the sentiment ids (the
    baseline reads no lexicon: its set is empty)."""
    splits = {split: senteval.load_sst2(config.data_dir, split) for split in senteval.SPLITS}
    limits = {"train": config.limit_train, "dev": config.limit_eval, "test": config.limit_eval}
    tokenizer = models.load_tokenizer(config.model)
    encoded = {split: encode_sentences(tokenizer, data.head(limits[split]), config.max_length)
               for split, data in splits.items()}
    for split in senteval.SPLITS:
        cut = sum(1 for length in encoded[split].lengths if length == config.max_length)
        logger.info("SST-2 %s: %d sentences, %.1f word pieces on average, %d at the %d limit",
                    split, len(encoded[split]), encoded[split].lengths.mean(), cut,
                    config.max_length)
    words: set[str] = set()
    ids: set[int] = set()
    if config.cell == "sifter":
        words = lexicon.sentiment_words(lexicon.load_vader_lexicon(), config.lexicon_threshold)
        ids = lexicon.sentiment_token_ids(words, tokenizer)
    embeddings = input_embeddings(config.model)
    if embeddings.shape[0] < len(tokenizer):
        raise ValueError(f"model {config.model!r} has {embeddings.shape[0]} word embeddings "
                         f"but its tokenizer {len(tokenizer)} tokens")
    return LSTMData(encoded["train"], encoded["dev"], encoded["test"], embeddings,
                    tuple(sorted(ids)), len(words))


# -- training -----------------------------------------------------------------------------------


def epoch_order(seed: int, epoch: int, rows: int) -> np.ndarray:
    """The training rows of an epoch, in a seeded order; the same on every worker."""
    return np.random.default_rng([seed, epoch]).permutation(rows)


def l2_penalty(parameters: Iterable[torch.Tensor]) -> torch.Tensor:
    """sum of squared entries over all trainable parameters (the paper's lambda ||theta||^2)."""
    return torch.stack([p.pow(2).sum() for p in parameters if p.requires_grad]).sum()


@torch.no_grad()
def accuracy(model: nn.Module, data: EncodedSplit, batch_size: int,
             device: torch.device | str = "cpu") -> float:
    """Fraction of `data` classified correctly (eval mode, restored to train mode after)."""
    was_training = model.training
    model.eval()
    correct = 0
    for start in range(0, len(data), batch_size):
        ids, lengths, labels = data.batch(slice(start, start + batch_size))
        logits = model(ids.to(device), lengths)
        correct += int((logits.argmax(-1).cpu() == labels).sum())
    model.train(was_training)
    return correct / len(data)


def total_steps(config: LSTMConfig, train_rows: int) -> tuple[int, int]:
    """(steps per epoch, steps of the run); the rows past an epoch's last full batch are
    left out of it (a different few each epoch)."""
    per_epoch = train_rows // config.batch_size
    if per_epoch == 0:
        raise ValueError(f"{train_rows} training rows is fewer than one batch "
                         f"({config.batch_size})")
    total = per_epoch * config.epochs
    return per_epoch, min(total, config.max_steps) if config.max_steps else total


def train_loop(
    config: LSTMConfig,
    data: LSTMData,
    *,
    rank: int = 0,
    world_size: int = 1,
    device: torch.device | str = "cpu",
    prepare: Callable[[nn.Module], nn.Module] | None = None,
    report: Callable[[dict], None] | None = None,
) -> dict | None:
    """Train one classifier; the same code in a plain process and on every Ray Train worker.

    `prepare` wraps the model for distributed training (Ray's `prepare_model`); `report` is
    called on every rank after every evaluation. Rank r trains on rows [r*b, (r+1)*b) of each
    seeded global batch (b = batch_size // world_size). Rank 0 scores dev every `eval_steps`,
    keeps the best state, scores it on test at the end and returns the metrics; other ranks
    return None.
    """
    device = torch.device(device)
    torch.manual_seed(config.seed)  # the LSTM and the Linear start the same on every rank
    bare = LSTMClassifier(data.embeddings, cell=config.cell, sentiment_ids=data.sentiment_ids,
                          dropout=config.dropout).to(device)
    model = prepare(bare) if prepare is not None else bare
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    per_epoch, steps = total_steps(config, len(data.train))
    if config.batch_size % world_size:
        raise ValueError(f"the global batch size {config.batch_size} must be divisible by the "
                         f"number of workers {world_size}")
    local = config.batch_size // world_size
    history: list[dict] = []
    best = {"dev_accuracy": -1.0, "step": 0, "state": None}
    losses: list[float] = []
    step, started = 0, time.perf_counter()
    for epoch in range(math.ceil(steps / per_epoch)):
        order = epoch_order(config.seed, epoch, len(data.train))
        for index in range(per_epoch):
            if step >= steps:
                break
            step += 1
            start = index * config.batch_size + rank * local
            ids, lengths, labels = data.train.batch(order[start:start + local])
            torch.manual_seed(step_seed(config.seed, rank, step))  # this step's dropout
            logits = model(ids.to(device), lengths)  # (b, 2)
            cross_entropy = F.cross_entropy(logits, labels.to(device))
            loss = cross_entropy
            if config.l2:
                loss = loss + config.l2 * l2_penalty(bare.parameters())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(float(cross_entropy.detach()))
            if rank == 0 and (step % config.log_steps == 0 or step == 1):
                logger.info("step %d/%d epoch %d cross-entropy %.4f (%.1f steps/s)", step,
                            steps, epoch, losses[-1], step / (time.perf_counter() - started))
            if step % config.eval_steps == 0 or step == steps:
                # loss: this rank's mean cross-entropy since the last record
                record = {"step": step, "epoch": epoch, "loss": float(np.mean(losses))}
                losses = []
                if rank == 0:
                    record["dev_accuracy"] = accuracy(bare, data.dev, config.eval_batch_size,
                                                      device)
                    if record["dev_accuracy"] > best["dev_accuracy"]:
                        best = {"dev_accuracy": record["dev_accuracy"], "step": step,
                                "state": {k: v.detach().cpu().clone()
                                          for k, v in bare.state_dict().items()}}
                    logger.info("step %d: dev accuracy %.4f (best %.4f at step %d), "
                                "loss %.4f", step, record["dev_accuracy"],
                                best["dev_accuracy"], best["step"], record["loss"])
                history.append(record)
                if report is not None:
                    report(record)
    if rank != 0:
        return None
    bare.load_state_dict(best["state"])
    test = accuracy(bare, data.test, config.eval_batch_size, device)
    logger.info("best step %d: dev accuracy %.4f, test accuracy %.4f", best["step"],
                best["dev_accuracy"], test)
    return {"dev_accuracy": best["dev_accuracy"], "test_accuracy": test,
            "best_step": best["step"], "steps": steps, "steps_per_epoch": per_epoch,
            "history": history}


def train_loop_per_worker(loop_config: dict) -> dict | None:
    """Ray Train's per-worker function: `loop_config` = {"config": LSTMConfig, "data": an
    ObjectRef of LSTMData}. Returns rank 0's metrics (Ray hands them back as
    `Result.return_value`)."""
    import ray
    import ray.train
    import ray.train.torch

    config: LSTMConfig = loop_config["config"]
    rank, world, device = train_worker_setup(config.world_size, config.cpus_per_worker)
    data: LSTMData = ray.get(loop_config["data"])
    # the one buffer, the SIFTER lookup table, never changes: no need to broadcast it each step
    prepare = functools.partial(ray.train.torch.prepare_model,
                                parallel_strategy_kwargs={"broadcast_buffers": False})
    return train_loop(config, data, rank=rank, world_size=world, device=device,
                      prepare=prepare, report=ray.train.report)


def _train_on_ray(config: LSTMConfig, data: LSTMData) -> dict:
    import ray
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from sentray.runtime import init_ray, local_cpus

    started_cluster = init_ray(config.address, num_cpus=config.num_cpus or local_cpus(
        config.workers, config.cpus_per_worker))
    try:
        trainer = TorchTrainer(
            train_loop_per_worker,
            train_loop_config={"config": config, "data": ray.put(data)},
            scaling_config=ScalingConfig(
                num_workers=config.workers, use_gpu=config.use_gpu,
                resources_per_worker={"CPU": config.cpus_per_worker,
                                      **({"GPU": 1} if config.use_gpu else {})}),
            run_config=RunConfig(name=f"lstm-{config.cell}-seed{config.seed}",
                                 storage_path=str((Path(config.out) / "ray").resolve())),
        )
        result = trainer.fit()
    finally:
        if started_cluster:
            ray.shutdown()
    if result.error:
        raise RuntimeError(f"training failed: {result.error}") from result.error
    if not result.return_value:
        raise RuntimeError("Ray Train returned no metrics from rank 0")
    return result.return_value


def run_lstm(config: LSTMConfig) -> dict:
    """Train and test one classifier; returns the metrics, also written to OUT/metrics.json."""
    started = time.perf_counter()
    logger.info("LSTM config: %s", json.dumps(dataclasses.asdict(config), default=str))
    if config.workers == 0 and config.use_gpu and not torch.cuda.is_available():
        raise ValueError("use_gpu is set but torch sees no CUDA GPU; drop --use-gpu")
    data = prepare_data(config)
    total_steps(config, len(data.train))  # fewer rows than a batch fails here
    if config.workers == 0:
        if config.threads:
            torch.set_num_threads(config.threads)
        metrics = train_loop(config, data, device="cuda" if config.use_gpu else "cpu")
    else:
        metrics = _train_on_ray(config, data)
    metrics = {"cell": config.cell, "seed": config.seed, **metrics,
               "sentiment_words": data.sentiment_words,
               "sentiment_token_ids": len(data.sentiment_ids),
               "train_rows": len(data.train), "dev_rows": len(data.dev),
               "test_rows": len(data.test), "seconds": round(time.perf_counter() - started, 1),
               "config": json.loads(json.dumps(dataclasses.asdict(config), default=str))}
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1))
    return metrics


__all__ = ["CELLS", "EncodedSplit", "LSTMClassifier", "LSTMConfig", "LSTMData", "SifterLSTM",
           "accuracy", "encode_sentences", "epoch_order", "l2_penalty", "lstm_cell_step",
           "prepare_data", "run_lstm", "sifter_lstm", "train_loop", "train_loop_per_worker"]

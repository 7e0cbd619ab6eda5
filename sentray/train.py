"""SIFTER-SimCSE and unsupervised SimCSE training on Ray Train (DDP), and the model export.

The shape is Ray's own: the driver validates the config and the input, builds one Ray Dataset per
epoch and hands `train_loop_per_worker` to a `TorchTrainer`; every worker reads its rows with
`ray.train.get_dataset_shard`, trains a `ContrastiveModel` wrapped by `prepare_model`, and calls
`ray.train.report` every `eval_steps` with a checkpoint (rank 0 scores STS-B dev first). The
driver then exports the best checkpoint as a Hugging Face and a sentence-transformers directory.

Reproducibility and resumption are designed in, not hoped for:
- each epoch's order is a sort on a hash of (seed, epoch, row id), so it does not depend on how
  Ray Data happens to schedule blocks; every worker reads the epoch in that order and takes its
  slice of each global batch (rank r: rows [r*b, (r+1)*b) of the global batch);
- dropout masks come from a generator seeded by (seed, rank, step) at every step;
- a checkpoint carries the model, optimizer, scheduler (and grad scaler) state and the step, so
  a run restarted after a lost worker, or rerun under the same name, continues from the step it
  reached and ends where an uninterrupted run would.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import posixpath
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import torch
from torch import nn

from sentray import export, models, senteval, storage, sts
from sentray.encoder import EncoderConfig, SentenceEncoder, embed_with
from sentray.losses import (
    OBJECTIVES,
    Objective,
    SifterWeights,
    gather_with_local_grad,
    objective_loss,
    scale_for_ddp,
)
from sentray.pooling import DITTO_POOLINGS, canonical_pooling
from sentray.runtime import step_seed, train_worker_setup
from sentray.views import (
    VIEW_COLUMNS,
    ViewGroup,
    backbone_coverage,
    objective_views,
    tokenize_batch,
)

logger = logging.getLogger(__name__)

Precision = Literal["fp32", "fp16", "bf16"]

# sentence-transformers Pooling modes for the poolings it can express
SORT_ROWS = 200_000  # rows per partition of the epoch shuffle's sort
# poolings that leave encoder layers out of the loss (DDP must be told)
PARTIAL_POOLINGS = frozenset({"static_avg", "ditto_static"})


@dataclass(frozen=True)
class TrainConfig:
    """One training run. Defaults are the SIFTER paper's (after ESimCSE/SimCSE)."""

    input: str  # augmentation output folder (jobs/augment.py), local or s3://
    output: str = "out/train"  # runs, checkpoints and the exported model (local or s3://)
    name: str | None = None  # run name under `output`; rerunning a name resumes (default: objective)
    model: str = models.DEFAULT_MODEL  # initial encoder: HF id, local dir or packaged name
    objective: Objective = "sifter"
    # The sentence embedding. None: the model's own read-out (a sentence-transformers model's
    # 1_Pooling, a sentray export's sentray.json), else the paper's [CLS].
    pooling: str | None = None
    head: str | None = None  # Ditto head, for the Ditto poolings (default: the model's known one)
    # MLP (Linear + Tanh) on top of the pooling at train time only. None: on, as SimCSE and the
    # paper do, unless the pooling is the model's own read-out, which is trained as it is.
    mlp: bool | None = None
    dropout: float = 0.15
    temperature: float = 0.05
    weights: SifterWeights = field(default_factory=SifterWeights)
    max_length: int = 32  # training truncation (SimCSE's default)
    batch_size: int = 64  # global: split evenly over the workers
    lr: float = 1e-5
    weight_decay: float = 0.0
    warmup_ratio: float = 0.0  # share of the run's steps with a linear lr warm-up from 0
    max_grad_norm: float | None = 1.0  # clip the gradient's global norm (SimCSE, ST); None: off
    epochs: int = 1
    # Cap on optimizer steps. The run is then max_steps long and so is its schedule: warm-up and
    # linear decay to 0 at the run's last step (Hugging Face Trainer's max_steps rule).
    max_steps: int | None = None
    eval_steps: int = 125  # score STS-B dev (rank 0), report and checkpoint every this many steps
    eval_batch_size: int = 64
    seed: int = 42
    data_dir: str | None = None  # SentEval folder for STS-B dev (default: $SENTRAY_DATA_DIR)
    workers: int = 1
    use_gpu: bool = False
    cpus_per_worker: float = 1.0  # also the worker's torch threads on CPU
    precision: Precision = "fp32"  # AMP dtype on GPU
    max_failures: int = 3  # worker-group restarts from the last checkpoint before giving up
    keep_checkpoints: int = 1  # best by STS-B dev, besides the latest (always kept)
    log_steps: int = 10
    address: str | None = None  # Ray cluster; None: $RAY_ADDRESS or a private local one
    num_cpus: int | None = None  # logical CPUs of a local cluster
    s3_endpoint: str | None = None
    fail_at_step: int | None = None  # fault drill: the last worker dies once at this step

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
        self._resolve_read_out()
        if self.pooling in DITTO_POOLINGS:  # the model's known head, or an error asking for one
            object.__setattr__(self, "head", EncoderConfig(model=self.model, pooling=self.pooling,
                                                           head=self.head).head)
        elif self.head is not None:
            raise ValueError(f"head is only used by the Ditto poolings, not {self.pooling!r}")
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise ValueError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.max_grad_norm is not None and self.max_grad_norm <= 0:
            raise ValueError(f"max_grad_norm must be > 0 (or None: no clipping), got "
                             f"{self.max_grad_norm}")
        positive = {"batch_size": self.batch_size, "epochs": self.epochs,
                    "eval_steps": self.eval_steps, "workers": self.workers,
                    "eval_batch_size": self.eval_batch_size, "log_steps": self.log_steps,
                    "max_length": self.max_length - 1, "keep_checkpoints": self.keep_checkpoints}
        for name, value in positive.items():
            if value < 1:
                raise ValueError(f"{name} must be >= {1 + (name == 'max_length')}, got "
                                 f"{getattr(self, name)}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if self.batch_size % self.workers:
            raise ValueError(f"the global batch size {self.batch_size} must be divisible by the "
                             f"number of workers {self.workers}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.temperature <= 0 or self.lr <= 0 or self.weight_decay < 0:
            raise ValueError("temperature and lr must be > 0 and weight_decay >= 0, got "
                             f"{self.temperature}, {self.lr}, {self.weight_decay}")
        if self.precision not in ("fp32", "fp16", "bf16"):
            raise ValueError(f"precision must be fp32, fp16 or bf16, got {self.precision!r}")
        if self.precision != "fp32" and not self.use_gpu:
            raise ValueError(f"precision {self.precision!r} is AMP on GPU; add --use-gpu or use "
                             "fp32")
        if self.cpus_per_worker <= 0 or self.max_failures < 0:
            raise ValueError("cpus_per_worker must be > 0 and max_failures >= 0")
        if self.name is None:
            object.__setattr__(self, "name", self.objective)
        if not self.name or "/" in self.name:
            raise ValueError(f"run name must be a non-empty folder name, got {self.name!r}")

    def _resolve_read_out(self) -> None:
        """pooling and mlp, when not given: the model's own read-out without an MLP (training
        a new read-out on a sentence model trained for another throws its training away), else
        [CLS] + the train-time MLP (SimCSE's and the paper's setting for a raw encoder)."""
        own = None
        if self.pooling is None or self.mlp is None:
            own = models.own_pooling(self.model)
        if self.pooling is None:
            pooling, head = own or ("cls_before_pooler", None)
            object.__setattr__(self, "pooling", pooling)
            if self.head is None:
                object.__setattr__(self, "head", head)
        object.__setattr__(self, "pooling", canonical_pooling(self.pooling))
        if self.mlp is None:
            is_own = own is not None and canonical_pooling(own[0]) == self.pooling
            object.__setattr__(self, "mlp", not is_own)

    @property
    def views(self) -> int:
        """Views encoded per sentence and step."""
        return len(objective_views(self.objective, self.weights))

    @property
    def local_batch_size(self) -> int:
        return self.batch_size // self.workers


# -- the model ----------------------------------------------------------------------------------


class ContrastiveModel(nn.Module):
    """Encoder + pooling (+ the train-time MLP): padded batch (B, T) -> embeddings (B, D)."""

    def __init__(self, encoder: nn.Module, pooling: str, *, head: str | None = None,
                 mlp: bool = True) -> None:
        super().__init__()
        self.encoder = encoder
        self.pooling = canonical_pooling(pooling)
        self.layer_head = EncoderConfig(pooling=self.pooling, head=head).layer_head \
            if self.pooling in DITTO_POOLINGS else None
        self.fast_ditto = self.layer_head is not None and models.is_bert_family(encoder.config)
        size = encoder.config.hidden_size
        # SimCSE's MLPLayer: dense + tanh over the pooled vector; dropped for evaluation/export.
        self.mlp = nn.Sequential(nn.Linear(size, size), nn.Tanh()) if mlp else None
        pooler = getattr(encoder, "pooler", None)
        if pooler is not None and self.pooling != "cls":
            pooler.requires_grad_(False)  # not in the loss; DDP rejects parameters without grads

    def forward(self, input_ids: torch.Tensor | list[torch.Tensor],
                attention_mask: torch.Tensor | list[torch.Tensor]
                ) -> torch.Tensor | list[torch.Tensor]:
        """(B, T) ids and mask -> (B, D); or lists of them (groups padded apart, such as SIFTER's
        longer Y) -> a list of (B_g, D), all in one forward call as DDP needs."""
        if isinstance(input_ids, (list, tuple)):
            return [self(ids, mask) for ids, mask in zip(input_ids, attention_mask, strict=True)]
        pooled = embed_with(self.encoder, input_ids, attention_mask, pooling=self.pooling,
                            layer_head=self.layer_head, fast_ditto=self.fast_ditto)  # (B, D)
        return self.mlp(pooled) if self.mlp is not None else pooled


def encode_views(model: nn.Module, groups: list[ViewGroup], views: tuple[str, ...],
                 rows: int, device: torch.device | str = "cpu") -> list[torch.Tensor]:
    """Embeddings (rows, D) of each view in `views` order, the groups in one forward call."""
    embeddings = model([g.tokens.input_ids.to(device) for g in groups],
                       [g.tokens.attention_mask.to(device) for g in groups])
    by_view = {view: view_rows
               for group, group_embeddings in zip(groups, embeddings, strict=True)
               for view, view_rows in zip(group.views, group_embeddings.split(rows), strict=True)}
    return [by_view[v] for v in views]


def build_model(config: TrainConfig, encoder_source: str | None = None) -> ContrastiveModel:
    """The model for `config`, its encoder loaded from `encoder_source` (a checkpoint's model
    folder) or the configured initial model, with the training dropout."""
    source = encoder_source or config.model
    needs_eager = (config.pooling in DITTO_POOLINGS
                   and not models.is_bert_family(models.load_config(source)))
    encoder = models.load_encoder(source, dropout=config.dropout,
                                  attn_implementation="eager" if needs_eager else None)
    return ContrastiveModel(encoder, config.pooling, head=config.head, mlp=config.mlp)


def adamw(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW over the trainable parameters, weight decay on the matrices only: biases and
    LayerNorm weights (the 1-d parameters) are not decayed, as in the Hugging Face Trainer that
    SimCSE and sentence-transformers train with."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(
        [{"params": [p for p in trainable if p.ndim >= 2], "weight_decay": weight_decay},
         {"params": [p for p in trainable if p.ndim < 2], "weight_decay": 0.0}], lr=lr)


def warmup_steps(config: TrainConfig, total_steps: int) -> int:
    return math.ceil(config.warmup_ratio * total_steps)


def linear_schedule(optimizer: torch.optim.Optimizer, total_steps: int,
                    warmup: int = 0) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up from 0 over `warmup` steps, then linear decay to 0 at `total_steps` (the
    Hugging Face Trainer's `linear` schedule, which SimCSE's training used). The factor of step
    s (0-based, the lr of the s-th optimizer step) is s / warmup during the warm-up, then
    (total - s) / (total - warmup)."""
    def factor(step: int) -> float:
        if step < warmup:
            return step / warmup
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def clipped_step(model: nn.Module, loss: torch.Tensor, optimizer: torch.optim.Optimizer,
                 scaler: torch.amp.GradScaler | None,
                 max_grad_norm: float | None) -> float:
    """Backward (DDP-scaled), clip the global gradient norm to `max_grad_norm` (after AMP
    unscaling), optimizer step. Returns the gradient norm before clipping (nan without one)."""
    optimizer.zero_grad(set_to_none=True)
    if scaler is not None:
        scaler.scale(scale_for_ddp(loss)).backward()
        scaler.unscale_(optimizer)
    else:
        scale_for_ddp(loss).backward()
    norm = float("nan")
    if max_grad_norm is not None:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        norm = float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm))
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    return norm


# -- data ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InputSummary:
    rows: int
    steps_per_epoch: int
    total_steps: int
    dropped_per_epoch: int  # rows past the last full global batch of an epoch


def inspect_input(config: TrainConfig) -> InputSummary:
    """Check the augmentation output before any worker starts: the columns the objective
    needs, no null text, at least one global batch. Reads Parquet metadata and the text columns'
    validity only."""
    location = storage.locate(config.input, config.s3_endpoint)
    if not storage.exists(location):
        raise FileNotFoundError(f"training input {config.input!r} does not exist; make it with "
                                "`python jobs/augment.py --output ...`")
    files = [f.path for f in storage.list_files(location, (".parquet",))]
    if not files:
        raise FileNotFoundError(f"training input {config.input!r} holds no .parquet files; it "
                                "should be the output folder of jobs/augment.py")
    dataset = pads.dataset(files, filesystem=location.filesystem, format="parquet")
    needed = ("id", *VIEW_COLUMNS[config.objective])
    missing = [c for c in needed if c not in dataset.schema.names]
    if missing:
        raise ValueError(f"training input {config.input!r} lacks columns {missing} that "
                         f"objective {config.objective!r} needs (it has {dataset.schema.names}); "
                         "it should be the output folder of jobs/augment.py")
    for column in needed:
        nulls = dataset.count_rows(filter=pc.field(column).is_null())
        if nulls:
            example = dataset.to_table(columns=["id"], filter=pc.field(column).is_null())
            raise ValueError(f"training input {config.input!r}: {nulls} rows have no "
                             f"{column!r} (e.g. id {example.column('id')[0].as_py()!r})")
    rows = dataset.count_rows()
    steps_per_epoch = rows // config.batch_size
    if steps_per_epoch == 0:
        raise ValueError(f"training input {config.input!r} has {rows} rows, fewer than one "
                         f"global batch ({config.batch_size})")
    total = steps_per_epoch * config.epochs
    if config.max_steps is not None:
        total = min(total, config.max_steps)
    return InputSummary(rows, steps_per_epoch, total, rows - steps_per_epoch * config.batch_size)


def input_backbone_coverage(config: TrainConfig) -> dict | None:
    """For SIFTER: the share of rows whose Y keeps its whole backbone at the training length
    (over the whole input; the Y views of training are tokenized the same way)."""
    if config.objective != "sifter":
        return None
    location = storage.locate(config.input, config.s3_endpoint)
    files = [f.path for f in storage.list_files(location, (".parquet",))]
    table = pads.dataset(files, filesystem=location.filesystem, format="parquet").to_table(
        columns=["text", "backbone_text"])
    return backbone_coverage(models.load_tokenizer(config.model),
                             table.column("text").to_pylist(),
                             table.column("backbone_text").to_pylist(), config.max_length)


class EpochOrder:
    """Adds `order`, a hash of (seed, epoch, id): sorting on it shuffles the rows the same way
    on every run, whatever the block layout. With `sort`, also sorts the table on it (for an
    epoch handed over as one batch)."""

    def __init__(self, seed: int, epoch: int, sort: bool = False) -> None:
        self.salt = f"{seed}:{epoch}:".encode()
        self.sort = sort

    def __call__(self, table: pa.Table) -> pa.Table:
        import hashlib

        ids = table.column("id").cast(pa.string()).to_pylist()
        keys = [int.from_bytes(hashlib.blake2b(self.salt + i.encode(), digest_size=8).digest(),
                               "little") for i in ids]
        table = table.append_column("order", pa.array(keys, pa.uint64()))
        return table.sort_by("order") if self.sort else table


def epoch_datasets(config: TrainConfig, epochs: int, rows: int) -> dict:
    """One Ray Dataset per epoch: the view columns, in that epoch's seeded order."""
    import ray.data

    location = storage.locate(config.input, config.s3_endpoint)
    files = [f.path for f in storage.list_files(location, (".parquet",))]
    columns = ["id", *VIEW_COLUMNS[config.objective]]
    context = ray.data.DataContext.get_current()
    # Ray's defaults (200 sort partitions, a read task per few files) cost minutes on small
    # data: ~SORT_ROWS rows per read task and per sort partition instead. A dataset keeps a
    # copy of the context it was made under, so the process-wide one is restored after.
    partitions = max(1, math.ceil(rows / SORT_ROWS))
    saved = context.default_hash_shuffle_parallelism, context.enable_progress_bars
    context.default_hash_shuffle_parallelism = partitions
    context.enable_progress_bars = False  # one line per step from rank 0 says enough
    try:
        datasets = {}
        for epoch in range(epochs):
            dataset = ray.data.read_parquet(files, filesystem=location.filesystem,
                                            columns=columns, override_num_blocks=partitions)
            if partitions == 1:
                # The epoch is one sort partition: order it as one batch of all its rows, in one
                # task, instead of Ray Data's distributed sort (a sample pass and a shuffle:
                # 10-20 s of fixed cost on a small machine). The same order either way.
                dataset = dataset.map_batches(EpochOrder(config.seed, epoch, sort=True),
                                              batch_format="pyarrow", batch_size=rows)
            else:
                dataset = dataset.map_batches(EpochOrder(config.seed, epoch),
                                              batch_format="pyarrow").sort("order")
            datasets[f"epoch_{epoch}"] = dataset.select_columns(list(columns[1:]))
    finally:
        context.default_hash_shuffle_parallelism, context.enable_progress_bars = saved
    return datasets


# -- the loop on each worker --------------------------------------------------------------------


class Checkpointing:
    """What a checkpoint folder holds. `model/` is a complete Hugging Face directory (weights of
    the encoder, config, tokenizer), ready for export."""

    MODEL, HEAD, STATE = "model", "mlp.pt", "trainer.pt"

    @staticmethod
    def save(folder: Path, model: ContrastiveModel, tokenizer, optimizer, scheduler, scaler,
             state: dict) -> None:
        model.encoder.save_pretrained(folder / Checkpointing.MODEL)
        tokenizer.save_pretrained(folder / Checkpointing.MODEL)
        if model.mlp is not None:
            torch.save(model.mlp.state_dict(), folder / Checkpointing.HEAD)
        torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                    "scaler": scaler.state_dict() if scaler is not None else None,
                    **state}, folder / Checkpointing.STATE)
        (folder / "state.json").write_text(json.dumps(state, indent=1))


def train_loop_per_worker(loop_config: dict) -> None:
    """Ray Train's per-worker function. `loop_config`: config (TrainConfig), total_steps,
    steps_per_epoch, dev (STS-B dev PairSet, scored on rank 0), fault_marker (or None)."""
    import ray.train
    import ray.train.torch

    config: TrainConfig = loop_config["config"]
    total_steps, steps_per_epoch = loop_config["total_steps"], loop_config["steps_per_epoch"]
    rank, world, device = train_worker_setup(config.workers, config.cpus_per_worker)
    local_batch = config.local_batch_size
    rows = slice(rank * local_batch, (rank + 1) * local_batch)

    checkpoint = ray.train.get_checkpoint()
    restored: dict = {}
    with checkpoint.as_directory() if checkpoint else contextlib.nullcontext() as folder:
        torch.manual_seed(config.seed)  # the MLP starts the same on every run
        model = build_model(config, str(Path(folder) / Checkpointing.MODEL) if folder else None)
        if folder:
            if model.mlp is not None:
                model.mlp.load_state_dict(torch.load(Path(folder) / Checkpointing.HEAD))
            restored = torch.load(Path(folder) / Checkpointing.STATE, weights_only=False)
    tokenizer = models.load_tokenizer(config.model)
    model.train()
    ddp_kwargs = {"find_unused_parameters": config.pooling in PARTIAL_POOLINGS}
    model = ray.train.torch.prepare_model(model, parallel_strategy_kwargs=ddp_kwargs)
    bare: ContrastiveModel = getattr(model, "module", model)
    optimizer = adamw(model, config.lr, config.weight_decay)
    scheduler = linear_schedule(optimizer, total_steps, warmup_steps(config, total_steps))
    amp = device.type == "cuda" and config.precision != "fp32"
    amp_dtype = torch.float16 if config.precision == "fp16" else torch.bfloat16
    scaler = torch.amp.GradScaler("cuda") if amp and config.precision == "fp16" else None
    start_step, history, initial = 0, [], None
    if restored:
        optimizer.load_state_dict(restored["optimizer"])
        scheduler.load_state_dict(restored["scheduler"])
        if scaler is not None and restored.get("scaler"):
            scaler.load_state_dict(restored["scaler"])
        start_step, history = restored["step"], restored["history"]
        initial = restored.get("initial_stsb_dev")
        if rank == 0:
            logger.info("resuming at step %d of %d", start_step, total_steps)

    evaluator = None
    if rank == 0:
        evaluator = SentenceEncoder(
            EncoderConfig(model=config.model, pooling=config.pooling, head=config.head,
                          batch_size=config.eval_batch_size, device=str(device)),
            model=bare.encoder, tokenizer=tokenizer)
        if not restored:  # the starting point every checkpoint is compared with
            initial = _score_dev(evaluator, loop_config.get("dev"), model)
            logger.info("step 0: STS-B dev %.2f (the initial model)", initial)
    model.train()

    losses: list[float] = []
    grad_norms: list[float] = []
    backbones = [0, 0]  # Y views with a backbone, and with all of it, since the last report
    # Wall time of each step, batch fetch included, reports excluded; the first step after a
    # (re)start also waits for the epoch's dataset to start and is left out.
    step_seconds: list[float] = []
    step, started = start_step, time.perf_counter()
    mark = None
    for epoch in range(start_step // steps_per_epoch, math.ceil(total_steps / steps_per_epoch)):
        shard = ray.train.get_dataset_shard(f"epoch_{epoch}")
        batches = shard.iter_batches(batch_size=config.batch_size, batch_format="numpy",
                                     drop_last=True)
        for index, batch in enumerate(batches):
            if epoch * steps_per_epoch + index < step:
                continue  # trained before the restart
            if step >= total_steps:
                break
            step += 1
            _maybe_fail(loop_config.get("fault_marker"), config, rank, world, step)
            groups = tokenize_batch(tokenizer, batch, config.objective, rows,
                                    config.max_length, config.weights)
            backbones[0] += sum(g.tokens.backbones for g in groups)
            backbones[1] += sum(g.tokens.backbones_whole for g in groups)
            torch.manual_seed(step_seed(config.seed, rank, step))  # this step's dropout masks
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp):
                local_views = encode_views(model, groups, objective_views(
                    config.objective, config.weights), local_batch, device)
            views = [gather_with_local_grad(v) for v in local_views]
            loss = objective_loss(config.objective, views, config.weights, config.temperature)
            grad_norms.append(clipped_step(model, loss, optimizer, scaler, config.max_grad_norm))
            scheduler.step()
            losses.append(float(loss.detach()))
            now = time.perf_counter()
            if mark is not None:
                step_seconds.append(now - mark)
            mark = now
            if rank == 0 and (step % config.log_steps == 0 or step == 1):
                rate = (step - start_step) / (time.perf_counter() - started)
                logger.info("step %d/%d epoch %d loss %.4g grad norm %.3g lr %.3g (%.2f "
                            "steps/s)", step, total_steps, epoch, losses[-1], grad_norms[-1],
                            scheduler.get_last_lr()[0], rate)
            if step % config.eval_steps == 0 or step == total_steps:
                record = _evaluate(evaluator, loop_config.get("dev"), model, step, epoch,
                                   losses, scheduler, history, bare, initial)
                record["seconds_per_step"] = float(np.mean(step_seconds)) if step_seconds \
                    else None
                record["grad_norm"] = float(np.mean(grad_norms)) if grad_norms else None
                record["backbone_whole_share"] = (backbones[1] / backbones[0] if backbones[0]
                                                  else None)
                losses, step_seconds, grad_norms, backbones = [], [], [], [0, 0]
                _report(record, history, bare, tokenizer, optimizer, scheduler, scaler, rank,
                        step, initial)
                mark = time.perf_counter()
        if step >= total_steps:
            break


def _maybe_fail(marker: str | None, config: TrainConfig, rank: int, world: int,
                step: int) -> None:
    """The fault drill: the last worker's process dies at `fail_at_step`, once per run."""
    if marker is None or step != config.fail_at_step or rank != world - 1:
        return
    location = storage.locate(marker, config.s3_endpoint)
    if storage.exists(location):
        return
    location.filesystem.create_dir(location.path.rsplit("/", 1)[0], recursive=True)
    with location.filesystem.open_output_stream(location.path) as f:
        f.write(b"failed once here\n")
    logger.warning("fault drill: worker %d exits at step %d", rank, step)
    os._exit(1)


def parameter_checksum(model: nn.Module) -> float:
    """Sum of all trainable parameters in float64: equal on every worker when DDP is in sync."""
    with torch.no_grad():
        return float(sum(p.double().sum() for p in model.parameters() if p.requires_grad))


def _score_dev(evaluator, dev, model: nn.Module) -> float:
    """STS-B dev Spearman x 100 of the encoder as exported: dropout off while scoring (eval
    mode; inference mode alone leaves dropout on), back to train mode after."""
    model.eval()
    try:
        return sts.score_pairs(evaluator, dev)
    finally:
        model.train()


def _evaluate(evaluator, dev, model, step, epoch, losses, scheduler, history, bare,
              initial) -> dict:
    import torch.distributed as dist

    checksum = torch.tensor([parameter_checksum(bare)], dtype=torch.float64)
    if dist.is_available() and dist.is_initialized():
        sums = [torch.zeros_like(checksum) for _ in range(dist.get_world_size())]
        dist.all_gather(sums, checksum)
        spread = float(max(sums) - min(sums))
    else:
        spread = 0.0
    record = {"step": step, "epoch": epoch, "loss": float(np.mean(losses)) if losses else None,
              "lr": scheduler.get_last_lr()[0], "param_checksum": float(checksum),
              "param_spread": spread}
    if evaluator is not None:
        started = time.perf_counter()
        record["stsb_dev"] = _score_dev(evaluator, dev, model)
        best = max([r["stsb_dev"] for r in history] + [record["stsb_dev"]])
        record["best_stsb_dev"] = best
        logger.info("step %d: STS-B dev %.2f (best %.2f, initial %.2f), loss %.4g, scored in "
                    "%.1f s", step, record["stsb_dev"], best, initial,
                    record["loss"] or float("nan"), time.perf_counter() - started)
    return record


def _report(record, history, bare, tokenizer, optimizer, scheduler, scaler, rank, step,
            initial) -> None:
    import ray.train

    history.append(record)
    if rank != 0:
        ray.train.report(record)
        return
    with tempfile.TemporaryDirectory() as folder:
        Checkpointing.save(Path(folder), bare, tokenizer, optimizer, scheduler, scaler,
                           {"step": step, "history": history, "initial_stsb_dev": initial})
        ray.train.report(record, checkpoint=ray.train.Checkpoint.from_directory(folder))


# -- the driver ---------------------------------------------------------------------------------


def run_training(config: TrainConfig) -> dict:
    """Train, export OUTPUT/best (HF) and OUTPUT/best-st (sentence-transformers) from the best
    checkpoint by STS-B dev; returns the summary (also OUTPUT/summary.json)."""
    started = time.perf_counter()
    logger.info("training config: %s", json.dumps(dataclasses.asdict(config), default=str))
    data_dir = senteval.resolve_data_dir(config.data_dir)  # fail before any cluster work
    dev = senteval.load_sts_benchmark(data_dir, "dev")
    models.load_config(config.model)  # an unknown model fails here, not on every worker
    plan = inspect_input(config)
    logger.info("%d rows: %d steps/epoch of %d, %d steps; %d rows/epoch past the last full batch",
                plan.rows, plan.steps_per_epoch, config.batch_size, plan.total_steps,
                plan.dropped_per_epoch)
    schedule = {"warmup_steps": warmup_steps(config, plan.total_steps),
                "decay_to_zero_at_step": plan.total_steps, "max_grad_norm": config.max_grad_norm}
    logger.info("lr %g: linear warm-up over %d steps, linear decay to 0 at step %d (the run's "
                "last%s); gradient norm clipped at %s", config.lr, schedule["warmup_steps"],
                plan.total_steps, ", set by --max-steps" if config.max_steps and
                plan.total_steps == config.max_steps else "", config.max_grad_norm)
    coverage = input_backbone_coverage(config)
    if coverage is not None:
        logger.info("Y keeps its whole backbone at max_length %d in %.2f%% of the %d rows with "
                    "one", config.max_length, 100 * coverage["backbone_whole_share"],
                    coverage["rows_with_backbone"])
    epochs = math.ceil(plan.total_steps / plan.steps_per_epoch)
    output = storage.locate(config.output, config.s3_endpoint)
    run_folder = output.join(config.name)
    finished = finished_checkpoints(run_folder, plan.total_steps)
    if finished:
        logger.info("run %s already trained its %d steps: exported again, no worker started",
                    run_folder.uri, plan.total_steps)
        best, latest = finished
    else:
        best, latest = _fit(config, plan, epochs, dev, output, run_folder)
    with latest.as_directory() as folder:
        state = json.loads((Path(folder) / "state.json").read_text())
    history, initial = state["history"], state.get("initial_stsb_dev")
    best_record = max(history, key=lambda r: r["stsb_dev"])
    if initial is not None and best_record["stsb_dev"] < initial:
        logger.warning("no checkpoint beats the initial model on STS-B dev (best %.2f at step "
                       "%d, initial %.2f): the exported model is worse than the one training "
                       "started from", best_record["stsb_dev"], best_record["step"], initial)
    exported = export_checkpoint(best, output, config, best_record)
    summary = {"run": run_folder.uri, "rows": plan.rows, "steps": plan.total_steps,
               "steps_per_epoch": plan.steps_per_epoch, "epochs": epochs,
               "rows_past_last_batch_per_epoch": plan.dropped_per_epoch,
               "schedule": schedule, "backbone_coverage": coverage,
               "initial_stsb_dev": initial,
               "best_step": best_record["step"], "best_stsb_dev": best_record["stsb_dev"],
               "exported": exported, "history": history,
               "seconds": round(time.perf_counter() - started, 1),
               "config": json.loads(json.dumps(dataclasses.asdict(config), default=str))}
    with output.filesystem.open_output_stream(output.join("summary.json").path) as f:
        f.write(json.dumps(summary, indent=1).encode())
    return summary


def _fit(config: TrainConfig, plan, epochs: int, dev, output: storage.Location,
         run_folder: storage.Location):
    """Ray Train's fit of `train_loop_per_worker` (resuming the run when `run_folder` holds
    one); returns its (best by STS-B dev, latest) checkpoints."""
    import ray
    from ray.train import CheckpointConfig, DataConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from sentray.runtime import init_ray, local_cpus

    started_cluster = init_ray(config.address, num_cpus=config.num_cpus or local_cpus(
        config.workers, config.cpus_per_worker))
    try:
        execution = DataConfig.default_ingest_options()
        execution.preserve_order = True  # batches in the sorted order, on every worker
        trainer = TorchTrainer(
            train_loop_per_worker,
            train_loop_config={
                "config": config, "total_steps": plan.total_steps,
                "steps_per_epoch": plan.steps_per_epoch, "dev": dev,
                "fault_marker": (_absolute(run_folder.join(f"fault-drill-{config.fail_at_step}"))
                                 if config.fail_at_step else None)},
            scaling_config=ScalingConfig(
                num_workers=config.workers, use_gpu=config.use_gpu,
                resources_per_worker={"CPU": config.cpus_per_worker,
                                      **({"GPU": 1} if config.use_gpu else {})}),
            datasets=epoch_datasets(config, epochs, plan.rows),
            # Every worker reads the whole epoch in order and keeps its slice of each batch.
            dataset_config=DataConfig(datasets_to_split=[], execution_options=execution),
            run_config=RunConfig(
                name=config.name, storage_path=_absolute(output),
                storage_filesystem=output.filesystem if output.is_s3 else None,
                failure_config=FailureConfig(max_failures=config.max_failures),
                checkpoint_config=CheckpointConfig(
                    num_to_keep=config.keep_checkpoints, checkpoint_score_attribute="stsb_dev",
                    checkpoint_score_order="max")),
        )
        result = trainer.fit()
    finally:
        if started_cluster:
            ray.shutdown()
    if result.error:
        raise RuntimeError(f"training failed: {result.error}") from result.error
    best = result.get_best_checkpoint("stsb_dev", "max")
    latest = result.checkpoint
    if best is None or latest is None:
        raise RuntimeError(f"run {config.name!r} reported no checkpoint")
    return best, latest


def finished_checkpoints(run_folder: storage.Location, total_steps: int):
    """(best by STS-B dev, latest) checkpoints of a run that has already trained `total_steps`
    steps, else None: rerunning a finished run exports it again without starting a worker.
    Folders without a readable state.json (a checkpoint cut off mid-write) are not counted."""
    import pyarrow.fs as pafs
    import ray.train

    filesystem = run_folder.filesystem
    try:
        infos = filesystem.get_file_info(pafs.FileSelector(run_folder.path))
    except FileNotFoundError:
        return None
    states = []
    for info in infos:
        if (info.type != pafs.FileType.Directory
                or not posixpath.basename(info.path).startswith("checkpoint_")):
            continue
        try:
            with filesystem.open_input_stream(posixpath.join(info.path, "state.json")) as f:
                states.append((json.loads(f.read()), info.path))
        except (FileNotFoundError, OSError, ValueError):
            continue
    if not states or max(state["step"] for state, _ in states) < total_steps:
        return None

    def checkpoint(path: str):
        return ray.train.Checkpoint(path, filesystem=filesystem if run_folder.is_s3 else None)

    # the best as Ray Train ranks them (the score each was reported with), the earliest of ties
    best = max(states, key=lambda s: (s[0]["history"][-1]["stsb_dev"], -s[0]["step"]))
    latest = max(states, key=lambda s: s[0]["step"])
    return checkpoint(best[1]), checkpoint(latest[1])


def export_checkpoint(checkpoint, output: storage.Location, config: TrainConfig,
                      record: dict) -> dict:
    """The checkpoint's encoder, without the training MLP, as OUTPUT/best (Hugging Face model
    directory + tokenizer + sentray.json naming the pooling) and OUTPUT/best-st (the same as a
    sentence-transformers directory, for every pooling: `sentray.export`)."""
    info = {"pooling": config.pooling, "head": config.head, "base_model": config.model,
            "objective": config.objective, "step": record["step"],
            "stsb_dev": record["stsb_dev"], "max_length": None}
    exported = {}
    with checkpoint.as_directory() as folder, tempfile.TemporaryDirectory() as staging:
        model_dir = Path(folder) / Checkpointing.MODEL
        tokenizer = models.load_tokenizer(str(model_dir))
        info["max_length"] = models.default_max_length(config.model, tokenizer)
        hf_dir = Path(staging) / "best"
        shutil.copytree(model_dir, hf_dir)
        (hf_dir / models.SENTRAY_MODEL_INFO).write_text(json.dumps(info, indent=1))
        exported["best"] = output.join("best").uri
        st_dir = Path(staging) / "best-st"
        shutil.copytree(model_dir, st_dir)
        export.write_metadata(st_dir, info)
        exported["best-st"] = output.join("best-st").uri
        for name in ("best", "best-st"):
            if exported.get(name):
                _replace_folder(Path(staging) / name, output.join(name))
    logger.info("exported step %d (STS-B dev %.2f): %s", record["step"], record["stsb_dev"],
                exported)
    return exported


def _absolute(location: storage.Location) -> str:
    """A location as every node understands it: s3://... or an absolute local path."""
    return location.uri if location.is_s3 else location.path


def _replace_folder(source: Path, target: storage.Location) -> None:
    import pyarrow.fs as pafs

    target.filesystem.delete_dir_contents(target.path, missing_dir_ok=True)
    target.filesystem.create_dir(target.path, recursive=True)
    pafs.copy_files(str(source), target.path, source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=target.filesystem)


__all__ = ["ContrastiveModel", "TrainConfig", "build_model", "export_checkpoint",
           "epoch_datasets", "finished_checkpoints", "inspect_input", "linear_schedule", "run_training",
           "adamw", "clipped_step", "encode_views", "train_loop_per_worker", "warmup_steps"]

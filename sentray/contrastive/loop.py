"""The contrastive trainer's loop on each Ray Train worker (`train_loop_per_worker`): it reads its
rows with `ray.train.get_dataset_shard`, trains a `ContrastiveModel` wrapped by `prepare_model`,
and calls `ray.train.report` every `eval_steps` with a checkpoint (rank 0 scores STS-B dev first).

Reproducibility and resumption are designed in, not hoped for:
- each epoch's order is a sort on a hash of (seed, epoch, row id) (`sentray.contrastive.
  input_data`), so it does not depend on how Ray Data happens to schedule blocks; every worker
  reads the epoch in that order and takes its slice of each global batch (rank r: rows
  [r*b, (r+1)*b) of the global batch);
- dropout masks come from a generator seeded by (seed, rank, step) at every step;
- a checkpoint carries the model, optimizer, scheduler (and grad scaler) state and the step, so
  a run restarted after a lost worker, or rerun under the same name, continues from the step it
  reached and ends where an uninterrupted run would.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from sentray.contrastive.checkpoints import Checkpointing
from sentray.contrastive.config import TrainConfig
from sentray.contrastive.losses import global_mean, worker_objective_loss
from sentray.contrastive.model import PARTIAL_POOLINGS, ContrastiveModel, build_model, encode_views
from sentray.contrastive.objectives import objective_views
from sentray.contrastive.optimizer import adamw, clipped_step, linear_schedule
from sentray.contrastive.view_tokens import tokenize_batch
from sentray.encode.encoder import SentenceEncoder
from sentray.encode.model_loading import load_tokenizer
from sentray.encode.model_lookup import resolve_model
from sentray.encode.plan import EncoderPlan
from sentray.evaluation import sts
from sentray.evaluation.senteval import PairSet
from sentray.kit import storage
from sentray.training.keep_best import EvalHistory
from sentray.training.ray_train import worker_setup
from sentray.training.steps import StepPlan, step_seed

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoopConfig:
    """What every worker of a run is handed with the loop."""

    config: TrainConfig  # resolved, as the run repeats
    plan: StepPlan
    dev: PairSet  # STS-B dev, scored on rank 0
    encoder: EncoderPlan  # the model, read-out and length the run trains (`plan_encoder`)
    fault_marker: str | None = None  # the fault drill's once-only marker file (fail_at_step)


def train_loop_per_worker(loop: LoopConfig) -> None:
    """Ray Train's per-worker function (handed `loop` by `sentray.training.ray_train.fit`)."""
    WorkerRun(loop).train()


@dataclass
class Window:
    """What a worker measures between two reports, step by step: the loss, the global gradient
    norm before and after clipping, and the lr the optimizer step used (read from the optimizer
    itself, so a loop that skipped the clip or the schedule shows it in its records)."""

    losses: list
    grad_norms: list  # before clipping
    grad_norms_after_clip: list
    lrs_used: list
    step_seconds: list  # wall time per step, batch fetch included, reports excluded
    backbones: int = 0  # Y views with a backbone ...
    backbones_whole: int = 0  # ... and with all of it
    # what the encoder's first Linear returned at the last training step: bfloat16 or float16
    # when autocast ran its matmuls, float32 without (None: no Linear ran, e.g. static_avg)
    matmul_dtype: str | None = None

    @classmethod
    def empty(cls) -> Window:
        return cls([], [], [], [], [])

    def summary(self) -> dict:
        """The report's measures: window means, and the last step's lr and norms as they were
        at that step (`lr`, added by the report, is the lr of the step after it)."""
        def last(values: list):
            return float(values[-1]) if values else None

        return {"loss": float(np.mean(self.losses)) if self.losses else None,
                "seconds_per_step": float(np.mean(self.step_seconds)) if self.step_seconds
                else None,
                "grad_norm": float(np.mean(self.grad_norms)) if self.grad_norms else None,
                "backbone_whole_share": (self.backbones_whole / self.backbones
                                         if self.backbones else None),
                "lr_used": last(self.lrs_used),
                "grad_norm_before_clip": last(self.grad_norms),
                "grad_norm_after_clip": last(self.grad_norms_after_clip),
                "largest_grad_norm_after_clip": (float(max(self.grad_norms_after_clip))
                                                 if self.grad_norms_after_clip else None),
                "matmul_dtype": self.matmul_dtype}


class WorkerRun:
    """One worker's part of a run: its model (restored from the latest checkpoint when there
    is one), optimizer, schedule and evaluation history, and the steps it still trains."""

    def __init__(self, loop: LoopConfig) -> None:
        import ray.train

        self.loop, self.config, self.plan = loop, loop.config, loop.plan
        config = self.config
        self.rank, self.world, self.device = worker_setup(config.cluster.workers,
                                                           config.cluster.cpus_per_worker)
        self.local_batch = config.local_batch_size
        self.rows = slice(self.rank * self.local_batch, (self.rank + 1) * self.local_batch)
        self.tokenizer = load_tokenizer(loop.encoder.model)
        restored = self._build(ray.train.get_checkpoint())
        self.history = EvalHistory.restore("stsb_dev", restored.get("history", []))
        self.step, self.initial = restored.get("step", 0), restored.get("initial_stsb_dev")
        self.evaluator = None
        if self.rank == 0:
            self.evaluator = SentenceEncoder(
                # the run's encoder as evaluate scores it: fp32, at the model's own length
                dataclasses.replace(loop.encoder.running("fp32", why="STS-B dev"),
                                    max_length=loop.encoder.model_max_length,
                                    device=str(self.device)),
                model=self.bare.encoder, tokenizer=self.tokenizer)
            if restored:
                logger.info("resuming at step %d of %d", self.step, self.plan.total_steps)
            else:  # the starting point every checkpoint is compared with
                self.initial = self._score_dev()
                logger.info("step 0: STS-B dev %.2f (the initial model)", self.initial)
        self.model.train()

    def _build(self, checkpoint) -> dict:
        """Model, optimizer, schedule and AMP scaler, restored from `checkpoint` if given;
        returns the checkpoint's state ({} without one)."""
        import ray.train.torch

        config, restored = self.config, {}
        with checkpoint.as_directory() if checkpoint else contextlib.nullcontext() as folder:
            torch.manual_seed(config.seed)  # the MLP starts the same on every run
            model = build_model(  # a checkpoint: a model of its own
                self.loop.encoder, dropout=config.dropout, mlp=config.mlp, mlp_init=config.mlp_init,
                encoder_source=resolve_model(str(Path(folder) / Checkpointing.MODEL))
                if folder else None)
            if folder:
                if model.mlp is not None:
                    model.mlp.load_state_dict(torch.load(Path(folder) / Checkpointing.HEAD))
                restored = torch.load(Path(folder) / Checkpointing.STATE, weights_only=False)
        model.train()
        ddp = {"find_unused_parameters": config.encoder.pooling in PARTIAL_POOLINGS}
        self.model = ray.train.torch.prepare_model(model, parallel_strategy_kwargs=ddp)
        self.bare: ContrastiveModel = getattr(self.model, "module", self.model)
        self.matmul_dtype = None
        linears = [m for m in self.bare.encoder.modules() if isinstance(m, nn.Linear)]
        if linears:  # what autocast did, read from the model (a record field, tested)
            linears[0].register_forward_hook(self._saw_matmul)
        self.optimizer = adamw(self.model, config.lr, config.weight_decay)
        self.scheduler = linear_schedule(self.optimizer, self.plan.total_steps,
                                         self.plan.warmup_steps(config.warmup_ratio))
        # autocast: fp16/bf16 on a GPU, bf16 on a CPU (the config refuses fp16 there); the
        # weights stay fp32 (the optimizer's master copy)
        self.amp = config.encoder.precision != "fp32"
        self.amp_dtype = torch.float16 if config.encoder.precision == "fp16" else torch.bfloat16
        self.scaler = (torch.amp.GradScaler("cuda") if self.amp and config.encoder.precision == "fp16"
                       else None)
        self.bf16_speedup = None
        if self.amp and self.device.type == "cpu" and self.rank == 0:
            self.bf16_speedup = self._measure_bf16()
        if restored:
            self.optimizer.load_state_dict(restored["optimizer"])
            self.scheduler.load_state_dict(restored["scheduler"])
            if self.scaler is not None and restored.get("scaler"):
                self.scaler.load_state_dict(restored["scaler"])
        return restored

    def _measure_bf16(self) -> float:
        """bf16 autocast against fp32 on this CPU: one forward-backward pass of the model on a
        batch of 16 x 32 random tokens (`sentray.training.autocast_check`)."""
        from sentray.kit.cpu import cpu_info
        from sentray.training.autocast_check import check_cpu_bf16

        generator = torch.Generator().manual_seed(0)
        vocab = int(self.bare.encoder.config.vocab_size)
        ids = torch.randint(0, vocab, (16, 32), generator=generator)
        mask = torch.ones_like(ids)

        def step() -> None:
            self.bare(ids, mask).float().sum().backward()
            self.bare.zero_grad(set_to_none=True)

        speedup = check_cpu_bf16(step, cpu_info()["name"])
        self.matmul_dtype = None  # what the training steps themselves run in, read afresh
        return speedup

    def _epoch_batches(self, epoch: int, skip: int):
        """The global batches of `epoch` in its seeded order, after the first `skip`."""
        import ray.train

        shard = ray.train.get_dataset_shard(f"epoch_{epoch}")
        batches = shard.iter_batches(batch_size=self.config.batch_size, batch_format="numpy",
                                     drop_last=True)
        return itertools.islice(batches, skip, None)

    def train(self) -> None:
        """Every step after the restored one, a report (and checkpoint) at each evaluation."""
        window, batches, epoch = Window.empty(), None, None
        started, done, mark = time.perf_counter(), self.step, None
        for step in self.plan.steps(done):
            if step.epoch != epoch:
                batches, epoch = self._epoch_batches(step.epoch, step.batch), step.epoch
            batch = next(batches)
            self.step = step.number
            _maybe_fail(self.loop.fault_marker, self.config, self.rank, self.world, step.number)
            loss = self._train_step(batch, window)
            now = time.perf_counter()
            if mark is not None:
                window.step_seconds.append(now - mark)
            mark = now
            if self.rank == 0 and self.plan.logs_at(step.number):
                logger.info("step %d/%d epoch %d loss %.4g grad norm %.3g (clipped to %.3g) lr "
                            "%.3g (%.2f steps/s)", step.number, self.plan.total_steps,
                            step.epoch, loss, window.grad_norms[-1],
                            window.grad_norms_after_clip[-1], window.lrs_used[-1],
                            (step.number - done) / (time.perf_counter() - started))
            if self.plan.evaluates_at(step.number):
                self._report({"step": step.number, "epoch": step.epoch, **window.summary()})
                window, mark = Window.empty(), time.perf_counter()

    def _train_step(self, batch: dict, window: Window) -> float:
        """One optimizer step on this worker's rows of `batch`; returns the global batch's
        loss (the mean of the workers' shares)."""
        config = self.config
        groups = tokenize_batch(self.tokenizer, batch, config.objective, self.rows,
                                config.encoder.max_length, config.lambdas)
        window.backbones += sum(g.tokens.backbones for g in groups)
        window.backbones_whole += sum(g.tokens.backbones_whole for g in groups)
        torch.manual_seed(step_seed(config.seed, self.rank, self.step))  # this step's dropout
        with torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.amp):
            local_views = encode_views(self.model, groups, objective_views(
                config.objective, config.lambdas), self.local_batch, self.device)
        window.matmul_dtype = self.matmul_dtype
        # this worker's rows against every worker's: DDP's average is the global batch's step
        loss = worker_objective_loss(config.objective, local_views, config.lambdas,
                                     config.temperature)
        window.lrs_used.append(self.optimizer.param_groups[0]["lr"])  # what this update uses
        before = clipped_step(self.model, loss, self.optimizer, self.scaler,
                              config.max_grad_norm)
        after = gradient_norm(self.optimizer)  # the gradient the update was made with
        window.grad_norms.append(after if np.isnan(before) else before)  # nan: no clipping
        window.grad_norms_after_clip.append(after)
        self.scheduler.step()
        window.losses.append(global_mean(loss))  # the global batch's loss, as one worker's
        return window.losses[-1]

    def _saw_matmul(self, module: nn.Module, inputs, output: torch.Tensor) -> None:
        if module.training:  # a training step's, not the dev scoring's (eval mode)
            self.matmul_dtype = str(output.dtype).removeprefix("torch.")

    def _score_dev(self) -> float:
        """STS-B dev Spearman x 100 of the encoder as exported: dropout off while scoring (eval
        mode; inference mode alone leaves dropout on), back to train mode after."""
        self.model.eval()
        try:
            return sts.score_pairs(self.evaluator, self.loop.dev)
        finally:
            self.model.train()

    def _report(self, record: dict) -> None:
        """Score STS-B dev (rank 0), check the replicas agree, report; rank 0 checkpoints."""
        import ray.train

        record.update(lr=self.scheduler.get_last_lr()[0], **_checksums(self.bare))
        if self.evaluator is not None:
            started = time.perf_counter()
            record["stsb_dev"] = self._score_dev()
        self.history.add(record)
        if self.evaluator is not None:
            record["best_stsb_dev"] = self.history.best_score
            logger.info("step %d: STS-B dev %.2f (best %.2f, initial %.2f), loss %.4g, scored "
                        "in %.1f s", self.step, record["stsb_dev"], self.history.best_score,
                        self.initial, record["loss"] or float("nan"),
                        time.perf_counter() - started)
        if self.rank != 0:
            ray.train.report(record)
            return
        with tempfile.TemporaryDirectory() as folder:
            Checkpointing.save(Path(folder), self.bare, self.tokenizer, self.optimizer,
                               self.scheduler, self.scaler,
                               {"step": self.step, "history": self.history.records,
                                "initial_stsb_dev": self.initial})
            ray.train.report(record, checkpoint=ray.train.Checkpoint.from_directory(folder))


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


def gradient_norm(optimizer: torch.optim.Optimizer) -> float:
    """The global L2 norm of the gradients the optimizer holds (after a clipped step: the
    clipped gradient; under AMP, unscaled)."""
    grads = [p.grad for group in optimizer.param_groups for p in group["params"]
             if p.grad is not None]
    if not grads:
        return 0.0
    return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float())
                                                       for g in grads])))


def parameter_checksum(model: nn.Module) -> float:
    """Sum of all trainable parameters in float64: equal on every worker when DDP is in sync."""
    with torch.no_grad():
        return float(sum(p.double().sum() for p in model.parameters() if p.requires_grad))


def _checksums(model: nn.Module) -> dict:
    """This worker's parameter checksum and the spread of all workers' (0: in sync)."""
    import torch.distributed as dist

    checksum = torch.tensor([parameter_checksum(model)], dtype=torch.float64)
    spread = 0.0
    if dist.is_available() and dist.is_initialized():
        sums = [torch.zeros_like(checksum) for _ in range(dist.get_world_size())]
        dist.all_gather(sums, checksum)
        spread = float(max(sums) - min(sums))
    return {"param_checksum": float(checksum), "param_spread": spread}

"""The LSTM classifier's training loop on SST-2 (`train_loop`), the same code in a plain process
(`workers=0`) and on every Ray Train worker (`train_loop_per_worker`, DDP via `prepare_model`):
every rank takes its slice of each seeded global batch, rank 0 scores dev and keeps the best
state, and returns the metrics. The step plan, seeds and keep-best are the training kit's
(`sentray.training`).

Training as the paper's: Adam, lr 1e-5, batch 32, cross-entropy + 1e-7 * sum of squared
parameters, dev accuracy every 50 steps. Unlike the paper, which picked the checkpoint on the
*test* set, the best step is chosen on dev and only that state is scored on test. The L2 penalty
is an explicit loss term, l2 * sum(p^2) over all trainable parameters (embeddings included), as
the paper's loss writes it; Adam's weight_decay=2*l2 would give the same gradients.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from sentray.kit.progress_bars import bar
from sentray.lstm.classifier import LSTMClassifier
from sentray.lstm.config import LSTMConfig
from sentray.lstm.data import EncodedSplit, LSTMData
from sentray.training.keep_best import EvalHistory
from sentray.training.ray_train import worker_setup
from sentray.training.steps import Step, StepPlan, epoch_permutation, step_seed

logger = logging.getLogger(__name__)


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


def step_plan(config: LSTMConfig, train_rows: int) -> StepPlan:
    """The run's steps: epochs of full batches (the rows past an epoch's last full batch are
    left out of it, a different few each epoch), capped at max_steps."""
    if train_rows < config.batch_size:
        raise ValueError(f"{train_rows} training rows is fewer than one batch "
                         f"({config.batch_size})")
    return StepPlan(train_rows, config.batch_size, config.epochs, config.max_steps,
                    config.eval_steps, config.log_steps)


class LSTMRun:
    """One rank's training of one classifier."""

    def __init__(self, config: LSTMConfig, data: LSTMData, rank: int, world_size: int,
                 device: torch.device | str,
                 prepare: Callable[[nn.Module], nn.Module] | None) -> None:
        if config.batch_size % world_size:
            raise ValueError(f"the global batch size {config.batch_size} must be divisible by "
                             f"the number of workers {world_size}")
        self.config, self.data, self.rank = config, data, rank
        self.device = torch.device(device)
        self.plan = step_plan(config, len(data.train))
        self.local = config.batch_size // world_size
        torch.manual_seed(config.seed)  # the LSTM and the Linear start the same on every rank
        self.bare = LSTMClassifier(data.embeddings, cell=config.cell,
                                   sentiment_ids=data.sentiment_ids,
                                   dropout=config.dropout).to(self.device)
        self.model = prepare(self.bare) if prepare is not None else self.bare
        self.model.train()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr)
        self.history = EvalHistory("dev_accuracy")
        self.losses: list[float] = []
        self.order, self.started = None, time.perf_counter()

    def train_step(self, step: Step) -> None:
        """One optimizer step on this rank's rows of the step's global batch."""
        config = self.config
        if step.batch == 0 or self.order is None:
            self.order = epoch_permutation(config.seed, step.epoch, len(self.data.train))
        start = step.batch * config.batch_size + self.rank * self.local
        ids, lengths, labels = self.data.train.batch(self.order[start:start + self.local])
        torch.manual_seed(step_seed(config.seed, self.rank, step.number))  # this step's dropout
        logits = self.model(ids.to(self.device), lengths)  # (b, 2)
        cross_entropy = F.cross_entropy(logits, labels.to(self.device))
        loss = cross_entropy
        if config.l2:
            loss = loss + config.l2 * l2_penalty(self.bare.parameters())
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.losses.append(float(cross_entropy.detach()))
        if self.rank == 0 and self.plan.logs_at(step.number):
            logger.info("step %d/%d epoch %d cross-entropy %.4f (%.1f steps/s)", step.number,
                        self.plan.total_steps, step.epoch, self.losses[-1],
                        step.number / (time.perf_counter() - self.started))

    def evaluate(self, step: Step) -> dict:
        """The record of the steps since the last one: this rank's mean cross-entropy, and on
        rank 0 dev accuracy (the best state kept)."""
        record = {"step": step.number, "epoch": step.epoch, "loss": float(np.mean(self.losses))}
        self.losses = []
        if self.rank == 0:
            record["dev_accuracy"] = accuracy(self.bare, self.data.dev,
                                              self.config.eval_batch_size, self.device)
            self.history.add(record, lambda: {k: v.detach().cpu().clone()
                                              for k, v in self.bare.state_dict().items()})
            logger.info("step %d: dev accuracy %.4f (best %.4f at step %d), loss %.4f",
                        step.number, record["dev_accuracy"], self.history.best_score,
                        self.history.best["step"], record["loss"])
        else:
            self.history.add(record)
        return record

    def metrics(self) -> dict:
        """Rank 0's result: the best state by dev, scored on test."""
        self.bare.load_state_dict(self.history.best_state)
        test = accuracy(self.bare, self.data.test, self.config.eval_batch_size, self.device)
        best = self.history.best
        logger.info("best step %d: dev accuracy %.4f, test accuracy %.4f", best["step"],
                    best["dev_accuracy"], test)
        return {"dev_accuracy": best["dev_accuracy"], "test_accuracy": test,
                "best_step": best["step"], "steps": self.plan.total_steps,
                "steps_per_epoch": self.plan.steps_per_epoch, "history": self.history.records}


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
    run = LSTMRun(config, data, rank, world_size, device, prepare)
    progress = bar(run.plan.total_steps, desc=f"{config.cell} steps", enabled=rank == 0)
    for step in run.plan.steps():
        run.train_step(step)
        progress.update()
        if run.plan.evaluates_at(step.number):
            record = run.evaluate(step)
            if report is not None:
                report(record)
    progress.close()
    return run.metrics() if rank == 0 else None


@dataclass(frozen=True)
class LSTMLoopConfig:
    """What every Ray Train worker is handed with the loop."""

    config: LSTMConfig
    data: Any  # an ObjectRef of the LSTMData the driver prepared


def train_loop_per_worker(loop: LSTMLoopConfig) -> dict | None:
    """Ray Train's per-worker function. Returns rank 0's metrics (Ray hands them back as
    `Result.return_value`)."""
    import ray
    import ray.train
    import ray.train.torch

    config = loop.config
    rank, world, device = worker_setup(config.world_size, config.cluster.cpus_per_worker)
    data: LSTMData = ray.get(loop.data)
    # the one buffer, the SIFTER lookup table, never changes: no need to broadcast it each step
    prepare = functools.partial(ray.train.torch.prepare_model,
                                parallel_strategy_kwargs={"broadcast_buffers": False})
    return train_loop(config, data, rank=rank, world_size=world, device=device,
                      prepare=prepare, report=ray.train.report)

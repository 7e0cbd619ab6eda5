"""The LSTM classifier's training loop on SST-2 (`train_loop`), the same code in a plain process
(`workers=0`) and on every Ray Train worker (`train_loop_per_worker`, DDP via `prepare_model`):
every rank takes its slice of each seeded global batch, rank 0 scores dev and keeps the best
state, and returns the metrics.

Training as the paper's: Adam, lr 1e-5, batch 32, cross-entropy + 1e-7 * sum of squared
parameters, dev accuracy every 50 steps. Unlike the paper, which picked the checkpoint on the
*test* set, the best step is chosen on dev and only that state is scored on test. The L2 penalty
is an explicit loss term, l2 * sum(p^2) over all trainable parameters (embeddings included), as
the paper's loss writes it; Adam's weight_decay=2*l2 would give the same gradients.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable, Iterable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from sentray.lstm import LSTMClassifier
from sentray.lstm_config import LSTMConfig
from sentray.lstm_data import EncodedSplit, LSTMData
from sentray.progress import bar
from sentray.runtime import step_seed, train_worker_setup

logger = logging.getLogger(__name__)


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
    progress = bar(steps, desc=f"{config.cell} steps", enabled=rank == 0)
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
            progress.update()
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
    progress.close()
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


__all__ = ["accuracy", "epoch_order", "l2_penalty", "total_steps", "train_loop",
           "train_loop_per_worker"]

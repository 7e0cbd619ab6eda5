"""The contrastive trainer's loop on each Ray Train worker (`train_loop_per_worker`): it reads its
rows with `ray.train.get_dataset_shard`, trains a `ContrastiveModel` wrapped by `prepare_model`,
and calls `ray.train.report` every `eval_steps` with a checkpoint (rank 0 scores STS-B dev first).

Reproducibility and resumption are designed in, not hoped for:
- each epoch's order is a sort on a hash of (seed, epoch, row id) (`sentray.train_data`), so it
  does not depend on how Ray Data happens to schedule blocks; every worker reads the epoch in that
  order and takes its slice of each global batch (rank r: rows [r*b, (r+1)*b) of the global batch);
- dropout masks come from a generator seeded by (seed, rank, step) at every step;
- a checkpoint carries the model, optimizer, scheduler (and grad scaler) state and the step, so
  a run restarted after a lost worker, or rerun under the same name, continues from the step it
  reached and ends where an uninterrupted run would.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from sentray import models, storage, sts
from sentray.checkpoint import Checkpointing
from sentray.contrastive import PARTIAL_POOLINGS, ContrastiveModel, build_model, encode_views
from sentray.encoder import EncoderConfig, SentenceEncoder
from sentray.losses import gather_with_local_grad, objective_loss
from sentray.optim import adamw, clipped_step, linear_schedule, warmup_steps
from sentray.runtime import step_seed, train_worker_setup
from sentray.train_config import TrainConfig
from sentray.views import objective_views, tokenize_batch

logger = logging.getLogger(__name__)


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
                                    config.max_length, config.lambdas)
            backbones[0] += sum(g.tokens.backbones for g in groups)
            backbones[1] += sum(g.tokens.backbones_whole for g in groups)
            torch.manual_seed(step_seed(config.seed, rank, step))  # this step's dropout masks
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp):
                local_views = encode_views(model, groups, objective_views(
                    config.objective, config.lambdas), local_batch, device)
            views = [gather_with_local_grad(v) for v in local_views]
            loss = objective_loss(config.objective, views, config.lambdas, config.temperature)
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


__all__ = ["parameter_checksum", "train_loop_per_worker"]

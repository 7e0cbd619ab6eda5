"""SIFTER-SimCSE and unsupervised SimCSE training on Ray Train (DDP): the driver.

The shape is Ray's own: the driver validates the config (`sentray.train_config`) and the input
(`sentray.train_data`), builds one Ray Dataset per epoch and hands `train_loop_per_worker`
(`sentray.train_loop`) to a `TorchTrainer` (`sentray.raytrain`); every worker reads its rows with
`ray.train.get_dataset_shard`, trains a `ContrastiveModel` (`sentray.contrastive`) wrapped by
`prepare_model`, and calls `ray.train.report` every `eval_steps` with a checkpoint (rank 0 scores
STS-B dev first). The driver then exports the best checkpoint as a Hugging Face and a
sentence-transformers directory (`sentray.checkpoint`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from pathlib import Path

from sentray import configfile, models, raytrain, senteval, storage
from sentray.checkpoint import export_checkpoint, finished_checkpoints
from sentray.optim import warmup_steps
from sentray.train_config import TrainConfig
from sentray.train_data import epoch_datasets, input_backbone_coverage, inspect_input
from sentray.train_loop import train_loop_per_worker

logger = logging.getLogger(__name__)


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
    configfile.write_config(config, config.output, job="train", s3_endpoint=config.s3_endpoint)
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
    loop_config = {
        "config": config, "total_steps": plan.total_steps,
        "steps_per_epoch": plan.steps_per_epoch, "dev": dev,
        "fault_marker": (_absolute(run_folder.join(f"fault-drill-{config.fail_at_step}"))
                         if config.fail_at_step else None)}
    result = raytrain.fit(
        train_loop_per_worker, lambda: loop_config, config,
        name=config.name, storage_path=_absolute(output),
        storage_filesystem=output.filesystem if output.is_s3 else None,
        # Every worker reads the whole epoch in order and keeps its slice of each batch.
        datasets=lambda: epoch_datasets(config, epochs, plan.rows),
        max_failures=config.max_failures, keep_checkpoints=config.keep_checkpoints,
        best_by="stsb_dev")
    best = result.get_best_checkpoint("stsb_dev", "max")
    latest = result.checkpoint
    if best is None or latest is None:
        raise RuntimeError(f"run {config.name!r} reported no checkpoint")
    return best, latest


def _absolute(location: storage.Location) -> str:
    """A location as every node understands it: s3://... or an absolute local path."""
    return location.uri if location.is_s3 else location.path


__all__ = ["run_training"]

"""SIFTER-SimCSE and unsupervised SimCSE training on Ray Train (DDP): the driver behind
`jobs/train.py`.

The shape is Ray's own: the driver validates the config (`sentray.contrastive.config`) and the
input (`sentray.contrastive.input_data`), builds one Ray Dataset per epoch and hands
`train_loop_per_worker` (`sentray.contrastive.loop`) to a `TorchTrainer`
(`sentray.training.ray_train`); every worker reads its rows with `ray.train.get_dataset_shard`,
trains a `ContrastiveModel` wrapped by `prepare_model`, and calls `ray.train.report` every
`eval_steps` with a checkpoint (rank 0 scores STS-B dev first). The driver then exports the
best checkpoint as a Hugging Face and a sentence-transformers folder
(`sentray.contrastive.checkpoints`).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from sentray.contrastive.checkpoints import export_checkpoint, finished_checkpoints
from sentray.contrastive.config import TrainConfig
from sentray.contrastive.input_data import (
    epoch_datasets,
    input_backbone_coverage,
    input_settings,
    inspect_input,
)
from sentray.contrastive.loop import LoopConfig, train_loop_per_worker
from sentray.encode.plan import EncoderPlan
from sentray.evaluation import senteval
from sentray.kit import config_files, storage
from sentray.kit.settings_record import differences, mixing_error, read_settings, write_settings
from sentray.precision.plan import Where, plan_encoder
from sentray.training import ray_train
from sentray.training.steps import StepPlan

logger = logging.getLogger(__name__)


def run_training(config: TrainConfig) -> dict:
    """Train, export OUTPUT/best (HF) and OUTPUT/best-st (sentence-transformers) from the best
    checkpoint by STS-B dev; returns the summary (also OUTPUT/summary.json)."""
    started = time.perf_counter()
    config, encoder = plan_run(config)
    logger.info("training config: %s", json.dumps(config_files.flat_record(config)))
    data_dir = senteval.resolve_data_dir(config.data_dir)  # fail before any cluster work
    dev = senteval.load_sts_benchmark(data_dir, "dev")
    plan = inspect_input(config)
    schedule = _log_plan(config, plan)
    coverage = input_backbone_coverage(config, encoder)
    if coverage is not None:
        sampled = (f" (a seeded sample of {coverage['rows']:,} of the {coverage['input_rows']:,}"
                   " input rows)" if coverage["rows"] < coverage["input_rows"] else "")
        logger.info("Y keeps its whole backbone at max_length %d in %.2f%% of the %d rows with "
                    "one%s", config.encoder.max_length, 100 * coverage["backbone_whole_share"],
                    coverage["rows_with_backbone"], sampled)
    output = storage.locate(config.output, config.s3_endpoint)
    run_folder = output.join(config.name)
    _claim_run_folder(config, encoder, output, run_folder)
    finished = finished_checkpoints(run_folder, plan.total_steps)
    if finished:
        logger.info("run %s already trained its %d steps: exported again, no worker started",
                    run_folder.uri, plan.total_steps)
        best, latest = finished
    else:
        best, latest = _fit(config, plan, encoder, dev, output, run_folder)
    with latest.as_directory() as folder:
        state = json.loads((Path(folder) / "state.json").read_text())
    history, initial = state["history"], state.get("initial_stsb_dev")
    best_record = max(history, key=lambda r: r["stsb_dev"])
    if initial is not None and best_record["stsb_dev"] < initial:
        logger.warning("no checkpoint beats the initial model on STS-B dev (best %.2f at step "
                       "%d, initial %.2f): the exported model is worse than the one training "
                       "started from", best_record["stsb_dev"], best_record["step"], initial)
    summary = {"run": run_folder.uri, "rows": plan.rows, "steps": plan.total_steps,
               "steps_per_epoch": plan.steps_per_epoch, "epochs": plan.epochs_run,
               "rows_past_last_batch_per_epoch": plan.dropped_per_epoch,
               "schedule": schedule, "backbone_coverage": coverage,
               # what the input's views were made with (jobs/augment.py's _settings.json: the Z
               # rule, the parsers, the seed), or {"unknown": why} for an input that holds none
               "input_settings": input_settings(config),
               "initial_stsb_dev": initial,
               "best_step": best_record["step"], "best_stsb_dev": best_record["stsb_dev"],
               "exported": export_checkpoint(best, output, config, encoder, best_record),
               "history": history, "seconds": round(time.perf_counter() - started, 1),
               "config": config_files.flat_record(config)}
    storage.write_bytes(output.join("summary.json"), json.dumps(summary, indent=1).encode())
    config_files.write_config(config, config.output, job="train",
                              s3_endpoint=config.s3_endpoint)
    return summary


def plan_run(config: TrainConfig) -> tuple[TrainConfig, EncoderPlan]:
    """(the config as the run repeats it, the plan of the encoder it trains): the objective's
    paper settings (`resolved`), then the model looked up and its facts read once, here (a
    broken folder fails before any worker), the read-out decided (the trainer's default:
    [CLS]); training's precisions are fixed (fp32, bf16, fp16): nothing is measured."""
    config = config.resolved()
    encoder = plan_encoder(config.encoder, default_pooling="cls_before_pooler", where=Where(
        cpus=config.cluster.cpus_per_worker, gpus=1.0 if config.cluster.use_gpu else 0.0))
    return config.as_planned(encoder), encoder


# What a trained model depends on: a rerun into the same --output/--name that changes any of
# these would continue one run with another's settings. epochs and max_steps only extend a run
# (its schedule then decays to the new last step); workers, evaluation and resources may change.
MODEL_SETTINGS = ("model", "objective", "pooling", "head", "mlp", "dropout", "temperature",
                  "lambdas", "max_length", "batch_size", "lr", "weight_decay", "warmup_ratio",
                  "max_grad_norm", "seed", "input", "precision")


def train_settings(config: TrainConfig, encoder: EncoderPlan) -> dict:
    record = config_files.flat_record(config)
    settings = {key: record[key] for key in MODEL_SETTINGS}
    settings["lambdas"] = config.lambdas.spec()
    settings["model_files"] = encoder.model.fingerprint
    if config.mlp:  # only a run with the MLP depends on its initial weights
        settings["mlp_init"] = config.mlp_init
    return settings


def _claim_run_folder(config: TrainConfig, encoder: EncoderPlan, output: storage.Location,
                      run_folder: storage.Location) -> None:
    """--overwrite: delete the run's folder and the exports; else stop when the run folder
    holds a run made with other settings. Then record this run's."""
    settings = train_settings(config, encoder)
    if config.overwrite:
        for folder in (run_folder, output.join("best"), output.join("best-st")):
            if storage.exists(folder):
                folder.filesystem.delete_dir(folder.path)
        logger.info("--overwrite: deleted run %s and its exports", run_folder.uri)
    elif storage.exists(run_folder):
        stored = read_settings(run_folder)
        if stored is not None and stored.get("mlp") and "mlp_init" not in stored:
            stored["mlp_init"] = "torch"  # recorded before --mlp-init: PyTorch's default init
        changed = differences(stored, settings) if stored is not None else []
        if changed:
            raise mixing_error(
                run_folder.uri, changed, "Train under another --name, rerun with the stored "
                "settings (--epochs and --max-steps may grow: they extend the run), or add "
                "--overwrite to delete that run and its exports and start afresh.")
    run_folder.filesystem.create_dir(run_folder.path, recursive=True)
    write_settings(run_folder, settings, "train")


def _log_plan(config: TrainConfig, plan: StepPlan) -> dict:
    """Say what the run will do; returns its schedule (for the summary)."""
    logger.info("%d rows: %d steps/epoch of %d, %d steps; %d rows/epoch past the last full batch",
                plan.rows, plan.steps_per_epoch, config.batch_size, plan.total_steps,
                plan.dropped_per_epoch)
    schedule = {"warmup_steps": plan.warmup_steps(config.warmup_ratio),
                "decay_to_zero_at_step": plan.total_steps, "max_grad_norm": config.max_grad_norm}
    logger.info("lr %g: linear warm-up over %d steps, linear decay to 0 at step %d (the run's "
                "last%s); gradient norm clipped at %s", config.lr, schedule["warmup_steps"],
                plan.total_steps, ", set by --max-steps" if config.max_steps and
                plan.total_steps == config.max_steps else "", config.max_grad_norm)
    return schedule


def _fit(config: TrainConfig, plan: StepPlan, encoder: EncoderPlan, dev,
         output: storage.Location, run_folder: storage.Location):
    """Ray Train's fit of `train_loop_per_worker` (resuming the run when `run_folder` holds
    one); returns its (best by STS-B dev, latest) checkpoints."""
    marker = (_absolute(run_folder.join(f"fault-drill-{config.fail_at_step}"))
              if config.fail_at_step else None)
    result = ray_train.fit(
        train_loop_per_worker, lambda: LoopConfig(config, plan, dev, encoder, marker), config.cluster,
        name=config.name, storage_path=_absolute(output),
        storage_filesystem=output.filesystem if output.is_s3 else None,
        # Every worker reads the whole epoch in order and keeps its slice of each batch.
        datasets=lambda: epoch_datasets(config, plan.epochs_run, plan.rows),
        keep_checkpoints=config.keep_checkpoints,
        best_by="stsb_dev")
    best = result.get_best_checkpoint("stsb_dev", "max")
    latest = result.checkpoint
    if best is None or latest is None:
        raise RuntimeError(f"run {config.name!r} reported no checkpoint")
    return best, latest


def _absolute(location: storage.Location) -> str:
    """A location as every node understands it: s3://... or an absolute local path."""
    return location.uri if location.is_s3 else location.path

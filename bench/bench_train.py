"""Training throughput: Ray Train against a plain PyTorch loop on the same batches, 1 -> 2
workers, and sentence-transformers' MultipleNegativesRankingLoss on (x, x) pairs (its SimCSE
recipe) at the same batch size. Seconds per optimizer step, batch fetch included, first step
(warm-up) and evaluation excluded; every figure measured in this run.

    python bench/bench_train.py --input out/brown-aug --data-dir ../shared/data/senteval

Goals: Ray Train 1 worker / plain loop <= 1.10 (same threads); 2 workers faster than 1. Also
fp32 against bf16 autocast (1 worker x 2 CPUs): what bf16 gains where the CPU runs it natively.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from sentray.cli import setup_logging
from sentray.contrastive.config import TrainConfig, TrainEncoderConfig
from sentray.contrastive.epoch_order import EpochOrder
from sentray.contrastive.job import plan_run, run_training
from sentray.contrastive.losses import objective_loss
from sentray.contrastive.model import build_model, encode_views
from sentray.contrastive.objectives import objective_views
from sentray.contrastive.optimizer import adamw, clipped_step
from sentray.contrastive.view_tokens import tokenize_batch
from sentray.encode.model_loading import load_tokenizer
from sentray.encode.model_lookup import DEFAULT_MODEL
from sentray.kit import storage


def first_batches(config: TrainConfig, steps: int) -> list[dict[str, np.ndarray]]:
    """The global batches of the run's first `steps` steps, in the run's order."""
    location = storage.locate(config.input)
    files = [f.path for f in storage.list_files(location, (".parquet",))]
    table = pa.concat_tables(pq.read_table(f, columns=["id", "text", "backbone_text",
                                                       "pruned_text"]) for f in files)
    table = EpochOrder(config.seed, 0)(table).sort_by("order")
    rows = table.slice(0, steps * config.batch_size).to_pydict()
    return [{k: np.array(v[i * config.batch_size:(i + 1) * config.batch_size])
             for k, v in rows.items()} for i in range(steps)]


def plain_loop(config: TrainConfig, steps: int, threads: int) -> float:
    """The same model, tokenization, loss and optimizer in one process: seconds per step."""
    torch.set_num_threads(threads)
    torch.manual_seed(config.seed)
    config, encoder = plan_run(config)
    model = build_model(encoder, dropout=config.dropout, mlp=config.mlp,
                        mlp_init=config.mlp_init).train()
    tokenizer = load_tokenizer(encoder.model)
    optimizer = adamw(model, config.lr, config.weight_decay)
    batches = first_batches(config, steps)
    times = []
    for batch in batches:
        started = time.perf_counter()
        groups = tokenize_batch(tokenizer, batch, config.objective,
                                slice(0, config.batch_size), config.encoder.max_length,
                                config.lambdas)
        views = encode_views(model, groups, objective_views(config.objective, config.lambdas),
                             config.batch_size)
        loss = objective_loss(config.objective, views, config.lambdas)
        clipped_step(model, loss, optimizer, None, config.max_grad_norm)
        times.append(time.perf_counter() - started)
    return float(np.mean(times[1:]))


def ray_train(config: TrainConfig, output: str, workers: int, cpus: float,
              precision: str = "fp32") -> float:
    summary = run_training(dataclasses.replace(
        config, output=output, name=f"bench-{workers}x{cpus:g}-{precision}",
        encoder=dataclasses.replace(config.encoder, precision=precision),
        cluster=dataclasses.replace(config.cluster, workers=workers, cpus_per_worker=cpus)))
    return float(summary["history"][-1]["seconds_per_step"])


def sentence_transformers_mnrl(config: TrainConfig, steps: int, threads: int) -> float:
    """sentence-transformers' trainer with MultipleNegativesRankingLoss on (x, x) pairs."""
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.losses import MultipleNegativesRankingLoss
    from transformers import TrainerCallback

    torch.set_num_threads(threads)
    model = SentenceTransformer(plan_run(config)[1].model.path, device="cpu")
    model.max_seq_length = config.encoder.max_length
    texts = [t for b in first_batches(config, steps) for t in b["text"].tolist()]
    data = Dataset.from_dict({"anchor": texts, "positive": texts})
    times: list[float] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.started = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            times.append(time.perf_counter() - self.started)

    with tempfile.TemporaryDirectory() as folder:
        args = SentenceTransformerTrainingArguments(
            output_dir=folder, per_device_train_batch_size=config.batch_size, max_steps=steps,
            learning_rate=config.lr, save_strategy="no", report_to=[], logging_steps=1000,
            use_cpu=True, dataloader_drop_last=True, seed=config.seed)
        trainer = SentenceTransformerTrainer(
            model=model, args=args, train_dataset=data, callbacks=[StepTimer()],
            loss=MultipleNegativesRankingLoss(model, scale=1.0 / config.temperature))
        trainer.train()
    return float(np.mean(times[1:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", default="out/brown-aug")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--objective", default="simcse", choices=["simcse", "sifter"])
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args()
    setup_logging()
    logging.getLogger("sentray").setLevel(logging.WARNING)
    config = TrainConfig(input=args.input, encoder=TrainEncoderConfig(model=args.model),
                         objective=args.objective, batch_size=args.batch_size,
                         max_steps=args.steps, eval_steps=args.steps, data_dir=args.data_dir,
                         log_steps=1000)
    config = plan_run(config)[0]  # the objective's dropout and lr, the model's pooling
    print(cpu_line())
    results = {}
    with tempfile.TemporaryDirectory() as output:
        results["plain, 2 threads"] = plain_loop(config, args.steps, threads=2)
        results["Ray Train, 1 worker x 2 CPUs"] = ray_train(config, output, 1, 2)
        results["Ray Train, 1 worker x 2 CPUs, bf16 autocast"] = ray_train(
            config, output, 1, 2, precision="bf16")
        results["Ray Train, 1 worker x 1 CPU"] = ray_train(config, output, 1, 1)
        results["Ray Train, 2 workers x 1 CPU"] = ray_train(config, output, 2, 1)
    if args.objective == "simcse":
        results["sentence-transformers MNRL (x, x), 2 threads"] = sentence_transformers_mnrl(
            config, args.steps, threads=2)
    print(f"\n{args.model}, {args.objective}, global batch {args.batch_size}, max_length "
          f"{config.encoder.max_length}, {args.steps} steps each")
    for name, seconds in results.items():
        print(f"  {name:48s} {seconds:6.3f} s/step  {1 / seconds:6.3f} steps/s")
    ratios = {
        "Ray Train 1 worker / plain loop (goal <= 1.10)":
            results["Ray Train, 1 worker x 2 CPUs"] / results["plain, 2 threads"],
        "2 workers speed-up over 1 worker (1 CPU each)":
            results["Ray Train, 1 worker x 1 CPU"] / results["Ray Train, 2 workers x 1 CPU"],
        "bf16 autocast speed-up over fp32 (Ray, 1 worker x 2 CPUs)":
            results["Ray Train, 1 worker x 2 CPUs"]
            / results["Ray Train, 1 worker x 2 CPUs, bf16 autocast"],
    }
    if args.objective == "simcse":
        ratios["sentray steps/s / sentence-transformers steps/s (Ray, 1 worker x 2 CPUs)"] = (
            results["sentence-transformers MNRL (x, x), 2 threads"]
            / results["Ray Train, 1 worker x 2 CPUs"])
    for name, value in ratios.items():
        print(f"  {name}: {value:.2f}")
    record = {"cpu": cpu_line(), "model": args.model, "objective": args.objective,
              "batch_size": args.batch_size, "steps": args.steps,
              "seconds_per_step": results, "ratios": ratios}
    print(json.dumps(record))
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")


def cpu_line() -> str:
    from sentray.kit.cpu import cpu_bf16_features, cpu_info

    features = cpu_bf16_features()
    return (f"CPU: {cpu_info()['name']}, {os.cpu_count()} CPUs, "
            f"{'native bf16 (' + ', '.join(features) + ')' if features else 'bf16 emulated'}")


if __name__ == "__main__":
    main()

"""Training fidelity against a peer: unsupervised SimCSE with `jobs/train.py` and with
sentence-transformers' own recipe, side by side on the same sentences in the same order, both
scored on the 7 STS tasks by `jobs/evaluate.py`.

    python bench/bench_train_peer.py --data-dir ../shared/data/senteval

The peer: `SentenceTransformerTrainer` with `MultipleNegativesRankingLoss(scale=20)` on (x, x)
pairs (SimCSE: the two copies differ by their dropout masks), the packaged all-MiniLM-L6-v2
with its mean pooling. Both runs: dropout 0.1, AdamW lr 3e-5 with linear decay, weight decay
0.01 (not on biases and LayerNorm), batch 64, max length 32, 300 steps, no warm-up, gradient
norm clipped at 1.0, the final model (sentray: `--eval-steps` = the run, so its only
checkpoint is the last). Prints both averages, their difference (goal: within 0.5) and the
steps/s ratio; each run uses the same number of torch threads.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from sentray.cli import setup_logging
from sentray.contrastive.epoch_order import EpochOrder
from sentray.encode.model_lookup import DEFAULT_MODEL, resolve_model

ROOT = Path(__file__).resolve().parents[1]
BROWN = ROOT.parent / "shared" / "data" / "corpus" / "brown.txt"


def write_corpus(lines: list[str], folder: Path) -> Path:
    """The sentences as the training job reads them: a Parquet folder with id and text."""
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"id": [f"brown:{i}" for i in range(len(lines))], "text": lines}),
                   folder / "part-0.parquet")
    return folder


def training_order(folder: Path, seed: int, rows: int) -> list[str]:
    """The first `rows` texts in the order jobs/train.py trains on them (epoch 0)."""
    table = EpochOrder(seed, 0)(pq.read_table(folder / "part-0.parquet")).sort_by("order")
    return table.column("text").to_pylist()[:rows]


def run_sentence_transformers(texts: list[str], args, output: Path) -> float:
    """sentence-transformers' SimCSE recipe on `texts` in this order; saves the model to
    `output`; returns seconds per step (first step excluded)."""
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.losses import MultipleNegativesRankingLoss
    from torch.utils.data import BatchSampler, SequentialSampler
    from transformers import TrainerCallback

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = SentenceTransformer(resolve_model(args.model).path, device="cpu")
    model.max_seq_length = args.max_length
    times: list[float] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, a, state, control, **kwargs):
            self.started = time.perf_counter()

        def on_step_end(self, a, state, control, **kwargs):
            times.append(time.perf_counter() - self.started)

    def in_order(dataset, batch_size, drop_last, **kwargs):  # jobs/train.py's order, no shuffle
        return BatchSampler(SequentialSampler(dataset), batch_size, drop_last)

    with tempfile.TemporaryDirectory() as scratch:
        training_args = SentenceTransformerTrainingArguments(
            output_dir=scratch, per_device_train_batch_size=args.batch_size,
            max_steps=args.steps, learning_rate=args.lr, weight_decay=args.weight_decay,
            warmup_steps=0, max_grad_norm=1.0, lr_scheduler_type="linear",
            batch_sampler=in_order, save_strategy="no", report_to=[], logging_steps=50,
            use_cpu=True, dataloader_drop_last=True, seed=args.seed)
        trainer = SentenceTransformerTrainer(
            model=model, args=training_args, callbacks=[StepTimer()],
            train_dataset=Dataset.from_dict({"anchor": texts, "positive": texts}),
            loss=MultipleNegativesRankingLoss(model, scale=20.0))
        trainer.train()
    model.save(str(output))
    return float(np.mean(times[1:]))


def run_sentray(corpus: Path, args, output: Path) -> float:
    """jobs/train.py with the same settings; returns seconds per step."""
    job(["train.py", "--input", str(corpus), "--output", str(output), "--model", args.model,
        "--objective", "simcse", "--pooling", "mean", "--no-mlp", "--dropout", "0.1",
        "--lr", str(args.lr), "--weight-decay", str(args.weight_decay),
        "--max-steps", str(args.steps), "--eval-steps", str(args.steps),
        "--batch-size", str(args.batch_size), "--max-length", str(args.max_length),
        "--warmup-ratio", "0", "--max-grad-norm", "1.0", "--seed", str(args.seed),
        "--workers", "1", "--cpus-per-worker", str(args.threads),
        "--data-dir", args.data_dir, "--log-steps", "50"])
    summary = json.loads((output / "summary.json").read_text())
    return float(summary["history"][-1]["seconds_per_step"])


def job(argv: list[str]) -> None:
    subprocess.run([sys.executable, str(ROOT / "jobs" / argv[0]), *argv[1:]], check=True)


def score(model_dir: Path, args, out: Path) -> dict[str, float]:
    """The 7 STS tasks by jobs/evaluate.py, the model's own pooling (both are mean)."""
    job(["evaluate.py", "--model", str(model_dir), "--data-dir", args.data_dir,
         "--out", str(out)])
    return json.loads((out / "results.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=str(BROWN), help="one sentence per line")
    parser.add_argument("--data-dir", default=os.environ.get("SENTRAY_DATA_DIR",
                                                             str(BROWN.parents[1] / "senteval")))
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of each run")
    parser.add_argument("--out", default="out/bench-train-peer",
                        help="models and scores are kept here")
    args = parser.parse_args()
    setup_logging()
    logging.getLogger("sentray").setLevel(logging.WARNING)
    out = Path(args.out)
    lines = [t for t in Path(args.corpus).read_text().splitlines() if t.strip()]
    corpus = write_corpus(lines, Path(tempfile.mkdtemp()) / "corpus")
    texts = training_order(corpus, args.seed, args.steps * args.batch_size)
    seconds = {"sentence-transformers": run_sentence_transformers(texts, args, out / "st")}
    seconds["sentray"] = run_sentray(corpus, args, out / "sentray")
    results = {"untrained": score(Path(resolve_model(args.model).path), args,
                                  out / "eval-untrained"),
               "sentence-transformers": score(out / "st", args, out / "eval-st"),
               "sentray": score(out / "sentray" / "best", args, out / "eval-sentray")}
    tasks = [k for k in results["sentray"] if k != "avg"]
    print(f"\n{args.model}, unsupervised SimCSE, {len(lines)} sentences, {args.steps} steps of "
          f"{args.batch_size}, {args.threads} threads each")
    print("| run | " + " | ".join(tasks) + " | Avg. | s/step |")
    print("|---" * (len(tasks) + 3) + "|")
    for name, scores in results.items():
        rate = f"{seconds[name]:.3f}" if name in seconds else "-"
        print(f"| {name} | " + " | ".join(f"{scores[t]:.2f}" for t in tasks)
              + f" | {scores['avg']:.2f} | {rate} |")
    difference = results["sentray"]["avg"] - results["sentence-transformers"]["avg"]
    ratio = seconds["sentence-transformers"] / seconds["sentray"]
    print(f"\nsentray avg - sentence-transformers avg: {difference:+.2f} (goal: within 0.5: "
          f"{'met' if abs(difference) <= 0.5 else 'NOT met'})")
    print(f"sentray steps/s / sentence-transformers steps/s: {ratio:.2f}")
    print(json.dumps({"results": results, "seconds_per_step": seconds,
                      "difference": difference, "steps_per_second_ratio": ratio}))


if __name__ == "__main__":
    main()

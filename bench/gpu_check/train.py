"""Step 4: training steps/s of `jobs/train.py`, SIFTER and SimCSE at each --train-batch-sizes.

Each run is the real job (a subprocess, one worker, one GPU, AMP in --train-precision) joining
one private loopback Ray cluster, on jobs/augment.py's output for the Brown corpus. steps/s is
1 / the job's own seconds_per_step (mean wall time of steps 2..N), so data loading and
tokenization count and the start-up, STS-B dev scoring and checkpointing do not. The dry run
trains fp32 on CPU on a small augmented corpus made here and 64 STS-B dev pairs."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path

from bench.gpu_check.ray_cluster import private_ray_cluster
from bench.gpu_check.repo_io import ROOT, read_lines, run_logged, tail
from bench.gpu_check.report import StepFailed

logger = logging.getLogger(__name__)

NOTE = ("steps/s = 1 / the job's seconds_per_step: mean wall time of steps 2..N (batch fetch and "
        "tokenization included; step 1, the STS-B dev scoring and checkpointing excluded)")


def train_throughput(args: argparse.Namespace, out: Path) -> dict:
    """Step 4's record: the training input, the cluster and one run per (objective, batch)."""
    import torch

    on_gpu = not args.dry_run
    data_dir = Path(args.data_dir) if on_gpu else tiny_senteval(args, out)
    cpus = (os.cpu_count() or 4) if on_gpu else 4
    gpus = torch.cuda.device_count() if on_gpu else 0
    runs, failures = [], []
    with private_ray_cluster(out, cpus, gpus, timeout=180) as address:
        source, input_info = training_input(args, out, address)
        for objective in ("sifter", "simcse"):
            for batch in args.train_batch_sizes:
                run = train_run(args, out, address, source, data_dir, objective, batch)
                if "error" in run:
                    failures.append(f"{objective} batch {batch}")
                runs.append(run)
    record = {"input": str(source), **{f"input_{k}": v for k, v in input_info.items()},
              "stsb_dev": str(data_dir), "ray_cluster": {"cpus": cpus, "gpus": gpus},
              "runs": runs, "note": NOTE}
    if failures:
        raise StepFailed(f"failed: {', '.join(failures)}", record)
    return record


def training_input(args: argparse.Namespace, out: Path, address: str) -> tuple[Path, dict]:
    """jobs/augment.py's output to train on: given, out/brown-aug (not in a dry run), or a
    small one made here from the corpus's first --aug-lines lines (kept for the next run)."""
    if args.train_input:
        return Path(args.train_input), {"source": "--train-input"}
    full = ROOT / "out" / "brown-aug"
    if not args.dry_run and (full / "_summary.json").is_file():
        return full, {"source": "out/brown-aug"}
    target = out / "brown-aug-small"
    info = {"source": f"first {args.aug_lines} corpus lines through jobs/augment.py"}
    head = out / "corpus-head.txt"
    lines = read_lines(Path(args.corpus), args.aug_lines)
    if (target / "_summary.json").is_file() and head.is_file() and (
            head.read_text(encoding="utf-8").splitlines() == lines):
        return target, {**info, "reused": True}
    shutil.rmtree(target, ignore_errors=True)
    shutil.rmtree(f"{target}-rejects", ignore_errors=True)
    head.write_text("\n".join(lines) + "\n", encoding="utf-8")
    actors = 2 if args.dry_run else max(2, min(8, (os.cpu_count() or 4) - 2))
    command = [sys.executable, "jobs/augment.py", "--input", str(head), "--output", str(target),
               "--actors", str(actors), "--address", address]
    started = time.perf_counter()
    rc = run_logged(command, out / "logs" / "augment.log", args.job_timeout)
    if rc != 0:
        raise RuntimeError(f"jobs/augment.py exited {rc}:\n{tail(out / 'logs' / 'augment.log')}")
    return target, {**info, "actors": actors, "seconds": round(time.perf_counter() - started, 1)}


def tiny_senteval(args: argparse.Namespace, out: Path, pairs: int = 64) -> Path:
    """A SentEval folder holding the first `pairs` STS-B dev pairs: the dry run's training
    scores dev at step 0 and at its end, and the whole file takes CPU minutes."""
    source = Path(args.data_dir) / "STS" / "STSBenchmark" / "sts-dev.csv"
    target = out / "senteval-tiny"
    (target / "STS" / "STSBenchmark").mkdir(parents=True, exist_ok=True)
    lines = source.read_text(encoding="utf-8").splitlines()[:pairs]
    (target / "STS" / "STSBenchmark" / "sts-dev.csv").write_text("\n".join(lines) + "\n",
                                                                 encoding="utf-8")
    return target


def train_command(args: argparse.Namespace, address: str, source: Path, data_dir: Path,
                  folder: Path, objective: str, batch: int) -> list[str]:
    """jobs/train.py for one run: evaluated only at its last step, on the GPU unless dry."""
    command = [sys.executable, "jobs/train.py", "--input", str(source), "--output", str(folder),
               "--data-dir", str(data_dir), "--objective", objective, "--batch-size", str(batch),
               "--max-steps", str(args.train_steps), "--eval-steps", str(args.train_steps),
               "--log-steps", "10", "--workers", "1", "--address", address]
    if not args.dry_run:
        command += ["--use-gpu", "--precision", args.train_precision]
    return command


def train_run(args: argparse.Namespace, out: Path, address: str, source: Path, data_dir: Path,
              objective: str, batch: int) -> dict:
    """One jobs/train.py run's figures from its summary.json, or its error."""
    name = f"{objective}-b{batch}"
    folder = out / "train" / name
    shutil.rmtree(folder, ignore_errors=True)  # the same --output and --name would resume
    command = train_command(args, address, source, data_dir, folder, objective, batch)
    run = {"objective": objective, "batch_size": batch, "device": "cpu" if args.dry_run else
           "cuda", "precision": "fp32" if args.dry_run else args.train_precision,
           "command": " ".join(command[1:])}
    log = out / "logs" / f"train-{name}.log"
    logger.info("train: %s", run["command"])
    started = time.perf_counter()
    try:
        rc = run_logged(command, log, args.job_timeout)
        run["wall_seconds"] = round(time.perf_counter() - started, 1)
        if rc != 0:
            raise RuntimeError(f"jobs/train.py exited {rc}:\n{tail(log)}")
        summary = json.loads((folder / "summary.json").read_text())
        run.update(summary_figures(summary, batch))
        (out / "train" / f"{name}-summary.json").write_text(json.dumps(summary, indent=1))
    except Exception as exc:
        logger.error("train %s failed: %s", name, exc)
        run["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        if not args.keep_train_output:
            shutil.rmtree(folder, ignore_errors=True)  # checkpoints: hundreds of MB per run
    run["log"] = str(log)
    return run


def summary_figures(summary: dict, batch: int) -> dict:
    """Throughput from a jobs/train.py summary.json: its last history entry's seconds_per_step."""
    last = summary["history"][-1]
    seconds_per_step = last["seconds_per_step"]
    return {"rows": summary["rows"], "steps": summary["steps"],
            "steps_per_epoch": summary["steps_per_epoch"],
            "seconds_per_step": round(seconds_per_step, 4),
            "steps_per_s": round(1 / seconds_per_step, 3),
            "sentences_per_s": round(batch / seconds_per_step, 1),
            "final_loss": last.get("loss"), "job_seconds": summary["seconds"]}

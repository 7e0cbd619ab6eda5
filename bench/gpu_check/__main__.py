"""The GPU path measured in one command, for the first machine with an NVIDIA GPU (issue 12, §4).

    bash bench/gpu_check.sh                  # one GPU; sized for under 8 minutes on an H200
    bash bench/gpu_check.sh --dry-run        # every step on CPU at tiny sizes

Steps, in order; each writes its figures into OUT/gpu_check.json (rewritten after every step)
and OUT/gpu_check.md is rebuilt from that JSON. A step that fails is recorded with its error and
the next one runs; the exit status is 1 when any step failed.

1. gpu_tests: `python -m pytest -q -m gpu` (they skip without CUDA), pass/skip/fail counts.
2. embed: `SentenceEncoder` throughput for mean, fast Ditto and eager Ditto at fp32/fp16/bf16:
   sentences/s end to end (`encode`: tokenize, pad, forward, copy back) and of the forward
   passes alone, real (unpadded) tokens/s, model FLOP/s and its fraction of the GPU's data
   sheet peak and of a matrix product in the same precision measured in the same run.
3. ditto_memory: peak GPU memory of one forward pass of fast vs eager Ditto on a synthetic
   (256, 128) batch.
4. train: steps/s of `jobs/train.py` (SIFTER and SimCSE, global batch 64 and 512, one GPU, bf16)
   on the augmented Brown corpus, each run a subprocess joining one private loopback cluster.
5. feed: the embedding job on its Ray path (tokenizing on the CPUs, one GPU actor) against the
   forward passes alone on the same rows: the fraction of the time the GPU is kept busy.

`python -m bench.gpu_check --markdown OUT/gpu_check.json` (from the repository root) prints the
table again from a JSON.
Relative paths in the options start at the repository root. Away from this machine (no
../shared), pass --corpus and --data-dir; step 4 uses out/brown-aug when it exists.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import sys
import time
from pathlib import Path

from bench.gpu_check.ditto_memory import ditto_memory
from bench.gpu_check.embed import embed_throughput
from bench.gpu_check.encoders import Encoders
from bench.gpu_check.environment import environment
from bench.gpu_check.feed import feed
from bench.gpu_check.gpu_tests import gpu_tests
from bench.gpu_check.markdown import markdown
from bench.gpu_check.ray_cluster import serve_ray_cluster
from bench.gpu_check.repo_io import ROOT, SHARED
from bench.gpu_check.report import Report
from bench.gpu_check.train import train_throughput

# The steps, in the order they run and are reported; each is one module of bench/gpu_check/, named
# after it: gpu_tests (pytest), embed, ditto_memory, train. The others: report (the JSON, each
# step's success or error), markdown (the tables), environment (versions, data-sheet peaks),
# encoders (shared by embed and ditto_memory), ray_cluster (step 4's cluster), repo_io (the
# repository root, the corpus reader, logged subprocesses).
STEPS = ("gpu_tests", "embed", "ditto_memory", "train", "feed")

logger = logging.getLogger("gpu_check")

# Sizes per mode; every one can be overridden on the command line.
SIZES = {
    "gpu": {"sentences": 20000, "batch_size": 256, "precisions": "fp32,fp16,bf16", "repeats": 3,
            "memory_batch": 256, "memory_tokens": 128, "train_steps": 60,
            "train_batch_sizes": "64,512", "aug_lines": 5000, "job_timeout": 300,
            "feed_rows": 200000},
    "dry": {"sentences": 64, "batch_size": 16, "precisions": "fp32", "repeats": 1,
            "memory_batch": 4, "memory_tokens": 16, "train_steps": 4,
            "train_batch_sizes": "8,16", "aug_lines": 200, "job_timeout": 600,
            "feed_rows": 300},
}

def build_parser() -> argparse.ArgumentParser:
    """Every flag; the size flags default to None and are filled in per mode by parse_args."""
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_check", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true",
                        help="every step on CPU at tiny sizes (checks the script, not a GPU)")
    parser.add_argument("--out", default="out/gpu_check",
                        help="folder for gpu_check.json, gpu_check.md, logs (default: "
                             "%(default)s; relative paths start at the repository root)")
    parser.add_argument("--markdown", metavar="JSON", default=None,
                        help="print the markdown of an existing gpu_check.json and exit")
    parser.add_argument("--skip-tests", action="store_true", help="skip step 1 (pytest -m gpu)")
    parser.add_argument("--skip-train", action="store_true", help="skip step 4 (training)")
    parser.add_argument("--only", default=None,
                        help=f"comma-separated steps to run, the others recorded as skipped "
                             f"(of {', '.join(STEPS)})")
    parser.add_argument("--feed-rows", type=int, help="step 5's rows; GPU 200000, dry run 300")
    data = parser.add_argument_group("data")
    data.add_argument("--corpus", default=str(SHARED / "data/corpus/brown.txt"),
                      help="one sentence per line (default: ../shared/data/corpus/brown.txt)")
    data.add_argument("--data-dir", default=os.environ.get("SENTRAY_DATA_DIR",
                                                           str(SHARED / "data/senteval")),
                      help="SentEval folder, STS-B dev for training and the tests (default: "
                           "$SENTRAY_DATA_DIR, else ../shared/data/senteval)")
    embed = parser.add_argument_group("embed and memory (steps 2, 3)")
    embed.add_argument("--model", default="all-MiniLM-L6-v2", help="(default: %(default)s)")
    embed.add_argument("--head", default="0-8",
                       help="Ditto head L-H (default: %(default)s, all-MiniLM-L6-v2's on STS-B dev)")
    embed.add_argument("--sentences", type=int, help="GPU 20000, dry run 64")
    embed.add_argument("--batch-size", type=int, help="GPU 256, dry run 16")
    embed.add_argument("--precisions", help="comma-separated; GPU fp32,fp16,bf16, dry run fp32")
    embed.add_argument("--repeats", type=int, help="timed passes, best kept; GPU 3, dry run 1")
    embed.add_argument("--memory-batch", type=int, help="GPU 256, dry run 4")
    embed.add_argument("--memory-tokens", type=int, help="GPU 128, dry run 16")
    embed.add_argument("--peak-tflops", type=float, default=None,
                       help="the GPU's peak TFLOP/s for every precision (default: looked up by "
                            "device name for H100/H200/A100; unknown: no fraction)")
    train = parser.add_argument_group("training (step 4)")
    train.add_argument("--train-input", default=None,
                       help="jobs/augment.py output (default: out/brown-aug when it exists and "
                            "not --dry-run, else OUT/brown-aug-small made from --aug-lines lines)")
    train.add_argument("--aug-lines", type=int, help="GPU 5000, dry run 200")
    train.add_argument("--train-steps", type=int, help="steps per run; GPU 60, dry run 4")
    train.add_argument("--train-batch-sizes", help="GPU 64,512, dry run 8,16")
    train.add_argument("--train-precision", default="bf16",
                       help="AMP on GPU (default: %(default)s; the dry run trains fp32 on CPU)")
    train.add_argument("--keep-train-output", action="store_true",
                       help="keep each run's checkpoints and exports (default: summary only)")
    train.add_argument("--job-timeout", type=int, help="seconds per subprocess; GPU 300, dry 600")
    parser.add_argument("--serve-ray-cluster", nargs=2, type=int, metavar=("CPUS", "GPUS"),
                        help=argparse.SUPPRESS)  # internal: the helper holding step 4's cluster
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The flags with the mode's sizes filled in, paths made absolute, lists split."""
    args = build_parser().parse_args(argv)
    unknown = set(args.only.split(",")) - set(STEPS) if args.only else set()
    if unknown:
        build_parser().error(f"--only: no step {', '.join(sorted(unknown))}; steps: "
                             f"{', '.join(STEPS)}")
    for key, value in SIZES["dry" if args.dry_run else "gpu"].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    for key in ("out", "corpus", "data_dir", "train_input", "markdown"):  # from the repo root
        if getattr(args, key):
            setattr(args, key, str((ROOT / getattr(args, key)).resolve()))
    args.precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    args.train_batch_sizes = [int(b) for b in args.train_batch_sizes.split(",")]
    return args


def run_steps(args: argparse.Namespace, report: Report, out: Path, device: str) -> None:
    """Every step in STEPS' order; a failed one is recorded and the next still runs."""
    encoders = Encoders(args, device)  # loaded by step 2, reused by step 3
    only = set(args.only.split(",")) if args.only else set(STEPS)

    def skip(name: str, flag: bool = False, why: str = "") -> str | None:
        return why if flag else (None if name in only else f"not in --only {args.only}")

    report.run_step("gpu_tests", lambda: gpu_tests(args, out),
                    skip("gpu_tests", args.skip_tests, "--skip-tests"))
    report.run_step("embed", lambda: embed_throughput(args, encoders, device), skip("embed"))
    report.run_step("ditto_memory", lambda: ditto_memory(args, encoders, device),
                    skip("ditto_memory"))
    encoders.clear()  # step 4's jobs get the GPU's memory
    report.run_step("train", lambda: train_throughput(args, out),
                    skip("train", args.skip_train, "--skip-train"))
    report.run_step("feed", lambda: feed(args, out, device), skip("feed"))


def new_report(args: argparse.Namespace, argv: list[str] | None, out: Path) -> Report:
    """The report's header: schema, mode, start time, the command line, the resolved flags and
    the environment; stale files of an earlier run removed first."""
    (out / "logs").mkdir(parents=True, exist_ok=True)
    for stale in ("gpu_check.json", "gpu_check.md"):
        (out / stale).unlink(missing_ok=True)
    config = {k: v for k, v in vars(args).items() if k not in ("markdown", "serve_ray_cluster")}
    return Report(out, {"schema": 1, "dry_run": args.dry_run,
                        "started": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                        "argv": sys.argv[1:] if argv is None else argv, "config": config,
                        "environment": environment()}, STEPS)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_ray_cluster:
        serve_ray_cluster(*args.serve_ray_cluster)
        return 0
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text()), STEPS))
        return 0
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("error: torch sees no CUDA GPU; run with --dry-run to check the script on CPU",
              file=sys.stderr)
        return 2
    out = Path(args.out)
    device = "cpu" if args.dry_run else "cuda"
    if args.dry_run:  # two spinning OpenMP threads crawl on a small shared machine; one does not
        torch.set_num_threads(1)
    started = time.perf_counter()
    report = new_report(args, argv, out)
    report.write()
    run_steps(args, report, out, device)
    report.data["seconds"] = round(time.perf_counter() - started, 1)
    report.write()
    failed = report.failed()
    logger.info("done in %.1f s; %s", report.data["seconds"],
                f"failed steps: {failed}" if failed else "every step ran")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

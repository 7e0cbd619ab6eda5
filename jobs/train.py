"""SIFTER-SimCSE (or unsupervised SimCSE) on Ray Train: DDP over --workers, STS-B dev every
--eval-steps, the best checkpoint exported for jobs/embed.py and jobs/evaluate.py.

    python jobs/augment.py                       # X/Y/Z of the bundled sample -> out/augmented
    python jobs/train.py --objective sifter      # -> out/train/best, out/train/best-st
    python jobs/evaluate.py --model out/train/best
    ray job submit --address http://HEAD:8265 --working-dir . -- python jobs/train.py \\
        --input s3://bucket/aug/ --output s3://bucket/runs/ --model bert-base-uncased \\
        --workers 2 --use-gpu --precision fp16

Rerunning with the same --output and --name resumes the run from its latest checkpoint; a lost
worker restarts the group from there too (up to --max-failures times).
"""

from __future__ import annotations

import argparse
import json
import logging

from sentray import senteval
from sentray.cli import setup_logging
from sentray.losses import OBJECTIVES, SifterWeights
from sentray.models import DEFAULT_MODEL
from sentray.pooling import ALIASES, POOLINGS
from sentray.train import TrainConfig, run_training

logger = logging.getLogger("sentray.train")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    io = parser.add_argument_group("input and output")
    io.add_argument("--input", default="out/augmented",
                    help="jobs/augment.py's output folder, local or s3:// (default: %(default)s)")
    io.add_argument("--output", default="out/train",
                    help="runs, checkpoints and OUTPUT/best, OUTPUT/best-st (default: %(default)s)")
    io.add_argument("--name", default=None,
                    help="run name; the same name resumes (default: the objective)")
    io.add_argument("--data-dir", default=None,
                    help=f"SentEval folder for STS-B dev (default: ${senteval.DATA_DIR_ENV})")
    io.add_argument("--s3-endpoint", default=None, help="S3-compatible endpoint URL")
    model = parser.add_argument_group("model and objective")
    model.add_argument("--model", default=DEFAULT_MODEL,
                       help="initial encoder: HF id, local dir or packaged name "
                            "(default: %(default)s)")
    model.add_argument("--objective", default="sifter", choices=OBJECTIVES,
                       help="sifter: X-Y, X-Z, Y-Z InfoNCE; simcse: X under two dropout masks "
                            "(default: %(default)s)")
    model.add_argument("--pooling", default=None,
                       choices=sorted(POOLINGS) + sorted(ALIASES), metavar="POOLING",
                       help="sentence embedding (default: the model's own, e.g. mean for "
                            "all-MiniLM-L6-v2; [CLS] for a raw encoder such as "
                            "bert-base-uncased, as the paper)")
    model.add_argument("--head", default=None,
                       help="Ditto head L-H, for the Ditto poolings (default: the model's "
                            "known head)")
    model.add_argument("--mlp", action=argparse.BooleanOptionalAction, default=None,
                       help="MLP (Linear + Tanh) over the pooling at train time, dropped at "
                            "export, as SimCSE (default: on, unless the pooling is the model's "
                            "own read-out)")
    model.add_argument("--dropout", type=float, default=0.15, help="(default: %(default)s)")
    model.add_argument("--temperature", type=float, default=0.05, help="(default: %(default)s)")
    model.add_argument("--lambdas", default="1,1,1",
                       help="SIFTER weights of X-Y, X-Z, Y-Z, and optionally a 4th of SimCSE's "
                            "X-X' dropout pair (default: %(default)s); views of zero-weight "
                            "pairs are not encoded")
    model.add_argument("--max-length", type=int, default=32,
                       help="training truncation in tokens (default: %(default)s)")
    opt = parser.add_argument_group("optimisation")
    opt.add_argument("--batch-size", type=int, default=64,
                     help="global batch, split over the workers (default: %(default)s)")
    opt.add_argument("--lr", type=float, default=1e-5, help="AdamW (default: %(default)s)")
    opt.add_argument("--weight-decay", type=float, default=0.0, help="(default: %(default)s)")
    opt.add_argument("--warmup-ratio", type=float, default=0.0,
                     help="share of the run's steps with a linear lr warm-up (default: "
                          "%(default)s)")
    opt.add_argument("--max-grad-norm", type=float, default=1.0,
                     help="clip the gradient norm; 0 turns clipping off (default: %(default)s)")
    opt.add_argument("--epochs", type=int, default=1, help="(default: %(default)s)")
    opt.add_argument("--max-steps", type=int, default=None,
                     help="train this many steps, fewer than the epochs hold; the lr "
                          "schedule then ends (decays to 0) at this step (default: all epochs)")
    opt.add_argument("--eval-steps", type=int, default=125,
                     help="STS-B dev, report and checkpoint every N steps (default: %(default)s)")
    opt.add_argument("--eval-batch-size", type=int, default=64, help="(default: %(default)s)")
    opt.add_argument("--seed", type=int, default=42, help="(default: %(default)s)")
    opt.add_argument("--log-steps", type=int, default=10, help="(default: %(default)s)")
    ray_group = parser.add_argument_group("Ray")
    ray_group.add_argument("--workers", type=int, default=1,
                           help="DDP workers (default: %(default)s)")
    ray_group.add_argument("--use-gpu", action="store_true", help="one GPU per worker")
    ray_group.add_argument("--cpus-per-worker", type=float, default=1.0,
                           help="CPUs per worker, also its torch threads (default: %(default)s)")
    ray_group.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "bf16"],
                           help="AMP on GPU (default: %(default)s)")
    ray_group.add_argument("--max-failures", type=int, default=3,
                           help="restarts from the last checkpoint (default: %(default)s)")
    ray_group.add_argument("--keep-checkpoints", type=int, default=1,
                           help="best checkpoints kept besides the latest (default: %(default)s)")
    ray_group.add_argument("--address", default=None,
                           help="Ray cluster (default: $RAY_ADDRESS, else a local one on "
                                "127.0.0.1)")
    ray_group.add_argument("--num-cpus", type=int, default=None,
                           help="logical CPUs of a local cluster (default: workers x "
                                "cpus-per-worker + 2)")
    ray_group.add_argument("--fail-at-step", type=int, default=None,
                           help="fault drill: the last worker dies once at this step")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    try:
        values = [float(w) for w in args.lambdas.split(",")]
        if len(values) not in (3, 4):
            raise ValueError(f"{len(values)} numbers")
        weights = SifterWeights(*values)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"--lambdas takes 3 or 4 numbers like 1,1,1, got {args.lambdas!r}: "
                         f"{exc}") from exc
    return TrainConfig(
        input=args.input, output=args.output, name=args.name, model=args.model,
        objective=args.objective, pooling=args.pooling, head=args.head, mlp=args.mlp,
        dropout=args.dropout, temperature=args.temperature, weights=weights,
        max_length=args.max_length, batch_size=args.batch_size, lr=args.lr,
        weight_decay=args.weight_decay, warmup_ratio=args.warmup_ratio,
        max_grad_norm=args.max_grad_norm or None, epochs=args.epochs, max_steps=args.max_steps,
        eval_steps=args.eval_steps, eval_batch_size=args.eval_batch_size, seed=args.seed,
        data_dir=args.data_dir, workers=args.workers, use_gpu=args.use_gpu,
        cpus_per_worker=args.cpus_per_worker, precision=args.precision,
        max_failures=args.max_failures, keep_checkpoints=args.keep_checkpoints,
        log_steps=args.log_steps, address=args.address, num_cpus=args.num_cpus,
        s3_endpoint=args.s3_endpoint, fail_at_step=args.fail_at_step)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    setup_logging(args.verbose)
    try:
        summary = run_training(config_from_args(args))
    except (FileNotFoundError, ValueError) as exc:
        raise SystemExit(f"error: {exc}") from exc
    print(json.dumps({k: summary[k] for k in ("rows", "steps", "initial_stsb_dev", "best_step",
                                              "best_stsb_dev", "exported", "seconds")}))
    return summary


if __name__ == "__main__":
    main()

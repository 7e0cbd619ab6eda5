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

import json
import logging

from sentray import cli
from sentray.train import run_training
from sentray.train_config import TrainConfig

logger = logging.getLogger("sentray.train")


def parse_config(argv: list[str] | None) -> tuple[TrainConfig, bool]:
    """(config, verbose): the flags are TrainConfig's fields (`--help` lists them)."""
    return cli.parse(TrainConfig, argv, description=__doc__, prog="jobs/train.py")


def main(argv: list[str] | None = None) -> dict:
    config, verbose = parse_config(argv)
    cli.setup_logging(verbose)
    try:
        summary = run_training(config)
    except (FileNotFoundError, ValueError) as exc:
        raise SystemExit(f"error: {exc}") from exc
    print(json.dumps({k: summary[k] for k in ("rows", "steps", "initial_stsb_dev", "best_step",
                                              "best_stsb_dev", "exported", "seconds")}))
    return summary


if __name__ == "__main__":
    main()

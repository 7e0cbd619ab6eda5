"""SIFTER augmentation on Ray Data: for every sentence X, Y (X + its backbone) and Z (X without
articles, conjunctions and pronouns), with the paper's corpus filter.

    python jobs/augment.py                                  # bundled sample, local Ray
    python jobs/augment.py --input corpus.txt --output out/aug --actors 2
    ray job submit --address http://127.0.0.1:8265 --working-dir . -- \\
        python jobs/augment.py --input s3://bucket/corpus/ --output s3://bucket/aug/

Output: OUTPUT/<file key>/part-*.parquet with id, text (X), backbone_text (Y), pruned_text (Z),
subject, relation, object, backbone_source (openie | dependency | none), source, row; rejected
rows with their reject_reason in REJECTS (default OUTPUT-rejects); OUTPUT/_summary.json. Every
input row is in exactly one of the two.
"""

from __future__ import annotations

import json
import logging

from sentray import cli
from sentray.augment import AugmentConfig, run_augmentation

logger = logging.getLogger("sentray.augment")


def parse_config(argv: list[str] | None) -> tuple[AugmentConfig, bool]:
    """(config, verbose): the flags are AugmentConfig's fields, its corpus and actor pool
    included (`--help` lists them)."""
    return cli.parse(AugmentConfig, argv, description=__doc__, prog="jobs/augment.py")


def main(argv: list[str] | None = None) -> dict:
    config, verbose = parse_config(argv)
    cli.setup_logging(verbose)
    logger.debug("config: %s", config)  # and OUTPUT/_config.yaml
    try:
        summary = run_augmentation(config)
    except (FileNotFoundError, ValueError) as exc:
        raise SystemExit(f"error: {exc}") from exc
    brief = {k: summary[k] for k in ("sources", "rows_in", "rows_out", "rows_rejected",
                                      "rejected_by_reason", "backbone_source",
                                      "sentences_per_second", "seconds")}
    print(json.dumps(brief))
    return summary


if __name__ == "__main__":
    main()

"""Embed a corpus with a sentence encoder on Ray Data and write Parquet.

    python jobs/embed.py                                   # bundled sample, packaged model, local Ray
    python jobs/embed.py --input s3://bucket/corpus/ --output s3://bucket/emb/ \\
        --model bert-base-uncased --pooling ditto --actors 8 --num-gpus 1 --precision fp16

Input: text files (one sentence per line) or Parquet, a file or a folder, local or s3://.
Output: OUTPUT/<file key>/part-*.parquet with id, embedding, status, source, row; and
OUTPUT/_summary.json. Every input row is in the output exactly once; rerunning into the same
output skips the input files already done.
"""

from __future__ import annotations

import argparse
import json
import logging

from sentray.cli import (
    add_corpus_args,
    add_encoder_args,
    add_pool_args,
    corpus_config_from_args,
    encoder_config_from_args,
    pool_config_from_args,
    setup_logging,
)
from sentray.embed import EmbedConfig, run_embedding

logger = logging.getLogger("sentray.embed")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_args(parser, default_output="out/embeddings")
    add_encoder_args(parser)
    add_pool_args(parser, actors=2, rows_per_batch=1024, gpus=True)
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def build_config(args: argparse.Namespace) -> EmbedConfig:
    encoder = encoder_config_from_args(args)
    if args.num_gpus > 0 and encoder.device == "auto":
        encoder = encoder_config_from_args(args, device="cuda")
    try:
        return EmbedConfig(corpus=corpus_config_from_args(args), output=args.output,
                           encoder=encoder, pool=pool_config_from_args(args))
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from exc


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    setup_logging(args.verbose)
    config = build_config(args)
    logger.info("config: %s", config)
    try:
        summary = run_embedding(config)
    except (FileNotFoundError, ValueError) as exc:
        raise SystemExit(f"error: {exc}") from exc
    brief = {k: summary[k] for k in ("sources", "rows_in", "rows_out", "status", "seconds")}
    print(json.dumps(brief))
    logger.info("embeddings in %s (summary: %s/_summary.json)", config.output, config.output)
    return summary


if __name__ == "__main__":
    main()

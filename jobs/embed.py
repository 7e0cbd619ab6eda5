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

import json
import logging

from sentray import cli
from sentray.embed import EmbedConfig, run_embedding

logger = logging.getLogger("sentray.embed")


def parse_config(argv: list[str] | None) -> tuple[EmbedConfig, bool]:
    """(config, verbose): the flags are EmbedConfig's fields, its corpus, encoder and actor pool
    included (`--help` lists them)."""
    return cli.parse(EmbedConfig, argv, description=__doc__, prog="jobs/embed.py")


def main(argv: list[str] | None = None) -> dict:
    config, verbose = parse_config(argv)
    cli.setup_logging(verbose)
    logger.debug("config: %s", config)  # and OUTPUT/_config.yaml
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

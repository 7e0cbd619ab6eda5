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
from importlib import resources

from sentray.cli import add_encoder_args, encoder_config_from_args, setup_logging
from sentray.corpus import CorpusConfig
from sentray.embed import EmbedConfig, run_embedding

logger = logging.getLogger("sentray.embed")


def sample_corpus() -> str:
    return str(resources.files("sentray") / "data" / "sample.txt")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    io = parser.add_argument_group("input and output")
    io.add_argument("--input", default=None,
                    help="file or folder (local or s3://), comma-separated for several "
                         "(default: the bundled 1,000-sentence Brown sample)")
    io.add_argument("--output", default="out/embeddings",
                    help="output folder, local or s3:// (default: %(default)s)")
    io.add_argument("--text-column", default="text", help="Parquet text column (default: text)")
    io.add_argument("--id-column", default=None,
                    help="Parquet id column (default: ids are <file>:<row>)")
    io.add_argument("--format", default="auto", choices=["auto", "parquet", "text"],
                    help="input format (default: by suffix: .parquet/.pq, .txt/.text)")
    io.add_argument("--s3-endpoint", default=None,
                    help="S3-compatible endpoint URL (default: $AWS_ENDPOINT_URL, else AWS)")
    add_encoder_args(parser)
    ray_group = parser.add_argument_group("ray")
    ray_group.add_argument("--actors", type=int, default=2,
                           help="embedding actors (default: %(default)s)")
    ray_group.add_argument("--num-gpus", type=float, default=0.0,
                           help="GPUs per actor (default: 0, CPU)")
    ray_group.add_argument("--cpus-per-actor", type=float, default=1.0,
                           help="CPUs per actor (default: %(default)s)")
    ray_group.add_argument("--rows-per-batch", type=int, default=1024,
                           help="rows per map_batches call, length-sorted inside (default: "
                                "%(default)s)")
    ray_group.add_argument("--address", default=None,
                           help="Ray cluster address (default: $RAY_ADDRESS, else a local "
                                "cluster bound to 127.0.0.1)")
    ray_group.add_argument("--num-cpus", type=int, default=None,
                           help="logical CPUs of a local cluster (default: actors x "
                                "cpus-per-actor + 2, so readers never starve)")
    parser.add_argument("-v", "--verbose", action="store_true")
    return parser.parse_args(argv)


def build_config(args: argparse.Namespace) -> EmbedConfig:
    encoder = encoder_config_from_args(args)
    if args.num_gpus > 0 and encoder.device == "auto":
        encoder = encoder_config_from_args(args, device="cuda")
    num_cpus = args.num_cpus or int(args.actors * args.cpus_per_actor + 2)
    try:
        corpus = CorpusConfig(input=args.input or sample_corpus(), text_column=args.text_column,
                              id_column=args.id_column, format=args.format,
                              s3_endpoint=args.s3_endpoint)
        return EmbedConfig(corpus=corpus, output=args.output, encoder=encoder,
                           actors=args.actors, num_gpus=args.num_gpus,
                           cpus_per_actor=args.cpus_per_actor, rows_per_batch=args.rows_per_batch,
                           address=args.address, num_cpus=num_cpus)
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

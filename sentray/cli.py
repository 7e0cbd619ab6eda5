"""Command-line pieces shared by the jobs: logging setup and the encoder flags."""

from __future__ import annotations

import argparse
import logging
import sys

from sentray import models
from sentray.corpus import CorpusConfig
from sentray.encoder import EncoderConfig
from sentray.models import DEFAULT_MODEL
from sentray.pipeline import ActorPoolConfig
from sentray.pooling import ALIASES, POOLINGS
from sentray.runtime import local_cpus


def setup_logging(verbose: bool = False) -> None:
    """Configure logging for a job process (never at import time: it would run on workers)."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO, stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True)


def add_encoder_args(parser: argparse.ArgumentParser, *, batch_size: int = 32) -> None:
    group = parser.add_argument_group("encoder")
    group.add_argument("--model", default=DEFAULT_MODEL,
                       help="Hugging Face id, local model directory, or packaged short name "
                            "(default: %(default)s, packaged, works offline)")
    group.add_argument("--pooling", default=None,
                       choices=sorted(POOLINGS) + sorted(ALIASES), metavar="POOLING",
                       help="one of: " + ", ".join(f"{k} ({v})" for k, v in POOLINGS.items())
                            + f"; aliases {ALIASES} (default: the model directory's own "
                            "(sentray.json, or sentence-transformers' 1_Pooling), else mean)")
    group.add_argument("--head", default=None,
                       help="Ditto head as L-H (0-based layer, head); default: the model's known "
                            "head (bert-base-uncased 0-9, roberta-base 0-4, ...)")
    group.add_argument("--max-length", type=int, default=None,
                       help="truncate to this many tokens (default: the model's own limit)")
    group.add_argument("--batch-size", type=int, default=batch_size,
                       help="sentences per forward pass (default: %(default)s; on GPU use "
                            "256 or more)")
    group.add_argument("--max-tokens-per-batch", type=int, default=None,
                       help="batch by a token budget instead of --batch-size: each forward pass "
                            "takes as many length-sorted sentences as fit in this many padded "
                            "tokens (default: off)")
    group.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N (default: auto)")
    group.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "bf16"],
                       help="autocast dtype on GPU (default: %(default)s)")
    group.add_argument("--ditto-impl", default="auto", choices=["auto", "fast", "eager"],
                       help="fast: one head recomputed on SDPA (BERT family); eager: attention "
                            "maps (default: %(default)s)")


def sample_corpus() -> str:
    """The bundled 1,000-sentence Brown sample (the jobs' default input)."""
    from importlib import resources

    return str(resources.files("sentray") / "data" / "sample.txt")


def add_corpus_args(parser: argparse.ArgumentParser, *, default_output: str) -> None:
    io = parser.add_argument_group("input and output")
    io.add_argument("--input", default=None,
                    help="file or folder (local or s3://), comma-separated for several "
                         "(default: the bundled 1,000-sentence Brown sample)")
    io.add_argument("--output", default=default_output,
                    help="output folder, local or s3:// (default: %(default)s)")
    io.add_argument("--text-column", default="text", help="Parquet text column (default: text)")
    io.add_argument("--id-column", default=None,
                    help="Parquet id column (default: ids are <file>:<row>)")
    io.add_argument("--format", default="auto", choices=["auto", "parquet", "text"],
                    help="input format (default: by suffix: .parquet/.pq, .txt/.text)")
    io.add_argument("--s3-endpoint", default=None,
                    help="S3-compatible endpoint URL (default: $AWS_ENDPOINT_URL, else AWS)")


def corpus_config_from_args(args: argparse.Namespace) -> CorpusConfig:
    return CorpusConfig(input=args.input or sample_corpus(), text_column=args.text_column,
                        id_column=args.id_column, format=args.format,
                        s3_endpoint=args.s3_endpoint)


def add_pool_args(parser: argparse.ArgumentParser, *, actors: int, rows_per_batch: int,
                  gpus: bool = False) -> None:
    group = parser.add_argument_group("ray")
    group.add_argument("--actors", type=int, default=actors,
                       help="actors in the pool (default: %(default)s)")
    if gpus:
        group.add_argument("--num-gpus", type=float, default=0.0,
                           help="GPUs per actor (default: 0, CPU)")
    group.add_argument("--cpus-per-actor", type=float, default=1.0,
                       help="CPUs per actor (default: %(default)s)")
    group.add_argument("--rows-per-batch", type=int, default=rows_per_batch,
                       help="rows per actor call (default: %(default)s)")
    group.add_argument("--address", default=None,
                       help="Ray cluster address (default: $RAY_ADDRESS, else a local cluster "
                            "bound to 127.0.0.1)")
    group.add_argument("--num-cpus", type=int, default=None,
                       help="logical CPUs of a local cluster (default: actors x cpus-per-actor "
                            "+ 2, so readers never starve)")


def pool_config_from_args(args: argparse.Namespace) -> ActorPoolConfig:
    """The actor pool from add_pool_args' flags; a local cluster gets actors x cpus-per-actor
    + 2 logical CPUs unless --num-cpus says otherwise."""
    num_cpus = args.num_cpus or local_cpus(args.actors, args.cpus_per_actor)
    return ActorPoolConfig(actors=args.actors, num_gpus=getattr(args, "num_gpus", 0.0),
                           cpus_per_actor=args.cpus_per_actor, rows_per_batch=args.rows_per_batch,
                           address=args.address, num_cpus=num_cpus)


def encoder_config_from_args(args: argparse.Namespace, **overrides) -> EncoderConfig:
    if args.pooling is None:  # the model's own, e.g. CLS for a model jobs/train.py exported
        args.pooling, own_head = models.model_pooling(args.model)
        args.head = args.head or own_head
    fields = dict(model=args.model, pooling=args.pooling, head=args.head,
                  max_length=args.max_length, batch_size=args.batch_size,
                  max_tokens_per_batch=args.max_tokens_per_batch, device=args.device,
                  precision=args.precision, ditto_impl=args.ditto_impl)
    fields.update(overrides)
    try:
        return EncoderConfig(**fields)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from exc

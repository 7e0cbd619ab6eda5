"""Pooling throughput on the packaged encoder, measured in one run:

- fast Ditto (one head's diagonal recomputed, model on SDPA) vs mean pooling (goal >= 0.95x);
- fast Ditto vs eager Ditto (every layer's attention maps materialised);
- the model's FLOP/s as a fraction of a plain fp32 matmul's FLOP/s on this machine.

    python bench/bench_pooling.py --sentences 4000
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

from sentray.encode.config import EncoderConfig
from sentray.encode.encoder import SentenceEncoder
from sentray.precision.plan import plan_encoder

DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/data/corpus/brown.txt"


def forward_flops(config, batch_shapes: list[tuple[int, int]]) -> float:
    """Multiply-adds x 2 of a BERT encoder over padded batches (B, T): the linear layers
    (QKV, output, FFN) and the two attention matmuls; embeddings, norms, softmax left out."""
    d, inner, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    total = 0.0
    for b, t in batch_shapes:
        linear = 2 * b * t * (4 * d * d + 2 * d * inner)
        attention = 2 * 2 * b * t * t * d
        total += layers * (linear + attention)
    return total


def matmul_flops_per_second(size: int = 1024, seconds: float = 3.0) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.mm(a, b)
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        torch.mm(a, b)
        runs += 1
    return 2 * size ** 3 * runs / (time.perf_counter() - start)


def shapes_of(encoder: SentenceEncoder, texts: list[str]) -> list[tuple[int, int]]:
    return [(len(b.positions), b.input_ids.shape[1])
            for b in encoder.length_sorted_batches(encoder.tokenize(texts))]


def time_round_robin(encoders: dict[str, SentenceEncoder], texts: list[str],
                     repeats: int) -> dict[str, float]:
    """Best sentences/s of each encoder; rounds interleave the encoders so that a slow spell of
    the machine hits all of them alike."""
    for encoder in encoders.values():
        encoder.encode(texts[:256])  # warm-up
    best = dict.fromkeys(encoders, float("inf"))
    for _ in range(repeats):
        for name, encoder in encoders.items():
            start = time.perf_counter()
            encoder.encode(texts)
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: len(texts) / seconds for name, seconds in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    parser.add_argument("--sentences", type=int, default=4000)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--head", default="0-9")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    texts = Path(args.corpus).read_text(encoding="utf-8").splitlines()[:args.sentences]
    common = dict(model=args.model, batch_size=args.batch_size, device="cpu")
    runs = {
        "mean": EncoderConfig(pooling="mean", **common),
        "ditto fast": EncoderConfig(pooling="ditto", head=args.head, ditto_impl="fast", **common),
        "ditto eager": EncoderConfig(pooling="ditto", head=args.head, ditto_impl="eager",
                                     **common),
    }
    encoders = {name: SentenceEncoder(plan_encoder(config)) for name, config in runs.items()}
    speed = time_round_robin(encoders, texts, args.repeats)
    flops = {name: forward_flops(encoder.model.config, shapes_of(encoder, texts))
             * speed[name] / len(texts) for name, encoder in encoders.items()}
    peak = matmul_flops_per_second()
    print(f"{args.model}, {len(texts)} Brown sentences, batch {args.batch_size}, "
          f"torch threads {torch.get_num_threads()}, best of {args.repeats}")
    print("| pooling | sentences/s | model GFLOP/s | fraction of fp32 matmul |")
    print("|---|---|---|---|")
    for name in runs:
        print(f"| {name} | {speed[name]:.0f} | {flops[name] / 1e9:.1f} | "
              f"{flops[name] / peak:.2f} |")
    print(f"fp32 matmul 1024x1024: {peak / 1e9:.1f} GFLOP/s")
    print(f"ratio fast Ditto / mean: {speed['ditto fast'] / speed['mean']:.3f}  (goal >= 0.95)")
    print(f"ratio fast Ditto / eager Ditto: {speed['ditto fast'] / speed['ditto eager']:.2f}x")


if __name__ == "__main__":
    main()

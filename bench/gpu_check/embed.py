"""Step 2: `SentenceEncoder` throughput for mean, fast Ditto and eager Ditto at each precision.

Two timings per (pooling, precision) on the first --sentences corpus lines: `encode` end to end
(tokenize, pad, forward, copy back: what a job sees) and the forward passes alone on batches
already on the device (what the GPU does). The forward time turns into real (unpadded) tokens/s
and model FLOP/s, and the FLOP/s into two fractions: of the data sheet's peak (how far from the
hardware) and of a square matrix product in the same precision timed in this run (how far from
what this stack reaches on this machine today)."""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from pathlib import Path

from bench.gpu_check.encoders import Encoders, best_seconds
from bench.gpu_check.environment import peak_tflops
from bench.gpu_check.repo_io import read_lines
from bench.gpu_check.report import StepFailed

logger = logging.getLogger(__name__)

POOLING_RUNS = (("mean", "auto"), ("ditto", "fast"), ("ditto", "eager"))  # (pooling, ditto_impl)

NOTE = ("forward: pre-tokenized, length-sorted padded batches already on the device, outputs "
        "left there, best of --repeats after a warm-up pass; encode: SentenceEncoder.encode end "
        "to end (tokenize, pad, forward, copy to host), once. FLOPs: bench_pooling.forward_flops "
        "over the padded batches (linear layers and the two attention matmuls). Peak: NVIDIA's "
        "data sheet; matmul: a square matrix product in the same precision measured in this run "
        "(8192 on GPU, 512 on CPU).")


def pooling_name(pooling: str, ditto_impl: str) -> str:
    return pooling if pooling != "ditto" else f"ditto {ditto_impl}"


def matmul_tflops(precision: str, device: str, seconds: float = 0.5) -> float:
    """TFLOP/s of a square matrix product in this precision on this device, measured now: the
    ceiling the model's FLOP/s is set against (as bench_pooling does with fp32 on CPU)."""
    import torch

    size = 8192 if device == "cuda" else 512
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    a, b, c = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(3))

    def products(count: int) -> None:
        for _ in range(count):
            torch.mm(a, b, out=c)

    one = best_seconds(lambda: products(1), 3, device)  # the first of these warms up
    runs = max(3, int(seconds / max(one, 1e-6)))  # about `seconds` of products, timed once
    return 2 * size ** 3 * runs / best_seconds(lambda: products(runs), 1, device) / 1e12


def embed_throughput(args: argparse.Namespace, encoders: Encoders, device: str) -> dict:
    """Step 2's record: one run per (precision, pooling); a failed run is recorded with its
    error and the others still run."""
    from bench.bench_pooling import forward_flops

    texts = read_lines(Path(args.corpus), args.sentences)
    runs, failures = [], []
    for precision in args.precisions:
        matmul = None  # measured once per precision, by the first run that gets that far
        for pooling, ditto_impl in POOLING_RUNS:
            name = pooling_name(pooling, ditto_impl)
            logger.info("embed: %s %s, %d sentences, batch %d", name, precision, len(texts),
                        args.batch_size)
            run = {"pooling": name, "precision": precision, "batch_size": args.batch_size,
                   "sentences": len(texts)}
            try:
                encoder = encoders.get(pooling, ditto_impl, precision)
                timing = time_encoder(encoder, texts, args.repeats, device)
                matmul = matmul or matmul_tflops(precision, device)
                flops = forward_flops(encoder.model.config, timing.shapes)
                run.update(throughput(encoder, timing, flops, matmul,
                                      peak_tflops(precision, args.peak_tflops)))
            except Exception as exc:  # one failed precision does not hide the others
                logger.exception("embed %s %s failed", name, precision)
                run["error"] = f"{type(exc).__name__}: {exc}"
                failures.append(f"{name} {precision}")
            runs.append(run)
    record = {"model": args.model, "head": args.head, "corpus": args.corpus, "runs": runs,
              "note": NOTE}
    if failures:
        raise StepFailed(f"failed: {', '.join(failures)}", record)
    return record


@dataclass
class EncoderTiming:
    """What one encoder did with the step's sentences: its batches and how long they took."""

    sentences: int
    shapes: list[tuple[int, int]]  # (B, T) of each padded forward pass, longest first
    real_tokens: int  # attention-mask ones: the tokens of the sentences, without padding
    forward_seconds: float  # every forward pass, on batches already on the device (best)
    encode_seconds: float  # SentenceEncoder.encode end to end, once


def time_encoder(encoder, texts: list[str], repeats: int, device: str) -> EncoderTiming:
    """Time the forward passes (best of `repeats` after a warm-up) and one whole `encode`."""
    import torch

    batches = list(encoder.length_sorted_batches(encoder.tokenize(texts)))
    on_device = [(b.input_ids.to(encoder.device), b.attention_mask.to(encoder.device))
                 for b in batches]

    def forward() -> None:
        with torch.inference_mode():
            for input_ids, attention_mask in on_device:
                encoder.embed_tokens(input_ids, attention_mask)  # (B, D), kept on the device

    forward()  # warm-up: kernels for every batch shape, allocator, autotuning
    forward_s = best_seconds(forward, repeats, device)
    # once: the same shapes as forward, plus tokenization, which dominates on a GPU
    encode_s = best_seconds(lambda: encoder.encode(texts), 1, device)
    return EncoderTiming(sentences=len(texts),
                         shapes=[tuple(b.input_ids.shape) for b in batches],
                         real_tokens=int(sum(int(b.attention_mask.sum()) for b in batches)),
                         forward_seconds=forward_s, encode_seconds=encode_s)


def throughput(encoder, timing: EncoderTiming, flops: float, matmul: float,
               peak: tuple[float | None, str]) -> dict:
    """The run's figures from its timing, its model FLOPs, the matmul TFLOP/s measured in this
    run and the data-sheet peak (TFLOP/s or None, and what that figure is)."""
    peak_value, basis = peak
    forward_s, encode_s = timing.forward_seconds, timing.encode_seconds
    tflops_per_s = flops / forward_s / 1e12
    return {
        "device": str(encoder.device), "fast_ditto": encoder.fast_ditto,
        "forward_passes": len(timing.shapes), "real_tokens": timing.real_tokens,
        "padded_tokens": sum(b * t for b, t in timing.shapes),
        "encode_seconds": round(encode_s, 4),
        "encode_sentences_per_s": round(timing.sentences / encode_s, 1),
        "forward_seconds": round(forward_s, 4),
        "forward_sentences_per_s": round(timing.sentences / forward_s, 1),
        "real_tokens_per_s": round(timing.real_tokens / forward_s, 1),
        "model_tflop": round(flops / 1e12, 4),
        "model_tflops_per_s": round(tflops_per_s, 4),
        "peak_tflops": peak_value, "peak_basis": basis,
        "fraction_of_peak": round(tflops_per_s / peak_value, 4) if peak_value else None,
        "matmul_tflops_per_s": round(matmul, 3),
        "fraction_of_matmul": round(tflops_per_s / matmul, 4)}

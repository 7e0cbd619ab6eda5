"""Step 3: peak GPU memory of one forward pass of fast vs eager Ditto.

Eager Ditto materialises every layer's (B, H, T, T) attention maps to read one head's diagonal;
fast Ditto runs the model on SDPA and recomputes only that diagonal. This step measures what
that saves on a synthetic (--memory-batch, --memory-tokens) batch with an all-ones mask, as
torch.cuda.max_memory_allocated over what was resident before the pass. On CPU there is no such
counter: the pass runs (the script is checked) and the memory figures are None."""

from __future__ import annotations

import argparse
import logging
import time

from bench.gpu_check.encoders import Encoders, synchronize
from bench.gpu_check.report import StepFailed

logger = logging.getLogger(__name__)

MIB = 2 ** 20

GPU_NOTE = ("peak_over_resident: torch.cuda.max_memory_allocated during one embed_tokens under "
            "inference_mode, minus what was allocated before (weights of every loaded encoder, "
            "the input)")
CPU_NOTE = ("CPU: not measured (torch's CPU allocator keeps no peak counter and tracemalloc does "
            "not see tensor memory); the forward pass ran")


def ditto_memory(args: argparse.Namespace, encoders: Encoders, device: str) -> dict:
    """Step 3's record: one run per (precision, fast/eager) and, per precision where both were
    measured, eager's peak over fast's."""
    from bench.bench_pooling import forward_flops

    batch, tokens = args.memory_batch, args.memory_tokens
    runs, failures = [], []
    for precision in args.precisions:
        for impl in ("fast", "eager"):
            run = {"ditto_impl": impl, "precision": precision, "batch": batch, "tokens": tokens}
            try:
                encoder = encoders.get("ditto", impl, precision)
                flops = forward_flops(encoder.model.config, [(batch, tokens)])
                run.update(measure_forward(encoder, synthetic_input_ids(encoder, batch, tokens),
                                           flops, device))
            except Exception as exc:
                logger.exception("memory %s %s failed", impl, precision)
                run["error"] = f"{type(exc).__name__}: {exc}"
                failures.append(f"{impl} {precision}")
            runs.append(run)
    record = {"model": args.model, "head": args.head, "runs": runs,
              "note": GPU_NOTE if device == "cuda" else CPU_NOTE}
    ratios = eager_over_fast(runs, args.precisions)
    if ratios:
        record["eager_over_fast"] = ratios
    if failures:
        raise StepFailed(f"failed: {', '.join(failures)}", record)
    return record


def synthetic_input_ids(encoder, batch: int, tokens: int):
    """(B, T) token ids above the special tokens, [CLS] first as a tokenizer would put it."""
    import torch

    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(1000, encoder.tokenizer.vocab_size, (batch, tokens),
                              generator=generator)
    input_ids[:, 0] = encoder.tokenizer.cls_token_id or 0
    return input_ids.to(encoder.device)


def measure_forward(encoder, input_ids, flops: float, device: str) -> dict:
    """Time one forward pass of `input_ids` (B, T) after a warm-up one and, on a GPU, its peak
    allocated memory: in total and over what was allocated just before it."""
    import torch

    attention_mask = torch.ones_like(input_ids)
    figures = {}
    with torch.inference_mode():
        encoder.embed_tokens(input_ids, attention_mask)  # warm-up
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()  # the warm-up's cached blocks would hide the peak
            before = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        started = time.perf_counter()
        embeddings = encoder.embed_tokens(input_ids, attention_mask)  # (B, D)
        synchronize(device)
        seconds = time.perf_counter() - started
        figures["forward_seconds"] = round(seconds, 4)
        figures["model_tflops_per_s"] = round(flops / seconds / 1e12, 4)
        figures["embedding_shape"] = list(embeddings.shape)
        del embeddings
    if device != "cuda":
        return {**figures, "peak_allocated_mib": None, "peak_over_resident_mib": None}
    peak = torch.cuda.max_memory_allocated()
    return {**figures, "peak_allocated_mib": round(peak / MIB, 1),
            "peak_over_resident_mib": round((peak - before) / MIB, 1),
            "resident_before_mib": round(before / MIB, 1)}


def eager_over_fast(runs: list[dict], precisions: list[str]) -> dict[str, float]:
    """Eager's peak over resident divided by fast's, per precision where both have one."""
    ratios = {}
    for precision in precisions:
        fast, eager = ({r["ditto_impl"]: r for r in runs if r["precision"] == precision}.get(i)
                       for i in ("fast", "eager"))
        if fast and eager and fast.get("peak_over_resident_mib") and eager.get(
                "peak_over_resident_mib"):
            ratios[precision] = round(eager["peak_over_resident_mib"]
                                      / fast["peak_over_resident_mib"], 2)
    return ratios

"""bench_embed.py's own runs and the machine's limit:

- `run_job`: `python jobs/embed.py` as a user runs it, end to end, each run in a cache of its own
  (`SENTRAY_CACHE_DIR` fresh): a user's first run, the probe and every conversion included;
- `candidate_rates`: sentray's encoder in this process on every runtime x precision of the
  probe's grid, at steady state over the same sentences (its conversions made beforehand,
  untimed), each one's vectors against torch fp32's: what `auto` chose among;
- `encoder_seconds`: the encoder of the plan a job ran, in this process (load + encode): what
  the job's rows cost without the job around them;
- `flops_per_token` (from the model's config) and `gemm_rates` (torch's 2048 x 2048 GEMM at fp32,
  bf16 and int8, on the same threads): the figures the FLOP-rate ratio is made of;
- `padding_table`: the padding of each way of cutting the sentences into sorted batches.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# the GEMM each precision's matrix products run in
GEMM_OF = {"fp32": "fp32", "bf16": "bf16", "fp16": "bf16", "int8": "int8"}


def run_job(corpus: Path, output: Path, flags: list[str], rows: int, env: dict) -> dict:
    """jobs/embed.py end to end in a fresh cache: seconds, the plan it ran (`encoder`), its
    timings; every id checked once."""
    import pyarrow.dataset as pads

    with tempfile.TemporaryDirectory(prefix="bench-embed-fresh-cache-") as fresh:
        start_wall, start = time.time(), time.perf_counter()
        job = subprocess.run([sys.executable, str(ROOT / "jobs" / "embed.py"), "--input",
                              str(corpus), "--output", str(output), *flags],
                             env={**os.environ, **env, "SENTRAY_CACHE_DIR": fresh},
                             capture_output=True, text=True)
        seconds = time.perf_counter() - start
    if job.returncode:
        raise SystemExit(f"jobs/embed.py failed ({job.returncode}):\n{job.stderr[-3000:]}")
    ids = pads.dataset(output, format="parquet").to_table(columns=["id"]).column("id")
    assert len(ids) == rows == len(set(ids.to_pylist())), "every id once"
    summary = json.loads((output / "_summary.json").read_text())
    timings = {**summary["timings"], "fixed": summary["timings"]["first_part_at"] - start_wall}
    return {"seconds": seconds, "encoder": summary["encoder"], "timings": timings}


def plan_of(model: str, runtime: str, precision: str):
    from sentray.encode.config import EncoderConfig
    from sentray.precision.plan import plan_encoder

    return plan_encoder(EncoderConfig(model=model, device="cpu", precision=precision,
                                      runtime=runtime))


def candidate_rates(model: str, sentences: list[str]) -> list[dict]:
    """Every runtime x precision of the probe's grid on `sentences`, in this process, at steady
    state (all of them once, untimed: every shape's first call, OpenVINO's compile for it; then
    all of them timed; warming only the first 256 had OpenVINO compile the other shapes inside
    the timed pass, 888/s for its bf16 where the warmed rate is 1,038/s): sentences/s, the
    largest difference of a component and the lowest cosine to torch fp32's vectors, and
    whether the runtime runs that precision as itself here (`runs_as_itself`: the probe times
    no other; OpenVINO's bf16 hint runs f32 on a CPU without bf16, the fp32 candidate again)."""
    from sentray.encode.encoder import SentenceEncoder
    from sentray.encode.runtimes import registry
    from sentray.precision.probe import cosines

    rows, reference = [], None
    for runtime, precision in registry.candidates():
        if not registry.available(runtime):
            continue
        encoder = SentenceEncoder(plan_of(model, runtime, precision))
        encoder.encode(sentences)
        start = time.perf_counter()
        vectors = encoder.encode(sentences)
        rate = len(sentences) / (time.perf_counter() - start)
        reference = vectors if reference is None else reference
        rows.append({"runtime": runtime, "precision": precision, "rate": rate,
                     "max_difference": float(np.abs(vectors - reference).max()),
                     "cosine_min": float(cosines(vectors, reference).min()),
                     "runs_as_asked": registry.runs_as_itself(runtime, precision)})
    return rows


def encoder_seconds(model: str, runtime: str, precision: str, sentences: list[str]) -> float:
    """Load + encode of the plan's encoder in this process (its artefact already made)."""
    from sentray.encode.encoder import SentenceEncoder

    plan = plan_of(model, runtime, precision)
    start = time.perf_counter()
    vectors = SentenceEncoder(plan).encode(sentences)
    assert len(vectors) == len(sentences)
    return time.perf_counter() - start


def flops_per_token(model: str, mean_tokens: float) -> float:
    """The encoder's FLOPs a token (2 per multiply-add): per layer the four attention
    projections (4 h^2), the feed-forward (2 h i) and the attention itself (2 T h: Q K^T and
    A V over T tokens), from its config."""
    from sentray.encode.model_loading import load_config
    from sentray.encode.model_lookup import resolve_model

    config = load_config(resolve_model(model))
    h, i, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    return 2.0 * layers * (4 * h * h + 2 * h * i + 2 * mean_tokens * h)


def gemm_rates(threads: int, size: int = 2048, seconds: float = 1.0) -> dict[str, float]:
    """torch's own GEMM of two size x size matrices, FLOP/s (int8: operations/s), on `threads`
    threads: fp32, bf16 and int8 (`torch._int_mm`), each repeated for about `seconds` after
    one untimed call. A precision torch emulates on this CPU (bf16 without AVX512-BF16 or AMX,
    int8 without VNNI: under a tenth of fp32) is timed on a 512 x 512 product instead, so
    that the figure costs seconds, not minutes."""
    import torch

    torch.set_num_threads(threads)
    rates = {}
    for name, make, multiply in (
            ("fp32", lambda n: torch.randn(n, n), torch.matmul),
            ("bf16", lambda n: torch.randn(n, n, dtype=torch.bfloat16), torch.matmul),
            ("int8", lambda n: torch.randint(-128, 127, (n, n), dtype=torch.int8),
             torch._int_mm)):
        n = size
        a, b = make(512), make(512)
        multiply(a, b)
        start = time.perf_counter()
        multiply(a, b)
        if name != "fp32" and 2.0 * 512 ** 3 / (time.perf_counter() - start) < rates["fp32"] / 10:
            n = 512  # emulated: the small product's rate is the figure
        a, b = make(n), make(n)
        multiply(a, b)
        repeats, start = 0, time.perf_counter()
        while True:
            multiply(a, b)
            repeats += 1
            if time.perf_counter() - start >= seconds:
                break
        rates[name] = 2.0 * n ** 3 * repeats / (time.perf_counter() - start)
    return rates


# Rows each actor call sorts by length (each call sorted on its own; the last size repeats): the
# embed job's Ray blocks before issue 54's third round and now, and its calls in its own process
CALLS = (("in blocks of 1,024 rows", (1024,)), ("in blocks of 4,096 rows", (4096,)),
         ("in calls of 1,024 then 32,768 rows (in process)", (1024, 32768)))


def padding_table(model: str, sentences: list[str], batch_size: int, budget: int) -> str:
    """Forward passes and padding of fixed batches of `batch_size` vs a token budget on the
    same sentences sorted by length all at once, and of fixed batches in the CALLS' blocks,
    each sorted on its own (the shapes the encoder would run; no model call)."""
    from sentray.encode.config import EncoderConfig
    from sentray.encode.encoder import SentenceEncoder
    from sentray.precision.plan import plan_encoder

    rows = ["| batching | forward passes | padded tokens | real tokens | padding |",
            "|---|---|---|---|---|"]
    fixed = EncoderConfig(model=model, device="cpu", batch_size=batch_size, runtime="torch")
    runs = [(f"fixed, {batch_size} sentences", fixed, (len(sentences),)),
            (f"token budget {budget}", EncoderConfig(
                model=model, device="cpu", max_tokens_per_batch=budget, runtime="torch"),
             (len(sentences),))]
    runs += [(f"fixed, {batch_size} sentences, {label}", fixed, calls) for label, calls in CALLS]
    for label, config, calls in runs:
        encoder = SentenceEncoder(plan_encoder(config))
        passes = padded = real = start = call = 0
        while start < len(sentences):
            block = calls[min(call, len(calls) - 1)]
            tokens = encoder.tokenize(sentences[start:start + block])
            start, call = start + block, call + 1
            for batch in encoder.length_sorted_batches(tokens):
                passes += 1
                padded += batch.input_ids.numel()
                real += int(batch.attention_mask.sum())
        rows.append(f"| {label} | {passes} | {padded} | {real} | {1 - real / padded:.2%} |")
    return "\n".join(rows)

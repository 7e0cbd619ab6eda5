"""Bulk embedding: `jobs/embed.py` end to end against its peers, on the same sentences with the
same model, at every corpus size of `--sizes`, in one run:

- sentence-transformers `encode` (torch, its default batch of 32 and its own length sorting)
  as a few-line script, timed from its launch to its exit like the job (interpreter start,
  imports and model load included; its own load + encode seconds recorded beside); and the
  same with bf16 weights where the CPU runs bf16 natively (AMX or AVX512-BF16: `--bf16-peer`
  times it elsewhere too), so that "fastest peer" is the fastest configuration a user could
  write in a few lines;
- sentence-transformers' ONNX backend (`backend="onnx"`, exported once before timing, load
  included), run by `--onnx-python`: an interpreter with `optimum-onnx[onnxruntime]`, which pins
  transformers < 4.58 and so cannot share sentray's environment (see README, Benchmarks);
- sentray's `SentenceEncoder.encode` in this process (the job's compute without Ray), and the
  same with a token budget (`--max-tokens-per-batch`), at the smallest size;
- `python jobs/embed.py` as a subprocess, as a user runs it (an input of at most
  `--in-process-rows` rows runs in its own process), and again on its Ray actor pool
  (`--in-process-rows 0`: Ray start, actor start included); reading and writing Parquet
  included; every id checked once. Each prints where its first seconds went (`timings.
  since_launch` of its summary: Ray ready, actor ready, first rows embedded, first part).

For each run: seconds, sentences/s, padding (padded tokens that are not real tokens, for the
batches that run would form) and the ratio of throughput to the fastest peer.

    python bench/bench_embed.py --sizes 10000,50000 --onnx-python /path/to/venv/bin/python
    python bench/bench_embed.py --sizes 10000 --padding-only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.dataset as pads

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared/data/corpus/brown.txt"
OFFLINE_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0",
               "HF_HUB_OFFLINE": "1"}

# Run by --onnx-python: export once (not timed), then load + encode (timed), as a user would.
ONNX_PEER = """
import sys, time, tempfile
from sentence_transformers import SentenceTransformer
model_path, corpus, batch_size = sys.argv[1], sys.argv[2], int(sys.argv[3])
sentences = open(corpus, encoding="utf-8").read().split("\\n")[:-1]
with tempfile.TemporaryDirectory() as exported:
    SentenceTransformer(model_path, backend="onnx", device="cpu").save_pretrained(exported)
    start = time.perf_counter()
    model = SentenceTransformer(exported, backend="onnx", device="cpu")
    vectors = model.encode(sentences, batch_size=batch_size)
    assert vectors.shape[0] == len(sentences)
    print(time.perf_counter() - start)
"""


def padding(batches: list[list[int]]) -> float:
    """Share of padded tokens in batches of token-id lists (each batch padded to its longest)."""
    padded = sum(len(batch) * max(batch) for batch in batches)
    return 1 - sum(sum(batch) for batch in batches) / padded


def peer_padding(lengths: np.ndarray, texts: list[str], batch_size: int) -> float:
    """sentence-transformers sorts the whole input by character length (longest first)."""
    order = np.argsort([-len(t) for t in texts], kind="stable")
    return padding([list(lengths[order[i:i + batch_size]])
                    for i in range(0, len(order), batch_size)])


def encoder_padding(encoder, token_ids: list[list[int]], block_rows: int) -> float:
    """The encoder's batches, sorted within blocks of `block_rows` (the job's actor calls)."""
    batches = []
    for start in range(0, len(token_ids), block_rows):
        for batch in encoder.length_sorted_batches(token_ids[start:start + block_rows]):
            batches.append(batch.attention_mask.sum(1).tolist())
    return padding(batches)


# The peer as a user runs it: a few lines of sentence-transformers in a script, timed from the
# command's launch to its exit (interpreter start and imports included, as they are in the
# job's figure); it prints its own load + encode seconds, which the bench also records.
ST_PEER = """
import sys, time
import torch
from sentence_transformers import SentenceTransformer
model_path, corpus, batch_size, precision = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
sentences = open(corpus, encoding="utf-8").read().split("\\n")[:-1]
started = time.perf_counter()
model = SentenceTransformer(model_path, device="cpu", model_kwargs={
    "torch_dtype": torch.bfloat16} if precision == "bf16" else None)
vectors = model.encode(sentences, batch_size=batch_size)
assert vectors.shape[0] == len(sentences)
print(time.perf_counter() - started)
"""


def run_peer(model_path: str, corpus: Path, batch_size: int,
             bf16: bool = False) -> tuple[float, float]:
    """sentence-transformers' `encode` as a script: (seconds from launch to exit, seconds of
    its model load + encode). `bf16`: its weights in bfloat16 (`model_kwargs={"torch_dtype":
    torch.bfloat16}`), the fastest CPU configuration a user could write in a few lines where
    the CPU runs bf16 natively."""
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", ST_PEER, model_path, str(corpus),
                             str(batch_size), "bf16" if bf16 else "fp32"], check=True,
                            capture_output=True, text=True, env={**os.environ, **OFFLINE_ENV})
    return time.perf_counter() - start, float(result.stdout.strip().splitlines()[-1])


def native_bf16() -> bool:
    from sentray.encode.precision import cpu_bf16_native

    return cpu_bf16_native()


def cpu_line() -> str:
    """Which CPU this ran on, and whether it runs bf16 natively."""
    from sentray.encode.precision import BF16_CPU_FLAGS, cpu_bf16_features, cpu_info

    features = cpu_bf16_features()
    bf16 = (f"native bf16 ({', '.join(features)})" if features
            else f"bf16 emulated (no {' or '.join(BF16_CPU_FLAGS)})")
    return f"CPU: {cpu_info()['name']}, {os.cpu_count()} CPUs, {bf16}"


def run_onnx_peer(python: str, model_path: str, corpus: Path, batch_size: int) -> float:
    result = subprocess.run([python, "-c", ONNX_PEER, model_path, str(corpus), str(batch_size)],
                            check=True, capture_output=True, text=True,
                            env={**os.environ, **OFFLINE_ENV})
    return float(result.stdout.strip().splitlines()[-1])


def run_in_process(model: str, sentences: list[str], **config) -> float:
    from sentray.encode.config import EncoderConfig
    from sentray.encode.encoder import SentenceEncoder

    start = time.perf_counter()
    vectors = SentenceEncoder(EncoderConfig(model=model, device="cpu", **config)).encode(
        sentences)
    assert vectors.shape[0] == len(sentences)
    return time.perf_counter() - start


def run_job(corpus: Path, output: Path, extra: list[str], rows: int) -> tuple[float, dict]:
    """(seconds, timings) of jobs/embed.py; timings gain `fixed`: launch to first part."""
    start_wall, start = time.time(), time.perf_counter()
    job = subprocess.run([sys.executable, str(ROOT / "jobs" / "embed.py"), "--input",
                          str(corpus), "--output", str(output), *extra],
                         env={**os.environ, **OFFLINE_ENV}, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if job.returncode:
        raise SystemExit(f"jobs/embed.py failed ({job.returncode}):\n{job.stderr[-3000:]}")
    ids = pads.dataset(output, format="parquet").to_table(columns=["id"]).column("id")
    assert len(ids) == rows == len(set(ids.to_pylist())), "every id once"
    timings = json.loads((output / "_summary.json").read_text())["timings"]
    timings["fixed"] = timings["first_part_at"] - start_wall
    return seconds, timings


def padding_table(model: str, sentences: list[str], batch_size: int, budget: int) -> str:
    """Forward passes and padding of fixed batches of `batch_size` vs a token budget on the
    same sentences (the shapes the encoder would run; no model call)."""
    from sentray.encode.config import EncoderConfig
    from sentray.encode.encoder import SentenceEncoder

    rows = ["| batching | forward passes | padded tokens | real tokens | padding |",
            "|---|---|---|---|---|"]
    for label, config in ((f"fixed, {batch_size} sentences", EncoderConfig(
            model=model, device="cpu", batch_size=batch_size)),
                          (f"token budget {budget}", EncoderConfig(
            model=model, device="cpu", max_tokens_per_batch=budget))):
        encoder = SentenceEncoder(config)
        passes = padded = real = 0
        for batch in encoder.length_sorted_batches(encoder.tokenize(sentences)):
            passes += 1
            padded += batch.input_ids.numel()
            real += int(batch.attention_mask.sum())
        rows.append(f"| {label} | {passes} | {padded} | {real} | {1 - real / padded:.2%} |")
    return "\n".join(rows)


def measure(size: int, all_sentences: list[str], args, smallest: bool) -> list[dict]:
    from sentray.encode.config import EncoderConfig
    from sentray.encode.encoder import SentenceEncoder
    from sentray.encode.model_loading import resolve_model

    sentences = all_sentences[:size]
    model_path = resolve_model(args.model).path
    encoder = SentenceEncoder(EncoderConfig(model=args.model, device="cpu"))
    token_ids = encoder.tokenize(sentences)
    lengths = np.array([len(ids) for ids in token_ids])
    whole = encoder_padding(encoder, token_ids, len(token_ids))
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "sentences.txt"
        corpus.write_text("\n".join(sentences) + "\n", encoding="utf-8")
        job_args = [*args.job_args.split(), "--precision", args.precision]
        seconds, timings = run_job(corpus, Path(tmp) / "out", job_args, size)
        runs.append({"run": f"jobs/embed.py {' '.join(job_args)}", "seconds": seconds,
                     "peer": False,
                     "padding": encoder_padding(encoder, token_ids, timings["rows_per_block"]),
                     "timings": timings})
        if args.ray_path:  # the same job on its Ray actor pool, however small the input
            ray_args = [*job_args, "--in-process-rows", "0"]
            seconds, ray_timings = run_job(corpus, Path(tmp) / "out-ray", ray_args, size)
            runs.append({"run": f"jobs/embed.py {' '.join(ray_args)}", "seconds": seconds,
                         "peer": False, "timings": ray_timings,
                         "padding": encoder_padding(encoder, token_ids,
                                                    ray_timings["rows_per_block"])})
        if args.onnx_python:
            runs.append({"run": f"sentence-transformers ONNX (batch {args.peer_batch_size})",
                         "seconds": run_onnx_peer(args.onnx_python, model_path, corpus,
                                                  args.peer_batch_size),
                         "peer": True,
                         "padding": peer_padding(lengths, sentences, args.peer_batch_size)})
        for bf16 in (False, True):
            if bf16 and not (native_bf16() or args.bf16_peer):
                continue  # emulated bf16 is ~6x slower: no peer worth the wait
            seconds, inside = run_peer(model_path, corpus, args.peer_batch_size, bf16=bf16)
            runs.append({"run": f"sentence-transformers torch{' bf16' if bf16 else ''} "
                                f"(batch {args.peer_batch_size}), a script",
                         "seconds": seconds, "load_and_encode_seconds": inside, "peer": True,
                         "padding": peer_padding(lengths, sentences, args.peer_batch_size)})
    runs.append({"run": f"sentray encoder in-process, batch 32, {args.precision}",
                 "peer": False, "alone": True, "padding": whole,
                 "seconds": run_in_process(args.model, sentences, precision=args.precision)})
    if smallest:
        budget = args.max_tokens_per_batch
        budgeted = SentenceEncoder(EncoderConfig(model=args.model, device="cpu",
                                                 max_tokens_per_batch=budget))
        runs.append({"run": f"sentray encoder in-process, token budget {budget}", "peer": False,
                     "seconds": run_in_process(args.model, sentences, precision=args.precision,
                                               max_tokens_per_batch=budget),
                     "padding": encoder_padding(budgeted, token_ids, len(token_ids))})
    for run in runs:
        run["rate"] = size / run["seconds"]
    return runs


def launch_line(timings: dict, seconds: float) -> str:
    """The job's first moments (its summary's `timings.since_launch`) and its end."""
    moments = timings.get("since_launch") or {}
    names = {"ray_ready": "Ray ready", "actor_process": "first actor process",
             "actor_ready": "first actor ready (model loaded)",
             "first_row": "first rows embedded (goal <= 8)", "first_part": "first part written"}
    told = [f"{label} {moments[key]:.1f}" for key, label in names.items()
            if moments.get(key) is not None]
    return " | ".join([*told, f"done {seconds:.1f} (Ray stopped, summary written)"])


def report(size: int, runs: list[dict]) -> str:
    best = max((r for r in runs if r["peer"]), key=lambda r: r["rate"])
    lines = [f"{size} Brown sentences, {os.cpu_count()} CPUs; ratio = throughput / the fastest "
             f"peer's ({best['run']})", "",
             "| run | seconds | sentences/s | padding | ratio |", "|---|---|---|---|---|"]
    for run in runs:
        lines.append(f"| {run['run']} | {run['seconds']:.1f} | {run['rate']:.0f} | "
                     f"{run['padding']:.2%} | {run['rate'] / best['rate']:.2f}x |")
    job = runs[0]
    timings = job["timings"]
    after = job["seconds"] - timings["fixed"]
    lines.append("")
    for run in runs:
        if "timings" in run:
            lines.append(f"{run['run']}, seconds since launch: "
                         f"{launch_line(run['timings'], run['seconds'])}")
    if not timings.get("in_process"):  # in its own process one block can be most of the input
        lines.append(f"jobs/embed.py after its first part: {after:.1f} s, about "
                     f"{(size - timings['rows_per_block']) / max(after, 1e-9):.0f} sentences/s "
                     f"for the remaining rows (blocks of {timings['rows_per_block']} rows)")
    peer_fp32 = next(r for r in runs if r["peer"] and r["run"].startswith(
        "sentence-transformers torch (batch"))
    alone = next(r for r in runs if r.get("alone"))
    goal = 1.0 if size >= 50_000 else 0.9
    lines += [f"jobs/embed.py / fastest peer: {job['rate'] / best['rate']:.2f}x "
              f"(goal >= {goal} at {size} rows)",
              f"jobs/embed.py / sentence-transformers fp32: {job['rate'] / peer_fp32['rate']:.2f}x",
              f"jobs/embed.py / sentray encoder in-process (what Ray costs; goal >= 0.9): "
              f"{job['rate'] / alone['rate']:.2f}x"]
    for run in runs[1:]:
        if "timings" in run:
            lines.append(f"{run['run']} / fastest peer: {run['rate'] / best['rate']:.2f}x; / "
                         f"sentray encoder in-process: {run['rate'] / alone['rate']:.2f}x")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    parser.add_argument("--sizes", default="10000,50000",
                        help="corpus sizes, comma-separated (default: %(default)s)")
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--peer-batch-size", type=int, default=32,
                        help="sentence-transformers' batch size (default: its own default, 32)")
    parser.add_argument("--onnx-python", default=os.environ.get("SENTRAY_ONNX_PYTHON"),
                        help="a Python with sentence-transformers and optimum-onnx[onnxruntime] "
                             "for the ONNX peer (default: $SENTRAY_ONNX_PYTHON; none: no row)")
    parser.add_argument("--job-args", default="--actors 2",
                        help="extra flags for jobs/embed.py (default: %(default)s)")
    parser.add_argument("--precision", default="auto",
                        help="the job's and the in-process encoder's --precision (default: "
                             "%(default)s: bf16 where the CPU runs it natively, else fp32)")
    parser.add_argument("--max-tokens-per-batch", type=int, default=2048,
                        help="the token budget compared with fixed batches of 32 (default: "
                             "%(default)s = 32 x 64 tokens)")
    parser.add_argument("--no-ray-path", dest="ray_path", action="store_false",
                        help="leave out the job's run on its Ray actor pool (--in-process-rows "
                             "0; default: run it too, beside the job's own choice)")
    parser.add_argument("--bf16-peer", action="store_true",
                        help="time sentence-transformers in bf16 even where the CPU emulates "
                             "it (default: only where native)")
    parser.add_argument("--padding-only", action="store_true",
                        help="print the batching table only (seconds, no model run)")
    parser.add_argument("--json", default=None, help="also write every figure to this file")
    args = parser.parse_args()
    os.environ.update(OFFLINE_ENV)
    sizes = [int(s) for s in args.sizes.split(",")]
    sentences = Path(args.corpus).read_text(encoding="utf-8").splitlines()[:max(sizes)]
    if len(sentences) < max(sizes):
        raise SystemExit(f"{args.corpus} has {len(sentences)} lines, fewer than {max(sizes)}")
    print(cpu_line())
    print(padding_table(args.model, sentences[:sizes[0]], 32, args.max_tokens_per_batch))
    if args.padding_only:
        return
    results = {"cpu": cpu_line(), "torch_threads": __import__("torch").get_num_threads(),
               "precision": args.precision, "job_args": args.job_args, "sizes": {}}
    for size in sizes:
        runs = measure(size, sentences, args, smallest=size == min(sizes))
        results["sizes"][size] = runs
        print()
        print(report(size, runs), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

"""Bulk embedding: `jobs/embed.py` end to end against its peers, on the same sentences with the
same model, at every corpus size of `--sizes`, in one run:

- the peers (bench/embed_peers.py), few-line sentence-transformers scripts, each timed from its
  launch to its exit like the job (interpreter start, imports and model load included; its own
  load + encode seconds recorded beside), at its default batch of 32 and its own length sorting:
  `encode` on torch fp32, and bf16 weights where the CPU runs bf16 natively (AMX or AVX512-BF16:
  `--bf16-peer` times it elsewhere too); the ONNX backend in fp32 and dynamically quantized to
  int8 (`--onnx-python`); the OpenVINO backend statically quantized to int8 (`--ov-python`). The
  exported ones are exported once, untimed (seconds printed); their pins clash with sentray's,
  so each runs in its own venv (bench/peer_venvs.sh builds both), and one whose interpreter is
  not given is skipped with a note. "Fastest peer" is the fastest of these configurations;
- sentray's `SentenceEncoder.encode` in this process (the job's compute without Ray), and the
  same with a token budget (`--max-tokens-per-batch`), at the smallest size;
- `python jobs/embed.py` as a subprocess, as a user runs it (an input of at most
  `--in-process-rows` rows runs in its own process), and again on its Ray actor pool
  (`--in-process-rows 0`: Ray start, actor start included); reading and writing Parquet
  included; every id checked once. Each prints where its first seconds went (`timings.
  since_launch` of its summary: Ray ready, actor ready, first rows embedded, first part).

For each run: seconds, sentences/s, padding (padded tokens that are not real tokens, for the
batches that run would form), STS-B test Spearman x 100 (each peer's in its own interpreter,
sentray's by its encoder at the run's precision; "–" where that fails) and the ratio of
throughput to the fastest peer; then the goals, met or not.

    bash bench/peer_venvs.sh    # once: out/peer-venvs/onnx and out/peer-venvs/openvino
    python bench/bench_embed.py --sizes 10000,50000 --onnx-python out/peer-venvs/onnx/bin/python \
        --ov-python out/peer-venvs/openvino/bin/python
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

# embed_peers imports because Python puts a script's folder first on sys.path
# (`python bench/bench_embed.py` is the way in).
import embed_peers
import numpy as np
import pyarrow.dataset as pads

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared/data/corpus/brown.txt"

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


def native_bf16() -> bool:
    from sentray.kit.cpu import cpu_bf16_native

    return cpu_bf16_native()


def cpu_line() -> str:
    """Which CPU this ran on, and whether it runs bf16 natively."""
    from sentray.kit.cpu import BF16_CPU_FLAGS, cpu_bf16_features, cpu_info

    features = cpu_bf16_features()
    bf16 = (f"native bf16 ({', '.join(features)})" if features
            else f"bf16 emulated (no {' or '.join(BF16_CPU_FLAGS)})")
    return f"CPU: {cpu_info()['name']}, {os.cpu_count()} CPUs, {bf16}"


def run_in_process(model: str, sentences: list[str], **config) -> float:
    from sentray.encode.config import EncoderConfig
    from sentray.encode.encoder import SentenceEncoder
    from sentray.precision.plan import plan_encoder

    start = time.perf_counter()
    encoder = SentenceEncoder(plan_encoder(EncoderConfig(model=model, device="cpu", **config)))
    vectors = encoder.encode(sentences)
    assert vectors.shape[0] == len(sentences)
    return time.perf_counter() - start, encoder.precision


def run_job(corpus: Path, output: Path, extra: list[str], rows: int) -> tuple[float, dict]:
    """(seconds, timings) of jobs/embed.py; timings gain `fixed`: launch to first part."""
    start_wall, start = time.time(), time.perf_counter()
    job = subprocess.run([sys.executable, str(ROOT / "jobs" / "embed.py"), "--input",
                          str(corpus), "--output", str(output), *extra],
                         env={**os.environ, **embed_peers.OFFLINE_ENV}, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if job.returncode:
        raise SystemExit(f"jobs/embed.py failed ({job.returncode}):\n{job.stderr[-3000:]}")
    ids = pads.dataset(output, format="parquet").to_table(columns=["id"]).column("id")
    assert len(ids) == rows == len(set(ids.to_pylist())), "every id once"
    summary = json.loads((output / "_summary.json").read_text())
    timings = {**summary["timings"], "precision": summary["settings"]["precision"]}
    timings["fixed"] = timings["first_part_at"] - start_wall
    return seconds, timings


def padding_table(model: str, sentences: list[str], batch_size: int, budget: int) -> str:
    """Forward passes and padding of fixed batches of `batch_size` vs a token budget on the
    same sentences (the shapes the encoder would run; no model call)."""
    from sentray.encode.config import EncoderConfig
    from sentray.encode.encoder import SentenceEncoder
    from sentray.precision.plan import plan_encoder

    rows = ["| batching | forward passes | padded tokens | real tokens | padding |",
            "|---|---|---|---|---|"]
    for label, config in ((f"fixed, {batch_size} sentences", EncoderConfig(
            model=model, device="cpu", batch_size=batch_size)),
                          (f"token budget {budget}", EncoderConfig(
            model=model, device="cpu", max_tokens_per_batch=budget))):
        encoder = SentenceEncoder(plan_encoder(config))
        passes = padded = real = 0
        for batch in encoder.length_sorted_batches(encoder.tokenize(sentences)):
            passes += 1
            padded += batch.input_ids.numel()
            real += int(batch.attention_mask.sum())
        rows.append(f"| {label} | {passes} | {padded} | {real} | {1 - real / padded:.2%} |")
    return "\n".join(rows)


def measure(size: int, all_sentences: list[str], args, peers: list, stsb,
            smallest: bool) -> list[dict]:
    """Every run at `size`; `stsb(precision)`: sentray's STS-B at the precision a run chose."""
    from sentray.encode.config import EncoderConfig
    from sentray.encode.encoder import SentenceEncoder
    from sentray.encode.model_loading import resolve_model
    from sentray.precision.plan import plan_encoder

    sentences = all_sentences[:size]
    model_path = resolve_model(args.model).path
    encoder = SentenceEncoder(plan_encoder(EncoderConfig(model=args.model, device="cpu")))
    token_ids = encoder.tokenize(sentences)
    lengths = np.array([len(ids) for ids in token_ids])
    whole = encoder_padding(encoder, token_ids, len(token_ids))
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "sentences.txt"
        corpus.write_text("\n".join(sentences) + "\n", encoding="utf-8")
        job_args = [*args.job_args.split(), "--precision", args.precision]
        seconds, timings = run_job(corpus, Path(tmp) / "out", job_args, size)
        runs.append({"run": f"jobs/embed.py {' '.join(job_args)} (ran {timings['precision']})",
                     "seconds": seconds, "peer": False, "stsb": stsb(timings["precision"]),
                     "padding": encoder_padding(encoder, token_ids, timings["rows_per_block"]),
                     "timings": timings})
        if args.ray_path:  # the same job on its Ray actor pool, however small the input
            ray_args = [*job_args, "--in-process-rows", "0"]
            seconds, ray_timings = run_job(corpus, Path(tmp) / "out-ray", ray_args, size)
            runs.append({"run": f"jobs/embed.py {' '.join(ray_args)} (ran "
                                f"{ray_timings['precision']})", "seconds": seconds,
                         "peer": False, "timings": ray_timings, "ray": True,
                         "stsb": stsb(ray_timings["precision"]),
                         "padding": encoder_padding(encoder, token_ids,
                                                    ray_timings["rows_per_block"])})
        peer_pad = peer_padding(lengths, sentences, args.peer_batch_size)
        runs += [{**peer.row(model_path, corpus, args.peer_batch_size), "padding": peer_pad}
                 for peer in peers]  # each exported once (not timed) at the first size
    seconds, ran = run_in_process(args.model, sentences, precision=args.precision)
    runs.append({"run": f"sentray encoder in-process, batch 32, {args.precision} (ran {ran})",
                 "peer": False, "alone": True, "padding": whole, "stsb": stsb(ran),
                 "seconds": seconds, "load_and_encode_seconds": seconds})
    if smallest:
        budget = args.max_tokens_per_batch
        budgeted = SentenceEncoder(plan_encoder(EncoderConfig(
            model=args.model, device="cpu", max_tokens_per_batch=budget)))
        runs.append({"run": f"sentray encoder in-process, token budget {budget}", "peer": False,
                     "seconds": run_in_process(args.model, sentences, precision=args.precision,
                                               max_tokens_per_batch=budget)[0],
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


def goal(text: str, value: float, least: float, sizes: tuple[int, ...], size: int) -> str:
    """One goal's line: the ratio, the goal, and whether this run met it (at the goal's sizes)."""
    where = f" at {' and '.join(f'{s:,}' for s in sizes)} rows" if sizes else ""
    verdict = ("met" if value >= least else "NOT met") if not sizes or size in sizes else \
        f"not judged at {size:,}"
    return f"goal: {text}: {value:.2f}x (goal >= {least}{where}): {verdict}"


def goal_lines(size: int, runs: list[dict]) -> list[str]:
    peers = [r for r in runs if r["peer"]]
    best = max(peers, key=lambda r: r["rate"])
    encode = min(peers, key=lambda r: r["load_and_encode_seconds"])
    job, alone = runs[0], next(r for r in runs if r.get("alone"))
    lines = [goal(f"{job['run']} / fastest peer", job["rate"] / best["rate"], 1.0,
                  (10_000, 50_000), size)]
    lines += [goal(f"{run['run']} (its Ray pool) / fastest peer", run["rate"] / best["rate"],
                   0.9, (50_000,), size) for run in runs if run.get("ray")]
    lines += [goal(f"sentray encoder in-process / the fastest peer's load + encode "
                   f"({encode['run']}, {encode['load_and_encode_seconds']:.1f} s)",
                   encode["load_and_encode_seconds"] / alone["seconds"], 1.2, (), size),
              goal(f"{job['run']} / its own encoder in-process (what Ray and Parquet cost)",
                   job["rate"] / alone["rate"], 0.9, (50_000,), size)]
    return lines


def report(size: int, runs: list[dict]) -> str:
    best = max((r for r in runs if r["peer"]), key=lambda r: r["rate"])
    lines = [f"{size} Brown sentences, {os.cpu_count()} CPUs; ratio = throughput / the fastest "
             f"peer's ({best['run']}); STS-B = STS-B test Spearman x 100", "",
             "| run | seconds | load + encode s | sentences/s | padding | STS-B | ratio |",
             "|---|---|---|---|---|---|---|"]
    for run in runs:
        inside, stsb = run.get("load_and_encode_seconds"), run.get("stsb")
        lines.append(f"| {run['run']} | {run['seconds']:.1f} | "
                     f"{'–' if inside is None else f'{inside:.1f}'} | {run['rate']:.0f} | "
                     f"{run['padding']:.2%} | {'–' if stsb is None else f'{stsb:.2f}'} | "
                     f"{run['rate'] / best['rate']:.2f}x |")
    job = runs[0]
    timings = job["timings"]
    after = job["seconds"] - timings["fixed"]
    exports = [f"{r['run']} {r['export_seconds']:.1f} s" for r in runs
               if r.get("export_seconds") is not None]
    lines += ["", f"one-time exports (not in the seconds above): {'; '.join(exports)}"] \
        if exports else [""]
    for run in runs:
        if "timings" in run:
            lines.append(f"{run['run']}, seconds since launch: "
                         f"{launch_line(run['timings'], run['seconds'])}")
    if not timings.get("in_process"):  # in its own process one block can be most of the input
        lines.append(f"jobs/embed.py after its first part: {after:.1f} s, about "
                     f"{(size - timings['rows_per_block']) / max(after, 1e-9):.0f} sentences/s "
                     f"for the remaining rows (blocks of {timings['rows_per_block']} rows)")
    fp32 = next(r for r in runs if r.get("kind") == "torch")
    lines.append(f"jobs/embed.py / sentence-transformers torch fp32: "
                 f"{job['rate'] / fp32['rate']:.2f}x")
    return "\n".join(lines + goal_lines(size, runs))


def parse_args() -> argparse.Namespace:
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
                             "for the ONNX fp32 and int8 peers (default: $SENTRAY_ONNX_PYTHON; "
                             "none: skipped)")
    parser.add_argument("--ov-python", default=os.environ.get("SENTRAY_OV_PYTHON"),
                        help="a Python with sentence-transformers and optimum-intel[openvino,"
                             "nncf] for the OpenVINO int8 peer (default: $SENTRAY_OV_PYTHON; "
                             "none: skipped)")
    parser.add_argument("--onnx-int8-config", default="auto",
                        choices=["auto", "avx512_vnni", "avx512", "avx2", "arm64"],
                        help="export_dynamic_quantized_onnx_model's config (default: %(default)s:"
                             " avx512_vnni where the CPU has VNNI, else avx512, avx2 or arm64)")
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
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    os.environ.update(embed_peers.OFFLINE_ENV)
    # a cache of its own: the first job run pays auto's probe (once per kind of machine), as
    # a user's first run would
    os.environ.setdefault("SENTRAY_CACHE_DIR", tempfile.mkdtemp(prefix="bench-embed-cache-"))
    sizes = [int(s) for s in args.sizes.split(",")]
    sentences = Path(args.corpus).read_text(encoding="utf-8").splitlines()[:max(sizes)]
    if len(sentences) < max(sizes):
        raise SystemExit(f"{args.corpus} has {len(sentences)} lines, fewer than {max(sizes)}")
    print(cpu_line())
    print(embed_peers.cpu_flags_line(embed_peers.cpu_flags()))
    print(padding_table(args.model, sentences[:sizes[0]], 32, args.max_tokens_per_batch))
    if args.padding_only:
        return
    results = {"cpu": cpu_line(), "embed_peers.cpu_flags": sorted(embed_peers.cpu_flags()),
               "torch_threads": __import__("torch").get_num_threads(),
               "precision": args.precision, "job_args": args.job_args, "sizes": {}}
    with tempfile.TemporaryDirectory() as exports:
        # emulated bf16 is ~6x slower: no bf16 peer worth the wait unless asked for
        peers, notes = embed_peers.make_peers(args, Path(exports), native_bf16() or args.bf16_peer)
        print("", *notes, sep="\n")
        results["sentray_int8_prepare_seconds"] = embed_peers.prepare_int8(args.model)
        scores: dict = results.setdefault("sentray_stsb", {})

        def stsb(precision: str) -> float | None:
            if precision not in scores:
                scores[precision] = embed_peers.sentray_stsb(args.model, precision)
            return scores[precision]

        for size in sizes:
            runs = measure(size, sentences, args, peers, stsb, smallest=size == min(sizes))
            results["sizes"][size] = runs
            print()
            print(report(size, runs), flush=True)
    results["peers"] = {p.kind: {"label": p.label, "python": p.python, "export_seconds":
                                 p.export_seconds, "stsb": p.stsb} for p in peers}
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

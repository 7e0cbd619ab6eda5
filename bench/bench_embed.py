"""Bulk embedding: `jobs/embed.py` end to end against its peers, on the same sentences with the
same model, at every corpus size of `--sizes`, in one run, and how close each runs to the
machine's limit:

- the peers (bench/embed_peers.py), few-line sentence-transformers scripts, each timed from its
  launch to its exit like the job (interpreter start, imports and model load included; its own
  load + encode seconds recorded beside), at its default batch of 32 and its own length sorting:
  torch fp32 and bf16 weights (where the CPU runs bf16 natively: AMX or AVX512-BF16); the ONNX
  backend in fp32 and dynamically quantized to int8 (`--onnx-python`); the OpenVINO backend at
  an f32 hint, a bf16 hint and statically quantized to int8 (`--ov-python`). The exported ones
  are exported once, untimed (seconds printed); their pins clash with sentray's, so each runs
  in its own venv (bench/peer_venvs.sh builds both), and one whose interpreter is not given is
  skipped with a note. "Fastest peer" is the fastest of these configurations;
- `python jobs/embed.py` as a subprocess, as a user runs it, at its default (fp32, on the exact
  runtime it measures fastest) and with `--precision auto`, each a first run in a fresh cache
  (the probe and every conversion included); `auto` again on its Ray actor pool
  (`--in-process-rows 0`); reading and writing Parquet included, every id checked once;
- the encoder of the plan each job ran, in this process (load + encode): the job / encoder
  ratio is what Ray, Parquet and the job's own work cost;
- every candidate runtime x precision at steady state in this process (the first size's
  sentences, up to 2,000), with its vectors against torch fp32's: what `auto` chose among.

For each run: seconds, sentences/s, tokens/s, its encoder's FLOP rate (tokens/s x the model's
FLOPs a token) over torch's GEMM rate at the same precision on the same threads, STS-B test
Spearman x 100, and the ratio to the fastest peer; then the goals, met or not.

    bash bench/peer_venvs.sh    # once: out/peer-venvs/onnx and out/peer-venvs/openvino
    python bench/bench_embed.py --sizes 10000,50000 --onnx-python out/peer-venvs/onnx/bin/python \
        --ov-python out/peer-venvs/openvino/bin/python --json bench/results/embed-CPU.json
    python bench/bench_embed.py --sizes 10000 --padding-only
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

# embed_peers, embed_goals and embed_runs import because Python puts a script's folder first
# on sys.path (`python bench/bench_embed.py` is the way in).
import embed_peers
import embed_runs
from embed_goals import candidates_table, goal_lines

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared/data/corpus/brown.txt"

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


def job_runs(size: int, corpus: Path, work: Path, args, stsb) -> list[dict]:
    """jobs/embed.py at its default and at auto (and auto on its Ray pool), each a first run in
    a fresh cache; each with its plan's encoder alone in this process."""
    sentences = corpus.read_text(encoding="utf-8").splitlines()
    runs = []
    for name, flags in (("default", []), ("auto", ["--precision", "auto"]),
                        ("auto-ray", ["--precision", "auto", "--in-process-rows", "0"])):
        if name not in args.jobs.split(",") or name == "auto-ray" and not args.ray_path:
            continue
        flags = [*args.job_args.split(), *flags]
        job = embed_runs.run_job(corpus, work / name, flags, size, embed_peers.OFFLINE_ENV)
        plan = job["encoder"]
        runs.append({"run": f"jobs/embed.py {' '.join(flags)} (ran {plan['runtime']} "
                            f"{plan['precision']})", "job": name, "peer": False,
                     "seconds": job["seconds"], "precision": plan["precision"],
                     "runtime": plan["runtime"], "why": plan["why"],
                     "measured": plan["measured"], "timings": job["timings"],
                     "stsb": stsb(plan["precision"], plan["runtime"])})
        if name != "auto-ray":
            same = next((r for r in runs if r.get("alone") and (r["runtime"], r["precision"])
                         == (plan["runtime"], plan["precision"])), None)
            seconds = same["seconds"] if same else embed_runs.encoder_seconds(
                args.model, plan["runtime"], plan["precision"], sentences)  # once a plan
            runs.append({"run": f"sentray encoder in-process, {plan['runtime']} "
                                f"{plan['precision']} (the {name} job's plan"
                                f"{', timed once for both jobs' if same else ''})", "peer": False,
                         "alone": name, "seconds": seconds, "precision": plan["precision"],
                         "runtime": plan["runtime"], "reused": same is not None,
                         "stsb": stsb(plan["precision"], plan["runtime"])})
    return runs


def measure(size: int, all_sentences: list[str], args, peers: list, stsb) -> list[dict]:
    """Every run at `size`."""
    sentences = all_sentences[:size]
    model_path = __import__("sentray.encode.model_lookup", fromlist=["x"]).resolve_model(
        args.model).path
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "sentences.txt"
        corpus.write_text("\n".join(sentences) + "\n", encoding="utf-8")
        runs = job_runs(size, corpus, Path(tmp), args, stsb)
        runs += [{**peer.row(model_path, corpus, args.peer_batch_size),
                  "precision": embed_peers.PRECISION_OF[peer.kind]}
                 for peer in peers]  # each exported once (not timed) at the first size
    for run in runs:
        run["rate"] = size / run["seconds"]
    return runs


def limits(runs: list[dict], tokens: int, flops: float, gemm: dict) -> None:
    """Each run's tokens/s and its encoder's FLOP rate over the same-precision GEMM rate; where
    torch's GEMM at that precision runs slower than its fp32 one (torch emulates bf16 without
    AVX512-BF16/AMX and int8 without VNNI, while OpenVINO has its own int8 kernels), over the
    fp32 GEMM rate, and `gemm` says so."""
    for run in runs:
        run["tokens_per_second"] = tokens / run["seconds"]
        precision = embed_runs.GEMM_OF[run["precision"]]
        if gemm[precision] < gemm["fp32"]:
            precision = "fp32"
        run["gemm"] = precision
        run["flop_ratio"] = run["tokens_per_second"] * flops / gemm[precision]


def report(size: int, runs: list[dict]) -> str:
    best = max((r for r in runs if r["peer"]), key=lambda r: r["rate"])
    lines = [f"{size} Brown sentences, {os.cpu_count()} CPUs; ratio = throughput / the fastest "
             f"peer's ({best['run']}); FLOP ratio = the run's FLOP rate / torch's GEMM rate at "
             "its precision ((of fp32): torch emulates that precision here, so its fp32 GEMM); "
             "STS-B = STS-B test Spearman x 100", "",
             "| run | seconds | sentences/s | tokens/s | FLOP ratio | STS-B | ratio |",
             "|---|---|---|---|---|---|---|"]
    for run in runs:
        stsb = run.get("stsb")
        lines.append(f"| {run['run']} | {run['seconds']:.1f} | {run['rate']:.0f} | "
                     f"{run['tokens_per_second']:.0f} | {run['flop_ratio']:.2f}"
                     f"{'' if run['gemm'] == embed_runs.GEMM_OF[run['precision']] else ' (of fp32)'} | "
                     f"{'–' if stsb is None else f'{stsb:.2f}'} | "
                     f"{run['rate'] / best['rate']:.2f}x |")
    exports = [f"{r['run']} {r['export_seconds']:.1f} s" for r in runs
               if r.get("export_seconds") is not None]
    lines += ["", f"peers' one-time exports (not in their seconds): {'; '.join(exports)}"]
    for run in runs:
        if run.get("why"):
            lines.append(f"{run['run']}: {run['why']}")
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
                             "for the ONNX peers (default: $SENTRAY_ONNX_PYTHON; none: skipped)")
    parser.add_argument("--ov-python", default=os.environ.get("SENTRAY_OV_PYTHON"),
                        help="a Python with sentence-transformers and optimum-intel[openvino,"
                             "nncf] for the OpenVINO peers (default: $SENTRAY_OV_PYTHON; none: "
                             "skipped)")
    parser.add_argument("--onnx-int8-config", default="auto",
                        choices=["auto", "avx512_vnni", "avx512", "avx2", "arm64"],
                        help="export_dynamic_quantized_onnx_model's config (default: %(default)s:"
                             " avx512_vnni where the CPU has VNNI, else avx512, avx2 or arm64)")
    parser.add_argument("--job-args", default="--actors 2",
                        help="extra flags for jobs/embed.py (default: %(default)s)")
    parser.add_argument("--max-tokens-per-batch", type=int, default=2048,
                        help="the token budget compared with fixed batches of 32 in the "
                             "padding table (default: %(default)s = 32 x 64 tokens)")
    parser.add_argument("--peers", default=None,
                        help="only these peers, comma-separated (torch, torch-bf16, onnx, "
                             "onnx-int8, ov-f32, ov-bf16, ov-int8; default: every one)")
    parser.add_argument("--jobs", default="default,auto,auto-ray",
                        help="the job runs, comma-separated (default: %(default)s)")
    parser.add_argument("--no-candidates", dest="candidates", action="store_false",
                        help="leave out every candidate's steady rate in this process")
    parser.add_argument("--no-ray-path", dest="ray_path", action="store_false",
                        help="leave out auto's run on its Ray actor pool")
    parser.add_argument("--bf16-peer", action="store_true",
                        help="time sentence-transformers in bf16 even where the CPU emulates "
                             "it (default: only where native)")
    parser.add_argument("--padding-only", action="store_true",
                        help="print the batching table only (seconds, no model run)")
    parser.add_argument("--json", default=None, help="also write every figure to this file")
    return parser.parse_args()


def use_own_cache() -> None:
    """This process's own cache (its candidates' conversions; each job run has a fresh one),
    removed at its end, unless SENTRAY_CACHE_DIR names one."""
    if "SENTRAY_CACHE_DIR" not in os.environ:
        os.environ["SENTRAY_CACHE_DIR"] = cache = tempfile.mkdtemp(prefix="bench-embed-cache-")
        atexit.register(shutil.rmtree, cache, ignore_errors=True)


def main() -> None:
    args = parse_args()
    os.environ.update(embed_peers.OFFLINE_ENV)
    use_own_cache()
    sizes = [int(s) for s in args.sizes.split(",")]
    sentences = Path(args.corpus).read_text(encoding="utf-8").splitlines()[:max(sizes)]
    if len(sentences) < max(sizes):
        raise SystemExit(f"{args.corpus} has {len(sentences)} lines, fewer than {max(sizes)}")
    import torch

    print(cpu_line(), embed_peers.cpu_flags_line(embed_peers.cpu_flags()), sep="\n")
    padding = embed_runs.padding_table(args.model, sentences[:sizes[0]], 32,
                                       args.max_tokens_per_batch)
    print(padding)
    if args.padding_only:
        return write(args.json, {"cpu": cpu_line(), "sentences": sizes[0], "padding": padding})
    threads = torch.get_num_threads()
    gemm = embed_runs.gemm_rates(threads)
    from sentray.encode.encoder import special_tokens  # noqa: F401 (torch-heavy import, once)
    from sentray.encode.model_loading import load_tokenizer
    from sentray.encode.model_lookup import resolve_model

    tokenizer = load_tokenizer(resolve_model(args.model))
    results = {"cpu": cpu_line(), "cpu_flags": sorted(embed_peers.cpu_flags()),
               "torch_threads": threads, "gemm_flops_per_second": gemm,
               "job_args": args.job_args, "padding": padding, "sizes": {}}
    print(f"torch GEMM 2048^2 on {threads} threads, GFLOP/s: "
          + ", ".join(f"{k} {v / 1e9:.0f}" for k, v in gemm.items()))
    with tempfile.TemporaryDirectory() as exports:
        peers, notes = embed_peers.make_peers(args, Path(exports),
                                              native_bf16() or args.bf16_peer)
        print("", *notes, sep="\n")
        scores: dict = results.setdefault("sentray_stsb", {})

        def stsb(precision: str, runtime: str) -> float | None:
            key = f"{runtime} {precision}"
            if key not in scores:
                scores[key] = embed_peers.sentray_stsb(args.model, precision, runtime)
            return scores[key]

        for size in sizes:
            ids = tokenizer(sentences[:size], truncation=True, max_length=256)["input_ids"]
            tokens = sum(len(i) for i in ids)
            flops = embed_runs.flops_per_token(args.model, tokens / size)
            runs = measure(size, sentences, args, peers, stsb)
            limits(runs, tokens, flops, gemm)
            results["sizes"][size] = {"tokens": tokens, "flops_per_token": flops, "runs": runs}
            write(args.json, results)  # each size as it is done: a stopped run keeps them
            print("", report(size, runs), sep="\n", flush=True)
        if args.candidates:
            rows = embed_runs.candidate_rates(args.model, sentences[:min(sizes[0], 2000)])
            chosen = [r for s in results["sizes"].values() for r in s["runs"] if r.get("job")]
            results["candidates"] = rows
            print("", "Every candidate at steady state, in this process:",
                  candidates_table(rows, chosen), sep="\n", flush=True)
    results["peers"] = {p.kind: {"label": p.label, "python": p.python, "export_seconds":
                                 p.export_seconds, "stsb": p.stsb} for p in peers}
    write(args.json, results)


def write(path: str | None, results: dict) -> None:
    if path:
        Path(path).write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()

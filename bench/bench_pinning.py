"""Several encoder processes on one machine, as a node's Ray actors run: OpenVINO with its
threads pinned to cores (the CPU plugin's default on Linux) against not pinned (what
`sentray.encode.runtimes.openvino_runtime.infer_request` asks for), side by side in one run.

Each of `--processes` processes (default: one per CPU) compiles the same ONNX graph (the packaged
model, mean pooling, exported as the job exports it) on OpenVINO at an f32 hint with
`--threads` threads each (default 1: an actor's CPU), warms up, then runs the same batch of 32
Brown sentences for `--seconds`; the processes start together. Printed: each configuration's
sentences/s summed over the processes, and one process alone on every CPU, pinned and not.

    python bench/bench_pinning.py --json bench/results/pinning-amd.json
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

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared/data/corpus/brown.txt"


def worker(graph: str, corpus: str, threads: int, pinned: bool, seconds: float,
           start_at: float) -> None:
    """One process: compile, warm, wait for `start_at`, time; prints its JSON line."""
    import numpy as np
    import openvino

    from sentray.encode.model_loading import load_tokenizer
    from sentray.encode.model_lookup import resolve_model

    tokenizer = load_tokenizer(resolve_model("all-MiniLM-L6-v2"))
    texts = Path(corpus).read_text(encoding="utf-8").splitlines()[:32]
    batch = tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="np")
    inputs = {"input_ids": batch["input_ids"].astype(np.int64),
              "attention_mask": batch["attention_mask"].astype(np.int64)}
    compiled = openvino.Core().compile_model(graph, "CPU", {
        "INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": threads,
        "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": pinned})
    request = compiled.create_infer_request()
    for _ in range(3):
        request.infer(inputs)
    time.sleep(max(0.0, start_at - time.time()))
    began, calls = time.perf_counter(), 0
    while time.perf_counter() - began < seconds:
        request.infer(inputs)
        calls += 1
    print(json.dumps({"rate": calls * 32 / (time.perf_counter() - began),
                      "pinned": bool(compiled.get_property("ENABLE_CPU_PINNING"))}))


def run_together(graph: str, args, processes: int, threads: int, pinned: bool) -> dict:
    """`processes` workers started together; their rates."""
    start_at = time.time() + 15.0  # every process compiled and warm by then
    command = [sys.executable, __file__, "--worker", graph, "--corpus", str(args.corpus),
               "--threads", str(threads), "--seconds", str(args.seconds),
               "--start-at", str(start_at)] + (["--pinned"] if pinned else [])
    children = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
                for _ in range(processes)]
    lines = [child.communicate()[0].strip().splitlines()[-1] for child in children]
    rates = [json.loads(line) for line in lines]
    if any(r["pinned"] != pinned for r in rates):
        raise SystemExit(f"asked for pinning {pinned}, the plugin reports otherwise: {rates}")
    return {"processes": processes, "threads": threads, "pinned": pinned,
            "rates": [round(r["rate"], 1) for r in rates],
            "total": round(sum(r["rate"] for r in rates), 1)}


def export_graph(folder: Path) -> str:
    """The packaged model, mean pooling, as the job's one ONNX graph; its path."""
    from sentray.encode.config import EncoderConfig
    from sentray.precision.plan import plan_encoder

    plan = plan_encoder(EncoderConfig(model="all-MiniLM-L6-v2", device="cpu", pooling="mean",
                                      runtime="openvino", precision="fp32"))
    path = folder / "encoder.onnx"
    path.write_bytes(plan.artefact.data)
    return str(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=os.cpu_count())
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    parser.add_argument("--json", default=None)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--pinned", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.corpus, args.threads, args.pinned, args.seconds,
                      args.start_at)
    from sentray.kit.cpu import cpu_info

    cpu = f"{cpu_info()['name']}, {os.cpu_count()} CPUs"
    with tempfile.TemporaryDirectory(prefix="bench-pinning-") as folder:
        graph = export_graph(Path(folder))
        runs = [run_together(graph, args, processes, threads, pinned)
                for processes, threads in ((args.processes, args.threads), (1, os.cpu_count()))
                for pinned in (True, False)]
    print(f"CPU: {cpu}; {args.processes} processes x {args.threads} OpenVINO thread(s), f32 "
          f"hint, batches of 32 Brown sentences, {args.seconds:.0f} s each")
    print("| processes x threads | pinned | sentences/s each | in all |\n|---|---|---|---|")
    for run in runs:
        print(f"| {run['processes']} x {run['threads']} | {'yes' if run['pinned'] else 'no'} | "
              f"{', '.join(str(r) for r in run['rates'])} | {run['total']} |")
    print(f"not pinned / pinned: {runs[1]['total'] / runs[0]['total']:.2f}x with "
          f"{args.processes} processes, {runs[3]['total'] / runs[2]['total']:.2f}x with one")
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": cpu, "runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()

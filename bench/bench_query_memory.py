"""A query encoder's memory under a service's load: the encoder of an indexed output (the one
`sentray serve` builds) fed seeded random batches of 1-32 held-out queries, as concurrent
clients make them, its process's RSS read every 150 batches, once for each OpenVINO per-shape
cache size given (each in a fresh process). The record behind `openvino_runtime.SHAPE_CACHE`.

    python -m bench.bench_query_memory --output OUT --queries heldout.txt \\
        --record bench/results/query-memory-50k-mean-amd.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from bench.bench_index import ROOT, cpu_line

OPENVINO_DEFAULT = 5000  # the CPU plugin's own CPU_RUNTIME_CACHE_CAPACITY


def one_run(output: str, queries: Path, batches: int, cache: int) -> dict:
    """In this process: the encoder built with `cache`, fed `batches` batches."""
    import psutil

    from sentray.encode.runtimes import openvino_runtime
    from sentray.index.search import VectorIndex

    openvino_runtime.SHAPE_CACHE = cache
    index = VectorIndex(output, device="cpu", mode="table")
    texts = [line.strip() for line in queries.read_text(encoding="utf-8").splitlines()
             if line.strip()]
    rng, process = random.Random(0), psutil.Process()
    index.encode(texts[:4])
    curve = [{"batches": 0, "rss_mib": process.memory_info().rss >> 20}]
    encoded, cpu = 0, time.process_time()
    for number in range(1, batches + 1):
        batch = rng.sample(texts, rng.randint(1, 32))
        index.encode(batch)
        encoded += len(batch)
        if number % 150 == 0:
            curve.append({"batches": number, "rss_mib": process.memory_info().rss >> 20})
    return {"shape_cache": cache, "runtime": index.encoder.plan.runtime,
            "rss_curve": curve, "cpu_ms_per_query": round(
                (time.process_time() - cpu) / encoded * 1000, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", required=True, help="an indexed embedding output")
    parser.add_argument("--queries", type=Path, required=True, help="held-out sentences")
    parser.add_argument("--batches", type=int, default=600)
    parser.add_argument("--caches", default=f"{OPENVINO_DEFAULT},100",
                        help="OpenVINO per-shape cache sizes to run, comma-separated")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a run, in its process
    parser.add_argument("--record", type=Path)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(one_run(args.output, args.queries, args.batches, args.one)))
        return
    report = {"cpu": cpu_line(), "output": args.output, "batches": args.batches, "runs": []}
    for cache in [int(c) for c in args.caches.split(",")]:
        done = subprocess.run(
            [sys.executable, "-m", "bench.bench_query_memory", "--output", args.output,
             "--queries", str(args.queries), "--batches", str(args.batches), "--one",
             str(cache)], cwd=ROOT, capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)})
        run = json.loads(done.stdout.strip().splitlines()[-1])
        report["runs"].append(run)
        print(json.dumps(run), flush=True)
    print(report["cpu"])
    if args.record:
        args.record.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""The bulk embedding pipeline itself at 100k, 1M and 10M rows: what grows with rows, and what
with files. `--pooling static_avg` (Ditto's avg_static: a table lookup and a masked mean, no
transformer) makes 10M rows possible on 2 cores; the job around it is the same at any pooling.

For each size: N distinct rows (Brown sentences, each made unique by its row number) written as
Parquet (`--input-files` files, row groups of 100,000, an int64 id column); then

- the encoder alone: `EmbedBatch` (the actors' class) in this process, on blocks of the job's
  size, over the first `--alone-rows` rows (200,000); rows/s, for one process and for `--actors` of them;
- `jobs/embed.py` on a private loopback cluster (`--actors 2`, `--rows-per-file`): rows/s end to
  end (launch to summary), peak driver RSS, peak object-store use (sampled every second),
  output files before and after compaction, seconds before the first part, in the pipeline, in
  compaction and after it (accounting, summary), and the ratio job / encoder alone;
- the same command again: the seconds a rerun takes to decide there is nothing to do.

    python bench/bench_scale.py --sizes 100000,1000000,10000000 --out bench/results/scale.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared/data/corpus/brown.txt"
OFFLINE_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0",
               "HF_HUB_OFFLINE": "1"}
ROW_GROUP = 100_000


def write_inputs(folder: Path, rows: int, files: int, sentences: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    per_file = -(-rows // files)
    for index, start in enumerate(range(0, rows, per_file)):
        stop = min(start + per_file, rows)
        with pq.ParquetWriter(folder / f"part-{index:03d}.parquet",
                              pa.schema([("id", pa.int64()), ("text", pa.string())])) as writer:
            for first in range(start, stop, ROW_GROUP):
                last = min(first + ROW_GROUP, stop)
                texts = [f"{sentences[i % len(sentences)]} ({i})" for i in range(first, last)]
                writer.write_table(pa.table({"id": pa.array(range(first, last), pa.int64()),
                                             "text": texts}))


def job_config(input_dir: Path, output: Path, job_args: list[str]):
    """The job's own config for these flags, as the job parses it."""
    from sentray.cli import JOBS

    config, _ = JOBS["embed"].parse_config("embed", ["--input", str(input_dir), "--output",
                                                     str(output), *job_args])
    return config


def encoder_alone(config, rows: int) -> float:
    """Rows/s of the actors' class (`EmbedBatch`, one torch thread, as a one-CPU actor has) in
    this process, on blocks of the job's size of the first `rows` input rows; quantized with
    ranges calibrated as the job calibrates them."""
    import torch

    from sentray.bulk_embedding.actor import EmbedBatch, EmbedSpec
    from sentray.bulk_embedding.job import code_book, stored_vector
    from sentray.corpus.reading import first_records
    from sentray.corpus.sources import discover_sources
    from sentray.precision.plan import plan_encoder

    torch.set_num_threads(1)
    sources = discover_sources(config.corpus)
    plan = plan_encoder(config.encoder)
    vector = stored_vector(config.vector, plan)
    ranges, _ = code_book(plan, vector, config.corpus, sources, None)
    actor = EmbedBatch(EmbedSpec(plan, vector, ranges))
    records = first_records(sources, config.corpus, rows)
    block = config.pool.rows_per_batch
    started = time.perf_counter()
    for start in range(0, records.num_rows, block):
        actor(records.slice(start, block))
    return records.num_rows / (time.perf_counter() - started)


def run_job(args: list[str], address: str) -> dict:
    """jobs/embed.py as a user runs it, against this bench's cluster; its wall time, peak RSS
    and the peak object-store use while it ran."""
    started = time.perf_counter()
    job = subprocess.Popen([sys.executable, str(ROOT / "jobs" / "embed.py"), *args,
                            "--address", address], env={**os.environ, **OFFLINE_ENV},
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    with Sampler(job.pid) as sampler:
        _, err = job.communicate()
    if job.returncode:
        raise SystemExit(f"jobs/embed.py failed:\n{err[-3000:]}")
    return {"seconds": time.perf_counter() - started, "peak_driver_rss_mib": sampler.rss >> 20,
            "peak_object_store_mib": sampler.object_store >> 20}


class Sampler:
    """Peak RSS of a process and peak object-store use of this cluster, every second."""

    def __init__(self, pid: int) -> None:
        self.pid, self.rss, self.object_store = pid, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.rss = max(self.rss, psutil.Process(self.pid).memory_info().rss)
            except psutil.Error:
                return
            self.object_store = max(self.object_store, plasma_bytes())

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def plasma_bytes() -> int:
    """Bytes in this cluster's object stores now (Ray's memory summary)."""
    import re

    import ray
    from ray._private import internal_api

    summary = internal_api.memory_summary(ray.get_runtime_context().gcs_address,
                                          stats_only=True)
    match = re.search(r"Plasma memory usage (\d+) MiB", summary)
    return int(match.group(1)) << 20 if match else 0


def measure(rows: int, root: Path, sentences: list[str], args) -> dict:
    import ray

    inputs, output = root / f"in-{rows}", root / f"out-{rows}"
    started = time.perf_counter()
    write_inputs(inputs, rows, args.input_files, sentences)
    generated = time.perf_counter() - started
    job_args = ["--input", str(inputs), "--output", str(output), *args.job_args.split()]
    config = job_config(inputs, output, args.job_args.split())
    alone = encoder_alone(config, min(rows, args.alone_rows))
    address = ray.get_runtime_context().gcs_address
    launched = time.time()
    run = run_job(job_args, address)
    summary = json.loads((output / "_summary.json").read_text())
    assert summary["rows_in"] == summary["rows_out"] == rows, summary
    timings = summary["timings"]
    compaction = timings.get("compaction") or {}
    rerun = run_job(job_args, address)
    return {"rows": rows, "input_files": args.input_files, "generate_seconds": round(generated, 1),
            "seconds": round(run["seconds"], 1),
            "rows_per_second": round(rows / run["seconds"]),
            "encoder_alone_rows_per_second": round(alone), "actors": config.pool.actors.maximum,
            "ratio_to_encoder_alone_x_actors": round(rows / run["seconds"]
                                                     / (alone * config.pool.actors.maximum), 3),
            "peak_driver_rss_mib": run["peak_driver_rss_mib"],
            "peak_object_store_mib": run["peak_object_store_mib"],
            "output_files": len(list(output.rglob("part-*.parquet"))),
            "parts_before_compaction": compaction.get("files_before"),
            "output_bytes": sum(p.stat().st_size for p in output.rglob("part-*.parquet")),
            "before_first_part_seconds": round(timings["first_part_at"] - launched, 1),
            "pipeline_seconds": timings["pipeline"],
            "compaction_seconds": compaction.get("seconds"),
            "summary_seconds": timings.get("summary"),
            "after_compaction_seconds": round(run["seconds"] - (timings["first_part_at"]
                                                                - launched)
                                              - (timings["pipeline"] - timings["first_part"])
                                              - (compaction.get("seconds") or 0), 1),
            "rerun_seconds": round(rerun["seconds"], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000,10000000")
    parser.add_argument("--input-files", type=int, default=4)
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS))
    parser.add_argument("--job-args", default="--pooling static_avg --actors 2 --output-dtype "
                        "int8 --rows-per-file 1000000")
    parser.add_argument("--alone-rows", type=int, default=200_000,
                        help="rows the encoder alone is timed on (default: %(default)s; a "
                             "transformer pooling on a CPU: 20000 is enough)")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    parser.add_argument("--keep", default=None, help="work in this folder (default: a temp one)")
    args = parser.parse_args()
    import ray

    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    ray.init(address="local", num_cpus=4, include_dashboard=False,
             _node_ip_address="127.0.0.1")
    sentences = [s for s in Path(args.corpus).read_text(encoding="utf-8").split("\n") if s]
    results = []
    with tempfile.TemporaryDirectory(dir=args.keep) as folder:
        for rows in (int(s) for s in args.sizes.split(",")):
            results.append(measure(rows, Path(folder), sentences, args))
            print(json.dumps(results[-1]), flush=True)
            import shutil

            shutil.rmtree(Path(folder) / f"in-{rows}")
            shutil.rmtree(Path(folder) / f"out-{rows}")
    ray.shutdown()
    print_table(results)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        from sentray.kit.cpu import cpu_bf16_features, cpu_info

        Path(args.out).write_text(json.dumps({
            "cpu": cpu_info()["name"], "cpus": os.cpu_count(),
            "bf16_features": cpu_bf16_features(), "job_args": args.job_args,
            "sizes": results}, indent=1))


def print_table(results: list[dict]) -> None:
    print("\n| rows | rows/s | encoder alone x actors | ratio | driver RSS | object store | "
          "files (parts) | first part | compaction | after | rerun |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['rows']:,} | {r['rows_per_second']:,} | "
              f"{r['encoder_alone_rows_per_second'] * r['actors']:,} | "
              f"{r['ratio_to_encoder_alone_x_actors']:.2f} | {r['peak_driver_rss_mib']} MiB | "
              f"{r['peak_object_store_mib']} MiB | {r['output_files']} "
              f"({r['parts_before_compaction']}) | {r['before_first_part_seconds']} s | "
              f"{r['compaction_seconds']} s | {r['after_compaction_seconds']} s | "
              f"{r['rerun_seconds']} s |")


if __name__ == "__main__":
    main()

"""Does the embedding job's CPU side keep a GPU fed? Measured on this machine with a stand-in GPU
of known speed (`sentray.testing.stand_in_gpu`: the real token ids in, the time a GPU of that
rate would take slept, fixed vectors out) on the real pipeline, in one run:

1. **The CPU cost per row of every stage outside the model**, each stage alone in this process
   on one thread (TOKENIZERS_PARALLELISM=false, one torch thread), over the corpus's rows in the
   job's blocks of 4,096: read (the text file into records), tokenize (`TokenizeRows`), the
   hand-offs between stages (each table through Arrow IPC and back, what crossing Ray's object
   store costs at least), the encoder actor's own work around the model (`EncodeTokens` with
   an infinitely fast stand-in), store (`StoreVectors`: normalize, quantize, the output's
   columns), write (a Parquet part). In microseconds of one core per row (us x cores).
2. **The job on its Ray path** (`--tokenize own-stage`, one encoder actor holding the stand-in,
   batches of `--batch-size`) with the stand-in at 2,000, 5,000 and 20,000 rows/s: the
   stand-in's busy fraction (its busy seconds over the span from its first call to its last),
   the rows/s, and the CPU seconds every process of the run used (the driver, Ray's processes,
   the tasks and the actor: psutil, the reaped ones included) per row: the whole CPU side's cost
   on Ray. From that cost, the cores a node needs per GPU to keep it >= 90% busy at 14,000,
   50,000 and 150,000 rows/s (0.9 x rate x cost).
3. **The marginal cost of longer rows, measured independently** (the issue's method): `python
   jobs/embed.py --pooling static_avg --in-process-rows 0` (the model costs ~nothing: the word
   embeddings' mean) on 109,737 unique Brown rows (sentences and pairs of them) and on 219,474
   (adding as many rows of three and four), as a user runs it, the job's own `seconds`:
   (t2 - t1) x cores / 109,737. This checkout at its defaults and with `--tokenize own-stage`,
   and, with `--before DIR` (a checkout of the code before the change), that code, in the same
   run.
4. **Nothing slower**: with `--before DIR`, `python jobs/embed.py` on the first 10,000 Brown
   rows with the packaged model at its defaults, in the job's own process and on its Ray CPU
   pool (`--in-process-rows 0`), this checkout and DIR's in turn (after one warm-up run that
   caches the runtime decision both read).

    git worktree add /tmp/before <commit before the change>
    python bench/bench_gpu_feed.py --before /tmp/before --json bench/results/gpu-feed-CPU.json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # the stage costs are of one thread

ROOT = Path(__file__).resolve().parents[1]
BROWN = ROOT.parent / "shared/data/corpus/brown.txt"
OFFLINE_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0",
               "HF_HUB_OFFLINE": "1", "RAY_AUTH_MODE": "disabled"}
RATES = (2_000, 5_000, 20_000)  # the stand-in's rows/s
GPU_RATES = (14_000, 50_000, 150_000)  # rows/s of real GPUs: the cores each needs
BLOCK = 4096  # the job's rows per block (`ROWS_PER_BATCH`)


def brown_corpora(folder: Path, brown: Path) -> tuple[Path, Path]:
    """The two corpora of section 3: unique sentences and pairs of neighbours (109,737 rows),
    then those and as many rows of three and of four neighbours (219,474)."""
    unique = list(dict.fromkeys(brown.read_text(encoding="utf-8").splitlines()))
    n = len(unique)
    short = unique + [f"{unique[i]} {unique[i + 1]}" for i in range(n - 1)]
    longer = ([" ".join(unique[(i + k) % n] for k in range(3)) for i in range(n)]
              + [" ".join(unique[(i + k) % n] for k in range(4)) for i in range(n - 1)])
    first, second = folder / "brown-1-2.txt", folder / "brown-1-4.txt"
    first.write_text("\n".join(short) + "\n", encoding="utf-8")
    second.write_text("\n".join(short + longer) + "\n", encoding="utf-8")
    return first, second


def cpu_line() -> str:
    from sentray.kit.cpu import cpu_info

    return f"CPU: {cpu_info()['name']}, {os.cpu_count()} CPUs"


# -- 1. each stage alone --------------------------------------------------------------------------


def stage_costs(corpus: Path, batch_size: int) -> dict:
    """us x cores per row of each stage outside the model, one thread (module docstring, 1)."""
    import dataclasses

    import pyarrow as pa
    import torch

    from sentray.bulk_embedding.actor import EmbedSpec, EncodeTokens
    from sentray.bulk_embedding.config import VectorConfig
    from sentray.bulk_embedding.storing import StoreVectors
    from sentray.bulk_embedding.tokenizing import TokenizeRows
    from sentray.corpus import part_files
    from sentray.corpus.reading import read_task
    from sentray.corpus.sources import CorpusConfig, discover_sources
    from sentray.encode.config import EncoderConfig
    from sentray.kit import storage
    from sentray.precision.plan import plan_encoder
    from sentray.testing.stand_in_gpu import StandInGPU

    torch.set_num_threads(1)
    corpus_config = CorpusConfig(input=str(corpus), rows_per_block=BLOCK)
    source = discover_sources(corpus_config)[0]
    plan = plan_encoder(EncoderConfig(pooling="static_avg", runtime="torch",
                                      batch_size=batch_size), rows=source.num_rows)
    spec = EmbedSpec(plan, VectorConfig(normalize=True),
                     stand_in=StandInGPU(plan.dimension, rows_per_second=1e12))
    tokenize, encode, store = TokenizeRows(spec.tokenizer()), EncodeTokens(spec), StoreVectors(
        spec.store())
    seconds = dict.fromkeys(("read", "tokenize", "hand-off", "encoder actor (not the model)",
                             "store", "write"), 0.0)

    def timed(name, function, *args):
        start = time.process_time()
        result = function(*args)
        seconds[name] += time.process_time() - start
        return result

    def through_ipc(table: pa.Table) -> pa.Table:  # what an object-store hand-off does at least
        sink = io.BytesIO()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return pa.ipc.open_stream(sink.getvalue()).read_all()

    rows = 0
    with tempfile.TemporaryDirectory(prefix="bench-gpu-feed-write-") as out:
        route = part_files.SingleFolder(storage.locate(out))
        start = time.process_time()
        blocks = list(read_task(source, [], 0, None, dataclasses.replace(corpus_config)))
        seconds["read"] = time.process_time() - start
        for block in blocks:
            rows += block.num_rows
            tokens = timed("hand-off", through_ipc, timed("tokenize", tokenize, block))
            pooled = timed("hand-off", through_ipc,
                           timed("encoder actor (not the model)", encode, tokens))
            timed("write", part_files.write_block, route, timed("store", store, pooled))
    costs = {name: round(value / rows * 1e6, 1) for name, value in seconds.items()}
    costs["all"] = round(sum(seconds.values()) / rows * 1e6, 1)
    return {"rows": rows, "us_x_cores_per_row": costs}


# -- 2. the Ray path with the stand-in ------------------------------------------------------------


class CpuSampler:
    """The CPU seconds of this process and every descendant (the Ray cluster it started: its
    processes, tasks and actors), sampled every `every` seconds in a thread, per process: a
    process that ends (an actor Ray Data scales down, a worker that exits) keeps what it used,
    to within one interval, and one that starts counts from its birth."""

    def __init__(self, every: float = 0.2) -> None:
        import threading

        self.processes: dict[tuple[int, float], list[tuple[float, float]]] = {}
        self.every, self.stop = every, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        me = psutil.Process()
        while not self.stop.is_set():
            for process in [me, *me.children(recursive=True)]:
                try:
                    with process.oneshot():
                        times, born = process.cpu_times(), process.create_time()
                except psutil.Error:  # ended meanwhile: its last sample stands
                    continue
                self.processes.setdefault((process.pid, born), []).append(
                    (time.time(), times.user + times.system))
            self.stop.wait(self.every)

    def __enter__(self) -> CpuSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()

    def between(self, start: float, end: float) -> float:
        """CPU seconds every process used from `start` to `end` (wall times)."""
        import numpy as np

        total = 0.0
        for (_, born), samples in self.processes.items():
            times = np.array([born] + [t for t, _ in samples])
            cpu = np.array([0.0] + [c for _, c in samples])
            total += float(np.interp(end, times, cpu) - np.interp(start, times, cpu))
        return total


def ray_run(corpus: Path, rate: float, batch_size: int, work: Path) -> dict:
    """The job on its Ray path with a stand-in GPU of `rate` rows/s (module docstring, 2)."""
    import pyarrow.dataset as pads
    import ray

    from sentray.bulk_embedding.job import run_embedding
    from sentray.cli import job_entry_points
    from sentray.kit.ray_cluster import init_ray
    from sentray.testing.stand_in_gpu import StandInGPU, busy_fraction

    log, output = work / f"stand-in-{rate:g}.jsonl", work / f"out-{rate:g}"
    parse_config, _ = job_entry_points("embed")
    config, _ = parse_config(["--input", str(corpus), "--output", str(output), "--overwrite",
                              "--in-process-rows", "0", "--runtime", "torch", "--actors", "1",
                              "--tokenize", "own-stage", "--batch-size", str(batch_size)])
    init_ray(num_cpus=config.pool.local_cluster_cpus)  # the job's own cluster, kept to measure
    try:
        with CpuSampler() as sampler:
            time.sleep(2 * sampler.every)  # every process of the cluster sampled before
            started, started_wall = time.perf_counter(), time.time()
            summary = run_embedding(config, stand_in=StandInGPU(384, rows_per_second=rate,
                                                                log=str(log)))
            seconds, ended_wall = time.perf_counter() - started, time.time()
            time.sleep(2 * sampler.every)
        cpu = sampler.between(started_wall, ended_wall)
    finally:
        ray.shutdown()
    ids = pads.dataset(output, format="parquet").to_table(columns=["id"]).column("id")
    rows = summary["rows_in"]
    assert len(ids) == rows == len(set(ids.to_pylist())), "every row once"
    busy = busy_fraction(log)
    # the steady state: from the stand-in's first call to its last (what a row costs once the
    # cluster, the processes and their imports are up), all rows having passed it
    calls = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    first, last = min(c["start"] for c in calls), max(c["end"] for c in calls)
    steady = sampler.between(first, last)
    return {"rate_rows_per_second": rate, "rows": rows, "job_seconds": round(seconds, 2),
            "pipeline_seconds": summary["timings"]["pipeline"],
            "rows_per_second": round(rows / summary["timings"]["pipeline"], 1),
            "busy_fraction": busy["busy_fraction"], "busy_seconds": busy["busy_seconds"],
            "span_seconds": busy["span_seconds"],
            "cpu_seconds": round(cpu, 2), "us_x_cores_per_row_whole_run": round(cpu / rows * 1e6, 1),
            "steady_cpu_seconds": round(steady, 2), "steady_seconds": round(last - first, 2),
            "us_x_cores_per_row": round(steady / rows * 1e6, 1)}


def cores_per_gpu(cost: float) -> dict:
    """Cores a node needs per GPU of each rate for it to be >= 90% busy, at `cost` us x cores
    a row."""
    return {str(rate): round(0.9 * rate * cost / 1e6, 1) for rate in GPU_RATES}


# -- 3 and 4. the job as a user runs it, this checkout and the one before --------------------------


def cli_run(code: Path, corpus: Path, output: Path, flags: list[str], cache: str) -> dict:
    """`python jobs/embed.py` of the checkout `code` (its package first on the path)."""
    env = {**os.environ, **OFFLINE_ENV, "PYTHONPATH": str(code), "SENTRAY_CACHE_DIR": cache}
    env.pop("TOKENIZERS_PARALLELISM", None)  # as a user runs it
    start = time.perf_counter()
    job = subprocess.run([sys.executable, str(code / "jobs" / "embed.py"), "--input", str(corpus),
                          "--output", str(output), "--overwrite", *flags], env=env, cwd=code,
                         capture_output=True, text=True)
    wall = time.perf_counter() - start
    if job.returncode:
        raise SystemExit(f"{code}/jobs/embed.py {' '.join(flags)} failed:\n{job.stderr[-3000:]}")
    summary = json.loads((output / "_summary.json").read_text())
    return {"seconds": summary["seconds"], "wall": round(wall, 2), "rows": summary["rows_in"],
            "pipeline": summary["timings"].get("pipeline")}


def marginal(code: Path, corpora: tuple[Path, Path], flags: list[str], work: Path,
             cache: str) -> dict:
    """The cost of the second corpus's added rows, us x cores a row, from the job's seconds."""
    first = cli_run(code, corpora[0], work / "m1", flags, cache)
    second = cli_run(code, corpora[1], work / "m2", flags, cache)
    added = second["rows"] - first["rows"]
    cores = os.cpu_count() or 1
    return {"flags": flags, "first": first, "second": second, "added_rows": added,
            "marginal_us_x_cores_per_row": round((second["seconds"] - first["seconds"])
                                                 * cores / added * 1e6, 1),
            "first_us_x_cores_per_row": round(first["seconds"] * cores / first["rows"] * 1e6, 1)}


def nothing_slower(checkouts: dict[str, Path], corpus: Path, work: Path, cache: str) -> list:
    """The packaged model at the job's defaults on 10,000 rows, in process and on the Ray CPU
    pool, each checkout in turn (module docstring, 4)."""
    results = []
    for path, flags in (("in process", []), ("Ray CPU pool", ["--in-process-rows", "0"])):
        row = {"path": path}
        for name, code in checkouts.items():
            row[name] = cli_run(code, corpus, work / f"n-{name}", flags, cache)["seconds"]
        names = list(checkouts)
        row["after_over_before"] = round(row[names[1]] / row[names[0]], 3)
        results.append(row)
    return results


def ray_section(corpus: Path, args, work: Path) -> dict:
    """Section 2: the stand-in at each rate, and the cores per GPU from the 5,000 rows/s run."""
    runs = []
    for rate in map(float, args.rates.split(",")):
        runs.append(ray_run(corpus, rate, args.batch_size, work))
        print(f"stand-in at {rate:,.0f} rows/s: busy {runs[-1]['busy_fraction']:.3f}, "
              f"{runs[-1]['rows_per_second']:,.0f} rows/s, CPU "
              f"{runs[-1]['us_x_cores_per_row']} us x cores a row at steady state "
              f"({runs[-1]['us_x_cores_per_row_whole_run']} over the whole run: Ray's "
              "start and every process's imports included)", flush=True)
    cost = next((r for r in runs if r["rate_rows_per_second"] == 5000), runs[0])
    cores = {"from_us_x_cores_per_row": cost["us_x_cores_per_row"],
             "cores": cores_per_gpu(cost["us_x_cores_per_row"])}
    print("cores per GPU for >= 90% busy:", json.dumps(cores), flush=True)
    return {"ray": runs, "cores_per_gpu_for_90_percent_busy": cores}


def marginal_section(checkouts: dict[str, Path], corpora: tuple[Path, Path], work: Path,
                     cache: str) -> list[dict]:
    """Section 3: each checkout at its defaults, and this one with --tokenize own-stage."""
    results = []
    for name, code in checkouts.items():
        for extra in [[]] if name == "before" else [[], ["--tokenize", "own-stage"]]:
            flags = ["--pooling", "static_avg", "--in-process-rows", "0", *extra]
            results.append({"code": name, **marginal(code, corpora, flags, work, cache)})
            print(f"{name} {' '.join(flags)}: marginal "
                  f"{results[-1]['marginal_us_x_cores_per_row']} us x cores a row "
                  f"({results[-1]['first']['seconds']} s, {results[-1]['second']['seconds']} s)",
                  flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brown", type=Path, default=BROWN)
    parser.add_argument("--before", type=Path, help="a checkout of the code before the change")
    parser.add_argument("--batch-size", type=int, default=256,
                        help="the encoder actor's batch (a GPU's: 256)")
    parser.add_argument("--rates", default=",".join(map(str, RATES)))
    parser.add_argument("--skip", default="", help="sections to skip: stages,ray,marginal,slower")
    parser.add_argument("--json", help="write the record here")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    record: dict = {"cpu": cpu_line(), "batch_size": args.batch_size}
    print(record["cpu"], flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-gpu-feed-") as tmp:
        work = Path(tmp)
        corpora = brown_corpora(work, args.brown)
        if "stages" not in skip:
            record["stages"] = stage_costs(corpora[0], args.batch_size)
            print("stage costs, one thread, us x cores per row:",
                  json.dumps(record["stages"]["us_x_cores_per_row"]), flush=True)
        if "ray" not in skip:
            record.update(ray_section(corpora[0], args, work))
        with tempfile.TemporaryDirectory(prefix="bench-gpu-feed-cache-") as cache:
            checkouts = {"before": args.before, "after": ROOT} if args.before else {"after": ROOT}
            if "marginal" not in skip:
                record["marginal"] = marginal_section(checkouts, corpora, work, cache)
            if "slower" not in skip and args.before:
                ten = work / "brown-10k.txt"
                ten.write_text("\n".join(args.brown.read_text(encoding="utf-8").splitlines()
                                         [:10_000]) + "\n", encoding="utf-8")
                cli_run(ROOT, ten, work / "warm", [], cache)  # the runtime decision, cached
                record["nothing_slower_10k"] = nothing_slower(checkouts, ten, work, cache)
                for row in record["nothing_slower_10k"]:
                    print(f"10,000 rows {row['path']}: before {row['before']} s, after "
                          f"{row['after']} s ({row['after_over_before']}x)", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"record: {args.json}")


if __name__ == "__main__":
    main()

"""What `jobs/index.py` and `jobs/search.py` cost and how often they find the true neighbours:
for held-out queries (sentences not in the index), recall@10 of the ANN search against exact
search (cosine, brute force over the same stored vectors), the index build time (the whole job,
in a process of its own, with its peak RSS), the table's size on disk, and the latency of one
search at k = 10 (p50/p99; the query already encoded, as a server would batch encoding).

    python bench/bench_index.py --embeddings OUT --queries heldout.txt --record r.json
    python bench/bench_index.py --embeddings OUT --queries heldout.txt --scale-rows 1000000 \\
        --configs IVF_PQ:auto --record bench/results/index-1m.json

--scale-rows N builds an output of N rows from the real vectors of --embeddings: copy c of
each row is its vector plus seeded Gaussian noise of norm --noise, L2-normalized again, id
`<id>#c`, written in the embedding job's format (one source per copy, the output's settings).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
# (index type, partitions: "auto" = the job's default) x the search settings tried on each
# (nprobes, refine_factor); nprobes None: the search default (max(20, partitions / 3))
SEARCHES = [(None, 10), (None, 0), (10, 10), (20, 10), (40, 10), (80, 10), (160, 10)]


def cpu_line() -> str:
    name = platform.processor() or "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            name = line.split(":", 1)[1].strip()
            break
    return f"CPU: {name}, {os.cpu_count()} CPUs"


def held_out(path: Path, indexed_texts: set[str], count: int, seed: int) -> list[str]:
    """`count` sentences of `path` that are not texts of the index, chosen with `seed`."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines()
             if len(line.split()) >= 3 and line not in indexed_texts]
    return random.Random(seed).sample(lines, min(count, len(lines)))


def build(embeddings: Path, table: Path, flags: list[str]) -> dict:
    """Run the index job in a process of its own; its seconds and peak RSS (MiB)."""
    # VmHWM: this process's own peak (ru_maxrss would carry the forking parent's over exec)
    code = ("import re, sys; from sentray.cli import main; main(sys.argv[1:]); print("
            "'PEAK_RSS_KIB', re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status')"
            ".read()).group(1))")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, "index", str(embeddings),
                           "--index-uri", str(table), *flags], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    peak = [line for line in done.stdout.splitlines() if line.startswith("PEAK_RSS_KIB")]
    summary = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
    return {"seconds": round(seconds, 1), "job_seconds": summary["seconds"],
            "driver_peak_rss_mib": round(int(peak[0].split()[1]) / 1024),
            "rows": summary["rows"], "index": summary["index"]}


def size_mib(folder: Path) -> float:
    return round(sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20, 1)


def exact_top(table, queries: np.ndarray, k: int) -> list[list[str]]:
    """Each query's k nearest rows by cosine, over every row of `table`, batch by batch."""
    unit = queries / np.linalg.norm(queries, axis=1, keepdims=True)  # (Q, D)
    best_scores = np.full((len(queries), k), -np.inf)
    best_ids = np.empty((len(queries), k), dtype=object)
    for batch in table.to_lance().to_batches(columns=["id", "vector"], batch_size=65536):
        vectors = batch.column("vector").values.to_numpy().reshape(len(batch), -1)
        vectors = vectors.astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        scores = unit @ vectors.T  # (Q, B)
        ids = np.asarray(batch.column("id").to_pylist(), dtype=object)
        all_scores = np.concatenate([best_scores, scores], axis=1)
        all_ids = np.concatenate([best_ids, np.broadcast_to(ids, scores.shape)], axis=1)
        order = np.argsort(-all_scores, axis=1)[:, :k]
        best_scores = np.take_along_axis(all_scores, order, axis=1)
        best_ids = np.take_along_axis(all_ids, order, axis=1)
    return [list(row) for row in best_ids]


def measure(index, vectors: np.ndarray, exact: list[list[str]], k: int, nprobes: int,
            refine: int) -> dict:
    """recall@k against `exact` and the latency of each search (ms)."""
    recalls, latencies = [], []
    for vector, truth in zip(vectors, exact, strict=True):
        started = time.perf_counter()
        hits = index._one(vector, None, k, nprobes or index.nprobes, refine)
        latencies.append((time.perf_counter() - started) * 1000)
        recalls.append(len({h["id"] for h in hits} & set(truth)) / k)
    return {"nprobes": nprobes or f"default ({index.nprobes})", "refine_factor": refine,
            "recall_at_10": round(float(np.mean(recalls)), 4),
            "p50_ms": round(float(np.percentile(latencies, 50)), 2),
            "p99_ms": round(float(np.percentile(latencies, 99)), 2)}


def scaled_output(source: Path, target: Path, rows: int, noise: float, seed: int) -> None:
    """An output of `rows` rows from the vectors of the output `source` (module docstring)."""
    target.mkdir(parents=True)
    for item in source.glob("_*"):
        if item.is_file():
            shutil.copy(item, target / item.name)
    parts = sorted(source.glob("*/part-*.parquet"))
    table = pa.concat_tables([pq.read_table(p) for p in parts])
    table = table.filter(table.column("embedding").is_valid())
    metadata = pq.read_schema(parts[0]).metadata
    base = table.column("embedding").combine_chunks()
    width = base.type.list_size
    base = base.values.to_numpy().reshape(-1, width)
    rng = np.random.default_rng(seed)
    copies = -(-rows // len(base))
    for copy in range(copies):
        n = min(len(base), rows - copy * len(base))
        step = rng.standard_normal((n, width)).astype(np.float32) * (noise / np.sqrt(width))
        vectors = base[:n] + (step if copy else 0)  # copy 0: the real vectors
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        key = f"copy-{copy:03d}"
        out = pa.table({
            "id": [f"{i}#{copy}" for i in table.column("id").to_pylist()[:n]],
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), width),
            "status": table.column("status").slice(0, n), "source": [key] * n,
            "row": np.arange(n, dtype=np.int64)}).replace_schema_metadata(metadata)
        (target / key).mkdir()
        pq.write_table(out, target / key / f"part-{0:012d}-{n:012d}-of-{n:012d}.parquet")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embeddings", type=Path, required=True)
    parser.add_argument("--queries", type=Path, required=True, help="held-out sentences")
    parser.add_argument("--corpus", type=Path, help="the indexed texts (excluded from queries)")
    parser.add_argument("--n-queries", type=int, default=500)
    parser.add_argument("--configs", default="IVF_PQ:auto,IVF_PQ:sqrt,IVF_HNSW_SQ:auto",
                        help="index type:partitions (auto, sqrt or a number), comma-separated")
    parser.add_argument("--scale-rows", type=int, default=0)
    parser.add_argument("--noise", type=float, default=0.3)
    parser.add_argument("--extra", default="", help="more flags for the index job")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--record", type=Path)
    return parser.parse_args()


def partitions_flag(spec: str, rows: int) -> list[str]:
    if spec == "auto":
        return []
    value = int(np.sqrt(rows)) if spec == "sqrt" else int(spec)
    return ["--partitions", str(value)]


def main() -> None:
    import lancedb

    from sentray.index.search import VectorIndex

    args = parse()
    print(cpu_line(), flush=True)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-index-"))
    embeddings = args.embeddings
    construction = "the embedding job's output"
    if args.scale_rows:
        embeddings = work / f"scaled-{args.scale_rows}"
        if not embeddings.exists():
            scaled_output(args.embeddings, embeddings, args.scale_rows, args.noise, args.seed)
        construction = (f"{args.scale_rows} rows: the real vectors of {args.embeddings} and "
                        f"copies of them plus seeded Gaussian noise of norm {args.noise}, "
                        "renormalized (bench_index.scaled_output)")
    texts = set(args.corpus.read_text(encoding="utf-8").splitlines()) if args.corpus else set()
    queries = held_out(args.queries, texts, args.n_queries, args.seed)
    report = {"cpu": cpu_line(), "embeddings": construction, "queries": len(queries),
              "query_source": str(args.queries.name), "k": 10, "runs": []}
    exact = None
    for spec in args.configs.split(","):
        kind, partitions = spec.split(":")
        table_path = work / f"{kind}-{partitions}-{args.scale_rows}.lance"
        shutil.rmtree(table_path, ignore_errors=True)
        rows_hint = args.scale_rows or 50_000
        flags = ["--index-type", kind, *partitions_flag(partitions, rows_hint),
                 *args.extra.split()]
        built = build(embeddings, table_path, flags)
        print(f"{spec}: built {built}", flush=True)
        index = VectorIndex(str(table_path), device="cpu", mode="table")
        started = time.perf_counter()
        vectors = index.encoder.encode(queries)
        encode_ms = (time.perf_counter() - started) * 1000 / len(queries)
        if exact is None:
            exact = exact_top(lancedb.connect(str(work)).open_table(table_path.stem),
                              vectors.astype(np.float32), 10)
        run = {"index_type": kind, "partitions": partitions, "flags": flags, "build": built,
               "size_mib": size_mib(table_path), "encode_ms_per_query": round(encode_ms, 2),
               "searches": [measure(index, vectors, exact, 10, n, r) for n, r in SEARCHES]}
        print(json.dumps(run), flush=True)
        report["runs"].append(run)
    report["bench_peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                         / 1024)
    if args.record:
        args.record.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()

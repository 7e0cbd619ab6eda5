"""The index job through Ray (`--write ray`) on a real output, locally or on S3 (a moto server
on loopback, started here): the build's time and the driver's peak RSS, every row of the output
in the table exactly once, recall@10 against exact search at the search defaults, and, with
--kill-after-commit, a run killed (SIGKILL) once its first commit is recorded, then run again:
the table it ends with must hold each row once, as an uninterrupted run's does.

    python bench/bench_index_ray.py --embeddings OUT --queries heldout.txt \\
        --record bench/results/index-ray-1m-local.json
    python bench/bench_index_ray.py --embeddings OUT --queries heldout.txt --s3 \\
        --kill-after-commit --record bench/results/index-ray-1m-s3.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from bench.bench_index import ROOT, build, cpu_line, exact_top, held_out


def moto_server() -> tuple[object, str]:
    """A moto S3 server on 127.0.0.1 with a bucket `bench`, its keys in the environment."""
    import boto3
    from moto.server import ThreadedMotoServer

    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", "us-east-1"), ("AWS_EC2_METADATA_DISABLED", "true")):
        os.environ[key] = value
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
        Bucket="bench")
    return server, endpoint


def killed_run(embeddings: Path, table: str, flags: list[str], state_uri: str,
               endpoint: str | None) -> dict:
    """Start the index job, SIGKILL it once its record shows a first commit; what it left."""
    import psutil

    from sentray.index.index_state import IndexState
    from sentray.kit import storage

    code = "import sys; from sentray.cli import main; main(sys.argv[1:])"
    process = subprocess.Popen([sys.executable, "-c", code, "index", str(embeddings),
                                "--index-uri", table, *flags], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    started = time.perf_counter()
    location = storage.locate(state_uri, endpoint)
    while process.poll() is None:
        state = IndexState.read(location)
        if state is not None and state.rows > 0:
            # the job and every process of the Ray it started, at once, as a crash would
            family = [process, *psutil.Process(process.pid).children(recursive=True)]
            for member in family:
                try:
                    member.send_signal(signal.SIGKILL)
                except psutil.NoSuchProcess:
                    pass
            process.wait()
            return {"killed_after_s": round(time.perf_counter() - started, 1),
                    "rows_recorded_when_killed": state.rows}
        time.sleep(0.5)
    raise SystemExit("the run ended before it could be killed")


def copy_table(endpoint: str, name: str, target: Path) -> str:
    """Every object of s3://bench/NAME/ written under `target` (a byte copy); what it says."""
    import shutil

    import boto3

    shutil.rmtree(target, ignore_errors=True)
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    objects = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket="bench", Prefix=f"{name}/"):
        for item in page.get("Contents", []):
            path = target / item["Key"][len(name) + 1:]
            path.parent.mkdir(parents=True, exist_ok=True)
            body = s3.get_object(Bucket="bench", Key=item["Key"])["Body"]  # one read each
            with path.open("wb") as handle:
                shutil.copyfileobj(body, handle, 1 << 22)
            objects += 1
    return f"a byte copy of the S3 table's {objects} objects on local disk"


def output_ids(embeddings: Path) -> set[str]:
    """The ids of the output's rows with a vector."""
    ids: set[str] = set()
    for part in sorted(embeddings.glob("*/part-*.parquet")):
        table = pq.read_table(part, columns=["id", "embedding"])
        valid = table.column("embedding").is_valid().to_numpy(zero_copy_only=False)
        ids.update(np.asarray(table.column("id").to_pylist(), dtype=object)[valid])
    return ids


def check_rows(index, expected: set[str]) -> dict:
    """Each expected id in the table once, and nothing else."""
    ids = index.table.to_lance().to_table(columns=["id"]).column("id").to_pylist()
    return {"table_rows": len(ids), "distinct_ids": len(set(ids)),
            "each_row_once": len(ids) == len(set(ids)) and set(ids) == expected}


def recall(index, queries: list[str], truth=None) -> dict:
    """recall@10 of the search at its defaults against exact search over the same table (or
    over the table of `truth`, a VectorIndex, with its own query vectors), and its latency."""
    vectors = [v for v, _ in index.encode(queries)]
    truth = truth or index
    exact = exact_top(truth.table, np.asarray([v for v, _ in truth.encode(queries)],
                                              dtype=np.float32), 10)
    found, latencies = [], []
    for vector, truth in zip(vectors, exact, strict=True):
        started = time.perf_counter()
        hits = index.nearest((vector, None), 10)
        latencies.append((time.perf_counter() - started) * 1000)
        found.append(len({h["id"] for h in hits} & set(truth)) / 10)
    return {"queries": len(queries), "nprobes": index.nprobes, "refine_factor": 10,
            "recall_at_10": round(float(np.mean(found)), 4),
            "search_p50_ms": round(float(np.percentile(latencies, 50)), 2)}


def main() -> None:
    from sentray.index.search import VectorIndex

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embeddings", type=Path, required=True)
    parser.add_argument("--queries", type=Path, required=True, help="held-out sentences")
    parser.add_argument("--n-queries", type=int, default=500)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp"))
    parser.add_argument("--s3", action="store_true", help="the table on a moto S3 server")
    parser.add_argument("--kill-after-commit", action="store_true")
    parser.add_argument("--rows-per-commit", type=int, default=500_000)
    parser.add_argument("--truth", help="exact search over this table instead (an fp32 one)")
    parser.add_argument("--write", default="ray", help="the index job's --write")
    parser.add_argument("--record", type=Path)
    args = parser.parse_args()
    print(cpu_line(), flush=True)
    server, endpoint = moto_server() if args.s3 else (None, None)
    name = f"{args.write}-{args.embeddings.name}.lance"
    table = f"s3://bench/{name}" if args.s3 else str(args.workdir / name)
    flags = ["--write", args.write, "--rows-per-commit", str(args.rows_per_commit),
             *(["--s3-endpoint", endpoint] if endpoint else [])]
    report = {"cpu": cpu_line(), "embeddings": str(args.embeddings.name),
              "table": "moto S3 on loopback" if args.s3 else "local disk", "flags": flags}
    if args.kill_after_commit:
        report["killed"] = killed_run(args.embeddings, table, flags, table, endpoint)
        print(json.dumps(report["killed"]), flush=True)
    report["build"] = build(args.embeddings, table, flags)  # the whole run, or the rerun
    print(json.dumps(report["build"]), flush=True)
    index = VectorIndex(table, s3_endpoint=endpoint, device="cpu", mode="table")
    report["rows"] = check_rows(index, output_ids(args.embeddings))
    print(json.dumps(report["rows"]), flush=True)
    if args.s3:
        # moto answers a range read by reading the whole object (16-56 s a search at 1M
        # rows): the recall is measured on a byte copy of the table's files on local disk,
        # which the same search reads as it would read S3
        copy = args.workdir / f"s3-copy-{name}"
        report["search_table"] = copy_table(endpoint, name, copy)
        index = VectorIndex(str(copy), device="cpu", mode="table")
    queries = held_out(args.queries, set(), args.n_queries, 0)
    truth = VectorIndex(args.truth, device="cpu", mode="table") if args.truth else None
    report["search"] = recall(index, queries, truth)
    report["search"]["exact_search_over"] = args.truth or "the same table"
    print(json.dumps(report), flush=True)
    if args.record:
        args.record.write_text(json.dumps(report, indent=1) + "\n")
    if server is not None:
        server.stop()


if __name__ == "__main__":
    main()

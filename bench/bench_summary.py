"""The job's row accounting (its summary) over many parts: the counts read from the parts'
footers, 16 at a time (`part_files.read_counts`, now), against what the summary did before
(each part's `status` column read and counted, then its footer for the flag counts, one part
after another), on the same parts in the same run.

Parts as embed writes them (1,024 rows: id, row, source, a `status`, an int8 384-d vector and the
`_copied` flag), on three stores:
- `local`: a folder on this machine's disk;
- `s3`: a moto server on loopback (in this process: its own CPU time is in the figures);
- `s3+20ms`: the same behind a proxy that holds every answer back 20 ms. **Assumption:** 20 ms is
  a typical first-byte latency of S3 within a region for small ranged GETs (AWS's performance
  guidelines speak of 100-200 ms for the slowest requests; typical is lower); it is a stand-in,
  not a measurement of S3.

Printed per store: seconds and parts/s of both ways, HTTP requests per part (the S3 stores),
and the ratio before / now. Both ways must give the same counts.

    python bench/bench_summary.py --parts 2000 --s3-parts 400 --out bench/results/summary.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parents[1]

from sentray.corpus import part_files  # noqa: E402
from sentray.corpus.source_runs import source_runs  # noqa: E402
from sentray.corpus.sources import Source  # noqa: E402
from sentray.kit import storage  # noqa: E402

ROWS_PER_PART = 1024
STATUSES = ["ok"] * 97 + ["truncated", "empty", "null"]


def part_table(first: int, total: int, rng: np.random.Generator) -> pa.Table:
    rows = np.arange(first, first + ROWS_PER_PART)
    vectors = rng.integers(-128, 128, (ROWS_PER_PART, 384), dtype=np.int8)
    return pa.table({
        "id": pa.array(rows, pa.int64()), "row": pa.array(rows, pa.int64()),
        "source": ["bench"] * ROWS_PER_PART, "source_rows": [total] * ROWS_PER_PART,
        "status": rng.choice(STATUSES, ROWS_PER_PART).tolist(),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 384),
        "_copied": rng.random(ROWS_PER_PART) < 0.1})


class Keyed(Source):
    @property
    def key(self) -> str:
        return "bench"


def write_parts(folder: storage.Location, parts: int) -> list:
    total = parts * ROWS_PER_PART
    rng = np.random.default_rng(0)
    tables = [part_table(i * ROWS_PER_PART, total, rng) for i in range(parts)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda table: part_files.write_part(folder, "bench", table), tables))
    runs = source_runs([folder], Keyed("b", "b", None, "b", "parquet", num_rows=total))
    assert runs.complete and len(runs.parts) == parts
    return runs.parts


def before(parts) -> dict:
    """The summary's reads before this change: each part's status column counted, then its
    footer read for the flag counts, one part after another."""
    status: dict = {}
    copied = 0
    for part in parts:
        values = storage.with_retries(lambda part=part: part_files.read_column(part, "status"))
        for entry in pc.value_counts(values).to_pylist():
            status[entry["values"]] = status.get(entry["values"], 0) + entry["counts"]
        metadata = storage.with_retries(lambda part=part: part_files.read_metadata(part))
        copied += json.loads(metadata.get(part_files.COUNTS_KEY, b"{}")).get("copied", 0)
    return {"copied": copied, "status": status}


def now(parts) -> dict:
    return part_files.read_counts(parts, columns=("status",))


def timed(fn, parts, requests: list | None) -> dict:
    counted = len(requests) if requests is not None else 0
    started = time.perf_counter()
    counts = fn(parts)
    seconds = time.perf_counter() - started
    result = {"seconds": round(seconds, 3), "parts_per_second": round(len(parts) / seconds, 1),
              "counts": counts}
    if requests is not None:
        result["requests_per_part"] = round((len(requests) - counted) / len(parts), 2)
    return result


def measure(store: str, folder: storage.Location, parts: int,
            requests: list | None = None) -> dict:
    written = write_parts(folder, parts)
    old, new = timed(before, written, requests), timed(now, written, requests)
    assert old["counts"] == new["counts"], (old["counts"], new["counts"])
    return {"store": store, "parts": parts, "rows_per_part": ROWS_PER_PART,
            "before": {k: v for k, v in old.items() if k != "counts"},
            "now": {k: v for k, v in new.items() if k != "counts"},
            "ratio_before_over_now": round(old["seconds"] / new["seconds"], 2)}


def s3_stores(parts: int) -> list[dict]:
    import boto3
    from moto.server import ThreadedMotoServer

    from sentray.testing.s3_fault_proxy import FaultProxy, Faults

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's line per request
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                      AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    port = server.get_host_and_port()[1]
    boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}",
                 region_name="us-east-1").create_bucket(Bucket="bench")
    results = []
    try:
        for store, delay in (("s3", 0.0), ("s3+20ms", 1.0)):
            proxy = FaultProxy(port, Faults(delay=delay, delay_s=0.02))
            requests: list = []
            forward = proxy.forward
            proxy.forward = lambda handler, requests=requests, forward=forward: (
                requests.append(handler.command) or forward(handler))
            try:
                folder = storage.locate(f"s3://bench/{store}", proxy.endpoint)
                results.append(measure(store, folder, parts, requests))
            finally:
                proxy.close()
    finally:
        server.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", type=int, default=2000, help="parts on local disk")
    parser.add_argument("--s3-parts", type=int, default=400, help="parts on each S3 store")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as folder:
        results.append(measure("local", storage.locate(folder), args.parts))
    results += s3_stores(args.s3_parts)
    print("\n| store | parts | before: s (parts/s) | now: s (parts/s) | requests/part "
          "before → now | before ÷ now |")
    print("|---|---|---|---|---|---|")
    for r in results:
        b, n = r["before"], r["now"]
        requests = (f"{b['requests_per_part']} → {n['requests_per_part']}"
                    if "requests_per_part" in b else "–")
        print(f"| {r['store']} | {r['parts']:,} | {b['seconds']} ({b['parts_per_second']:,}) | "
              f"{n['seconds']} ({n['parts_per_second']:,}) | {requests} | "
              f"{r['ratio_before_over_now']}× |")
    if args.out:
        Path(args.out).write_text(json.dumps({"read_threads": part_files.READ_THREADS,
                                              "stores": results}, indent=1))


if __name__ == "__main__":
    main()

"""How a table is best searched: its vectors held in memory (`--search-mode memory`: from 20,000
rows a projected first pass, the best rows re-ranked exactly; `--search-mode exact`: every row
at full dimension) against the table's own ANN search (`--search-mode table`) at several
nprobes (none: `--nprobes ""`), on one indexed output. Per setting: recall@10 against exact search, wall and CPU time a query in
batches of 16 (as the service batches concurrent queries) and a lone query's p50. The record
behind `resident.MEMORY_SEARCH_MIB` and `ann.default_nprobes` (docs/index-and-search.md).

    python -m bench.bench_search_modes --output OUT --queries heldout.txt \\
        --record bench/results/search-modes-1m.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

from bench.bench_index import cpu_line, exact_top
from sentray.index import projection
from sentray.index.ann import default_nprobes
from sentray.index.index_state import IndexState
from sentray.index.resident import ResidentVectors, resident_mib
from sentray.index.search import VectorIndex
from sentray.kit import storage

BATCH = 16


def timed(run, batches: list) -> tuple[list, float, float]:
    """run(batch) for each batch: the results, wall and CPU seconds in all."""
    wall, cpu = time.perf_counter(), time.process_time()
    found = [hit for batch in batches for hit in run(batch)]
    return found, time.perf_counter() - wall, time.process_time() - cpu


def measure(index: VectorIndex, encoded: list, exact: list[list[str]], lone: int,
            nprobes: int | None = None) -> dict:
    def run(batch):
        return index.nearest_many(batch, 10, nprobes=nprobes)

    run(encoded[:BATCH])  # warm: the first call opens the index's files
    batches = [encoded[i:i + BATCH] for i in range(0, len(encoded), BATCH)]
    found, wall, cpu = timed(run, batches)
    recall = np.mean([len(set(truth) & {h["id"] for h in hits}) / len(truth)
                      for truth, hits in zip(exact, found, strict=True)])
    singles = []
    for query in encoded[:lone]:
        started = time.perf_counter()
        run([query])
        singles.append((time.perf_counter() - started) * 1000)
    return {"recall_at_10": round(float(recall), 4),
            "batch16_wall_ms_per_query": round(wall / len(encoded) * 1000, 2),
            "batch16_cpu_ms_per_query": round(cpu / len(encoded) * 1000, 2),
            "lone_query_p50_ms": round(statistics.median(singles), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, help="an indexed embedding output (or .lance)")
    parser.add_argument("--queries", type=Path, required=True,
                        help="held-out query texts, one a line (never texts of the table)")
    parser.add_argument("--count", type=int, default=480, help="queries used")
    parser.add_argument("--lone", type=int, default=100, help="queries timed one at a time")
    parser.add_argument("--nprobes", default="10,20,30,41,61,82",
                        help="the table search's nprobes to try, comma-separated")
    parser.add_argument("--record", type=Path, help="write the record (JSON) here")
    args = parser.parse_args()

    table_index = VectorIndex(args.output, mode="table", device="cpu")
    queries = [line.strip() for line in args.queries.read_text(encoding="utf-8").splitlines()
               if line.strip()][:args.count]
    encoded = table_index.encode(queries)
    exact = exact_top(table_index.table, np.stack([q for q, _ in encoded]).astype(np.float32),
                      10)
    rows, dimension = table_index.table.count_rows(), table_index.description.dimension
    state = IndexState.read(storage.locate(table_index.uri, None))
    partitions = state.partitions if state else 0
    record = {"cpu": cpu_line(), "table": table_index.uri, "rows": rows, "dimension": dimension,
              "index": state.index_type if state else None, "partitions": partitions,
              "default_nprobes": default_nprobes(partitions), "queries": len(queries),
              "resident_mib": round(resident_mib(rows, dimension), 1), "table_search": {}}
    for nprobes in [int(n) for n in args.nprobes.split(",") if n.strip()]:
        record["table_search"][nprobes] = measure(table_index, encoded, exact, args.lone,
                                                  nprobes)
        print(f"table, nprobes {nprobes:>3}: {record['table_search'][nprobes]}", flush=True)
    for mode in ("memory", "exact"):
        held_index = VectorIndex(args.output, mode=mode, device="cpu")
        started = time.perf_counter()  # the load alone (a second time: from the page cache)
        held = ResidentVectors(held_index.table.to_lance(), held_index.columns,
                               projected=mode == "memory")
        figures = {"load_seconds": round(time.perf_counter() - started, 2),
                   **measure(held_index, encoded, exact, args.lone)}
        if held.projection is not None:
            figures["projection"] = {"dimension": int(held.projection.axes.shape[1]),
                                     "candidates": projection.candidates(10, rows),
                                     "recall_on_own_rows": round(held.projection.recall, 4)}
        record[f"{mode}_search"] = figures
        print(f"{mode}: {figures}", flush=True)
    print(record["cpu"])
    if args.record:
        args.record.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()

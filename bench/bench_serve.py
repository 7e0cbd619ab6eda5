"""`sentray serve` under load, on this machine only (127.0.0.1): the service started as a user
starts it, then held-out queries (never texts of the index) sent by 1 client, then by 16 and
32 concurrent clients (each a keep-alive connection, the next query sent when the last one is
answered), every phase bounded in queries and in seconds. Per phase: p50/p99 latency as the
client sees it (HTTP, encoding and search), queries/s, errors (anything but a 200), and where a
request's time went, stage by stage (medians, ms): the proxy and the hop to the replica (what
the client saw beyond the replica's own `total`), the wait for a batch, tokenizing and
encoding, the search, the texts, the JSON (the replica's `Server-Timing` header), and the
batches' mean size. Then a soak at 16 clients until --soak queries have been answered since
the warm-up, and the service's RSS (its process and every process under it; its replicas'
alone) after warm-up and after them; at 16 and 32 clients, the CPU a query cost in the
replica, the proxy, the rest of the service's processes and the clients (this process); recall@10 of its answers at its defaults against exact
search over the table. Last, with the service stopped, its ceiling in this process: the same
encoder and search (`VectorIndex`, on the replica's thread count) at the batch sizes the
service ran, and the service's ratio to it. The goals of issue 67 are named in the record,
each with whether it was met.

    python bench/bench_serve.py --output OUT --queries heldout.txt --goals 50k \\
        --record bench/results/serve-50k.json --screenshot docs/figures/search-page.png
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path

import numpy as np

from bench.bench_index import cpu_line, exact_top, held_out
from bench.served import Client, cpu_per_query, cpu_seconds, rss_mib, start

# issue 67's goals on a 2-core CPU: (1-client p50 ms, 1-client p99 ms, 16-client queries/s)
GOALS = {"50k": {"one_client_p50_ms": 10, "one_client_p99_ms": 25, "clients_16_qps": 200},
         "1m": {"one_client_p50_ms": 30, "one_client_p99_ms": None, "clients_16_qps": 80}}
RECALL_GOAL, RSS_GROWTH_GOAL, CEILING_GOAL = 0.95, 0.10, 0.5
STAGES = ("proxy_hop", "body", "wait", "encode", "search", "texts", "json")


def phase(port: int, queries: list[str], clients: int, limit: int, seconds: float,
          method: str = "post") -> dict:
    """`clients` closed-loop clients sending up to `limit` queries in all, for at most
    `seconds`: latency percentiles, queries/s, errors."""
    latencies: list[float] = []
    errors: list[int] = []
    stages: list[dict] = []
    sent = iter(range(limit))
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def run() -> None:
        client = Client(port, method)
        while time.perf_counter() < deadline:
            with lock:
                number = next(sent, None)
            if number is None:
                return
            status, took, _, timing = client.timed_search(queries[number % len(queries)])
            with lock:
                (latencies if status == 200 else errors).append(took if status == 200 else status)
                stages.append(timing)

    threads = [threading.Thread(target=run) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return {"clients": clients, "answered": len(latencies), "errors": len(errors),
            "error_statuses": sorted(set(errors)), "seconds": round(elapsed, 1),
            "queries_per_s": round(len(latencies) / elapsed, 1),
            "p50_ms": round(float(np.percentile(latencies, 50)), 2),
            "p99_ms": round(float(np.percentile(latencies, 99)), 2),
            "stages_p50_ms": {name: round(float(np.median([t[name] for t in stages if name in t])), 2)
                              for name in STAGES if any(name in t for t in stages)},
            "mean_batch": round(float(np.mean([t["batch"] for t in stages if "batch" in t])), 1)
            if any("batch" in t for t in stages) else None}


def service_recall(port: int, table: str, queries: list[str], method: str = "post") -> float:
    """recall@10 of the service's answers against exact search over the table with the
    rows' own query vectors (the queries encoded by the rows' plan, exactly, in this process,
    whatever precision the service encodes its queries in)."""
    from sentray.index.search import VectorIndex

    index = VectorIndex(table, device="cpu", mode="table")
    vectors = np.asarray([v for v, _ in index.encode(queries)], dtype=np.float32)
    exact = exact_top(index.table, vectors, 10)
    client = Client(port, method)
    found = []
    for query, truth in zip(queries, exact, strict=True):
        status, _, answer = client.search(query)
        assert status == 200, status
        found.append(len({h["id"] for h in answer["hits"]} & set(truth)) / 10)
    return round(float(np.mean(found)), 4)


def ceiling(table: str, queries: list[str], batch_sizes: list[int], threads: int,
            query_precision: str = "exact", seconds: float = 20) -> dict:
    """The encoder and search alone, in this process on `threads` threads (the replica's), the
    queries in the precision the service took: per batch size, a batch's ms (encode + search +
    texts) and the queries/s it gives."""
    import torch

    from sentray.index.search import VectorIndex

    torch.set_num_threads(threads)
    index = VectorIndex(table, device="cpu", mode="auto", query_precision=query_precision)
    found = {}
    for size in batch_sizes:
        batches = [queries[i:i + size] for i in range(0, len(queries) - size + 1, size)]
        for batch in batches[:10]:  # warm: the runtime's kernels for these shapes
            index.nearest_many(index.encode(batch), 10)
        times, deadline = [], time.perf_counter() + seconds
        for batch in batches[10:]:
            started = time.perf_counter()
            index.nearest_many(index.encode(batch), 10)
            times.append(time.perf_counter() - started)
            if time.perf_counter() > deadline:
                break
        batch_ms = float(np.median(times)) * 1000
        found[str(size)] = {"batches": len(times), "batch_ms": round(batch_ms, 2),
                            "queries_per_s": round(size / batch_ms * 1000, 1)}
    return {"threads": threads, "query_precision": query_precision, "by_batch_size": found}


def judged(report: dict, goals: dict) -> dict:
    one, sixteen = report["phases"]["1"], report["phases"]["16"]
    checks = {"one_client_p50_ms": one["p50_ms"] <= goals["one_client_p50_ms"],
              "clients_16_qps": sixteen["queries_per_s"] >= goals["clients_16_qps"],
              "clients_16_errors": sixteen["errors"] == 0,
              "recall_at_10": report["recall_at_10"] >= RECALL_GOAL,
              "rss_after_within_10pct_of_warm": report["rss_after"]["service_tree_mib"]
              <= report["rss_warm"]["service_tree_mib"] * (1 + RSS_GROWTH_GOAL),
              "clients_16_ceiling_ratio": report["ceiling_ratio"]["clients_16"] >= CEILING_GOAL}
    if goals["one_client_p99_ms"] is not None:
        checks["one_client_p99_ms"] = one["p99_ms"] <= goals["one_client_p99_ms"]
    return {"goals": {**goals, "recall_at_10": RECALL_GOAL, "rss_growth": RSS_GROWTH_GOAL,
                      "ceiling_ratio": CEILING_GOAL}, "met": checks}


def stage_table(report: dict) -> str:
    """Where a request's time went, per phase (medians, ms), beside the ceiling."""
    lines = [f"{'clients':>7} {'q/s':>7} {'p50':>7} " + " ".join(f"{n:>9}" for n in STAGES)
             + "  batch"]
    for clients, found in report["phases"].items():
        stages = found["stages_p50_ms"]
        lines.append(f"{clients:>7} {found['queries_per_s']:>7} {found['p50_ms']:>7} "
                     + " ".join(f"{stages.get(n, float('nan')):>9.2f}" for n in STAGES)
                     + f"  {found['mean_batch']}")
    for clients, found in report["phases"].items():
        if "cpu_ms_per_query" in found:
            lines.append(f"CPU ms a query at {clients} clients: " + ", ".join(
                f"{name} {ms}" for name, ms in found["cpu_ms_per_query"].items()))
    for size, found in report["ceiling"]["by_batch_size"].items():
        lines.append(f"ceiling, batches of {size}: {found['batch_ms']} ms a batch, "
                     f"{found['queries_per_s']} q/s ({report['ceiling']['threads']} thread(s), "
                     f"queries {report['ceiling'].get('query_precision', 'exact')})")
    ratio = report["ceiling_ratio"]
    lines.append(f"service / ceiling: 16 clients {ratio['clients_16']}x its q/s; 1 client "
                 f"{ratio['one_client']}x (ceiling batch-of-1 ms / p50)")
    return "\n".join(lines)


def screenshot(url: str, query: str, path: Path) -> None:
    from sentray.testing.browser import headless_chromium, search_in_page

    browser = headless_chromium(1000, 760)
    try:
        search_in_page(browser, url, query)
        browser.save_screenshot(str(path))
    finally:
        browser.quit()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, required=True, help="an indexed output")
    parser.add_argument("--index-uri", help="the table, if not OUTPUT/_index.lance")
    parser.add_argument("--queries", type=Path, required=True, help="held-out sentences")
    parser.add_argument("--goals", choices=sorted(GOALS), required=True)
    parser.add_argument("--port", type=int, default=18431)
    parser.add_argument("--warm-up", type=int, default=400, help="queries, 32 clients, before "
                        "the RSS called 'after warm-up' is read")
    parser.add_argument("--one-client", type=int, default=300, help="queries, 1 client")
    parser.add_argument("--concurrent", type=int, default=1600, help="queries, 16/32 clients")
    parser.add_argument("--soak", type=int, default=10_000, help="queries answered after the "
                        "warm-up before the RSS called 'after' is read (16 clients)")
    parser.add_argument("--seconds", type=float, default=120, help="the most a phase runs")
    parser.add_argument("--recall-queries", type=int, default=200)
    parser.add_argument("--replica-threads", type=int, default=1, help="the ceiling's threads: "
                        "the replica's (Ray gives a 1-CPU actor one)")
    parser.add_argument("--method", choices=("post", "get"), default="post",
                        help="post: POST /search with a JSON body; get: GET /search?query=... "
                             "(no body for the replica to fetch back from the proxy)")
    parser.add_argument("--direct", action="store_true",
                        help="start the service with --direct-port PORT+1 and send the load "
                             "there (the replica itself, no proxy)")
    parser.add_argument("--flags", default="", help="more flags for jobs/serve.py")
    parser.add_argument("--record", type=Path)
    parser.add_argument("--screenshot", type=Path)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    queries = held_out(args.queries, set(), 2000, 0)
    flags = [*(["--index-uri", args.index_uri] if args.index_uri else []), *args.flags.split(),
             *(["--direct-port", str(args.port + 1)] if args.direct else [])]
    table = args.index_uri or str(args.output)
    process, ready = start(args.output, args.port, flags)
    port = args.port + 1 if args.direct else args.port  # where the load goes
    try:
        # warm-up: the first calls of each part, and batches as large as the run's (32
        # clients), so that "after warm-up" is the memory of a service that has seen its load
        warm = phase(port, queries[-args.warm_up:], 32, args.warm_up,
                     max(60.0, args.warm_up / 10), args.method)
        report = {"cpu": cpu_line(), "service": ready, "flags": flags, "method": args.method,
                  "load_to": f"127.0.0.1:{port}" + (" (the replica's direct port)"
                                                    if args.direct else " (the proxy)"),
                  "warm_up": warm,
                  "rss_warm": rss_mib(process.pid), "phases": {}}
        report["phases"]["1"] = phase(port, queries, 1, args.one_client, args.seconds,
                                      args.method)
        for clients in (16, 32):
            before = cpu_seconds(process.pid)
            found = phase(port, queries, clients, args.concurrent, args.seconds,
                          args.method)
            found["cpu_ms_per_query"] = cpu_per_query(before, cpu_seconds(process.pid),
                                                      found["answered"])
            report["phases"][str(clients)] = found
        answered = sum(p["answered"] for p in report["phases"].values())
        if args.soak > answered:
            report["soak"] = phase(port, queries, 16, args.soak - answered, args.soak / 20,
                                   args.method)
            answered += report["soak"]["answered"]
        report["queries_after_warm_up"] = answered
        report["rss_after"] = rss_mib(process.pid)
        report["recall_at_10"] = service_recall(port, table,
                                                queries[:args.recall_queries], args.method)
        if args.screenshot:
            screenshot(ready["url"], "the jury praised the city election", args.screenshot)
    finally:
        process.send_signal(2)  # Ctrl-C: the service stops itself and its Ray
        process.wait(120)
    sizes = sorted({1, max(1, round(report["phases"]["16"]["mean_batch"] or 1))})
    report["ceiling"] = ceiling(table, queries, sizes, args.replica_threads,
                                ready.get("query_precision", "exact"))
    by_size = report["ceiling"]["by_batch_size"]
    report["ceiling_ratio"] = {
        "clients_16": round(report["phases"]["16"]["queries_per_s"]
                            / by_size[str(sizes[-1])]["queries_per_s"], 2),
        "one_client": round(by_size["1"]["batch_ms"] / report["phases"]["1"]["p50_ms"], 2)}
    report.update(judged(report, GOALS[args.goals]))
    print(json.dumps(report, indent=1), flush=True)
    print(stage_table(report), flush=True)
    if args.record:
        args.record.write_text(json.dumps(report, indent=1) + "\n")
        args.record.with_suffix(".txt").write_text(stage_table(report) + "\n")


if __name__ == "__main__":
    main()

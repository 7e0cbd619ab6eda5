"""A replica of `sentray serve` lost under load: the service started as a user starts it (one
replica unless --flags say otherwise), 16 keep-alive clients searching held-out queries, and
after --kill-after seconds its replica's process killed with SIGKILL (no goodbye). Nobody
restarts anything: Ray Serve's controller must notice and start a new replica by itself. A
client whose connection broke connects again after RETRY_PAUSE_S. `--direct` sends the load to
the replica's own port (`--direct-port`), where nothing holds a request while it is replaced.

Every request is recorded (when sent, when answered, its status); the record says:
- how many failed, with which statuses, and whether each was in flight at the kill (sent before
  it, answered after) or sent after it (while the service had no replica);
- how long after the kill the service answered a search again (the first 200 to a request sent
  after the kill), and when the last failure came;
- the hangs: requests with no answer within --client-timeout seconds (there must be none).

    python bench/bench_serve_kill.py --output OUT --queries heldout.txt \\
        --record bench/results/serve-kill-50k.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time
from pathlib import Path

from bench.bench_index import cpu_line, held_out
from bench.served import Client, start

RECOVERY_GOAL_S = 15.0
RETRY_PAUSE_S = 0.05  # a client's pause before it connects again after a broken connection


def replica_pids(pid: int) -> list[int]:
    """The service's replica processes (their command line names the deployment)."""
    import psutil

    found = []
    for member in psutil.Process(pid).children(recursive=True):
        try:
            if "SearchService" in " ".join(member.cmdline()):
                found.append(member.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def load(port: int, queries: list[str], clients: int, seconds: float,
         timeout: float) -> tuple[list[dict], threading.Event]:
    """Start `clients` closed-loop clients for `seconds`; (their records, filled as they go;
    an event set when all are done)."""
    records: list[dict] = []
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds
    done = threading.Event()

    def run(number: int) -> None:
        client = Client(port)
        client.connection.timeout = timeout
        count = 0
        while time.perf_counter() < deadline:
            sent = time.perf_counter()
            status, took, _ = client.search(queries[(number * 997 + count) % len(queries)])
            count += 1
            if status == 0:  # the connection broke or timed out: a new one for the next,
                # after a pause, as clients retry (refused at once by a port nobody listens on,
                # 16 clients retrying at once spun ~10,000 connects a second, a core's worth,
                # and slowed the replacement replica's start: --direct-port answered again
                # after 24.2 s, against 14.3 s with the pause)
                time.sleep(RETRY_PAUSE_S)
                client = Client(port)
                client.connection.timeout = timeout
            with lock:
                records.append({"sent": sent, "answered": sent + took / 1000,
                                "status": status, "ms": took})

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()

    def wait() -> None:
        for thread in threads:
            thread.join()
        done.set()

    threading.Thread(target=wait).start()
    return records, done


def judged(records: list[dict], killed_at: float, timeout: float) -> dict:
    failed = [r for r in records if r["status"] != 200]
    in_flight = [r for r in failed if r["sent"] < killed_at <= r["answered"]]
    after = [r for r in failed if r["sent"] >= killed_at]
    before = [r for r in failed if r["answered"] < killed_at]
    again = [r for r in records if r["status"] == 200 and r["sent"] >= killed_at]
    first_again = min((r["answered"] for r in again), default=None)
    hangs = [r for r in records if r["ms"] >= timeout * 1000 * 0.99]
    recovered_s = None if first_again is None else round(first_again - killed_at, 2)
    return {
        "requests": len(records), "answered_200": len(records) - len(failed),
        "failed": len(failed), "failed_statuses": sorted({r["status"] for r in failed}),
        "failed_in_flight_at_kill": len(in_flight), "failed_sent_after_kill": len(after),
        "failed_before_kill": len(before), "hangs": len(hangs),
        "answers_again_after_s": recovered_s,
        "last_failure_after_kill_s": round(max((r["answered"] for r in failed),
                                               default=killed_at) - killed_at, 2),
        "slowest_ms": round(max(r["ms"] for r in records), 1),
        "met": {"answers_again_within_15_s": recovered_s is not None
                and recovered_s <= RECOVERY_GOAL_S,
                "failures_only_in_flight": len(after) == 0 and len(before) == 0,
                "failures_are_5xx": all(500 <= r["status"] < 600 for r in failed),
                "no_hangs": not hangs}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, required=True, help="an indexed output")
    parser.add_argument("--queries", type=Path, required=True, help="held-out sentences")
    parser.add_argument("--port", type=int, default=18433)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=45, help="the load's length")
    parser.add_argument("--kill-after", type=float, default=10)
    parser.add_argument("--client-timeout", type=float, default=30, help="no answer by then: "
                        "a hang")
    parser.add_argument("--direct", action="store_true",
                        help="start the service with --direct-port PORT+1 and send the load "
                             "there (no proxy: no failover, said in the record)")
    parser.add_argument("--flags", default="", help="more flags for jobs/serve.py")
    parser.add_argument("--record", type=Path)
    args = parser.parse_args()
    queries = held_out(args.queries, set(), 2000, 1)
    flags = [*args.flags.split(), *(["--direct-port", str(args.port + 1)] if args.direct
                                    else [])]
    process, ready = start(args.output, args.port, flags)
    port = args.port + 1 if args.direct else args.port  # where the load goes
    try:
        warm = Client(port)
        for query in queries[:50]:
            warm.search(query)
        records, done = load(port, queries, args.clients, args.seconds, args.client_timeout)
        time.sleep(args.kill_after)
        victims = replica_pids(process.pid)
        killed_at = time.perf_counter()
        os.kill(victims[0], signal.SIGKILL)
        done.wait(args.seconds + args.client_timeout + 30)
        report = {"cpu": cpu_line(), "service": ready, "flags": flags,
                  "load_to": f"127.0.0.1:{port}" + (" (the replica's direct port)"
                                                    if args.direct else " (the proxy)"),
                  "clients": args.clients, "seconds": args.seconds,
                  "killed_after_s": args.kill_after, "killed_pid": victims[0],
                  "replicas_after": replica_pids(process.pid),
                  **judged(records, killed_at, args.client_timeout)}
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(120)
    print(json.dumps(report, indent=1), flush=True)
    if args.record:
        args.record.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()

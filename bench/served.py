"""A running `sentray serve` as the serve benchmarks meet it: started as a user starts it
(`start`: `python jobs/serve.py`, its ready line read), its processes' memory (`rss_mib`) and
CPU (`cpu_seconds`, `cpu_per_query`: the replicas, the HTTP proxy, the rest), and one keep-alive
client (`Client`: POST or GET /search, the replica's stages from its Server-Timing header)."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

from bench.bench_index import ROOT


def start(output: Path, port: int, flags: list[str]) -> tuple[subprocess.Popen, dict]:
    process = subprocess.Popen([sys.executable, "jobs/serve.py", str(output), "--port",
                                str(port), *flags], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    line = process.stdout.readline()
    if not line:
        raise SystemExit("the service did not start (run it by hand to see why)")
    return process, json.loads(line)


def rss_mib(pid: int) -> dict:
    """RSS (MiB) of the service's process tree, and of its replicas alone."""
    import psutil

    family = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    total = replicas = 0
    for member in family:
        try:
            rss = member.memory_info().rss
            total += rss
            if "SearchService" in " ".join(member.cmdline()):
                replicas += rss
        except psutil.NoSuchProcess:
            continue
    return {"service_tree_mib": round(total / 2**20), "replicas_mib": round(replicas / 2**20)}


def cpu_seconds(pid: int) -> dict:
    """CPU seconds (user + system) so far of the service's replicas, its HTTP proxy, the rest
    of its process tree (the driver, Ray's own processes) and this process (the clients)."""
    import psutil

    found = {"replica": 0.0, "proxy": 0.0, "ray_and_driver": 0.0,
             "clients": sum(psutil.Process().cpu_times()[:2])}
    for member in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
        try:
            command, times = " ".join(member.cmdline()), member.cpu_times()
        except psutil.NoSuchProcess:
            continue
        group = ("replica" if "SearchService" in command else
                 "proxy" if "ProxyActor" in command else "ray_and_driver")
        found[group] += times.user + times.system
    return found


def cpu_per_query(before: dict, after: dict, answered: int) -> dict:
    """CPU ms a query, by where it ran, between two `cpu_seconds`."""
    spent = {name: (after[name] - before[name]) * 1000 / max(answered, 1) for name in after}
    return {**{name: round(ms, 2) for name, ms in spent.items()},
            "total": round(sum(spent.values()), 2)}


class Client:
    """One keep-alive connection to the service."""

    def __init__(self, port: int, method: str = "post") -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.method = method  # post: {"query": ..., "k": ...}; get: /search?query=...&k=...

    def search(self, query: str, k: int = 10) -> tuple[int, float, dict | None]:
        """(status, ms, the answer) of one search; status 0 when the connection failed."""
        status, took, answer, _ = self.timed_search(query, k)
        return status, took, answer

    def timed_search(self, query: str, k: int = 10) -> tuple[int, float, dict | None, dict]:
        """`search`, with the replica's stages (ms) from its Server-Timing header."""
        started = time.perf_counter()
        try:
            if self.method == "get":
                self.connection.request("GET", "/search?" + urlencode({"query": query, "k": k}))
            else:
                self.connection.request("POST", "/search", json.dumps({"query": query, "k": k}),
                                        {"Content-Type": "application/json"})
            answer = self.connection.getresponse()
            data = answer.read()
        except (OSError, http.client.HTTPException):
            self.connection.close()
            return 0, (time.perf_counter() - started) * 1000, None, {}
        took = (time.perf_counter() - started) * 1000
        if answer.status != 200:
            return answer.status, took, None, {}
        return 200, took, json.loads(data), server_timing(answer.getheader("Server-Timing"), took)


def server_timing(header: str | None, client_ms: float) -> dict:
    """The replica's stages (ms) and batch size from its Server-Timing header; `proxy_hop`:
    what the client saw beyond the replica's total."""
    stages: dict[str, float] = {}
    for part in (header or "").split(","):
        name, _, rest = part.strip().partition(";")
        key, _, value = rest.partition("=")
        if key in ("dur", "desc") and value:
            stages[name] = float(value.strip('"'))
    if "total" in stages:
        stages["proxy_hop"] = client_ms - stages["total"]
    return stages

"""`run_serve`: the job behind `sentray serve` and `jobs/serve.py`. Checks that the table is
there and the port free, connects to Ray (or starts a local loopback cluster), starts Ray
Serve's HTTP proxy on --host:--port and the `SearchService` replicas (a fixed count, or
autoscaled between MIN and MAX on the requests in flight), prints one JSON line once it
answers (its URL, the table, its rows), and serves until Ctrl-C (or SIGTERM): then it deletes
its application, stops Serve and the Ray it started itself, and nothing else."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import sys
import time
import urllib.request

from sentray.index.index_state import IndexState
from sentray.index.search import table_uri
from sentray.kit import storage
from sentray.kit.ray_cluster import init_ray, local_cpus
from sentray.serve.config import ServeConfig
from sentray.serve.direct_ingress import direct_ingress_env
from sentray.serve.search_requests import Limits

logger = logging.getLogger(__name__)
APPLICATION = "sentray-search"
# Replicas the autoscaler aims at per request in flight: a replica batches what it is sent, so
# it takes a few at once before another one helps
TARGET_ONGOING_REQUESTS = 8
# How often Serve's controller asks each replica whether it lives: a replica killed under load
# is replaced only once a check fails. At Serve's default (10 s) the service answered again
# 15.1 s after a SIGKILL and the 16 requests waiting meanwhile got a 408 from the proxy
# (bench/bench_serve_kill.py, issue 67); the check is a no-op call on the replica's loop.
HEALTH_CHECK_PERIOD_S = 2.0
# What Ray 2.60's RAY_SERVE_THROUGHPUT_OPTIMIZED sets, less direct ingress (which listens on
# ports of its own, not --port) and its quieter logs (ours are one line a request): the
# replica runs our handler on its own event loop and the proxy its router on its own, instead
# of each on a thread beside it; the proxy calls the replica over gRPC rather than as a Ray
# actor task; the garbage collector skips what the replica built at start-up. Issue 67 (AMD
# EPYC, 2 CPUs, 50,000 rows, back to back: bench/results/serve-67-loops-*.json): the loops,
# 32 clients 79.1 -> 109.8 q/s; 16 clients 103.4 -> 107.1 and one client's p50 20.2 -> 20.4
# ms, within the noise; gRPC and the GC freeze (serve-67b-ab-*.json): one client's p50 16.4
# -> 14.5 ms (the proxy and the hop 4.9 -> 3.4), 16 clients 147.8 -> 157.7 q/s, CPU a query
# 10.9 -> 9.8 ms.
# A value in this job's environment wins; the replica gets it in its runtime env (any
# cluster), the proxy only on a cluster this job starts.
SERVE_LOOPS_ENV = {"RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",
                   "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0",
                   "RAY_SERVE_USE_GRPC_BY_DEFAULT": "1",
                   "RAY_SERVE_FREEZE_GC_ON_STARTUP": "1"}


def run_serve(config: ServeConfig) -> None:
    """Serve `config.table` until interrupted (module docstring)."""
    uri = table_uri(config.table)
    # the index job's record says a table is there (opened by the replicas only: LanceDB's
    # runtime in this process would be forked into every Ray process it starts)
    if IndexState.read(storage.locate(uri, config.s3_endpoint)) is None:
        raise FileNotFoundError(f"no index at {uri}: build it with `sentray index "
                                f"{config.embeddings}` (or pass --index-uri TABLE.lance)")
    check_port_free(config.host, config.port)
    if config.direct_port is not None:
        check_port_free(config.host, config.direct_port, "--direct-port")
        os.environ.update(direct_ingress_env(config.direct_port))  # the cluster inherits it
    if not sys.stderr.isatty():
        # Ray colours the "(ServeReplica ...)" prefix of the replica's lines it prints here;
        # in a file those codes are noise (read by Ray at each line it prints)
        os.environ["RAY_COLOR_PREFIX"] = "0"
    for name, value in SERVE_LOOPS_ENV.items():  # a local cluster's proxy inherits them
        os.environ.setdefault(name, value)
    started_ray = init_ray(config.address, num_cpus=local_cpus(config.replicas.maximum,
                                                                 config.cpus_per_replica))
    handlers, stdout = _interrupt_on_signals(), sys.stdout
    try:
        url = start_service(config)
        info = _get_json(f"{url}/info", config.secret)
        direct = ({"direct_url": f"http://{config.host}:{config.direct_port}"}
                  if config.direct_port is not None else {})
        print(json.dumps({"url": url, **direct, "table": uri, "rows": info["rows"],
                          "index": info["index"], "search": info["search"],
                          "query_precision": info["query_precision"]["precision"],
                          "replicas": config.replicas.spec()}), flush=True)
        sys.stdout = sys.stderr  # the line above is the result: Ray's notes go to stderr
        logger.info("serving %s at %s (Ctrl-C stops it)", uri, url)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        logger.info("stopping the service")
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
        _stop_service(started_ray)
        sys.stdout = stdout


def start_service(config: ServeConfig) -> str:
    """Start Serve's proxy and the replicas; returns the service's URL once it answers."""
    from ray import serve

    from sentray.serve.service import SearchService, ServiceSpec

    verbose = logging.getLogger().level <= logging.DEBUG  # -v: Serve's own notes too
    if not verbose:
        logging.getLogger("ray.serve").setLevel(logging.WARNING)

    spec = ServiceSpec(
        table=config.table, s3_endpoint=config.s3_endpoint, device=config.device,
        search_mode=config.search_mode, query_precision=config.query_precision,
        nprobes=config.nprobes, refine_factor=config.refine_factor,
        limits=Limits(config.max_k, config.max_queries, config.max_body_bytes),
        secret=config.secret, max_batch_size=config.max_batch_size,
        request_timeout_s=config.request_timeout_s)
    # the proxy's own time limit, past ours: a request ours lets through is never cut there
    serve.start(http_options={"host": config.host, "port": config.port,
                              "request_timeout_s": config.request_timeout_s + 5},
                logging_config={"log_level": "INFO" if verbose else "WARNING"})
    scaling = ({"num_replicas": config.replicas.minimum} if config.replicas.fixed else
               {"autoscaling_config": {"min_replicas": config.replicas.minimum,
                                       "max_replicas": config.replicas.maximum,
                                       "target_ongoing_requests": TARGET_ONGOING_REQUESTS}})
    deployment = serve.deployment(
        SearchService, name="SearchService", max_queued_requests=config.max_queued_requests,
        max_ongoing_requests=2 * config.max_batch_size,
        health_check_period_s=HEALTH_CHECK_PERIOD_S,
        ray_actor_options={"num_cpus": config.cpus_per_replica,
                           "runtime_env": {"env_vars": {
                               name: os.environ.get(name, value)
                               for name, value in SERVE_LOOPS_ENV.items()} | (
                                   direct_ingress_env(config.direct_port)
                                   if config.direct_port is not None else {})}},
        # our one line a request (service.py), not Serve's own access log beside it
        logging_config={"log_level": "INFO", "enable_access_log": False}, **scaling)
    try:
        serve.run(deployment.bind(spec), name=APPLICATION, route_prefix="/")
    except RuntimeError as exc:  # the replicas failed to start: say why in one line
        raise ValueError(f"the service did not start: {replica_failure() or exc}") from None
    return f"http://{config.host}:{config.port}"


def replica_failure() -> str | None:
    """The last line of the error the replicas failed to start with (Serve's deployment status
    holds their traceback; e.g. `--query-precision bf16` refused), if Serve says one."""
    from ray import serve

    try:
        message = serve.status().applications[APPLICATION].deployments["SearchService"].message
    except (KeyError, AttributeError):
        return None
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return lines[-1] if lines else None


def check_port_free(host: str, port: int, flag: str = "--port") -> None:
    """ValueError naming the port when something listens on it already (Serve's proxy would
    otherwise fail in the background, and the service never answer)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ValueError(f"cannot listen on {host}:{port} ({exc.strerror}): another "
                             f"program holds the port; give another with {flag}") from None


def _interrupt_on_signals() -> dict:
    """Ctrl-C (SIGINT, even where the shell that started us ignores it) and SIGTERM stop the
    service; returns the handlers replaced."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    return {number: signal.signal(number, interrupt)
            for number in (signal.SIGINT, signal.SIGTERM)}


def _get_json(url: str, secret: str | None) -> dict:
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                timeout=30) as answer:
        return json.loads(answer.read())


def _stop_service(started_ray: bool) -> None:
    """Delete this service (its replicas finish what they hold); stop Ray, and Serve with it,
    when this process started Ray (a cluster given by --address keeps running, with whatever
    else it serves)."""
    import ray
    from ray import serve

    try:
        serve.delete(APPLICATION)
    finally:
        if started_ray:
            ray.shutdown()

"""Ray Serve's direct ingress as `sentray serve --direct-port PORT` uses it: the one replica
answers HTTP on PORT itself, beside the proxy on --port (Ray 2.60, `RAY_SERVE_ENABLE_DIRECT_
INGRESS`). `direct_ingress_env` is the environment that turns it on for that one port;
`rebind_after_loss` lets a replacement replica listen on it again.

Why the second: Ray 2.60 binds the replica's port without SO_REUSEADDR. When a replica is lost
under load, the connections it held wait out TIME_WAIT on that port (60 s on Linux), so its
replacement cannot bind it; Ray's port allocator then blocks the port and the replacement fails
to start, again and again: the whole service stopped answering, --port too (bench/results/
serve-67c-kill-50k-amd-direct.json: "Failed to bind to address '127.0.0.1:18434'", no answer
in the 35 s after the kill). Linux lets a socket bind past TIME_WAIT when it and the waiting
connections (which take their listener's options) set SO_REUSEADDR, as uvicorn's own sockets
do: every replica sets it on the one socket Ray's HTTP helpers make, so the replacement of a
lost one binds its port at once."""

from __future__ import annotations

import os
import socket

ENABLED = "RAY_SERVE_ENABLE_DIRECT_INGRESS"


def direct_ingress_env(port: int) -> dict[str, str]:
    """The environment of direct ingress on `port` alone: its port range is that one port,
    handed back at once when a replica is lost (no quarantine), so the replacement listens on
    it again; a replica stopping drains its requests in flight but does not hold its port open
    for a load balancer to deregister it (Ray's default, 30 s: Ctrl-C took 33 s to stop the
    service in tests/serve/test_serve_job.py; 5 s without that hold)."""
    return {ENABLED: "1",
            "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": str(port),
            "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": str(port + 1),
            "RAY_SERVE_PORT_QUARANTINE_S": "0",
            "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "0"}


def enabled() -> bool:
    """Whether this process (a replica) runs with direct ingress on."""
    return os.environ.get(ENABLED) == "1"


class ReusingSockets:
    """The `socket` module, but the sockets it makes set SO_REUSEADDR (module docstring)."""

    def __init__(self, module) -> None:
        self.module = module

    def __getattr__(self, name: str):
        return getattr(self.module, name)

    def socket(self, *args, **kwargs) -> socket.socket:
        made = self.module.socket(*args, **kwargs)
        made.setsockopt(self.module.SOL_SOCKET, self.module.SO_REUSEADDR, 1)
        return made


def rebind_after_loss() -> None:
    """In a replica, before Ray starts its direct-ingress server: that server's socket sets
    SO_REUSEADDR (Ray's HTTP helpers make no other socket)."""
    from ray.serve._private import http_util

    if not isinstance(http_util.socket, ReusingSockets):
        http_util.socket = ReusingSockets(http_util.socket)

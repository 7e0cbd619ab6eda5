"""`--direct-port`'s pieces without Ray Serve: the environment that turns direct ingress on
for one port, and the socket a replacement replica binds that port with: past the lost
replica's connections in TIME_WAIT, where a plain socket (Ray 2.60's) is refused."""

from __future__ import annotations

import socket

import pytest

from sentray.serve import direct_ingress
from sentray.serve.direct_ingress import ReusingSockets, direct_ingress_env


def test_the_environment_names_one_port_without_quarantine():
    env = direct_ingress_env(8001)
    assert env["RAY_SERVE_ENABLE_DIRECT_INGRESS"] == "1"
    # Ray's allocator hands out range(MIN, MAX): this one port
    assert (env["RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT"],
            env["RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT"]) == ("8001", "8002")
    assert env["RAY_SERVE_PORT_QUARANTINE_S"] == "0"
    assert env["RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S"] == "0"  # Ctrl-C stops at once


def port_in_time_wait(sockets) -> int:
    """A loopback port whose listener (made by `sockets`) closed after the server side closed
    an accepted connection first: that connection waits out TIME_WAIT on the port (as a killed
    replica's do)."""
    listener = sockets.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = listener.accept()
    accepted.close()  # the server's side closes first: TIME_WAIT is on the server's port
    listener.close()
    client.close()
    return port


def test_a_replacement_binds_the_port_past_time_wait_where_a_plain_socket_cannot():
    """Linux lets a socket bind past TIME_WAIT when it and the waiting connections (which take
    their listener's options) both set SO_REUSEADDR: every replica's listener sets it, so the
    replacement of a lost one binds its port at once."""
    port = port_in_time_wait(ReusingSockets(socket))
    plain = socket.socket()
    with pytest.raises(OSError):  # what Ray 2.60's replacement replica met
        plain.bind(("127.0.0.1", port))
    plain.close()
    reusing = ReusingSockets(socket).socket(socket.AF_INET, socket.SOCK_STREAM)
    reusing.bind(("127.0.0.1", port))
    reusing.listen()
    assert reusing.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR) == 1
    reusing.close()
    assert ReusingSockets(socket).AF_INET == socket.AF_INET  # the rest is the module's


def test_the_replica_patches_ray_s_http_helpers_once(monkeypatch):
    from ray.serve._private import http_util

    monkeypatch.setattr(http_util, "socket", socket)
    direct_ingress.rebind_after_loss()
    direct_ingress.rebind_after_loss()
    assert isinstance(http_util.socket, ReusingSockets) and http_util.socket.module is socket
    monkeypatch.setenv("RAY_SERVE_ENABLE_DIRECT_INGRESS", "1")
    assert direct_ingress.enabled()
    monkeypatch.delenv("RAY_SERVE_ENABLE_DIRECT_INGRESS")
    assert not direct_ingress.enabled()

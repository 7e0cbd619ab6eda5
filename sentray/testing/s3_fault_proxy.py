"""A misbehaving S3, for tests: an HTTP proxy on 127.0.0.1 in front of a moto server that answers
a share of requests 503 SlowDown or 500 InternalError, cuts some connections mid-body (the
request's or the response's), and delays some responses, as object stores do under load.
Deterministic for a seed; every fault it injects is counted."""

from __future__ import annotations

import http.client
import io
import random
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ERRORS = {503: ("SlowDown", "Please reduce your request rate."),
          500: ("InternalError", "We encountered an internal error. Please try again.")}


@dataclass
class Faults:
    """Shares of requests to spoil (each request gets at most one fault)."""

    slow_down: float = 0.0  # 503 SlowDown
    internal_error: float = 0.0  # 500 InternalError
    cut_request: float = 0.0  # the request read, then the connection closed with no answer
    cut_response: float = 0.0  # the answer's headers and half its body, then closed
    delay: float = 0.0  # share of answers held back `delay_s`
    delay_s: float = 0.2
    only: tuple[str, ...] = ()  # methods to spoil (default: all)
    path_contains: str = ""  # spoil only requests whose path holds this
    seed: int = 0
    injected: dict = field(default_factory=dict)

    def pick(self, rng: random.Random, method: str, path: str) -> str | None:
        if (self.only and method not in self.only) or self.path_contains not in path:
            return None
        draw = rng.random()
        for name in ("slow_down", "internal_error", "cut_request", "cut_response", "delay"):
            share = getattr(self, name)
            if draw < share:
                self.injected[name] = self.injected.get(name, 0) + 1
                return name
            draw -= share
        return None


class FaultProxy:
    """`FaultProxy(upstream_port, faults)`: `endpoint` is what clients use instead of moto's."""

    def __init__(self, upstream_port: int, faults: Faults | None = None) -> None:
        self.upstream_port, self.faults = upstream_port, faults or Faults()
        self._rng, self._lock = random.Random(self.faults.seed), threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _handle(self) -> None:
                proxy.forward(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def forward(self, handler: BaseHTTPRequestHandler) -> None:
        with self._lock:
            fault = self.faults.pick(self._rng, handler.command, handler.path)
        chunked = "chunked" in (handler.headers.get("Transfer-Encoding") or "").lower()
        aws_chunked = handler.headers.get("x-amz-decoded-content-length") is not None
        if chunked:  # HTTP's chunked transfer
            body = read_chunked(handler.rfile)
        else:
            length = int(handler.headers.get("Content-Length") or 0)
            body = handler.rfile.read(length) if length else b""
        if aws_chunked:  # the payload inside it: AWS's own chunks and a checksum trailer
            body = read_chunked(io.BytesIO(body))
        chunked = chunked or aws_chunked  # forwarded decoded, with its length
        if fault == "cut_request":  # the client hears nothing back: the connection is gone
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault in ("slow_down", "internal_error"):
            status = 503 if fault == "slow_down" else 500
            code, message = ERRORS[status]
            payload = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                       f"<Message>{message}</Message></Error>").encode()
            handler.send_response(status)
            handler.send_header("Content-Type", "application/xml")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
            return
        upstream = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=60)
        headers = {k: v for k, v in handler.headers.items() if k.lower() != "connection"}
        if chunked:  # aws-chunked with a trailing checksum: pass the payload on plain
            dropped = {"transfer-encoding", "content-encoding", "x-amz-trailer",
                       "x-amz-decoded-content-length", "content-length"}
            headers = {k: v for k, v in headers.items() if k.lower() not in dropped}
            headers = {**{k: v for k, v in headers.items()
                          if k.lower() != "x-amz-content-sha256"},
                       "x-amz-content-sha256": "UNSIGNED-PAYLOAD", "Content-Length": str(len(body))}
        upstream.request(handler.command, handler.path, body=body, headers=headers)
        answer = upstream.getresponse()
        data = answer.read()
        upstream.close()
        if fault == "delay":
            threading.Event().wait(self.faults.delay_s)
        handler.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("connection", "transfer-encoding", "content-length"):
                handler.send_header(key, value)
        length = answer.getheader("Content-Length") if handler.command == "HEAD" else None
        handler.send_header("Content-Length", length or str(len(data)))  # HEAD: the object's
        handler.end_headers()
        if fault == "cut_response" and handler.command != "HEAD" and len(data) > 1:
            handler.wfile.write(data[:len(data) // 2])
            handler.wfile.flush()
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        if handler.command != "HEAD":
            handler.wfile.write(data)


def read_chunked(stream) -> bytes:
    """The payload of a chunked request body (the AWS SDK sends uploads as `aws-chunked` with a
    trailing checksum): every chunk's data, the last chunk's trailers read and dropped."""
    data = b""
    while True:
        size = int(stream.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while stream.readline() not in (b"\r\n", b"\n", b""):
                pass
            return data
        data += stream.read(size)
        stream.readline()  # the CRLF after the chunk

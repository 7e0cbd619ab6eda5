"""The Ray Serve deployment behind `sentray serve`: `SearchService`, one replica, opens the table
and builds its query encoder once (`VectorIndex`: the encoder the search command builds, from
what the table records), then answers

    GET  /          the search page (page.html beside this module)
    GET  /healthz   {"status": "ok"}
    GET  /info      the model, pooling, rows and index type the table holds
    POST /search    {"query": "...", "k": 10} or {"queries": [...], "k": 10} -> the hits

Concurrent queries are encoded and searched together (`query_batches`: what queued while the
last batch ran), in a thread, so the replica's event loop keeps taking requests while a batch
runs. A bad request gets a 400 with a
one-line reason (`search_requests`), a missing or wrong token a 401, a search not answered
within --request-timeout-s a 503 (Ray Serve itself answers 503 past --max-queued-requests).
Each request is logged in one line: method, path, status, latency."""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from sentray.serve.query_batches import QueryBatches
from sentray.serve.search_requests import BadRequest, Limits, parse_search

logger = logging.getLogger("ray.serve")  # a replica's logger: its lines reach the driver
PAGE = Path(__file__).with_name("page.html")
ROUTES = {"/": "GET", "/healthz": "GET", "/info": "GET", "/search": "POST"}


@dataclass(frozen=True)
class ServiceSpec:
    """All a replica is built from (`ServeConfig` decided into what a replica needs)."""

    table: str  # an output folder or a .lance table
    s3_endpoint: str | None
    device: str
    search_mode: str
    nprobes: int | None
    refine_factor: int
    limits: Limits
    secret: str | None
    max_batch_size: int
    request_timeout_s: float


def error(status: int, reason: str) -> JSONResponse:
    return JSONResponse({"error": reason}, status_code=status)


class SearchService:
    """One replica of the service (module docstring)."""

    def __init__(self, spec: ServiceSpec) -> None:
        from sentray.index.search import VectorIndex

        self.spec = spec
        self.index = VectorIndex(spec.table, s3_endpoint=spec.s3_endpoint, device=spec.device,
                                 mode=spec.search_mode)
        self.page = PAGE.read_text(encoding="utf-8")
        self.info = table_info(self.index, spec)
        self.batches = QueryBatches(self._search_blocking, spec.max_batch_size)
        self._search_blocking([("warm up", 1)])  # the encoder's and the index's first call

    async def __call__(self, request: Request) -> Response:
        started = time.perf_counter()
        response = await self._answer(request)
        logger.info("%s %s %d %.1f ms", request.method, request.url.path, response.status_code,
                    (time.perf_counter() - started) * 1000)
        return response

    async def _answer(self, request: Request) -> Response:
        if not self._authorized(request):
            return error(401, "this service needs its token: send the header "
                              "`Authorization: Bearer TOKEN` (or ?token=TOKEN)")
        path, method = request.url.path.rstrip("/") or "/", request.method
        if path not in ROUTES:
            return error(404, f"no such path {path}: the paths are {', '.join(ROUTES)}")
        if method != ROUTES[path]:
            return error(405, f"{path} takes {ROUTES[path]}, not {method}")
        if path == "/":
            return HTMLResponse(self.page)
        if path == "/healthz":
            return JSONResponse({"status": "ok"})
        if path == "/info":
            return JSONResponse(self.info)
        return await self._search(request)

    def _authorized(self, request: Request) -> bool:
        if self.spec.secret is None:
            return True
        header = request.headers.get("authorization", "")
        given = (header[len("Bearer "):] if header.startswith("Bearer ")
                 else request.query_params.get("token", ""))
        return hmac.compare_digest(given.encode(), self.spec.secret.encode())

    async def _search(self, request: Request) -> Response:
        started = time.perf_counter()
        try:
            body = await read_body(request, self.spec.limits.max_body_bytes)
            parsed = parse_search(body, self.spec.limits)
        except BadRequest as exc:
            return error(400, str(exc))
        try:
            results = await asyncio.wait_for(
                asyncio.gather(*(self.batches.submit((q, parsed.k)) for q in parsed.queries)),
                self.spec.request_timeout_s)
        except asyncio.TimeoutError:
            return error(503, f"no answer within {self.spec.request_timeout_s:g} s: the "
                              "service is overloaded; retry later")
        took = round((time.perf_counter() - started) * 1000, 2)
        if not parsed.many:
            return JSONResponse({"query": parsed.queries[0], "k": parsed.k, "hits": results[0],
                                 "took_ms": took})
        return JSONResponse({"k": parsed.k, "took_ms": took, "results": [
            {"query": q, "hits": hits} for q, hits in zip(parsed.queries, results, strict=True)]})

    def _search_blocking(self, items: list[tuple[str, int]]) -> list[list[dict]]:
        """One batch of (query, k), in a worker thread: encoded together, searched together at
        the largest k asked (each query's own k are the first of those)."""
        encoded = self.index.encode([query for query, _ in items])
        found = self.index.nearest_many(encoded, max(k for _, k in items),
                                        nprobes=self.spec.nprobes,
                                        refine_factor=self.spec.refine_factor)
        return [hits[:k] for hits, (_, k) in zip(found, items, strict=True)]


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body; BadRequest as soon as it is past `limit` bytes (read no further)."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise BadRequest(f"the request body is {int(declared):,} bytes; at most {limit:,} are "
                         "accepted")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise BadRequest(f"the request body is over {limit:,} bytes, the most accepted")
    return bytes(body)


def table_info(index, spec: ServiceSpec) -> dict:
    """What `GET /info` says: the embedding the table holds and how it is searched."""
    from sentray.index.index_state import IndexState
    from sentray.kit import storage

    settings = index.description.settings
    state = IndexState.read(storage.locate(index.uri, spec.s3_endpoint))
    return {"table": index.uri, "rows": index.table.count_rows(),
            "model": settings["model"], "pooling": settings["pooling"],
            "dimension": index.description.dimension, "dtype": index.description.dtype,
            "metric": index.description.metric,
            "index": state.index_type if state and state.trained_rows else "none (exact search)",
            "search": ("exact, the vectors held in memory" if index.mode == "memory"
                       else "the table's index" if state and state.trained_rows
                       else "exact, in the table"),
            "nprobes": spec.nprobes or index.nprobes, "refine_factor": spec.refine_factor,
            "max_k": spec.limits.max_k, "max_queries": spec.limits.max_queries}

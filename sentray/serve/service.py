"""The Ray Serve deployment behind `sentray serve`: `SearchService`, one replica, opens the table
and builds its query encoder once (`VectorIndex`: the encoder the search command builds, from
what the table records), then answers

    GET  /               the search page (page.html beside this module)
    GET  /healthz        {"status": "ok"}: without the token (a load balancer's probe has none)
    GET  /info           the model, pooling, rows and index type the table holds
    POST /search         {"query": "...", "k": 10} or {"queries": [...], "k": 10} -> the hits
    GET  /search         ?query=...&k=10: one query, the same answer (no body to fetch)
    POST /v1/embeddings  OpenAI's embeddings API (`openai_api`): the embedding job's vectors
    GET  /v1/models      the one model, as OpenAI's API lists models

(HEAD too wherever GET is answered). Concurrent queries are encoded and searched together
(`query_batches`: what queued while the last batch ran), in threads, so the replica's event
loop keeps taking requests while a batch runs; the encoder runs one call at a time, on one
thread of its own (its infer request is not thread-safe), searches' batches and embedding
requests in turn; each batch's search runs on another thread, beside the next batch's
encoding.

A bad request gets a 400 with a one-line reason (`search_requests`; OpenAI's error shape under
/v1/), a missing or wrong token a 401 with `WWW-Authenticate`, a wrong method a 405 with
`Allow`, a search not answered within --request-timeout-s a 503 (Ray Serve itself answers 503
past --max-queued-requests), a failure of ours a 500 whose reason names no Python type (the
trace goes to the log). Each request is logged in one line: method, path, status, latency.

Each search answer carries a `Server-Timing` header, the replica's time by stage (ms): `body`
(the request's body read and checked: Ray Serve's replica fetches it from the proxy, a call
back; for GET, the query string read and checked), `wait` (for its batch to start), `encode`
(tokenizing and the encoder), `search`, `texts` (the hits' columns), `json`, and `total` (the
request in this replica); `batch;desc=N` its batch's size.
bench/bench_serve.py reads it: what the client saw beyond `total` is the proxy and the hop."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from sentray.serve import direct_ingress, openai_api
from sentray.serve.query_batches import Batched, QueryBatches
from sentray.serve.search_requests import (
    BadRequest,
    Limits,
    bounded_text,
    parse_search,
    parse_search_params,
)

logger = logging.getLogger("ray.serve")  # a replica's logger: its lines reach the driver
PAGE = Path(__file__).with_name("page.html")
READ = ("GET", "HEAD")
ROUTES = {"/": READ, "/healthz": READ, "/info": READ, "/search": ("GET", "HEAD", "POST"),
          "/v1/embeddings": ("POST",), "/v1/models": READ}
OPEN_PATHS = ("/healthz",)  # answered without the token: it says "ok" and nothing else
STAGES = ("body", "wait", "encode", "search", "texts", "json", "total")
AUTHENTICATE = {"WWW-Authenticate": 'Bearer realm="sentray"'}


@dataclass(frozen=True)
class ServiceSpec:
    """All a replica is built from (`ServeConfig` decided into what a replica needs)."""

    table: str  # an output folder or a .lance table
    s3_endpoint: str | None
    device: str
    search_mode: str
    query_precision: str
    nprobes: int | None
    refine_factor: int
    limits: Limits
    secret: str | None
    max_batch_size: int
    request_timeout_s: float


class Refused(Exception):
    """A request answered with `status` and `reason` (in the shape of its path's API)."""

    def __init__(self, status: int, reason: str, headers: dict | None = None, *,
                 code: str | None = None, param: str | None = None) -> None:
        super().__init__(reason)
        self.status, self.headers, self.code, self.param = status, headers or {}, code, param


class SearchService:
    """One replica of the service (module docstring)."""

    def __init__(self, spec: ServiceSpec) -> None:
        from sentray.index.search import VectorIndex

        if direct_ingress.enabled():  # --direct-port: the replacement of a lost replica too
            direct_ingress.rebind_after_loss()
        self.spec = spec
        self.index = VectorIndex(spec.table, s3_endpoint=spec.s3_endpoint, device=spec.device,
                                 mode=spec.search_mode, query_precision=spec.query_precision)
        # the embeddings API answers the job's float vectors (an int8 or binary output's
        # before quantization): the rows' own encoder (never the searches' bf16), or its
        # float side
        self.embedder = self.index.float_encoder or self.index.exact_encoder
        self.model = openai_api.ServedModel.of(self.index.description.settings)
        self.created = int(time.time())
        # One thread runs every encoder call, searches' batches and embedding requests in
        # turn: the encoder's infer request is not thread-safe (on asyncio's pool of threads
        # the replica grew 31% in 10,000 queries, and on this one thread 30%: that growth is
        # not the threads', docs/index-and-search.md)
        self.encoder_thread = ThreadPoolExecutor(1, thread_name_prefix="encoder")
        self.page = PAGE.read_text(encoding="utf-8")
        self.info = table_info(self.index, spec)
        # batches of a power of two queries: the shapes the query encoder pads to
        # and each batch's search on a thread of its own, beside the next batch's encoding
        self.search_thread = ThreadPoolExecutor(1, thread_name_prefix="search")
        self.batches = QueryBatches(self._encode_blocking, spec.max_batch_size,
                                    self.encoder_thread, powers_of_two=True,
                                    then=self._find_blocking, then_executor=self.search_thread)
        # the query encoder's kernels for the common batch shapes built now, not as queries
        # meet them (the replica's memory stays where it starts); then the index's first call
        shapes = self.index.encoder.warm_shapes(spec.max_batch_size)
        logger.info("query encoder warmed at %d batch shapes", shapes)
        warm = [("warm up", 1)]
        self._find_blocking(warm, self._encode_blocking(warm))

    async def __call__(self, request: Request) -> Response:
        started = time.perf_counter()
        path = request.url.path.rstrip("/") or "/"
        try:
            response = await self._answer(request, path, started)
        except Refused as refused:
            response = refusal(path, refused)
        except Exception:  # ours: the trace to the log, a reason without Python's names out
            logger.exception("%s %s failed", request.method, path)
            response = refusal(path, Refused(500, "the service failed on this request; its "
                                                  "log says why"))
        logger.info("%s %s %d %.1f ms", request.method, request.url.path, response.status_code,
                    (time.perf_counter() - started) * 1000)
        return response

    async def _answer(self, request: Request, path: str, started: float) -> Response:
        if path not in OPEN_PATHS and not self._authorized(request):
            raise Refused(401, "this service needs its token: send the header "
                               "`Authorization: Bearer TOKEN` (or ?token=TOKEN)", AUTHENTICATE,
                          code="invalid_api_key")
        if path not in ROUTES:
            raise Refused(404, f"no such path {path}: the paths are {', '.join(ROUTES)}")
        method = request.method
        if method not in ROUTES[path]:
            allowed = ", ".join(ROUTES[path])
            raise Refused(405, f"{path} takes {allowed}, not {method}", {"Allow": allowed})
        if method == "HEAD":  # GET's status and headers, no body
            answer = (await self._search(request, started) if path == "/search"
                      else self._read(path))
            return Response(b"", answer.status_code, headers=dict(answer.headers))
        if path == "/search":
            return await self._search(request, started)
        if path == "/v1/embeddings":
            return await self._embeddings(request)
        return self._read(path)

    def _read(self, path: str) -> Response:
        if path == "/":
            return HTMLResponse(self.page)
        if path == "/healthz":
            return JSONResponse({"status": "ok"})
        if path == "/v1/models":
            return JSONResponse(openai_api.models_response(self.model, self.created))
        return JSONResponse(self.info)

    def _authorized(self, request: Request) -> bool:
        if self.spec.secret is None:
            return True
        header = request.headers.get("authorization", "")
        given = (header[len("Bearer "):] if header.startswith("Bearer ")
                 else request.query_params.get("token", ""))
        return hmac.compare_digest(given.encode(), self.spec.secret.encode())

    async def _search(self, request: Request, started: float) -> Response:
        try:
            if request.method != "POST":  # GET, HEAD: the query string came with the request
                params: dict[str, list[str]] = {}
                for name, value in request.query_params.multi_items():
                    params.setdefault(name, []).append(value)
                parsed = parse_search_params(params, self.spec.limits)
            else:
                body = await read_body(request, self.spec.limits.max_body_bytes)
                parsed = parse_search(body, self.spec.limits)
        except BadRequest as exc:
            raise Refused(400, str(exc)) from None
        read_at = time.perf_counter()
        answers: list[Batched] = await self._within_timeout(asyncio.gather(
            *(self.batches.submit((q, parsed.k)) for q in parsed.queries)))
        encoded_at = time.perf_counter()
        hits = [[bounded_text(hit, parsed.full_text) for hit in answer.result[0]]
                for answer in answers]
        took = round((encoded_at - started) * 1000, 2)
        if parsed.many:
            value = {"k": parsed.k, "took_ms": took, "results": [
                {"query": q, "hits": h} for q, h in zip(parsed.queries, hits, strict=True)]}
        else:
            value = {"query": parsed.queries[0], "k": parsed.k, "hits": hits[0],
                     "took_ms": took}
        content = json_bytes(value)
        done = time.perf_counter()
        # the slowest of the request's queries, stage by stage
        stages = {name: max(a.result[1].get(name, 0.0) for a in answers)
                  for name in ("encode", "search", "texts")}
        stages.update(body=read_at - started, wait=max(a.waited_s for a in answers),
                      json=done - encoded_at, total=done - started)
        timing = ", ".join(f"{name};dur={stages[name] * 1000:.2f}" for name in STAGES)
        return Response(content, media_type="application/json", headers={
            "Server-Timing": f"{timing}, batch;desc={max(a.batch_size for a in answers)}"})

    async def _within_timeout(self, work):
        try:
            return await asyncio.wait_for(work, self.spec.request_timeout_s)
        except asyncio.TimeoutError:
            raise Refused(503, f"no answer within {self.spec.request_timeout_s:g} s: the "
                               "service is overloaded; retry later") from None

    def _encode_blocking(self, items: list[tuple[str, int]]) -> tuple[list, float]:
        """One batch of (query, k), in the encoder's thread: its queries encoded together,
        and the seconds that took."""
        started = time.perf_counter()
        encoded = self.index.encode([query for query, _ in items])
        return encoded, time.perf_counter() - started

    def _find_blocking(self, items: list[tuple[str, int]], encoded: tuple[list, float]
                       ) -> list[tuple[list[dict], dict]]:
        """The batch `_encode_blocking` encoded, in the search's thread: searched together at
        the largest k asked (each query's own k are the first of those); each with the batch's
        seconds by stage."""
        vectors, stages = encoded[0], {"encode": encoded[1]}
        found = self.index.nearest_many(vectors, max(k for _, k in items),
                                        nprobes=self.spec.nprobes,
                                        refine_factor=self.spec.refine_factor, stages=stages)
        return [(hits[:k], stages) for hits, (_, k) in zip(found, items, strict=True)]

    async def _embeddings(self, request: Request) -> Response:
        try:
            body = await read_body(request, openai_api.MAX_BODY_BYTES)
            parsed = openai_api.parse_embeddings(body, self.model)
        except openai_api.OpenAIError as exc:
            raise Refused(exc.status, str(exc), code=exc.code, param=exc.param) from None
        except BadRequest as exc:
            raise Refused(400, str(exc)) from None
        vectors, tokens = await self._within_timeout(asyncio.get_running_loop().run_in_executor(
            self.encoder_thread, self._embed_blocking, parsed.texts))
        vectors = openai_api.truncated(vectors, parsed.dimensions, self.model.normalize)
        return Response(json_bytes(openai_api.embeddings_response(
            vectors, tokens, parsed, self.model)), media_type="application/json")

    def _embed_blocking(self, texts: tuple[str, ...]) -> tuple[np.ndarray, int]:
        """The job's float vectors of `texts` (N, D) and the tokens they took, in the encoder's
        thread."""
        vectors, tokens = self.embedder.encode_counted(list(texts))
        return vectors.astype(np.float32, copy=False), sum(tokens)


def refusal(path: str, refused: Refused) -> Response:
    """The refusal as its path's API words errors: OpenAI's shape under /v1/, else
    {"error": "<one line>"}."""
    if path.startswith("/v1/"):
        kind = "invalid_request_error" if refused.status < 500 else "server_error"
        body = openai_api.error_body(str(refused), param=refused.param, code=refused.code,
                                     kind=kind)
    else:
        body = {"error": str(refused)}
    return JSONResponse(body, status_code=refused.status, headers=refused.headers)


def json_bytes(value: object) -> bytes:
    """`value` as compact UTF-8 JSON, as Starlette's JSONResponse writes it."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False,
                      separators=(",", ":")).encode("utf-8")


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


def pooling_label(name: str) -> str:
    """The pooling as the docs call it: `mean (last_avg)` for last_avg, else its name."""
    from sentray.encode.pooling_catalog import ALIASES

    alias = next((a for a, canonical in ALIASES.items() if canonical == name), None)
    return f"{alias} ({name})" if alias else name


def resident_search(resident) -> str:
    """How vectors held in memory are searched, as `GET /info` says it."""
    projection = resident.projection
    if projection is None:
        return "exact, the vectors held in memory"
    lists = projection.lists
    where = ("" if lists is None else
             f" in {len(lists.centres)} k-means lists, the nearest {lists.probes} read")
    return (f"in memory: a {projection.axes.shape[1]}-d projection first{where}, the best rows "
            f"re-ranked exactly (recall@10 {projection.recall:.3f} on the table's own rows)")


def table_info(index, spec: ServiceSpec) -> dict:
    """What `GET /info` says: the embedding the table holds and how it is searched."""
    from sentray.index.index_state import IndexState
    from sentray.kit import storage

    settings = index.description.settings
    state = IndexState.read(storage.locate(index.uri, spec.s3_endpoint))
    return {"table": index.uri, "rows": index.table.count_rows(),
            "model": settings["model"], "pooling": settings["pooling"],
            "pooling_label": pooling_label(settings["pooling"]),
            "dimension": index.description.dimension, "dtype": index.description.dtype,
            "metric": index.description.metric,
            "index": state.index_type if state and state.trained_rows else "none (exact search)",
            "search": (resident_search(index.resident) if index.resident is not None
                       else "the table's index" if state and state.trained_rows
                       else "exact, in the table"),
            "query_precision": index.query_precision.as_dict(),
            "nprobes": spec.nprobes or index.nprobes, "refine_factor": spec.refine_factor,
            "max_k": spec.limits.max_k, "max_queries": spec.limits.max_queries}

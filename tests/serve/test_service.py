"""The service's replica in this process (no Ray): `SearchService` over a tiny indexed output,
asked through Starlette's test client. Every route, every 4xx with its reason, a 503 when a
search outlasts --request-timeout-s, a batch encoded once for concurrent queries, an event
loop that keeps answering while a search blocks, and one log line a request."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from served_output import asgi, indexed_output, job_vectors

from sentray.kit.cpu import cpu_bf16_native
from sentray.serve.search_requests import Limits


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, tiny_model_dir, brown_corpus) -> Path:
    return indexed_output(tmp_path_factory.mktemp("served"), tiny_model_dir, brown_corpus)


def make_service(indexed: Path, **changes):
    from sentray.serve.service import SearchService, ServiceSpec

    values = dict(table=str(indexed / "out"), s3_endpoint=None, device="cpu",
                  search_mode="auto", query_precision="exact", nprobes=None,
                  refine_factor=10, limits=Limits(20, 8, 4096), secret=None, max_batch_size=8,
                  request_timeout_s=10.0)
    return SearchService(ServiceSpec(**{**values, **changes}))


def client(service):
    from starlette.testclient import TestClient

    return TestClient(asgi(service))


@pytest.fixture
def service(indexed):
    return make_service(indexed)


def test_the_table_search_finds_what_the_vectors_in_memory_find(service, indexed):
    """--search-mode table (Lance's exact scan here) and memory (the default for a small
    table): the same rows in the same order, scores within 1e-5 (two kernels' float32 sums)."""
    in_table = make_service(indexed, search_mode="table")
    lines = (indexed / "brown.txt").read_text().splitlines()
    queries = [lines[3], "a dog in the park", lines[90]]
    with client(service) as memory, client(in_table) as table:
        a = memory.post("/search", json={"queries": queries, "k": 6}).json()["results"]
        b = table.post("/search", json={"queries": queries, "k": 6}).json()["results"]
        assert table.get("/info").json()["search"] == "exact, in the table"
    for mine, theirs in zip(a, b, strict=True):
        assert [h["id"] for h in mine["hits"]] == [h["id"] for h in theirs["hits"]]
        assert [h["text"] for h in mine["hits"]] == [h["text"] for h in theirs["hits"]]
        np.testing.assert_allclose([h["score"] for h in mine["hits"]],
                                   [h["score"] for h in theirs["hits"]], atol=1e-5)


def test_search_info_health_and_page(service, indexed):
    line = (indexed / "brown.txt").read_text().splitlines()[17]
    with client(service) as http:
        found = http.post("/search", json={"query": line, "k": 3})
        assert found.status_code == 200
        hits = found.json()["hits"]
        assert len(hits) == 3 and hits[0]["text"] == line and hits[0]["id"] == "brown.txt:17"
        assert set(hits[0]) == {"id", "score", "text", "source", "row"}
        # GET with the query in its URL (no body for the replica to fetch): the same answer
        got = http.get("/search", params={"query": line, "k": 3, "full_text": "true"}).json()
        assert got["hits"] == hits and got["query"] == line
        many = http.post("/search", json={"queries": [line, "another"], "k": 2}).json()
        assert [r["query"] for r in many["results"]] == [line, "another"]
        assert many["results"][0]["hits"] == hits[:2]
        info = http.get("/info").json()
        assert info["rows"] == 120 and info["pooling"] == "last_avg"
        assert info["pooling_label"] == "mean (last_avg)"
        assert info["model"] and info["index"] == "none (exact search)"
        assert info["search"] == "exact, the vectors held in memory"
        assert http.get("/healthz").json() == {"status": "ok"}
        page = http.get("/")
        assert page.status_code == 200 and "<title>sentray search</title>" in page.text


def test_bad_requests_get_400_with_their_reason(service):
    with client(service) as http:
        for body, reason in [({"query": ""}, "the query is empty"),
                             ({"query": "a", "k": 21}, "from 1 to 20"),
                             ({"query": "a", "top": 1}, "unknown field 'top'"),
                             ({"query": "a" * 5000}, "at most 4,096 are accepted")]:
            answer = http.post("/search", json=body)
            assert answer.status_code == 400 and reason in answer.json()["error"]
        answer = http.post("/search", content=b"{oops")
        assert answer.status_code == 400 and "not JSON" in answer.json()["error"]
        for query, reason in [("", "no query: GET /search?query=TEXT"),
                              ("?query=", "the query is empty"),
                              ("?query=a&k=abc", 'k must be a whole number from 1 to 20, got "abc"'),
                              ("?query=a&k=-2", "from 1 to 20, got -2"),
                              ("?query=a&top=1", "unknown parameter 'top'"),
                              ("?query=a&query=b", "'query' is given 2 times"),
                              ("?query=a&full_text=maybe", '"full_text" must be true or false')]:
            answer = http.get(f"/search{query}")
            assert answer.status_code == 400 and reason in answer.json()["error"], query
        assert http.get("/nothing").status_code == 404


def test_a_token_is_needed_when_set_but_not_by_the_health_probe(indexed):
    """Every path needs the token but /healthz, which a load balancer's probe calls without
    one (it says "ok" and nothing else); a 401 says how to authenticate."""
    with client(make_service(indexed, secret="s3cret")) as http:
        refused = http.get("/info")
        assert refused.status_code == 401 and "Authorization: Bearer" in refused.json()["error"]
        assert refused.headers["WWW-Authenticate"] == 'Bearer realm="sentray"'
        assert http.get("/info", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert http.post("/search", json={"query": "a"}).status_code == 401
        assert http.get("/info", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert http.get("/?token=s3cret").status_code == 200
        assert http.get("/healthz").json() == {"status": "ok"}
        assert http.head("/healthz").status_code == 200


def test_http_details_allow_head_and_no_python_names(service):
    """A 405 names what the path takes in `Allow`; HEAD is answered wherever GET is (its
    headers, no body); no reason names a Python type."""
    with client(service) as http:
        wrong = http.put("/search")
        assert wrong.status_code == 405 and wrong.headers["Allow"] == "GET, HEAD, POST"
        assert wrong.json() == {"error": "/search takes GET, HEAD, POST, not PUT"}
        searched = http.head("/search?query=a+dog")
        assert searched.status_code == 200 and searched.content == b""
        assert searched.headers["content-type"] == "application/json"
        assert http.put("/").headers["Allow"] == "GET, HEAD"
        head = http.head("/")
        assert head.status_code == 200 and head.content == b""
        assert head.headers["content-type"].startswith("text/html")
        assert http.head("/info").status_code == 200
        for body in ({"query": None}, {"queries": [1]}, {"query": "a", "k": None}):
            reason = http.post("/search", json=body).json()["error"]
            assert not any(name in reason for name in ("NoneType", "int", "str", "list[")), \
                reason


def test_concurrent_queries_are_one_batch_and_the_loop_keeps_answering(indexed, caplog):
    """Nine searches at once: the first runs alone at once (no wait for company); the eight
    that arrive while it is held up are the next batch, encoded together (eight: a power of
    two, the shapes the query encoder pads to). Meanwhile /healthz
    answers at once (the search runs in a thread). A search that outlasts the request timeout
    gets a 503 with its reason."""
    service = make_service(indexed, request_timeout_s=30.0)
    batches = []
    release = threading.Event()
    encode = service.index.encode

    def slow_encode(queries):
        batches.append(len(queries))
        release.wait(5)
        return encode(queries)

    service.index.encode = slow_encode

    async def scenario():
        from httpx import ASGITransport, AsyncClient

        transport = ASGITransport(app=asgi(service))
        async with AsyncClient(transport=transport, base_url="http://t") as http:
            searches = [asyncio.create_task(http.post("/search", json={"query": "q 0"}))]
            await asyncio.sleep(0.3)  # the first is running (held up) when the others come
            searches += [asyncio.create_task(http.post("/search", json={"query": f"q {i}"}))
                         for i in range(1, 9)]
            await asyncio.sleep(0.3)
            started = time.perf_counter()
            health = await http.get("/healthz")
            health_s = time.perf_counter() - started
            release.set()
            answers = await asyncio.gather(*searches)
            release.clear()
            service.spec = dataclasses.replace(service.spec, request_timeout_s=0.5)
            late = await http.post("/search", json={"query": "never answered in time"})
            release.set()
            return health, health_s, answers, late

    serve_logger = logging.getLogger("ray.serve")  # Ray's: it does not propagate to root
    serve_logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger="ray.serve"):
            health, health_s, answers, late = asyncio.run(scenario())
    finally:
        serve_logger.removeHandler(caplog.handler)
    assert health.status_code == 200 and health_s < 0.5
    assert [a.status_code for a in answers] == [200] * 9
    assert batches[:2] == [1, 8] and service.batches.sizes[:2] == [1, 8]
    assert late.status_code == 503 and "no answer within 0.5 s" in late.json()["error"]
    # each record once, whether it reached the handler directly or through the root logger
    records = {id(r): r for r in caplog.records if r.name == "ray.serve"}.values()
    lines = [r.getMessage() for r in records]
    assert sum(line.startswith("POST /search 200 ") for line in lines) == 9
    assert any(line.startswith("GET /healthz 200 ") and line.endswith(" ms")
               for line in lines)


@pytest.mark.skipif(not cpu_bf16_native(), reason="bf16 is emulated on this CPU (refused)")
def test_bf16_queries_search_while_embeddings_stay_the_jobs_vectors(indexed):
    """--query-precision bf16: /info says so, a corpus sentence still finds itself first, and
    /v1/embeddings answers the job's own vectors (the exact encoder: cosine >= 0.9999, the
    OpenAI test's bound)."""
    service = make_service(indexed, query_precision="bf16")
    stored = job_vectors(indexed)
    ids = sorted(stored)[:4]
    texts = [stored[i][0] for i in ids]
    with client(service) as http:
        info = http.get("/info").json()
        hits = http.post("/search", json={"query": texts[0], "k": 1}).json()["hits"]
        answer = http.post("/v1/embeddings", json={"model": info["model"], "input": texts,
                                                   "encoding_format": "float"}).json()
    assert info["query_precision"]["precision"] == "bf16"
    assert info["query_precision"]["cosine_min"] >= 0.999
    assert hits[0]["text"] == texts[0]
    got = np.asarray([item["embedding"] for item in answer["data"]], dtype=np.float32)
    expected = np.stack([stored[i][1] for i in ids])
    cosine = (got * expected).sum(1) / (np.linalg.norm(got, axis=1)
                                        * np.linalg.norm(expected, axis=1))
    assert cosine.min() >= 0.9999

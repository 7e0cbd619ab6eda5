"""The OpenAI embeddings API of `sentray serve`, spoken to by the real `openai` client: one
replica (`SearchService`) over the tiny indexed output, served over loopback HTTP by uvicorn in
this process for the whole module (Ray Serve's own start is tested in test_serve_job.py). The
vectors are the embedding job's own for the same texts; bad requests get a 400 in OpenAI's
error shape; the token is the client's API key."""

from __future__ import annotations

import base64
import threading
import time

import numpy as np
import pytest
from conftest import free_port
from served_output import asgi, indexed_output, job_vectors

from sentray.serve import openai_api
from sentray.serve.search_requests import Limits

TOKEN = "openai-test-key"


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_model_dir, brown_corpus):
    """(the service's base URL, the output's root): the replica behind uvicorn, for the module."""
    import uvicorn

    from sentray.serve.service import SearchService, ServiceSpec

    root = indexed_output(tmp_path_factory.mktemp("openai"), tiny_model_dir, brown_corpus)
    service = SearchService(ServiceSpec(
        table=str(root / "out"), s3_endpoint=None, device="cpu", search_mode="auto",
        query_precision="auto", nprobes=None, refine_factor=10, limits=Limits(20, 8, 4096), secret=TOKEN,
        max_batch_size=8, request_timeout_s=30.0))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(asgi(service), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started and time.time() < deadline:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}", root
    server.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def client(served):
    import openai

    return openai.OpenAI(base_url=f"{served[0]}/v1", api_key=TOKEN, max_retries=0, timeout=60)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_the_client_gets_the_jobs_own_vectors(client, served):
    """The same texts through the API and through the embedding job: cosine >= 0.9999 (the
    same encoder on the same runtime; a batch padded otherwise moves the last bits), in the
    order sent, as floats and as base64 (the client's default), with the tokens used."""
    stored = job_vectors(served[1])
    ids = sorted(stored)[:5]
    texts = [stored[i][0] for i in ids]
    expected = np.stack([stored[i][1] for i in ids])
    model = client.models.list().data[0].id
    floats = client.embeddings.create(model=model, input=texts, encoding_format="float")
    assert [d.index for d in floats.data] == list(range(5)) and floats.model == model
    got = np.asarray([d.embedding for d in floats.data], dtype=np.float32)
    assert got.shape == expected.shape and cosines(got, expected).min() >= 0.9999
    assert floats.usage.prompt_tokens == floats.usage.total_tokens > 5 * 2
    packed = client.embeddings.create(model=model, input=texts)  # base64 on the wire
    np.testing.assert_allclose(np.asarray([d.embedding for d in packed.data]), got, atol=1e-6)
    one = client.embeddings.create(model=model, input=texts[0])
    assert len(one.data) == 1 and cosines(np.asarray([one.data[0].embedding]),
                                          expected[:1])[0] >= 0.9999


def test_models_lists_the_one_model(client, served):
    import openai

    listed = client.models.list().data
    assert len(listed) == 1 and listed[0].owned_by == "sentray"
    with pytest.raises(openai.AuthenticationError) as refused:
        openai.OpenAI(base_url=f"{served[0]}/v1", api_key="wrong",
                      max_retries=0).models.list()
    assert refused.value.status_code == 401
    assert refused.value.body["code"] == "invalid_api_key"


@pytest.mark.parametrize(("body", "param", "words"), [
    ({}, "input", "'input' is required"),
    ({"input": []}, "input", "an empty list"),
    ({"input": ["a"] * (openai_api.MAX_INPUTS + 1)}, "input", "at most 2,048"),
    ({"input": ["a", ""]}, "input", "input[1] is empty"),
    ({"input": [[101, 102]]}, "input", "input[0] is a list: send texts"),
    ({"input": "a", "model": "text-embedding-3-small"}, "model", "does not exist"),
    ({"input": "a", "dimensions": 8}, "dimensions", "not trained for Matryoshka"),
    ({"input": "a", "dimensions": 0}, "dimensions", "from 1 to"),
    ({"input": "a", "encoding_format": "int8"}, "encoding_format", "float, base64"),
    ({"input": "a", "temperature": 1}, "temperature", "Unrecognized request argument"),
])
def test_bad_requests_get_400_in_openais_error_shape(client, body, param, words):
    import openai

    body = {"model": client.models.list().data[0].id, **body}
    with pytest.raises(openai.BadRequestError) as refused:
        client.post("/embeddings", body=body, cast_to=object)
    error = refused.value.body  # the client hands over the "error" object
    assert refused.value.status_code == 400 and set(error) == {"message", "type", "param",
                                                               "code"}
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert words in error["message"] and "Error" not in error["message"].split()[0]


def test_dimensions_cut_and_renormalize_where_the_model_allows_it():
    model = openai_api.ServedModel("m", 8, matryoshka=True, normalize=True)
    parsed = openai_api.parse_embeddings(b'{"model": "m", "input": "a", "dimensions": 4}', model)
    assert parsed.dimensions == 4
    vectors = np.arange(16, dtype=np.float32).reshape(2, 8) + 1
    cut = openai_api.truncated(vectors, 4, normalize=True)
    np.testing.assert_allclose(np.linalg.norm(cut, axis=1), 1, rtol=1e-6)
    np.testing.assert_allclose(cut[0], vectors[0, :4] / np.linalg.norm(vectors[0, :4]))
    answer = openai_api.embeddings_response(cut, 3, openai_api.EmbeddingsRequest(
        ("a", "b"), "base64", 4), model)
    decoded = np.frombuffer(base64.b64decode(answer["data"][1]["embedding"]), dtype="<f4")
    # exact by construction: base64 carries the same float32 bytes, no kernel touches them
    np.testing.assert_array_equal(decoded, cut[1])
    assert openai_api.ServedModel.of({"model": "x", "dimension": 384, "truncate_dim": 128,
                                      "normalize": True}).matryoshka

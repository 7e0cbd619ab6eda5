"""OpenAI's embeddings API, as `sentray serve` answers it: the request of `POST /v1/embeddings`
checked (`parse_embeddings` -> `EmbeddingsRequest`, or `OpenAIError` with the status and the
message of OpenAI's error shape), the answer built (`embeddings_response`), and `GET
/v1/models` (`models_response`). Pure: no Ray, no model. What the shapes are:
https://platform.openai.com/docs/api-reference/embeddings

    {"model": "all-MiniLM-L6-v2", "input": ["a dog in the park", "the city budget"],
     "encoding_format": "float", "dimensions": 256}
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

import numpy as np

from sentray.serve.search_requests import json_type

FIELDS = ("input", "model", "encoding_format", "dimensions", "user")
ENCODING_FORMATS = ("float", "base64")
MAX_INPUTS = 2048  # OpenAI's own limit of inputs in one request
MAX_BODY_BYTES = 8 * 2**20  # 2,048 inputs of ~4 KiB: what a client batching documents sends
# Models trained so that the first d dimensions of a vector are an embedding of their own
# (Matryoshka representation learning): `dimensions` is honoured for these, and for an output
# the user embedded with --truncate-dim (which says the model allows it); else a 400.
MATRYOSHKA_MODELS = ("nomic-ai/nomic-embed-text-v1.5", "mixedbread-ai/mxbai-embed-large-v1",
                     "tomaarsen/mpnet-base-nli-matryoshka",
                     "Snowflake/snowflake-arctic-embed-m-v1.5")


class OpenAIError(ValueError):
    """A request answered with `status` and OpenAI's error shape (`error_body`)."""

    def __init__(self, message: str, *, status: int = 400, param: str | None = None,
                 code: str | None = None, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.param, self.code, self.kind = status, param, code, kind

    def body(self) -> dict:
        return error_body(str(self), param=self.param, code=self.code, kind=self.kind)


def error_body(message: str, *, param: str | None = None, code: str | None = None,
               kind: str = "invalid_request_error") -> dict:
    """OpenAI's error shape: {"error": {"message", "type", "param", "code"}}."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


@dataclass(frozen=True)
class ServedModel:
    """What the output's settings say about the one model served."""

    name: str  # the id clients send as `model`
    dimension: int  # of the vectors the embedding job stored
    matryoshka: bool  # whether `dimensions` below `dimension` may be asked for
    normalize: bool  # whether the job L2-normalized its vectors (then so is a truncated one)

    @classmethod
    def of(cls, settings: dict) -> ServedModel:
        dimension = settings["truncate_dim"] or settings["dimension"]
        return cls(settings["model"], dimension,
                   bool(settings["truncate_dim"]) or settings["model"] in MATRYOSHKA_MODELS,
                   bool(settings["normalize"]))


@dataclass(frozen=True)
class EmbeddingsRequest:
    texts: tuple[str, ...]
    encoding_format: str
    dimensions: int  # of the vectors answered: the output's unless the request asked fewer


def parse_embeddings(body: bytes, model: ServedModel) -> EmbeddingsRequest:
    """The request in `body`, or OpenAIError naming what is wrong with it (status 400)."""
    if len(body) > MAX_BODY_BYTES:
        raise OpenAIError(f"the request body is {len(body):,} bytes; at most "
                          f"{MAX_BODY_BYTES:,} are accepted")
    try:
        values = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OpenAIError(f"the body is not JSON ({exc})") from None
    if not isinstance(values, dict):
        raise OpenAIError('the body must be a JSON object: {"model": ..., "input": [...]}')
    unknown = sorted(set(values) - set(FIELDS))
    if unknown:
        raise OpenAIError(f"Unrecognized request argument supplied: {unknown[0]} (the "
                          f"arguments are {', '.join(FIELDS)})", param=unknown[0])
    if values.get("model") != model.name:
        raise OpenAIError(f"The model {json.dumps(values.get('model'))} does not exist: this "
                          f"service embeds with {model.name!r} (GET /v1/models)",
                          param="model", code="model_not_found")
    texts = _texts(values.get("input"))
    encoding = values.get("encoding_format", "float")
    if encoding not in ENCODING_FORMATS:
        raise OpenAIError(f"encoding_format must be one of {', '.join(ENCODING_FORMATS)}, got "
                          f"{json.dumps(encoding)}", param="encoding_format")
    return EmbeddingsRequest(texts, encoding, _dimensions(values.get("dimensions"), model))


def _texts(given: object) -> tuple[str, ...]:
    if given is None:
        raise OpenAIError("'input' is required: a text or a list of texts", param="input")
    texts = [given] if isinstance(given, str) else given
    if not isinstance(texts, list) or not texts:
        raise OpenAIError("'input' must be a text or a non-empty list of texts, got "
                          f"{json_type(given) if texts else 'an empty list'}", param="input")
    if len(texts) > MAX_INPUTS:
        raise OpenAIError(f"'input' holds {len(texts):,} texts; at most {MAX_INPUTS:,} in one "
                          "request", param="input")
    for number, text in enumerate(texts):
        if not isinstance(text, str):
            raise OpenAIError(f"input[{number}] is {json_type(text)}: send texts (token arrays "
                              "are not accepted)", param="input")
        if not text.strip():
            raise OpenAIError(f"input[{number}] is empty: give a text to embed", param="input")
    return tuple(texts)


def _dimensions(given: object, model: ServedModel) -> int:
    if given is None:
        return model.dimension
    if isinstance(given, bool) or not isinstance(given, int) or not 1 <= given <= model.dimension:
        raise OpenAIError(f"dimensions must be a whole number from 1 to {model.dimension}, got "
                          f"{json.dumps(given)}", param="dimensions")
    if given != model.dimension and not model.matryoshka:
        raise OpenAIError(f"{model.name} was not trained for Matryoshka truncation, so its "
                          f"vectors cannot be cut to {given} dimensions: leave 'dimensions' "
                          f"out (or send {model.dimension})", param="dimensions")
    return given


def truncated(vectors: np.ndarray, dimensions: int, normalize: bool) -> np.ndarray:
    """(N, D) -> (N, dimensions): the first dimensions, L2-normalized again where the job
    normalized (as its --truncate-dim does: truncate, then normalize)."""
    if dimensions == vectors.shape[1]:
        return vectors
    out = vectors[:, :dimensions]
    if not normalize:
        return out
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1)


def embeddings_response(vectors: np.ndarray, tokens: int, request: EmbeddingsRequest,
                        model: ServedModel) -> dict:
    """OpenAI's answer: a list of {"object": "embedding", "index", "embedding"} (floats, or
    base64 of little-endian float32s), the model and the usage in tokens."""
    vectors = np.ascontiguousarray(vectors, dtype="<f4")  # (N, dimensions)
    if request.encoding_format == "base64":
        encoded = [base64.b64encode(row.tobytes()).decode("ascii") for row in vectors]
    else:
        encoded = vectors.tolist()
    return {"object": "list", "model": model.name,
            "data": [{"object": "embedding", "index": i, "embedding": e}
                     for i, e in enumerate(encoded)],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def models_response(model: ServedModel, created: int) -> dict:
    return {"object": "list", "data": [{"id": model.name, "object": "model",
                                        "created": created, "owned_by": "sentray"}]}

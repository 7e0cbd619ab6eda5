"""What a search request may say, checked before any query is encoded: `parse_search` turns the
body of `POST /search` into a `SearchRequest`, and `parse_search_params` the query string of
`GET /search`, or raises `BadRequest`, whose message is the one-line reason the 400 carries.
Pure: no Ray, no table.

    POST /search  {"query": "a dog in the park", "k": 10}
                  {"queries": ["a dog in the park", "the city budget"], "k": 5}
                  {"query": "a dog in the park", "full_text": true}
    GET  /search?query=a+dog+in+the+park&k=10&full_text=true   (one query)

Why GET too: Ray Serve's replica fetches a request's body from the proxy with a call back to it
(the `body` stage of the service's Server-Timing: 1.8 ms of a lone query's 13.6, issue 67,
bench/results/serve-67b-50k-mean-amd.json); the query string travels with the request.

A hit's text is cut at TEXT_CHARS characters unless the request asks for `"full_text": true`
(a table may hold texts of any length: 64 queries x k=100 of whole texts came back as 1.25 MB,
and one 300,000-character row would be 300 kB of every answer that finds it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

FIELDS = ("query", "queries", "k", "full_text")
DEFAULT_K = 10
TEXT_CHARS = 1_000  # a hit's text is cut here unless the request asks for its full text


class BadRequest(ValueError):
    """A request the service answers with 400 and this one-line message."""


@dataclass(frozen=True)
class Limits:
    max_k: int
    max_queries: int
    max_body_bytes: int


@dataclass(frozen=True)
class SearchRequest:
    queries: tuple[str, ...]
    k: int
    many: bool  # sent as "queries" (answered with one result per query) rather than "query"
    full_text: bool = False  # whole texts, not cut at TEXT_CHARS


def parse_search(body: bytes, limits: Limits) -> SearchRequest:
    """The request in `body` (JSON), or BadRequest naming what is wrong with it."""
    if len(body) > limits.max_body_bytes:
        raise BadRequest(f"the request body is {len(body):,} bytes; at most "
                         f"{limits.max_body_bytes:,} are accepted")
    try:
        values = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"the body is not JSON ({exc}): send "
                         '{"query": "...", "k": 10}') from None
    if not isinstance(values, dict):
        raise BadRequest('the body must be a JSON object: {"query": "...", "k": 10}')
    return checked_search(values, limits)


def parse_search_params(params: Mapping[str, list[str]], limits: Limits) -> SearchRequest:
    """The search a `GET /search` query string asks for (each name with the values it was
    given; `token`, the service's key, is not the search's), or BadRequest."""
    given = {name: values for name, values in params.items() if name != "token"}
    unknown = sorted(set(given) - {"query", "k", "full_text"})
    if unknown:
        raise BadRequest(f"unknown parameter {unknown[0]!r}; GET /search takes query, k and "
                         "full_text (many queries: POST {\"queries\": [...]})")
    twice = sorted(name for name, values in given.items() if len(values) > 1)
    if twice:
        raise BadRequest(f"{twice[0]!r} is given {len(given[twice[0]])} times; once is read "
                         "(many queries: POST {\"queries\": [...]})")
    if "query" not in given:
        raise BadRequest("no query: GET /search?query=TEXT (&k=10)")
    values: dict = {"query": given["query"][0]}
    if "k" in given:
        text = given["k"][0]
        values["k"] = int(text) if text.strip().lstrip("-").isdigit() else text
    if "full_text" in given:
        flag = given["full_text"][0].lower()
        values["full_text"] = {"true": True, "1": True, "false": False, "0": False}.get(flag,
                                                                                      flag)
    return checked_search(values, limits)


def checked_search(values: dict, limits: Limits) -> SearchRequest:
    """The search `values` (a request's fields) ask for, or BadRequest naming what is wrong."""
    unknown = sorted(set(values) - set(FIELDS))
    if unknown:
        raise BadRequest(f"unknown field {unknown[0]!r}; the fields are {', '.join(FIELDS)}")
    if ("query" in values) == ("queries" in values):
        raise BadRequest('give either "query" (one text) or "queries" (a list of texts)')
    many = "queries" in values
    queries = values["queries"] if many else [values["query"]]
    if many and (not isinstance(queries, list) or not queries):
        raise BadRequest('"queries" must be a non-empty list of texts')
    if len(queries) > limits.max_queries:
        raise BadRequest(f"{len(queries)} queries in one request; at most {limits.max_queries}")
    for number, query in enumerate(queries, 1):
        name = f"query number {number}" if many else "the query"
        if not isinstance(query, str):
            raise BadRequest(f"{name} is {json_type(query)}, not a text")
        if not query.strip():
            raise BadRequest(f"{name} is empty: give the text to search for")
    k = values.get("k", DEFAULT_K)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= limits.max_k:
        raise BadRequest(f"k must be a whole number from 1 to {limits.max_k}, got "
                         f"{json.dumps(k)}")
    full_text = values.get("full_text", False)
    if not isinstance(full_text, bool):
        raise BadRequest(f'"full_text" must be true or false, got {json.dumps(full_text)}')
    return SearchRequest(tuple(queries), k, many, full_text)


def json_type(value: object) -> str:
    """What a JSON value is, in JSON's words (a reason never names a Python type)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "a list" if isinstance(value, list) else "an object"


def bounded_text(hit: dict, full_text: bool) -> dict:
    """The hit with its text cut at TEXT_CHARS characters (marked "…", with `text_length`, the
    whole text's length, and `text_truncated`), unless `full_text`."""
    text = hit.get("text")
    if full_text or text is None or len(text) <= TEXT_CHARS:
        return hit
    return {**hit, "text": text[:TEXT_CHARS] + "…", "text_truncated": True,
            "text_length": len(text)}

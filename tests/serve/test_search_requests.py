"""What POST /search accepts, and the one-line reason of each 400 (no Ray, no table)."""

from __future__ import annotations

import json

import pytest

from sentray.serve.search_requests import BadRequest, Limits, parse_search

LIMITS = Limits(max_k=50, max_queries=4, max_body_bytes=2000)


def parse(value) -> object:
    return parse_search(value if isinstance(value, bytes) else json.dumps(value).encode(),
                        LIMITS)


def test_one_query_and_many():
    one = parse({"query": "a dog", "k": 3})
    assert (one.queries, one.k, one.many) == (("a dog",), 3, False)
    many = parse({"queries": ["a dog", "a cat"]})
    assert (many.queries, many.k, many.many) == (("a dog", "a cat"), 10, True)


@pytest.mark.parametrize(("body", "reason"), [
    ({"query": ""}, "the query is empty"),
    ({"query": "   "}, "the query is empty"),
    ({"queries": ["a", ""]}, "query number 2 is empty"),
    ({"query": "a", "k": 0}, "k must be a whole number from 1 to 50, got 0"),
    ({"query": "a", "k": 51}, "k must be a whole number from 1 to 50, got 51"),
    ({"query": "a", "k": "5"}, 'k must be a whole number from 1 to 50, got "5"'),
    ({"query": "a", "k": True}, "k must be a whole number"),
    ({"query": "a", "k": 2.5}, "k must be a whole number"),
    ({"query": "a", "limit": 3},
     "unknown field 'limit'; the fields are query, queries, k, full_text"),
    ({"query": "a", "queries": ["b"]}, 'give either "query"'),
    ({}, 'give either "query"'),
    ({"query": 7}, "the query is a number, not a text"),
    ({"query": None}, "the query is null, not a text"),
    ({"queries": ["a", ["b"]]}, "query number 2 is a list, not a text"),
    ({"query": {"text": "a"}}, "the query is an object, not a text"),
    ({"query": "a", "full_text": "yes"}, '"full_text" must be true or false, got "yes"'),
    ({"queries": "a dog"}, '"queries" must be a non-empty list'),
    ({"queries": []}, '"queries" must be a non-empty list'),
    ({"queries": ["a"] * 5}, "5 queries in one request; at most 4"),
    (["a dog"], "the body must be a JSON object"),
    (b"{not json", "the body is not JSON"),
    (b"\xff\xfe", "the body is not JSON"),
    ({"query": "x" * 3000}, "the request body is 3,013 bytes; at most 2,000 are accepted"),
])
def test_bad_requests_get_a_one_line_reason(body, reason):
    with pytest.raises(BadRequest) as info:
        parse(body)
    assert reason in str(info.value) and "\n" not in str(info.value)

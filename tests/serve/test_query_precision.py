"""--query-precision (`sentray.bulk_embedding.query_precision`): bf16 queries only where native and gated against the rows' own plan (each
probe row's cosine >= 0.999), never for packed bits, other precisions or a GPU; `exact` the
rows' encoder; a failed gate refuses `bf16` and turns `auto` to exact, saying why. The tiny
indexed output of the serve tests; on a CPU without native bf16 the tests check the refusal."""

from __future__ import annotations

import numpy as np
import pytest
from served_output import indexed_output

from sentray.bulk_embedding.output import EmbeddingDescription
from sentray.bulk_embedding.query_precision import bf16_refusal, query_encoders
from sentray.kit.cpu import cpu_bf16_native

NATIVE = cpu_bf16_native()


@pytest.fixture(scope="module")
def description(tmp_path_factory, tiny_model_dir, brown_corpus) -> EmbeddingDescription:
    from sentray.index.search import VectorIndex

    root = indexed_output(tmp_path_factory.mktemp("query-precision"), tiny_model_dir,
                          brown_corpus)
    return VectorIndex(str(root / "out"), device="cpu").description


def test_refused_where_bf16_cannot_help(description):
    avx2 = frozenset({"avx2", "fma"})
    assert "emulated" in bf16_refusal(description, "cpu", avx2)
    assert "cuda" in bf16_refusal(description, "cuda", frozenset({"avx512_bf16"}))
    bits = EmbeddingDescription({**description.settings, "output_dtype": "binary"}, None, "x")
    assert "packed-bit" in bf16_refusal(bits, "cpu", frozenset({"avx512_bf16"}))
    int8 = EmbeddingDescription({**description.settings, "precision": "int8"}, None, "x")
    assert "int8" in bf16_refusal(int8, "cpu", frozenset({"avx512_bf16"}))


def test_exact_is_the_rows_own_encoder(description):
    search, exact, choice = query_encoders(description, "exact", device="cpu")
    assert search is exact and choice.precision == "exact"
    assert exact.plan.precision == description.settings["precision"]


@pytest.mark.skipif(not NATIVE, reason="bf16 is emulated on this CPU: refused instead")
def test_bf16_passes_its_gate_and_keeps_the_exact_encoder_beside_it(description):
    search, exact, choice = query_encoders(description, "bf16", device="cpu")
    assert search.plan.precision == "bf16" and exact.plan.precision != "bf16"
    assert choice.precision == "bf16" and choice.cosine_min >= 0.999
    texts = ["the jury praised the city", "a dog in the park"]
    a, b = search.encode(texts), exact.encode(texts)
    cosine = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert cosine.min() >= 0.999


@pytest.mark.skipif(not NATIVE, reason="bf16 is emulated on this CPU: refused instead")
def test_a_failed_gate_refuses_bf16_and_turns_auto_to_exact(description, monkeypatch):
    from sentray.precision import probe

    monkeypatch.setitem(probe.GATES, "bf16", 1.5)  # no cosine passes
    with pytest.raises(ValueError, match="under the gate 1.5.*--query-precision exact"):
        query_encoders(description, "bf16", device="cpu")
    search, exact, choice = query_encoders(description, "auto", device="cpu")
    assert search is exact and choice.precision == "exact" and "gate" in choice.why


@pytest.mark.skipif(NATIVE, reason="this CPU runs bf16 natively: the gate is tested instead")
def test_without_native_bf16_auto_is_exact_and_bf16_refused(description):
    search, exact, choice = query_encoders(description, "auto", device="cpu")
    assert search is exact and choice.precision == "exact" and "emulated" in choice.why
    with pytest.raises(ValueError, match="emulated"):
        query_encoders(description, "bf16", device="cpu")


def test_warm_shapes_runs_the_largest_batch_then_the_common_shapes(description):
    """A replica's query encoder meets its shapes at start-up: the largest batch (its buffers
    sized once), then every bucket shape of up to 8 queries of up to 128 tokens."""
    from sentray.bulk_embedding.query import QueryEncoder
    from sentray.encode.shape_buckets import common_shapes

    encoder = QueryEncoder(description, device="cpu")
    forward, seen = encoder.actor.encoder.embed_tokens, []

    def spy(ids, mask):
        seen.append(tuple(ids.shape))
        assert mask.all()  # no padding: a shape's own kernels, at full length
        return forward(ids, mask)

    encoder.actor.encoder.embed_tokens = spy
    longest = encoder.plan.max_length
    shapes = encoder.warm_shapes(8)
    warmed, calibration = seen[:shapes], seen[shapes:]
    assert shapes == 1 + 4 * len({s[1] for s in warmed[1:]})
    assert warmed[0] == (8, longest)
    assert warmed[1:] == common_shapes(8, min(128, longest))
    # then a call's own cost is measured, at two shapes already built
    assert calibration and set(calibration) <= set(warmed)
    assert encoder.actor.encode.buckets.call_tokens >= 0

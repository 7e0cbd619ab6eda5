"""EmbedBatch without Ray, on a tiny in-process model: long texts cut or chunked (a chunked
vector is the weighted mean of its windows embedded one by one; a text that fits one window
gets the plain vector), identical texts encoded once (the same vector, counted), statuses."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest

from sentray.bulk_embedding.actor import EmbedBatch, EmbedSpec
from sentray.bulk_embedding.config import VectorConfig
from sentray.bulk_embedding.windows import WindowPlan, bounded_text, window_starts, windows_of
from sentray.encode.config import EncoderConfig
from sentray.encode.encoder import SentenceEncoder
from sentray.encode.plan import EncoderPlan
from sentray.precision.plan import plan_encoder

MAX_LENGTH = 12  # 10 text tokens a window besides [CLS] and [SEP]
LONG = ("The jury further said in term-end presentments that the City Executive Committee, "
        "which had over-all charge of the election, deserves the praise and thanks.")
SHORT = "A cat sat on the mat."


def records(texts: list[str | None]) -> pa.Table:
    n = len(texts)
    return pa.table({"id": [str(i) for i in range(n)], "text": texts, "read_error": [None] * n,
                     "source": ["s"] * n, "row": list(range(n)), "source_rows": [n] * n})


@pytest.fixture(scope="module")
def encoder_plan(tiny_model_dir) -> EncoderPlan:
    return plan_encoder(EncoderConfig(model=str(tiny_model_dir), pooling="mean",
                                      max_length=MAX_LENGTH, device="cpu"))


def embeddings(table: pa.Table) -> np.ndarray:
    return np.stack([np.zeros(32) if v is None else np.asarray(v)
                     for v in table.column("embedding").to_pylist()])


def test_windows_step_by_the_stride_and_stop_at_the_cap():
    plan = WindowPlan.of(max_length=12, specials=2, overlap=3, max_windows=4)  # room 10, stride 7
    assert (plan.room, plan.stride) == (10, 7)
    assert window_starts(10, plan) == [0]
    assert window_starts(11, plan) == [0, 7]
    assert window_starts(24, plan) == [0, 7, 14]
    assert window_starts(1000, plan) == [0, 7, 14, 21]  # the cap: the rest is not embedded
    windows = windows_of(list(range(24)), [101], [102], plan)
    assert windows.ids[1] == [101, *range(7, 17), 102] and windows.whole
    assert windows.weights == [12, 12, 12]
    assert not windows_of(list(range(1000)), [101], [102], plan).whole
    with pytest.raises(ValueError, match="chunk_overlap"):
        WindowPlan.of(max_length=12, specials=2, overlap=10)


def test_a_gigantic_text_is_cut_at_a_space_before_the_bound():
    text = "word " * 1_000_000  # 5 MB
    kept, cut = bounded_text(text, 1000)
    assert cut and len(kept) <= 1000 and kept.endswith("word") and text.startswith(kept)
    assert bounded_text("short text", 1000) == ("short text", False)
    nospace = "x" * 5000
    assert bounded_text(nospace, 1000) == ("x" * 1000, True)


def test_a_chunked_text_is_the_weighted_mean_of_its_windows(encoder_plan, tokenizer):
    vector = VectorConfig(long_text="chunk", chunk_overlap=2, max_windows=8, normalize=False)
    table = EmbedBatch(EmbedSpec(encoder_plan, vector))(records([LONG, SHORT]))
    assert table.column("status").to_pylist() == ["chunked", "ok"]
    # the reference: every window encoded alone, by the plain encoder, and averaged by hand
    ids = tokenizer(LONG, add_special_tokens=False)["input_ids"]
    starts = list(range(0, len(ids) - 2, 8))  # room 10, stride 8, until a window reaches the end
    starts = [s for i, s in enumerate(starts) if i == 0 or starts[i - 1] + 10 < len(ids)]
    assert table.column("windows").to_pylist() == [len(starts), 1]
    plain = SentenceEncoder(encoder_plan)
    windows = [tokenizer.decode(ids[s:s + 10]) for s in starts]
    weights = np.array([min(10, len(ids) - s) + 2 for s in starts], np.float64)
    window_ids = [[tokenizer.cls_token_id, *ids[s:s + 10], tokenizer.sep_token_id]
                  for s in starts]
    assert [len(w) for w in window_ids] == list(weights)
    each = np.stack([plain.embed_tokens(*_padded([w])).detach().numpy()[0]
                     for w in window_ids])
    expected = (each * weights[:, None]).sum(0) / weights.sum()
    # different batches (all windows together vs one by one): float rounding, 1e-6
    np.testing.assert_allclose(embeddings(table)[0], expected, rtol=1e-5, atol=1e-6)
    assert windows  # the windows decode to text (they are real token runs)


def test_a_text_that_fits_one_window_gets_exactly_the_plain_vector(encoder_plan):
    texts = [SHORT, "Stocks fell.", "The dog barked at the door."]
    plain = EmbedBatch(EmbedSpec(encoder_plan, VectorConfig()))(records(texts))
    chunked = EmbedBatch(EmbedSpec(encoder_plan, VectorConfig(long_text="chunk")))(records(texts))
    # the same windows in the same batches through the same kernels: the same bits
    assert np.array_equal(embeddings(plain), embeddings(chunked))
    assert chunked.column("status").to_pylist() == ["ok"] * 3
    truncated = EmbedBatch(EmbedSpec(encoder_plan, VectorConfig()))(records([LONG]))
    assert truncated.column("status").to_pylist() == ["truncated"]


def test_identical_texts_are_encoded_once_and_counted(encoder_plan):
    actor = EmbedBatch(EmbedSpec(encoder_plan, VectorConfig(normalize=True)))
    first = actor(records([SHORT, LONG, SHORT, "", None, SHORT]))
    vectors = embeddings(first)
    # twins are copied from the first one's vector, not encoded again: the same bits anywhere
    assert np.array_equal(vectors[0], vectors[2]) and np.array_equal(vectors[0], vectors[5])
    assert first.column("_copied").to_pylist() == [False, False, True, False, False, True]
    assert first.column("status").to_pylist() == ["ok", "truncated", "ok", "empty", "null", "ok"]
    # a later block on the same actor: its texts seen before are copied from the cache
    second = actor(records([LONG, "Something new."]))
    assert second.column("_copied").to_pylist() == [True, False]
    # exact by construction: the cached float32 row (already normalized) is copied into this
    # block and stored by a float32 cast; no kernel runs on it again
    assert np.array_equal(embeddings(second)[0], vectors[1])
    # without dedupe every row is encoded, to the same vectors up to batch rounding
    plain = EmbedBatch(EmbedSpec(encoder_plan, dataclasses.replace(actor.vector, dedupe=False)))
    again = plain(records([SHORT, LONG, SHORT, "", None, SHORT]))
    assert not any(again.column("_copied").to_pylist())
    np.testing.assert_allclose(embeddings(again), vectors, rtol=1e-5, atol=1e-6)


def test_the_cache_forgets_the_oldest_texts_beyond_its_size(encoder_plan):
    actor = EmbedBatch(EmbedSpec(encoder_plan, VectorConfig(dedupe_cache_rows=2)))
    actor(records(["one", "two", "three"]))
    assert len(actor.cache) == 2
    assert actor(records(["one", "three"])).column("_copied").to_pylist() == [False, True]


def _padded(rows: list[list[int]]):
    import torch

    width = max(len(r) for r in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = torch.tensor(row)
        mask[i, :len(row)] = 1
    return ids, mask

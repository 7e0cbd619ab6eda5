"""The embedding job's three stages without Ray, on a tiny in-process model: the tokenizer's fast
path against the transformers call and the one-text window rule, the vectorized padding against
a loop, the stages handed their tables through Arrow IPC (what Ray's object store does) against
the one-process actor, and the stand-in GPU's clock."""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow as pa
import pytest

from sentray.bulk_embedding.actor import EmbedBatch, EmbedSpec, EncodeTokens
from sentray.bulk_embedding.config import VectorConfig
from sentray.bulk_embedding.storing import StoreVectors
from sentray.bulk_embedding.tokenizing import TokenizeRows, single_windows, tokenize_texts
from sentray.bulk_embedding.windows import WindowPlan, bounded_text, windows_of
from sentray.encode.config import EncoderConfig
from sentray.encode.encoder import TokenBatches
from sentray.precision.plan import plan_encoder
from sentray.testing.stand_in_gpu import StandInGPU, busy_fraction, fixed_vector

MAX_LENGTH = 12
TEXTS = ["A cat sat on the mat.", "", "  ", None, "\x00\x01", "A cat sat on the mat.",
         "The jury further said in term-end presentments that the City Executive Committee, "
         "which had over-all charge of the election, deserves the praise and thanks.",
         "Emoji \U0001F600 and caf\u00e9 and \u6211\u7231\u81ea\u7136.", "x" * 2000,
         "word " * 300, "Stocks fell.", "Stocks fell."]


def records(texts: list, errors: list | None = None) -> pa.Table:
    n = len(texts)
    return pa.table({"id": [f"f:{i}" for i in range(n)], "text": pa.array(texts, pa.string()),
                     "read_error": pa.array(errors or [None] * n, pa.string()),
                     "source": ["s"] * n, "row": list(range(n)), "source_rows": [n] * n})


def through_ipc(table: pa.Table) -> pa.Table:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return pa.ipc.open_stream(sink.getvalue()).read_all()


@pytest.fixture(scope="module")
def encoder_plan(tiny_model_dir):
    return plan_encoder(EncoderConfig(model=str(tiny_model_dir), pooling="mean",
                                      max_length=MAX_LENGTH, device="cpu", batch_size=4))


def test_the_fast_path_gives_the_transformers_ids(tokenizer):
    texts = [t for t in TEXTS if t] + ["Hello, World!  Twice  spaced\ttab", "\u200b\u200b"]
    reference = tokenizer(texts, add_special_tokens=False, truncation=False)["input_ids"]
    assert tokenize_texts(tokenizer, texts) == reference


def test_one_window_a_text_cut_from_the_flat_ids_is_the_window_rule():
    rng = np.random.default_rng(0)
    ids = [list(rng.integers(5, 1000, size=n)) for n in (0, 1, 9, 10, 11, 40, 3, 0)]
    plan = WindowPlan.of(MAX_LENGTH, 2)
    lengths = np.array([len(i) for i in ids])
    flat = np.array([t for i in ids for t in i], dtype=np.int32)
    windows, kept = single_windows(flat, lengths, plan.room, [101], [102])
    for text_ids, window, k in zip(ids, windows.to_pylist(), kept, strict=True):
        expected = windows_of(text_ids, [101], [102], plan).ids[0] if text_ids else []
        assert window == expected and k == min(len(text_ids), plan.room)


@pytest.mark.parametrize("long_text", ["truncate", "chunk"])
def test_the_token_table_against_the_reference_per_text(encoder_plan, tokenizer, long_text):
    vector = VectorConfig(long_text=long_text, max_windows=4)
    spec = EmbedSpec(encoder_plan, vector)
    table = TokenizeRows(spec.tokenizer())(records(TEXTS))
    plan = WindowPlan.of(MAX_LENGTH, 2, 0, 4 if long_text == "chunk" else 1)
    windows = table.column("_window_ids").to_pylist()
    copied = table.column("_copied").to_pylist()
    status = table.column("status").to_pylist()
    assert copied == [False] * 5 + [True] + [False] * 5 + [True]  # the later twins
    for i, text in enumerate(TEXTS):
        if text is None or not text.strip():
            assert windows[i] is None and status[i] in ("null", "empty")
            continue
        kept, cut = bounded_text(text, plan.char_limit)
        ids = tokenizer(kept, add_special_tokens=False)["input_ids"]
        if not ids:  # control characters only: nothing to embed
            assert status[i] == "empty" and windows[i] is None
            continue
        expected = windows_of(ids, [tokenizer.cls_token_id], [tokenizer.sep_token_id], plan, cut)
        assert windows[i] == (None if copied[i] else expected.ids), text[:30]
        assert table.column("windows")[i].as_py() == len(expected.ids)
        assert table.column("_tokens")[i].as_py() == (0 if copied[i] else sum(expected.weights))
    assert status[6] == ("chunked" if long_text == "chunk" else "truncated")


def test_padded_batches_are_the_loop_s(encoder_plan):
    rng = np.random.default_rng(1)
    sequences = [list(rng.integers(1, 99, size=n)) for n in rng.integers(1, 20, size=23)]
    lengths = np.array([len(s) for s in sequences])
    flat = np.concatenate([np.array(s) for s in sequences])
    for batches in (TokenBatches(0, 4), TokenBatches(0, 4, max_tokens_per_batch=40)):
        seen = []
        for batch in batches.padded(flat, lengths):
            width = batch.input_ids.shape[1]
            assert width == max(lengths[batch.positions])  # longest first, padded to it
            for row, position in enumerate(batch.positions):
                n = lengths[position]
                assert batch.input_ids[row, :n].tolist() == sequences[position]
                assert batch.input_ids[row, n:].eq(0).all() and batch.attention_mask[row].sum() == n
            seen += list(batch.positions)
        assert sorted(seen) == list(range(len(sequences)))


@pytest.mark.parametrize("vector", [VectorConfig(normalize=True),
                                    VectorConfig(long_text="chunk", max_windows=3,
                                                 output_dtype="float16"),
                                    VectorConfig(dedupe=False, truncate_dim=16)])
def test_the_stages_apart_give_the_one_process_actor_s_rows(encoder_plan, vector):
    spec = EmbedSpec(encoder_plan, vector, metadata={b"k": b"v"})
    blocks = [records(TEXTS), records(["Stocks fell.", "A new one.", None], [None, None, None])]
    fused = EmbedBatch(spec)
    tokenize, encode, store = TokenizeRows(spec.tokenizer()), EncodeTokens(spec), StoreVectors(
        spec.store())
    for block in blocks:  # the second block's twin comes from the encoder's cache
        one = fused(block)
        apart = store(through_ipc(encode(through_ipc(tokenize(through_ipc(block))))))
        # the same windows in the same batches through the same kernels: the same bits
        assert apart.equals(one) and apart.schema.metadata[b"k"] == b"v"
    assert one.column("_copied").to_pylist() == [vector.dedupe, False, False]


def test_the_stand_in_takes_the_real_ids_and_the_time_its_rate_says(encoder_plan, tmp_path):
    log = tmp_path / "gpu.jsonl"
    stand_in = StandInGPU(32, rows_per_second=2_000, log=str(log))
    spec = EmbedSpec(encoder_plan, VectorConfig(normalize=True), stand_in=stand_in)
    actor = EmbedBatch(spec)
    table = actor(records(TEXTS * 10))
    embedded = [v for v in table.column("embedding").to_pylist() if v is not None]
    assert len(embedded) == 8 * 10  # 8 rows of TEXTS have text to embed
    np.testing.assert_allclose(embedded, [fixed_vector(32, True)] * 80, rtol=1e-6)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert sum(c["rows"] for c in calls) == 6  # the 6 distinct texts; their twins copied
    assert sum(c["busy"] for c in calls) == pytest.approx(6 / 2000)
    busy = busy_fraction(log)
    assert busy["rows"] == 6 and 0 < busy["busy_fraction"] <= 1.0
    with pytest.raises(ValueError, match="rows_per_second or at tokens_per_second"):
        StandInGPU(32)


def test_rows_the_probe_encoded_with_the_plan_are_taken_not_encoded_again(encoder_plan):
    """`EncoderPlan.probed` (the probe's rows, encoded by this very plan) seeds the encoder's
    cache: those rows take the probe's vectors (marked here so that they are told apart) and
    are counted as not encoded; the others are encoded."""
    import dataclasses

    from sentray.bulk_embedding.storing import POOLED
    from sentray.encode.plan import ProbedRows

    marked = np.full((1, encoder_plan.dimension), 0.25, dtype=np.float32)
    plan = dataclasses.replace(encoder_plan, probed=ProbedRows(("Stocks fell.",), marked))
    encode = EncodeTokens(EmbedSpec(plan, VectorConfig()))
    tokenize = TokenizeRows(EmbedSpec(plan, VectorConfig()).tokenizer())
    out = encode(tokenize(records(["Stocks fell.", "A new one."])))
    pooled = np.asarray(out.column(POOLED).to_pylist(), dtype=np.float32)
    # the probe's vector is copied, never computed: equal bit for bit on any CPU
    assert np.array_equal(pooled[0], marked[0]) and not np.allclose(pooled[1], 0.25)
    assert out.column("_copied").to_pylist() == [True, False]

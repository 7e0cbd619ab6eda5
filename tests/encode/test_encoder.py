"""SentenceEncoder on tiny in-process models: fast Ditto against eager attention maps, batching
and sorting against one-by-one encoding, config validation; building from a plan decides
nothing."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import encoder_of, make_tiny_bert

from sentray.encode.config import EncoderConfig
from sentray.encode.encoder import SentenceEncoder, token_budget_bounds
from sentray.encode.plan import model_plan

TEXTS = ["A man is playing a guitar.", "Hi", "The quick brown fox jumps over the lazy dog.",
         "Ein Mann spielt Gitarre.", "猫が好きです。", "x " * 40]


def tiny_encoder(tokenizer, model, **config) -> SentenceEncoder:
    return encoder_of(EncoderConfig(**config), model=model, tokenizer=tokenizer)


@pytest.mark.parametrize("pooling", ["ditto", "ditto_last", "ditto_static", "ditto_layer1_last"])
@pytest.mark.parametrize("head", ["0-0", "1-3"])
def test_fast_ditto_equals_eager(tokenizer, pooling, head):
    fast = tiny_encoder(tokenizer, make_tiny_bert(tokenizer.vocab_size), pooling=pooling,
                        head=head)
    eager = tiny_encoder(tokenizer, make_tiny_bert(tokenizer.vocab_size), pooling=pooling,
                         head=head, ditto_impl="eager")
    assert fast.fast_ditto and not eager.fast_ditto
    assert fast.model.config._attn_implementation == "sdpa"
    assert eager.model.config._attn_implementation == "eager"
    a, b = fast.encode(TEXTS, batch_size=4), eager.encode(TEXTS, batch_size=4)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_eager_diagonal_is_read_from_attention_maps(tokenizer):
    """The head's diagonal, checked against output_attentions directly."""
    model = make_tiny_bert(tokenizer.vocab_size, attn_implementation="eager")
    encoder = tiny_encoder(tokenizer, model, pooling="ditto_last", head="1-2", ditto_impl="eager")
    batch = tokenizer(["one two three", "four"], padding=True, return_tensors="pt")
    with torch.no_grad():
        outputs = model(**batch, output_attentions=True, output_hidden_states=True)
        expected = [
            sum(outputs.attentions[1][b, 2, i, i] * outputs.hidden_states[-1][b, i]
                for i in range(int(batch["attention_mask"][b].sum())))
            for b in range(2)]
        got = encoder.embed_tokens(batch["input_ids"], batch["attention_mask"])
    torch.testing.assert_close(got, torch.stack(expected))


def test_non_bert_family_falls_back_to_eager(tokenizer):
    model = make_tiny_bert(tokenizer.vocab_size, model_type="mpnet")
    encoder = tiny_encoder(tokenizer, model, pooling="ditto", head="0-1")
    assert encoder.plan.ditto_impl == "eager"  # decided by the plan, for the model's family
    assert not encoder.fast_ditto
    assert encoder.model.config._attn_implementation == "eager"
    assert encoder.encode(TEXTS[:2]).shape == (2, 32)
    with pytest.raises(ValueError, match="fast Ditto supports"):
        tiny_encoder(tokenizer, make_tiny_bert(tokenizer.vocab_size, model_type="mpnet"),
                     pooling="ditto", head="0-1", ditto_impl="fast")


@pytest.mark.parametrize("pooling", ["mean", "cls_before_pooler", "first_last_avg", "ditto"])
def test_batched_sorted_encoding_equals_one_by_one(tokenizer, tiny_bert, pooling):
    encoder = tiny_encoder(tokenizer, tiny_bert, pooling=pooling,
                           head="1-1" if pooling == "ditto" else None)
    batched = encoder.encode(TEXTS, batch_size=3)
    single = np.concatenate([encoder.encode([t]) for t in TEXTS])
    np.testing.assert_allclose(batched, single, rtol=1e-4, atol=1e-5)


def test_token_budget_bounds_by_hand():
    # lengths sorted longest first, budget 20 padded tokens: 2 x 10, 2 x 8, then 4 rows of 3
    # (20 // 3 = 6 would fit, 4 remain)
    assert token_budget_bounds(np.array([10, 8, 8, 5, 3, 3, 3, 1]), 20) == [
        (0, 2), (2, 4), (4, 8)]
    assert token_budget_bounds(np.array([30, 2, 2]), 20) == [(0, 1), (1, 3)]  # 30 goes alone
    assert token_budget_bounds(np.array([], dtype=np.int64), 20) == []


def test_token_budget_batches_fit_and_give_the_same_embeddings(tokenizer, tiny_bert):
    """--max-tokens-per-batch: every forward pass within the budget (or one row alone), every
    sentence once, and the embeddings of fixed batches of 3. 1e-5: the same rows padded to
    other widths in other batches change float32 sums only in their last bits."""
    texts = TEXTS + ["word " * n for n in (1, 2, 9, 30, 31)]
    budget = 40
    encoder = tiny_encoder(tokenizer, tiny_bert, max_tokens_per_batch=budget)
    batches = list(encoder.length_sorted_batches(encoder.tokenize(texts)))
    assert sorted(np.concatenate([b.positions for b in batches]).tolist()) == list(
        range(len(texts)))
    for batch in batches:
        rows, width = batch.input_ids.shape
        assert rows * width <= budget or rows == 1
    assert len({b.input_ids.shape[0] for b in batches}) > 1  # short rows share a pass
    fixed = tiny_encoder(tokenizer, tiny_bert).encode(texts, batch_size=3)
    np.testing.assert_allclose(encoder.encode(texts), fixed, rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="max_tokens_per_batch"):
        EncoderConfig(max_tokens_per_batch=0)


def test_encode_edge_cases(tokenizer, tiny_bert):
    encoder = tiny_encoder(tokenizer, tiny_bert, max_length=8)
    assert encoder.encode([]).shape == (0, 32)
    with pytest.raises(TypeError, match="list"):
        encoder.encode("a single string")
    long = encoder.encode(["word " * 500])  # truncated to 8 tokens, no error
    word = tokenizer.convert_tokens_to_ids("word")
    assert encoder.tokenize(["word " * 500])[0] == (
        [tokenizer.cls_token_id] + [word] * 6 + [tokenizer.sep_token_id])
    # so it is the embedding of six words (tolerance: both are one length-8 batch, but
    # nothing needs the kernels to match)
    np.testing.assert_allclose(long, encoder.encode(["word " * 6]), rtol=1e-5, atol=1e-6)
    assert not np.allclose(long, encoder.encode(["word " * 5]), rtol=1e-3, atol=1e-4)


def test_every_head_matches_single_head(tokenizer, tiny_bert):
    encoder = tiny_encoder(tokenizer, tiny_bert, pooling="ditto", head="0-0", ditto_impl="eager")
    grid = encoder.encode_every_head(TEXTS[:3])
    assert grid.shape == (2, 4, 3, 32)
    for head in ("0-0", "1-3"):
        single = tiny_encoder(tokenizer, tiny_bert, pooling="ditto", head=head,
                              ditto_impl="eager").encode(TEXTS[:3])
        layer, h = map(int, head.split("-"))
        np.testing.assert_allclose(grid[layer, h], single, rtol=1e-5, atol=1e-6)


def test_every_head_leaves_a_fast_ditto_encoder_as_it_was(tokenizer, tiny_bert):
    """The head search runs the model eagerly; afterwards the encoder's own path is back."""
    tiny_bert.set_attn_implementation("sdpa")
    encoder = tiny_encoder(tokenizer, tiny_bert, pooling="ditto", head="1-2", ditto_impl="fast")
    before = encoder.encode(TEXTS[:3])
    grid = encoder.encode_every_head(TEXTS[:3])
    assert encoder.model.config._attn_implementation == "sdpa"
    # the same process and kernels before and after: equal up to float noise (1e-6)
    np.testing.assert_allclose(encoder.encode(TEXTS[:3]), before, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(grid[1, 2], before, rtol=1e-5, atol=1e-6)  # eager vs fast


def test_config_validation():
    with pytest.raises(ValueError, match="needs a head"):
        model_plan(EncoderConfig(pooling="ditto"))
    with pytest.raises(ValueError, match="only used by the Ditto"):
        EncoderConfig(pooling="mean", head="0-1")
    with pytest.raises(ValueError, match="unknown pooling"):
        EncoderConfig(pooling="maxpool")
    with pytest.raises(ValueError, match="batch_size"):
        EncoderConfig(batch_size=0)
    assert EncoderConfig(pooling="mean").pooling == "last_avg"


def test_head_out_of_range_and_cpu_precision(tokenizer, tiny_bert):
    with pytest.raises(ValueError, match="outside model"):
        tiny_encoder(tokenizer, tiny_bert, pooling="ditto", head="5-0")
    with pytest.raises(ValueError, match="'fp16' is for GPUs"):
        tiny_encoder(tokenizer, tiny_bert, precision="fp16", device="cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
def test_fast_ditto_on_gpu(tokenizer, precision):
    """On CUDA the fast path runs SDPA kernels; it must still equal eager (loosely under
    autocast), and fp32 GPU must equal CPU."""
    model = make_tiny_bert(tokenizer.vocab_size)
    fast = tiny_encoder(tokenizer, model, pooling="ditto", head="1-2", device="cuda",
                        precision=precision)
    eager = tiny_encoder(tokenizer, make_tiny_bert(tokenizer.vocab_size), pooling="ditto",
                         head="1-2", device="cuda", precision=precision, ditto_impl="eager")
    cpu = tiny_encoder(tokenizer, make_tiny_bert(tokenizer.vocab_size), pooling="ditto",
                       head="1-2", device="cpu")
    tolerance = 1e-5 if precision == "fp32" else 2e-2
    np.testing.assert_allclose(fast.encode(TEXTS), eager.encode(TEXTS), rtol=tolerance,
                               atol=tolerance)
    np.testing.assert_allclose(fast.encode(TEXTS), cpu.encode(TEXTS), rtol=100 * tolerance,
                               atol=100 * tolerance)


def test_the_plan_decides_the_defaults_the_config_keeps_what_was_typed(tokenizer, tiny_bert):
    """A config holds what the user typed; the plan decides the model's own read-out and
    length, once (all-MiniLM-L6-v2: mean, 256 tokens, normalized, 384-d)."""
    config = EncoderConfig()
    plan = model_plan(config)
    assert (config.pooling, config.head, config.max_length) == (None, None, None)
    assert (plan.pooling, plan.max_length, plan.model_max_length, plan.dimension,
            plan.normalize, plan.precision, plan.runtime) == (
        "last_avg", 256, 256, 384, True, "fp32", "torch")
    assert model_plan(EncoderConfig(max_length=16)).max_length == 16
    assert model_plan(EncoderConfig(), module=tiny_bert).dimension == tiny_bert.config.hidden_size


def test_building_an_encoder_decides_nothing(tokenizer, tiny_bert, monkeypatch):
    """SentenceEncoder(plan) only builds: it runs no probe, prepares no artefact, looks up no
    model and reads none of a model's files (its facts were read into the plan). Every deciding
    function is replaced by one that fails, wherever a sentray module holds it (a `from ...
    import` binding too)."""
    import sys

    import sentray.precision.plan  # noqa: F401 (loaded, so that its bindings are replaced too)

    plan = model_plan(EncoderConfig(pooling="ditto", head="0-1"), module=tiny_bert)
    deciding = {"decide", "measure_candidates", "plan_encoder", "model_plan", "prepare_int8",
                "read_cached", "model_facts", "own_pooling", "default_max_length",
                "own_normalize", "resolve_model", "config_value", "model_file",
                "model_fingerprint", "checked_model", "located_model", "check_folder"}

    def forbidden(*args, **kwargs):
        raise AssertionError("SentenceEncoder decided something while it was built")

    replaced = 0
    for name, module in list(sys.modules.items()):
        if name.startswith("sentray."):
            for attribute in deciding & set(vars(module)):
                monkeypatch.setattr(module, attribute, forbidden)
                replaced += 1
    assert replaced >= len(deciding)  # each is defined somewhere, most imported elsewhere too
    encoder = SentenceEncoder(plan, model=tiny_bert, tokenizer=tokenizer)
    assert encoder.encode(TEXTS[:2]).shape == (2, tiny_bert.config.hidden_size)

"""Pooling functions against naive loops over sentences and tokens."""

from __future__ import annotations

import pytest
import torch
from conftest import encoder_of

from sentray.encode.pooling import attention_diagonal, diagonal_weighted_sum, masked_mean, pool
from sentray.encode.pooling_catalog import POOLINGS, canonical_pooling, parse_head


def _random_batch(seed=0, batch=3, tokens=7, dim=5, layers=3):
    generator = torch.Generator().manual_seed(seed)
    hidden = tuple(torch.randn(batch, tokens, dim, generator=generator) for _ in range(layers + 1))
    lengths = [7, 4, 1]
    mask = torch.zeros(batch, tokens, dtype=torch.long)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
    diagonal = torch.rand(batch, tokens, generator=generator)
    words = torch.randn(batch, tokens, dim, generator=generator)  # the table's rows W[x_i]
    return hidden, mask, diagonal, lengths, words


def naive(pooling, hidden, lengths, diagonal, words):
    out = []
    for b, n in enumerate(lengths):
        h0, h1, hl, w = hidden[0][b], hidden[1][b], hidden[-1][b], words[b]
        a = diagonal[b]
        tokens = range(n)
        if pooling == "cls_before_pooler":
            out.append(hl[0])
        elif pooling == "last_avg":
            out.append(sum(hl[i] for i in tokens) / n)
        elif pooling == "first_last_avg":
            out.append(sum((h0[i] + hl[i]) / 2 for i in tokens) / n)
        elif pooling == "layer1_last_avg":
            out.append(sum((h1[i] + hl[i]) / 2 for i in tokens) / n)
        elif pooling == "static_avg":  # Ditto's avg_static: the word embeddings
            out.append(sum(w[i] for i in tokens) / n)
        elif pooling == "embedding_layer_avg":
            out.append(sum(h0[i] for i in tokens) / n)
        elif pooling == "ditto":  # Ditto: 1/2 sum_i A_ii (h0_i + hL_i), no 1/N
            out.append(0.5 * sum(a[i] * (h0[i] + hl[i]) for i in tokens))
        elif pooling == "ditto_layer1_last":
            out.append(0.5 * sum(a[i] * (h1[i] + hl[i]) for i in tokens))
        elif pooling == "ditto_last":
            out.append(sum(a[i] * hl[i] for i in tokens))
        elif pooling == "ditto_static":  # Ditto's att_static
            out.append(sum(a[i] * w[i] for i in tokens))
    return torch.stack(out)


@pytest.mark.parametrize("pooling", [p for p in POOLINGS if p != "cls"])
def test_pool_matches_naive_loop(pooling):
    hidden, mask, diagonal, lengths, words = _random_batch()
    got = pool(pooling, hidden, mask, diagonal=diagonal, word_embeddings=words)
    torch.testing.assert_close(got, naive(pooling, hidden, lengths, diagonal, words))


def test_padding_does_not_change_embeddings():
    hidden, mask, diagonal, _, words = _random_batch()
    noisy = tuple(h.clone() for h in (*hidden, words))
    for h in noisy:
        h[mask == 0] = 1e6  # garbage in padded positions
    for pooling in ("last_avg", "first_last_avg", "ditto", "ditto_static", "static_avg"):
        torch.testing.assert_close(
            pool(pooling, noisy[:-1], mask, diagonal=diagonal, word_embeddings=noisy[-1]),
            pool(pooling, hidden, mask, diagonal=diagonal, word_embeddings=words))


def test_cls_uses_pooler_output_and_needs_it():
    hidden, mask, _, _, _ = _random_batch()
    pooled = torch.randn(3, 5)
    assert pool("cls", hidden, mask, pooler_output=pooled) is pooled
    with pytest.raises(ValueError, match="cls_before_pooler"):
        pool("cls", hidden, mask)


def test_ditto_needs_a_diagonal():
    hidden, mask, _, _, words = _random_batch()
    with pytest.raises(ValueError, match="diagonal"):
        pool("ditto", hidden, mask)
    with pytest.raises(ValueError, match="word embeddings"):
        pool("static_avg", hidden, mask)


def test_attention_diagonal_equals_full_softmax():
    generator = torch.Generator().manual_seed(1)
    query, key = torch.randn(2, 6, 4, generator=generator), torch.randn(2, 6, 4, generator=generator)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])
    scores = query @ key.transpose(1, 2) * 0.5
    scores = scores.masked_fill(mask[:, None, :] == 0, float("-inf"))
    expected = scores.softmax(-1).diagonal(dim1=-2, dim2=-1)
    got = attention_diagonal(query, key, mask, scaling=0.5)
    torch.testing.assert_close(got[mask.bool()], expected[mask.bool()])


def test_masked_mean_and_weighted_sum_shapes_and_values_by_hand():
    hidden, mask, diagonal, _, _ = _random_batch()
    assert masked_mean(hidden[-1], mask).shape == (3, 5)
    assert diagonal_weighted_sum(hidden[-1], diagonal, mask).shape == (3, 5)
    # worked by hand: two real tokens and a padded one holding garbage (small integers and
    # halves, so every sum is exact on any CPU)
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, -100.0]]])  # (1, 3, 2)
    mask = torch.tensor([[1, 1, 0]])
    assert masked_mean(hidden, mask).tolist() == [[2.0, 3.0]]  # ([1, 2] + [3, 4]) / 2
    diagonal = torch.tensor([[0.5, 2.0, 9.0]])
    # 0.5 * [1, 2] + 2 * [3, 4], no division by the length
    assert diagonal_weighted_sum(hidden, diagonal, mask).tolist() == [[6.5, 9.0]]


def test_names_and_heads_are_validated():
    assert canonical_pooling("mean") == "last_avg"
    with pytest.raises(ValueError, match="valid: .*ditto"):
        canonical_pooling("max")
    assert parse_head("0-9") == (0, 9)
    assert parse_head("11-3") == (11, 3)
    for bad in ("9", "a-b", "1-2-3", "-1-2", ""):
        with pytest.raises(ValueError, match="L-H"):
            parse_head(bad)


def test_static_poolings_read_the_word_embedding_table_as_dittos_official_code(tokenizer):
    """On the packaged model: static_avg is the mean of the table rows W[x_i] of the tokens
    ([CLS] and [SEP] in, padding out) and runs no transformer layer; ditto_static weights the
    same rows by the head's attention diagonal (eager attention maps), as Ditto's avg_static
    and att_static do. Naive: numpy over one sentence at a time."""
    import numpy as np

    from sentray.encode.config import EncoderConfig
    from sentray.encode.model_loading import load_encoder
    from sentray.encode.model_lookup import resolve_model

    texts = ["A man is playing a guitar.", "Stocks fell.", "The cat sat on the mat today."]
    static = encoder_of(EncoderConfig(pooling="static_avg", device="cpu"))
    table = static.model.get_input_embeddings().weight.detach().numpy().astype(np.float64)
    calls = []
    static.model.encoder.register_forward_hook(lambda *args: calls.append(1))
    got = static.encode(texts)
    assert calls == []  # no transformer layer ran
    eager = load_encoder(resolve_model("all-MiniLM-L6-v2"), attn_implementation="eager")
    ditto = encoder_of(EncoderConfig(pooling="ditto_static", head="1-3", device="cpu"))
    got_ditto = ditto.encode(texts)
    for row, text in enumerate(texts):
        ids = tokenizer(text)["input_ids"]  # with [CLS] and [SEP]
        rows = table[ids]  # (T, D)
        # float32 sums in another order than the float64 ones: 1e-6
        np.testing.assert_allclose(got[row], rows.mean(0), rtol=1e-5, atol=1e-6)
        with torch.no_grad():
            attention = eager(input_ids=torch.tensor([ids]), output_attentions=True).attentions
        diagonal = attention[1][0, 3].diagonal().double().numpy()  # layer 1, head 3: A_ii
        np.testing.assert_allclose(got_ditto[row], (diagonal[:, None] * rows).sum(0),
                                   rtol=1e-4, atol=1e-6)

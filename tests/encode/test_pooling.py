"""Pooling functions against naive loops over sentences and tokens."""

from __future__ import annotations

import pytest
import torch

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
    return hidden, mask, diagonal, lengths


def naive(pooling, hidden, lengths, diagonal):
    out = []
    for b, n in enumerate(lengths):
        h0, h1, hl = hidden[0][b], hidden[1][b], hidden[-1][b]
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
        elif pooling == "static_avg":
            out.append(sum(h0[i] for i in tokens) / n)
        elif pooling == "ditto":  # Ditto: 1/2 sum_i A_ii (h0_i + hL_i), no 1/N
            out.append(0.5 * sum(a[i] * (h0[i] + hl[i]) for i in tokens))
        elif pooling == "ditto_layer1_last":
            out.append(0.5 * sum(a[i] * (h1[i] + hl[i]) for i in tokens))
        elif pooling == "ditto_last":
            out.append(sum(a[i] * hl[i] for i in tokens))
        elif pooling == "ditto_static":
            out.append(sum(a[i] * h0[i] for i in tokens))
    return torch.stack(out)


@pytest.mark.parametrize("pooling", [p for p in POOLINGS if p != "cls"])
def test_pool_matches_naive_loop(pooling):
    hidden, mask, diagonal, lengths = _random_batch()
    got = pool(pooling, hidden, mask, diagonal=diagonal)
    torch.testing.assert_close(got, naive(pooling, hidden, lengths, diagonal))


def test_padding_does_not_change_embeddings():
    hidden, mask, diagonal, _ = _random_batch()
    noisy = tuple(h.clone() for h in hidden)
    for h in noisy:
        h[mask == 0] = 1e6  # garbage in padded positions
    for pooling in ("last_avg", "first_last_avg", "ditto", "ditto_static"):
        torch.testing.assert_close(pool(pooling, noisy, mask, diagonal=diagonal),
                                   pool(pooling, hidden, mask, diagonal=diagonal))


def test_cls_uses_pooler_output_and_needs_it():
    hidden, mask, _, _ = _random_batch()
    pooled = torch.randn(3, 5)
    assert pool("cls", hidden, mask, pooler_output=pooled) is pooled
    with pytest.raises(ValueError, match="cls_before_pooler"):
        pool("cls", hidden, mask)


def test_ditto_needs_a_diagonal():
    hidden, mask, _, _ = _random_batch()
    with pytest.raises(ValueError, match="diagonal"):
        pool("ditto", hidden, mask)


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
    hidden, mask, diagonal, _ = _random_batch()
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

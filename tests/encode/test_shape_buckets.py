"""`ShapeBuckets`: a query encoder's batches padded to a few shapes give the vectors of the
unpadded batches (padding has mask 0; the padded rows are dropped), on torch and on OpenVINO,
for poolings that read the mask in different ways; the shapes stay few; a batch is split into
the groups whose padded tokens and calls cost least (against every split, by brute force), and
the split batch's vectors are the whole batch's."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
import torch
from conftest import encoder_of

from sentray.encode import shape_buckets
from sentray.encode.config import EncoderConfig
from sentray.encode.shape_buckets import (
    ShapeBuckets,
    bucket_length,
    bucket_rows,
    least_cost_groups,
)

# another shape runs other kernels (float32 sums blocked in another order): components agree
# to ~1e-6, the tolerance the tests hold fp32 runtimes to against torch is 1e-5
TOLERANCE = 1e-5
TEXTS = ["a dog", "the grand jury said friday an investigation of recent primary election",
         "no evidence", "it is a long way to the city hall of atlanta, georgia, in the south",
         "yes", "the mayor's budget was cut again this year by the council"]


def test_rows_go_to_powers_of_two_and_lengths_to_their_steps():
    assert [bucket_rows(n) for n in (1, 2, 3, 5, 8, 9, 32)] == [1, 2, 4, 8, 8, 16, 32]
    assert [bucket_length(n) for n in (1, 8, 9, 64, 65, 129, 250)] == [8, 8, 16, 64, 80, 160, 256]
    assert bucket_length(250, limit=252) == 252  # never past the model's length
    shapes = {ShapeBuckets(256).shape(rows, length) for rows in range(1, 33)
              for length in range(1, 129)}
    assert len(shapes) == 6 * 12  # rows 1-32, lengths 1-128: within the shape cache's 100


def test_padding_copies_the_first_row_and_masks_the_new_tokens():
    ids = torch.tensor([[101, 7, 8, 102], [101, 9, 102, 0], [101, 102, 0, 0]])
    mask = (ids != 0).long()
    padded_ids, padded_mask = ShapeBuckets(128, pad_id=0).pad(ids, mask)
    assert padded_ids.shape == padded_mask.shape == (4, 8)
    assert torch.equal(padded_ids[:3, :4], ids) and torch.equal(padded_mask[:3, :4], mask)
    assert torch.equal(padded_ids[3, :4], ids[0]) and not padded_mask[:, 4:].any()


@pytest.mark.parametrize(("runtime", "pooling"), [
    ("torch", "last_avg"), ("torch", "cls"), ("torch", "first_last_avg"),
    ("openvino", "last_avg")])
def test_padded_batches_give_the_unpadded_vectors(tokenizer, tiny_bert, runtime, pooling):
    if runtime == "openvino":
        pytest.importorskip("openvino")
    encoder = encoder_of(EncoderConfig(pooling=pooling, device="cpu", runtime=runtime),
                         model=tiny_bert, tokenizer=tokenizer)
    padded = ShapeBuckets(encoder.max_length, tokenizer.pad_token_id).wrap(encoder.embed_tokens)
    for size in (1, 3, 6):  # 3 rows run as 4, 6 as 8
        for batch in encoder.length_sorted_batches(encoder.tokenize(TEXTS[:size]), size):
            with torch.inference_mode():
                plain = encoder.embed_tokens(batch.input_ids, batch.attention_mask).numpy()
                bucketed = padded(batch.input_ids, batch.attention_mask).numpy()
            assert bucketed.shape == plain.shape
            np.testing.assert_allclose(bucketed, plain, atol=TOLERANCE, rtol=0)


def every_split_cost(lengths: list[int], cost) -> float:
    """The naive reference: the least summed cost over every way to cut `lengths` into
    contiguous groups."""
    n, best = len(lengths), float("inf")
    for cuts in itertools.product((False, True), repeat=n - 1):
        starts = [0] + [i + 1 for i, cut in enumerate(cuts) if cut]
        stops = starts[1:] + [n]
        best = min(best, sum(cost(stop - start, lengths[start])
                             for start, stop in zip(starts, stops, strict=True)))
    return best


@pytest.mark.parametrize("call_tokens", [0.0, 5.0, 12.0, 40.0, 1e9])
def test_the_groups_cost_the_least_of_every_split(call_tokens):
    buckets, rng = ShapeBuckets(256, call_tokens=call_tokens), random.Random(7)
    for _ in range(40):
        lengths = sorted((rng.randint(3, 120) for _ in range(rng.randint(1, 10))), reverse=True)
        groups = least_cost_groups(lengths, buckets.cost)
        assert [start for start, _ in groups] == [0] + [stop for _, stop in groups[:-1]]
        assert groups[-1][1] == len(lengths)  # every row in one group, in order
        total = sum(buckets.cost(stop - start, lengths[start]) for start, stop in groups)
        assert total == pytest.approx(every_split_cost(lengths, buckets.cost))
    # a call that costs nothing: each bucket length alone; one that costs all: one call
    assert least_cost_groups([40, 17, 16], ShapeBuckets(256, call_tokens=0).cost) == [
        (0, 1), (1, 2), (2, 3)]
    assert least_cost_groups([40, 17, 16], ShapeBuckets(256, call_tokens=1e9).cost) == [(0, 3)]


def test_a_split_batch_gives_the_whole_batch_vectors(tokenizer, tiny_bert):
    encoder = encoder_of(EncoderConfig(pooling="last_avg", device="cpu"), model=tiny_bert,
                         tokenizer=tokenizer)
    calls = []

    def counted(ids, mask):
        calls.append(tuple(ids.shape))
        return encoder.embed_tokens(ids, mask)

    split = ShapeBuckets(encoder.max_length, tokenizer.pad_token_id, call_tokens=0.0)
    texts = [TEXTS[1] * 3, *TEXTS]  # one long row and short ones: split
    batch = next(encoder.length_sorted_batches(encoder.tokenize(texts), len(texts)))
    # rows in another order than longest first: each comes back in its place
    shuffled = torch.tensor([3, 0, 6, 2, 5, 1, 4])
    ids, mask = batch.input_ids[shuffled], batch.attention_mask[shuffled]
    with torch.inference_mode():
        whole = encoder.embed_tokens(ids, mask).numpy()
        parts = split.wrap(counted)(ids, mask).numpy()
    assert len(calls) > 1 and all(rows == bucket_rows(rows) for rows, _ in calls)
    np.testing.assert_allclose(parts, whole, atol=TOLERANCE, rtol=0)


def test_calibrate_takes_the_calls_own_cost_from_two_lengths(monkeypatch):
    """A forward of 0.5 ms a call and 0.05 ms a token costs 10 tokens' worth a call."""
    clock = [0.0]
    monkeypatch.setattr(shape_buckets.time, "perf_counter", lambda: clock[0])

    def forward(ids, mask):
        clock[0] += 0.0005 + 0.00005 * ids.shape[1]

    buckets = ShapeBuckets(256)
    assert buckets.calibrate(forward, list(range(100, 200))) == pytest.approx(10.0)

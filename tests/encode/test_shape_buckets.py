"""`ShapeBuckets`: a query encoder's batches padded to a few shapes give the vectors of the
unpadded batches (padding has mask 0; the padded rows are dropped), on torch and on OpenVINO,
for poolings that read the mask in different ways; the shapes stay few."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import encoder_of

from sentray.encode.config import EncoderConfig
from sentray.encode.shape_buckets import ShapeBuckets, bucket_length, bucket_rows

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

"""`ShapeBuckets`: a forward whose batches are padded to a few fixed shapes, for an encoder that
sees batches of every size and length (a search service's queries).

Why: OpenVINO's CPU plugin builds and keeps kernels for each input shape it meets (held to
`openvino_runtime.SHAPE_CACHE` entries). A service's batches of 1-32 queries of any length are
hundreds of shapes: its replica grew 30% over 10,000 queries after its warm-up (issue 67,
bench/results/serve-67-50k-mean-amd.json) as the cache filled. Rows padded up to a power of two
and lengths up to a multiple of 8 (16 past 64 tokens, 32 past 128) leave a few dozen shapes
for Brown-length queries; a service builds the common ones when it starts (`common_shapes`),
so that its memory does not grow as it meets them.

What the padding does not change: the padded tokens have mask 0 (every pooling and the
attention ignore them) and the padded rows copy the batch's first row and are dropped; a
vector differs from its unpadded self only by the kernels of another shape (float32 sums in
another order; tests/encode/test_shape_buckets.py: within 1e-5 per component)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

# (multiple, up to): lengths are rounded up to a multiple of 8 up to 64 tokens, 16 up to 128,
# then 32
LENGTH_STEPS = ((8, 64), (16, 128), (32, None))


def bucket_rows(rows: int) -> int:
    """The power of two >= rows."""
    return 1 << max(rows - 1, 0).bit_length()


def bucket_length(length: int, limit: int | None = None) -> int:
    """`length` rounded up to its step (LENGTH_STEPS), at most `limit` (the model's length)."""
    for step, up_to in LENGTH_STEPS:
        if up_to is None or length <= up_to:
            rounded = -(-length // step) * step
            break
    return max(length, min(rounded, limit)) if limit else rounded


def common_shapes(max_rows: int, max_length: int = LENGTH_STEPS[0][1]) -> list[tuple[int, int]]:
    """The bucket shapes of batches of up to `max_rows` rows and `max_length` tokens (a
    search's queries: Brown sentences are ~30 tokens), largest first."""
    rows = sorted({bucket_rows(n) for n in range(1, max_rows + 1)}, reverse=True)
    lengths = sorted({bucket_length(n) for n in range(1, max_length + 1)}, reverse=True)
    return [(r, t) for r in rows for t in lengths]


@dataclass(frozen=True)
class ShapeBuckets:
    """`wrap(forward)`: `forward` on (B, T) ids and mask padded to (bucket_rows(B),
    bucket_length(T, max_length)); its (B, D) rows back."""

    max_length: int | None = None  # no length padded past the model's longest
    pad_id: int = 0

    def shape(self, rows: int, length: int) -> tuple[int, int]:
        return bucket_rows(rows), bucket_length(length, self.max_length)

    def pad(self, input_ids: torch.Tensor, attention_mask: torch.Tensor
            ) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids, mask) (B, T) -> (R, L) at the bucket shape: the new tokens pad_id with mask 0,
        the new rows copies of the first row."""
        rows, length = input_ids.shape
        padded_rows, padded_length = self.shape(rows, length)
        ids = torch.full((padded_rows, padded_length), self.pad_id, dtype=input_ids.dtype)
        mask = torch.zeros((padded_rows, padded_length), dtype=attention_mask.dtype)
        ids[:rows, :length], mask[:rows, :length] = input_ids, attention_mask
        ids[rows:, :length], mask[rows:, :length] = input_ids[0], attention_mask[0]
        return ids, mask

    def wrap(self, forward: Callable) -> Callable:
        def padded_forward(input_ids: torch.Tensor, attention_mask: torch.Tensor):
            ids, mask = self.pad(input_ids, attention_mask)
            return forward(ids, mask)[:len(input_ids)]  # (B, D)

        return padded_forward

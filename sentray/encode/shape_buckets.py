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
another order; tests/encode/test_shape_buckets.py: within 1e-5 per component).

A batch is also split where one forward call would pad more than the calls cost: its rows,
longest first, go in the contiguous groups whose bucket shapes hold the fewest padded tokens,
a call counted as `call_tokens` tokens more (`least_cost_groups`; the query encoder measures
it when it warms its shapes, `calibrate`). Why: a forward's time is nearly its padded tokens'
(OpenVINO bf16, one thread, this project's AMD EPYC Zen 5: 0.93 ms at 1 x 8 tokens, 2.14 at
1 x 32, 13.8 at 8 x 32), and Brown queries (p50 17 tokens, p90 38) padded to the longest
of their batch cost more a query as the batch grew: through `QueryEncoder.encode`, 2.77 ms a
query in batches of 8, 2.98 of 16, 3.56 of 32, against 2.34, 1.92 and 1.79 split (a lone
query 3.66; docs/index-and-search.md, "The fifth round")."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

# (multiple, up to): lengths are rounded up to a multiple of 8 up to 64 tokens, 16 up to 128,
# then 32
LENGTH_STEPS = ((8, 64), (16, 128), (32, None))
# a forward call's own cost, in padded tokens' worth, until `calibrate` measures it (OpenVINO
# at one thread on this project's AMD EPYC: ~0.5 ms a call, ~0.05 ms a bf16 token: ~10; fp32 ~14)
CALL_TOKENS = 12.0


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


def least_cost_groups(lengths: Sequence[int], cost: Callable[[int, int], float]
                      ) -> list[tuple[int, int]]:
    """The contiguous groups [(start, stop), ...] of `lengths`, sorted longest first, whose
    summed `cost(rows, longest)` is the least (each group's longest is its first)."""
    n = len(lengths)
    best, cut = [0.0] + [float("inf")] * n, [0] * (n + 1)
    for stop in range(1, n + 1):
        for start in range(stop):
            total = best[start] + cost(stop - start, lengths[start])
            if total < best[stop]:
                best[stop], cut[stop] = total, start
    groups, stop = [], n
    while stop:
        groups.append((cut[stop], stop))
        stop = cut[stop]
    return groups[::-1]


@dataclass
class ShapeBuckets:
    """`wrap(forward)`: `forward` on (B, T) ids and mask padded to (bucket_rows(B),
    bucket_length(T, max_length)), the rows split into `least_cost_groups` first; its (B, D)
    rows back, in their order."""

    max_length: int | None = None  # no length padded past the model's longest
    pad_id: int = 0
    call_tokens: float = CALL_TOKENS  # a forward call's own cost, in padded tokens

    def shape(self, rows: int, length: int) -> tuple[int, int]:
        return bucket_rows(rows), bucket_length(length, self.max_length)

    def cost(self, rows: int, length: int) -> float:
        """A call's cost at `rows` x `length` tokens, in padded tokens' worth."""
        padded_rows, padded_length = self.shape(rows, length)
        return padded_rows * padded_length + self.call_tokens

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
        def one_call(input_ids: torch.Tensor, attention_mask: torch.Tensor):
            return forward(*self.pad(input_ids, attention_mask))[:len(input_ids)]  # (B, D)

        def padded_forward(input_ids: torch.Tensor, attention_mask: torch.Tensor):
            if len(input_ids) == 1:
                return one_call(input_ids, attention_mask)
            # the rows are right-padded: a row's tokens are its mask's first `length`
            lengths = attention_mask.sum(dim=1)  # (B,)
            order = torch.argsort(lengths, descending=True, stable=True)
            longest = lengths[order].tolist()
            groups = least_cost_groups(longest, self.cost)
            if len(groups) == 1:
                return one_call(input_ids, attention_mask)
            out = None
            for start, stop in groups:
                rows, width = order[start:stop], longest[start]
                part = one_call(input_ids[rows, :width], attention_mask[rows, :width])
                if out is None:
                    out = part.new_empty((len(input_ids), *part.shape[1:]))
                out[rows] = part
            return out

        return padded_forward

    def calibrate(self, forward: Callable, words: Sequence[int], repeats: int = 3) -> float:
        """Measure `call_tokens` on `forward` (its shapes already built): one row of the
        shortest bucket length and one of 64 tokens, the fastest of `repeats` calls each, the
        call's own cost = the intercept of time over tokens; returns it."""
        seconds = {}
        short, long = LENGTH_STEPS[0][0], min(64, self.max_length or 64)
        for length in (short, long):
            ids = torch.tensor([list(words[:length - 1]) + list(words[-1:])])  # (1, length)
            mask = torch.ones_like(ids)
            timings = []
            for _ in range(repeats):
                started = time.perf_counter()
                forward(ids, mask)
                timings.append(time.perf_counter() - started)
            seconds[length] = min(timings)
        per_token = (seconds[long] - seconds[short]) / (long - short)
        if per_token > 0:
            self.call_tokens = max(0.0, seconds[short] / per_token - short)
        return self.call_tokens

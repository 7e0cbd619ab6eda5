"""The embedding job's actors. A row goes through three stages:

    TokenizeRows (CPU)   records -> status, dedupe key, the token ids of its windows
                         (sentray.bulk_embedding.tokenizing)
    EncodeTokens         token ids -> pooled vectors: the model, and nothing else
    StoreVectors (CPU)   pooled -> stored vectors in the output's columns
                         (sentray.bulk_embedding.storing)

On a GPU pool (or `--tokenize own-stage`) each is its own Ray Data step: tokenizing in an
autoscaling pool of CPU actors, storing in the write tasks, and the actor that holds a GPU only
receives token ids, moves them to the device (the next batch's copy made while the last one
computes) and runs the model. On a CPU pool and in the job's own process one actor,
`EmbedBatch`, runs the three in turn: a hand-off between processes would only add work there.

Every row gets a `status`:

    ok | truncated (longer than the model reads: embedded from its start) | chunked (embedded
    as the weighted mean of its windows, --long-text chunk) | null | empty | invalid_utf8

with a null embedding for null, empty and invalid_utf8. Identical texts are encoded once: within
a block (the tokenizer marks the twins), and across the blocks an actor has seen (an LRU cache
of `dedupe_cache_rows` pooled vectors, keyed by a 128-bit hash of the text, which starts with
the corpus rows the probe encoded with the plan's own runtime and precision, `EncoderPlan.probed`);
the rows that took a twin's vector are counted (`_copied`, summed into each part's metadata and the summary).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sentray.bulk_embedding import vectors
from sentray.bulk_embedding.config import VectorConfig
from sentray.bulk_embedding.storing import POOLED, StoreSpec, StoreVectors
from sentray.bulk_embedding.tokenizing import (
    EMBEDDED,
    PASSED_THROUGH,
    STATUSES,
    TokenizeRows,
    TokenizerSpec,
    text_key,
)
from sentray.corpus.actor_pool import ActorClock
from sentray.encode.plan import EncoderPlan

logger = logging.getLogger(__name__)

__all__ = ["EMBEDDED", "STATUSES", "EmbedBatch", "EmbedSpec", "EncodeTokens", "Forward"]

# (B, T) ids, (B, T) mask -> (B, D) pooled vectors: the encoder's forward, or a stand-in for one
Forward = Callable


@dataclass(frozen=True)
class EmbedSpec:
    """What each stage is built from: the job hands the same one to every actor and task."""

    plan: EncoderPlan  # decided once, in the job's driver: every actor builds the same encoder
    vector: VectorConfig = field(default_factory=VectorConfig)  # for the plan (`job.stored_vector`)
    ranges: vectors.CodeBook | None = None  # int8/uint8: the code book every row is coded with
    metadata: dict | None = None  # the output files' schema metadata (what the vectors are)
    # each forward batch padded to one of a few shapes (`sentray.encode.shape_buckets`): a
    # query encoder's, which meets batches of every size and length
    bucket_shapes: bool = False
    # benches and tests only: a forward to run instead of the plan's encoder (a GPU of known
    # speed, `sentray.testing.stand_in_gpu`); never a user's setting
    stand_in: Forward | None = None

    def tokenizer(self) -> TokenizerSpec:
        chunk = self.vector.long_text == "chunk"
        return TokenizerSpec(self.plan.model, self.plan.max_length,
                             self.vector.chunk_overlap if chunk else 0,
                             self.vector.max_windows if chunk else 1, self.vector.dedupe)

    def store(self) -> StoreSpec:
        return StoreSpec(self.vector, self.plan.dimension, self.ranges, self.metadata)


class EncodeTokens:
    """The model stage: the token table (`tokenizing`) -> the same rows with `_pooled` (the
    weighted mean of each row's windows' pooled vectors, (D,) float32; null where the row is not
    embedded) instead of the token ids. Builds the encoder once; on a GPU, one batch's ids are
    copied to the device while the one before it computes."""

    def __init__(self, spec: EmbedSpec) -> None:
        self.clock = ActorClock()  # the job's first moments, for its summary
        # torch and transformers are imported here, in the actor, not when the driver imports
        # this class to hand it to Ray Data (2 s of a 2-core machine's start-up)
        import torch

        from sentray.encode.encoder import TokenBatches

        self.torch = torch
        self.dimension = spec.plan.dimension
        self.dedupe_cache_rows = spec.vector.dedupe_cache_rows
        self.encoder = None  # the plan's `SentenceEncoder` (none beside a stand-in)
        if spec.stand_in is not None:
            self.forward, self.device = spec.stand_in, torch.device("cpu")
            pad_id = 0
        else:
            from sentray.encode.encoder import SentenceEncoder

            self.encoder = SentenceEncoder(spec.plan)
            self.forward, self.device = self.encoder.embed_tokens, self.encoder.device
            pad_id = self.encoder.tokenizer.pad_token_id or 0
        self.buckets = None  # a query encoder's shapes (`bucket_shapes`)
        if spec.bucket_shapes:
            from sentray.encode.shape_buckets import ShapeBuckets

            self.buckets = ShapeBuckets(spec.plan.max_length, pad_id)
            self.forward = self.buckets.wrap(self.forward)
        self.batches = TokenBatches(pad_id, spec.plan.batch_size, spec.plan.max_tokens_per_batch)
        self.cache: OrderedDict[bytes, np.ndarray] = OrderedDict()  # key -> pooled (D,)
        probed = spec.plan.probed if spec.stand_in is None else None
        if probed is not None:  # the probe's rows, encoded by this very plan: not again
            self.cache.update(zip(map(text_key, probed.texts), probed.vectors, strict=True))
        self.clock.ready()

    def __call__(self, table: pa.Table) -> pa.Table:
        started = time.perf_counter()
        rows = table.num_rows
        keys = table.column("_key").to_pylist()
        window_ids = table.column("_window_ids").combine_chunks()
        copied = np.asarray(table.column("_copied").to_numpy(zero_copy_only=False), dtype=bool)
        has_windows = ~np.asarray(window_ids.is_null().to_numpy(zero_copy_only=False))
        # a row whose text this actor encoded in an earlier block takes that vector
        cached = np.array([has_windows[i] and keys[i] in self.cache for i in range(rows)],
                          dtype=bool) if self.cache else np.zeros(rows, dtype=bool)
        fresh = has_windows & ~cached  # (N,) rows encoded now
        pooled = self._encode(window_ids.filter(pa.array(fresh)))  # (fresh rows, D)
        vectors_by_key: dict[bytes, np.ndarray] = {}
        out = np.zeros((rows, self.dimension), dtype=np.float32)  # (N, D)
        out[fresh] = pooled
        fresh_rows = np.flatnonzero(fresh)
        for i, vector in zip(fresh_rows, pooled, strict=True):
            if keys[i] is not None:
                vectors_by_key[keys[i]] = vector
        embedded = np.isin(np.asarray(table.column("status").to_numpy(zero_copy_only=False),
                                      dtype=object), EMBEDDED)
        for i in np.flatnonzero(embedded & ~fresh):  # twins and rows seen before: by key
            vector = vectors_by_key.get(keys[i])
            if vector is None:
                vector = self.cache[keys[i]]
                self.cache.move_to_end(keys[i])
            out[i] = vector
        self._remember(vectors_by_key)
        copied |= cached
        tokens = table.column("_tokens").to_numpy(zero_copy_only=False).copy()
        tokens[copied] = 0
        columns = {name: table.column(name) for name in (*PASSED_THROUGH, "status", "windows")}
        columns[POOLED] = pa.FixedSizeListArray.from_arrays(
            pa.array(out.reshape(-1)), self.dimension, mask=pa.array(~embedded))
        columns["_copied"] = pa.array(copied, pa.bool_())
        columns["_tokens"] = pa.array(tokens, pa.int64())
        logger.info("encoded %d of %d rows (%d took a twin's vector) in %.2f s", len(fresh_rows),
                    rows, int(copied.sum()), time.perf_counter() - started)
        return self.clock.stamp(pa.table(columns))

    def _encode(self, window_ids: pa.ListArray) -> np.ndarray:
        """The rows' pooled vectors (R, D) float32: each row's windows (`window_ids`, R rows of
        list<list<int32>>) through the model in length-sorted batches, then averaged, weighted
        by each window's tokens (its special tokens included: what its mask counts)."""
        rows = len(window_ids)
        if not rows:
            return np.zeros((0, self.dimension), dtype=np.float32)
        windows = pc.list_flatten(window_ids)  # (W,) list<int32>
        per_row = pc.list_value_length(window_ids).to_numpy(zero_copy_only=False)  # (R,)
        lengths = pc.list_value_length(windows).to_numpy(zero_copy_only=False).astype(np.int64)
        flat = pc.list_flatten(windows).to_numpy(zero_copy_only=False)  # (tokens,)
        pooled = np.zeros((len(lengths), self.dimension), dtype=np.float32)  # (W, D)
        torch = self.torch
        with torch.inference_mode():
            pending = None  # the batch computing while the next one is copied
            for batch in self.batches.padded(flat, lengths):
                ids, mask = batch.input_ids, batch.attention_mask
                if self.device.type == "cuda":  # pinned, so that the copy runs asynchronously
                    ids = ids.pin_memory().to(self.device, non_blocking=True)
                    mask = mask.pin_memory().to(self.device, non_blocking=True)
                result = self.forward(ids, mask)  # (B, D), queued on a GPU
                if pending is not None:
                    pooled[pending[0]] = pending[1].float().cpu().numpy()
                pending = (batch.positions, result)
                self.clock.output()
            if pending is not None:
                pooled[pending[0]] = pending[1].float().cpu().numpy()
        if len(lengths) == rows:  # one window a row (truncate): nothing to average
            return pooled
        weights = lengths.astype(np.float32)[:, None]  # (W, 1)
        starts = np.concatenate([[0], np.cumsum(per_row)[:-1]])  # (R,)
        sums = np.add.reduceat(pooled * weights, starts, axis=0)  # (R, D)
        return sums / np.add.reduceat(weights, starts, axis=0)

    def _remember(self, encoded: dict[bytes, np.ndarray]) -> None:
        """Keep the vectors of this block's texts, forgetting the oldest beyond the cap."""
        self.cache.update(encoded)
        while len(self.cache) > self.dedupe_cache_rows:
            self.cache.popitem(last=False)


class EmbedBatch:
    """The actor of a CPU pool and of the job's own process: the three stages in one, on one
    block of the reader's records (id, text, read_error, source, row, source_rows) as a pyarrow
    Table; returns them with `embedding` and `status` (and `windows` when chunking) instead of
    text and read_error."""

    def __init__(self, spec: EmbedSpec) -> None:
        self.tokenize = TokenizeRows(spec.tokenizer())
        self.encode = EncodeTokens(spec)
        self.store = StoreVectors(spec.store())
        self.vector, self.clock = spec.vector, self.encode.clock
        self.encoder = self.encode.encoder

    @property
    def cache(self) -> OrderedDict[bytes, np.ndarray]:
        """The encoder's vectors of texts seen in earlier blocks."""
        return self.encode.cache

    def __call__(self, batch: pa.Table) -> pa.Table:
        return self.store(self.encode(self.tokenize(batch)))  # the encoder's moments kept

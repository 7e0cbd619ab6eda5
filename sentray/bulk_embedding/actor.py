"""`EmbedBatch`, the Ray Data callable class of the embedding job: the encoder loads once per
actor; each call embeds one block of the reader's numbered rows and gives every row a `status`:

    ok | truncated (longer than the model reads: embedded from its start) | chunked (embedded
    as the weighted mean of its windows, --long-text chunk) | null | empty | invalid_utf8

with a null embedding for null, empty and invalid_utf8. Identical texts are encoded once: within
a block, and across the blocks an actor has seen (an LRU cache of `dedupe_cache_rows` vectors,
keyed by a 128-bit hash of the text); the rows that took a twin's vector are counted
(`_copied`, summed into each part's metadata and the job's summary).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from sentray.bulk_embedding import vectors
from sentray.bulk_embedding.config import VectorConfig
from sentray.bulk_embedding.output import output_columns
from sentray.bulk_embedding.windows import WindowPlan, bounded_text, windows_of
from sentray.corpus.actor_pool import ActorClock
from sentray.encode.plan import EncoderPlan

logger = logging.getLogger(__name__)

STATUSES = ("ok", "truncated", "chunked", "null", "empty", "invalid_utf8")
EMBEDDED = ("ok", "truncated", "chunked")


@dataclass(frozen=True)
class EmbedSpec:
    """What an `EmbedBatch` is built from: the job hands the same one to every actor."""

    plan: EncoderPlan  # decided once, in the job's driver: every actor builds the same encoder
    vector: VectorConfig = field(default_factory=VectorConfig)  # for the plan (`job.stored_vector`)
    ranges: vectors.Ranges | None = None  # int8/uint8: the code book every row is coded with
    metadata: dict | None = None  # the output files' schema metadata (what the vectors are)


@dataclass
class Encoded:
    """What a unique text became: its float vector (truncated and normalized as configured),
    its status and its window count."""

    vector: np.ndarray  # (d,) float32
    status: str
    windows: int
    tokens: int = 0  # tokens encoded for it (its windows', special tokens included)


class EmbedBatch:
    """Ray Data callable class: loads the encoder once per actor, embeds one block of records.

    Takes the reader's records (id, text, read_error, source, row, source_rows) as a pyarrow
    Table and returns them with `embedding` and `status` (and `windows` when chunking) instead
    of text and read_error.
    """

    def __init__(self, spec: EmbedSpec) -> None:
        self.clock = ActorClock()  # the job's first moments, for its summary
        # torch and transformers are imported here, in the actor, not when the driver imports
        # this class to hand it to Ray Data (2 s of a 2-core machine's start-up)
        from sentray.encode.encoder import SentenceEncoder, special_tokens

        self.encoder = SentenceEncoder(spec.plan)
        self.vector, self.ranges = spec.vector, spec.ranges
        self.metadata = spec.metadata  # the output's schema metadata (what the vectors are)
        self.prefix, self.suffix = special_tokens(self.encoder.tokenizer)
        self.specials = len(self.prefix) + len(self.suffix)
        chunk = spec.vector.long_text == "chunk"
        self.windows = WindowPlan.of(self.encoder.max_length, self.specials,
                                  spec.vector.chunk_overlap if chunk else 0,
                                  spec.vector.max_windows if chunk else 1)
        self.cache: OrderedDict[bytes, Encoded] = OrderedDict()
        self.clock.ready()

    def __call__(self, batch: pa.Table) -> pa.Table:
        started = time.perf_counter()
        texts = batch.column("text").to_pylist()
        status = read_status(texts, batch.column("read_error").to_pylist())
        keys = {i: text_key(texts[i]) if self.vector.dedupe else i.to_bytes(8, "little")
                for i, s in enumerate(status) if s is None}
        fresh = {}  # key -> text, for texts this actor has not encoded yet
        for i, key in keys.items():
            if key not in self.cache and key not in fresh:
                fresh[key] = texts[i]
        results, copied = self._gather(keys, self._encode(fresh), len(texts))
        for i, result in results.items():
            status[i] = result.status
        for i in set(keys) - set(results):
            status[i] = "empty"  # nothing but control characters and the like
        table = self._table(batch, status, results, copied)
        logger.info("embedded %d of %d rows (%d texts encoded) in %.2f s", len(results),
                    len(texts), len(fresh), time.perf_counter() - started)
        return self.clock.stamp(table)

    def _table(self, batch: pa.Table, status: list[str], results: dict[int, Encoded],
               copied: list[bool]) -> pa.Table:
        """The block's output: id, embedding (as stored), status (and windows, chunking), the
        accounting columns, and `_copied`."""
        rows = batch.num_rows
        floats = np.zeros((rows, self.vector.output_dimension(self.encoder.dimension)),
                          dtype=np.float32)
        for i, result in results.items():
            floats[i] = result.vector
        valid = np.array([s in EMBEDDED for s in status], dtype=bool)
        stored = vectors.to_output(floats, self.vector.output_dtype, self.ranges)
        columns = {"id": batch.column("id"),
                   "embedding": vectors.arrow_vectors(stored, self.vector.output_dtype, valid),
                   "status": pa.array(status, pa.string())}
        if self.windows.max_windows > 1:
            columns["windows"] = pa.array([results[i].windows if i in results else 0
                                           for i in range(rows)], pa.int32())
        for name in ("source", "row", "source_rows"):
            columns[name] = batch.column(name)
        columns["_copied"] = pa.array(copied, pa.bool_())
        # tokens this block encoded (a copied row encoded none): summed into each part's
        # metadata, the summary's tokens_encoded
        columns["_tokens"] = pa.array([0 if copied[i] or i not in results else results[i].tokens
                                       for i in range(rows)], pa.int64())
        # the output's columns as declared (`output_columns`), then the part writer's counts
        names = (*output_columns(self.windows.max_windows > 1), "source_rows", "_copied",
                 "_tokens")
        return pa.table({name: columns[name] for name in names}).replace_schema_metadata(
            self.metadata)

    def _gather(self, keys: dict[int, bytes], encoded: dict[bytes, Encoded],
                rows: int) -> tuple[dict[int, Encoded], list[bool]]:
        """Each embedded row's result, and whether it took a twin's (encoded before it)."""
        results, copied, seen = {}, [False] * rows, set()
        for i, key in keys.items():
            result = encoded.get(key)
            if result is None:
                result = self.cache[key]
                self.cache.move_to_end(key)
            copied[i] = key in seen or key not in encoded
            seen.add(key)
            if result.status != "empty":
                results[i] = result
        if self.vector.dedupe:  # remember them, forgetting the oldest beyond the cap
            self.cache.update(encoded)
            while len(self.cache) > self.vector.dedupe_cache_rows:
                self.cache.popitem(last=False)
        return results, copied

    def _encode(self, texts: dict[bytes, str]) -> dict[bytes, Encoded]:
        """The texts' windows through the encoder in length-sorted batches, each text's
        windows combined, then truncated and normalized."""
        import torch

        if not texts:  # a block of nulls, blanks or texts this actor has seen: nothing to encode
            return {}
        keys, plan = list(texts), self.windows
        bounded = [bounded_text(texts[key], plan.char_limit) for key in keys]
        # whole (bounded) texts: the windows cut them; verbose=False, so transformers does not
        # warn that a text is longer than the model reads
        token_ids = self.encoder.tokenizer([t for t, _ in bounded], add_special_tokens=False,
                                           truncation=False, return_attention_mask=False,
                                           return_token_type_ids=False,
                                           verbose=False)["input_ids"]
        per_text = [windows_of(ids, self.prefix, self.suffix, plan, cut)
                    for ids, (_, cut) in zip(token_ids, bounded, strict=True)]
        flat = [w for windows in per_text for w in windows.ids]
        pooled = np.zeros((len(flat), self.encoder.dimension), dtype=np.float32)
        with torch.inference_mode():
            for batch in self.encoder.length_sorted_batches(flat):
                pooled[batch.positions] = self.encoder.embed_tokens(
                    batch.input_ids, batch.attention_mask).float().cpu().numpy()
                self.clock.output()
        results, start = {}, 0
        for key, ids, windows in zip(keys, token_ids, per_text, strict=True):
            count = len(windows.ids)
            weights = np.asarray(windows.weights, np.float32)[:, None]  # (w, 1)
            vector = (pooled[start:start + count] * weights).sum(0) / weights.sum()  # (D,)
            start += count
            results[key] = Encoded(self.vector.finish(vector[None])[0],
                                   text_status(len(ids), count, windows.whole), count,
                                   sum(len(w) for w in windows.ids))
        return results


def read_status(texts: list, read_errors: list) -> list[str | None]:
    """The status of rows that are not embedded (read error, null, empty); None for the rest."""
    status: list[str | None] = []
    for text, error in zip(texts, read_errors, strict=True):
        if error is not None:
            status.append(error)
        elif text is None:
            status.append("null")
        elif not text.strip():
            status.append("empty")
        else:
            status.append(None)
    return status


def text_status(text_tokens: int, windows: int, whole: bool) -> str:
    """ok (one window, all of it), chunked (several windows, all of it), truncated (not all of
    it), empty (no text token at all: nothing but control characters and the like)."""
    if text_tokens == 0:
        return "empty"
    if not whole:
        return "truncated"
    return "ok" if windows == 1 else "chunked"


def text_key(text: str) -> bytes:
    """The dedupe key of a text: 128 bits of BLAKE2b over its UTF-8 bytes (no two of 10^18
    texts collide but with odds below 10^-2)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

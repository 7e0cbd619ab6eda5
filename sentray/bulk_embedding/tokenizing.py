"""`TokenizeRows`, the embedding job's first stage: the reader's records -> each row's status and
the token ids of its windows, with no model. On a GPU pool it runs in CPU actors of its own,
ahead of the encoder actors (`sentray.bulk_embedding.actor`), so that the actor that holds
a GPU only moves tensors and runs the model; in the job's own process and on a CPU pool it runs
inside the one actor.

The token table it returns (one row per input row, in input order):

    id, source, row, source_rows   the reader's, passed through
    status       ok | truncated | chunked | null | empty | invalid_utf8: final, whatever the
                 encoder then finds (a row with no window is never encoded)
    windows      the row's window count (0: not embedded)
    _key         the dedupe key (`text_key`, 16 bytes) of an embedded row; null without dedupe
    _window_ids  list<list<int32>>: the row's windows, special tokens included; null for a row
                 not embedded and for a twin of an earlier row of the block (`_copied`)
    _copied      the row takes the vector of an identical text encoded before it
    _tokens      the tokens its windows hold (0 for a copy): what the summary counts

Tokenizing goes straight to the fast tokenizer's Rust backend (`encode_batch_fast`: no offsets,
no Python objects per token), which gives the same ids as the transformers call (tested); the
windows are cut from one flat array. Per Brown row, one thread of this project's 2-core AMD
EPYC (Zen 5): ~36 us against ~50 us through transformers, measured by hand;
bench/bench_gpu_feed.py prints this stage's cost on the CPU it runs on.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sentray.bulk_embedding.windows import WindowPlan, bounded_text, windows_of

STATUSES = ("ok", "truncated", "chunked", "null", "empty", "invalid_utf8")
EMBEDDED = ("ok", "truncated", "chunked")
PASSED_THROUGH = ("id", "source", "row", "source_rows")  # the reader's columns every stage keeps


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


@dataclass(frozen=True)
class TokenizerSpec:
    """What a `TokenizeRows` is built from: the model whose tokenizer it loads, how texts become
    windows, and whether identical texts are encoded once."""

    model: object  # the plan's `ModelSource` (sentray.encode.plan)
    max_length: int  # tokens a window holds, special tokens included
    chunk_overlap: int = 0  # --long-text chunk: tokens a window shares with the one before
    max_windows: int = 1  # 1: truncate
    dedupe: bool = True


def tokenize_texts(tokenizer, texts: list[str]) -> list[list[int]]:
    """Token ids of each text, no special tokens, no truncation: the fast tokenizer's backend
    where there is one (the same ids as `tokenizer(texts, add_special_tokens=False)`), else
    the tokenizer's own call."""
    backend = getattr(tokenizer, "_tokenizer", None)
    if backend is not None and hasattr(backend, "encode_batch_fast"):
        return [encoding.ids for encoding in backend.encode_batch_fast(
            texts, add_special_tokens=False)]
    return tokenizer(texts, add_special_tokens=False, truncation=False,
                     return_attention_mask=False, return_token_type_ids=False,
                     verbose=False)["input_ids"]


class TokenizeRows:
    """Records (pyarrow) -> the token table (module docstring). Loads the tokenizer once."""

    def __init__(self, spec: TokenizerSpec, tokenizer=None) -> None:
        from sentray.encode.encoder import special_tokens  # transformers: not on import
        from sentray.encode.model_loading import load_tokenizer

        self.spec = spec
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(spec.model)
        self.prefix, self.suffix = special_tokens(self.tokenizer)
        self.windows = WindowPlan.of(spec.max_length, len(self.prefix) + len(self.suffix),
                                     spec.chunk_overlap, spec.max_windows)

    def __call__(self, batch: pa.Table) -> pa.Table:
        texts = batch.column("text").to_pylist()
        status = read_status(texts, batch.column("read_error").to_pylist())
        rows = len(texts)
        keys: list[bytes | None] = [None] * rows
        copied = np.zeros(rows, dtype=bool)
        first: dict[bytes, int] = {}
        todo = []  # rows whose text is tokenized here: the first of each text in the block
        for i, s in enumerate(status):
            if s is not None:
                continue
            if self.spec.dedupe:
                keys[i] = key = text_key(texts[i])
                if key in first:
                    copied[i] = True
                    continue
                first[key] = i
            todo.append(i)
        windows, counts, tokens = self._windows([texts[i] for i in todo], todo, status)
        for i, twin in enumerate(copied):  # a twin's status is its first occurrence's
            if twin:
                status[i] = status[first[keys[i]]]
        window_counts = np.zeros(rows, dtype=np.int32)
        window_counts[todo] = counts
        window_counts[copied] = window_counts[[first[keys[i]] for i in np.flatnonzero(copied)]]
        token_counts = np.zeros(rows, dtype=np.int64)
        token_counts[todo] = tokens
        embedded = np.array([s in EMBEDDED for s in status], dtype=bool)
        window_counts[~embedded] = 0
        columns = {name: batch.column(name) for name in PASSED_THROUGH}
        columns.update({
            "status": pa.array(status, pa.string()),
            "windows": pa.array(window_counts, pa.int32()),
            "_key": pa.array([k if e else None for k, e in zip(keys, embedded, strict=True)],
                             pa.binary(16)),
            "_window_ids": nest(windows, todo, rows),
            "_copied": pa.array(copied & embedded, pa.bool_()),
            "_tokens": pa.array(token_counts, pa.int64()),
        })
        return pa.table(columns)

    def _windows(self, texts: list[str], rows: list[int], status: list
                 ) -> tuple[pa.Array, np.ndarray, np.ndarray]:
        """The windows of `texts` (rows `rows` of the block) as one list<list<int32>> array
        (a text with no token: no window), each text's window count and tokens; each row's
        status is set in `status`."""
        plan = self.windows
        bounded = [bounded_text(text, plan.char_limit) for text in texts]
        ids = tokenize_texts(self.tokenizer, [text for text, _ in bounded])
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        if plan.max_windows == 1:  # truncate: one window a text, cut from one flat array
            flat = np.fromiter((t for text_ids in ids for t in text_ids), dtype=np.int32,
                               count=int(lengths.sum()))
            window_ids, kept = single_windows(flat, lengths, plan.room, self.prefix, self.suffix)
            counts = (lengths > 0).astype(np.int32)
            whole = (kept == lengths) & ~np.array([cut for _, cut in bounded], dtype=bool)
            window_ids = window_ids.filter(pa.array(counts > 0))
            window_lists = pa.ListArray.from_arrays(
                pa.array(np.concatenate([[0], np.cumsum(counts)]), pa.int32()), window_ids)
            tokens = np.where(counts > 0, kept + len(self.prefix) + len(self.suffix), 0)
        else:  # chunk: a few long texts; each cut by the one window rule
            per_text = [windows_of(text_ids, self.prefix, self.suffix, plan, cut) if text_ids
                        else None for text_ids, (_, cut) in zip(ids, bounded, strict=True)]
            counts = np.array([len(w.ids) if w else 0 for w in per_text], dtype=np.int32)
            whole = np.array([bool(w and w.whole) for w in per_text], dtype=bool)
            window_lists = pa.array([w.ids if w else [] for w in per_text],
                                    pa.list_(pa.list_(pa.int32())))
            tokens = np.array([sum(w.weights) if w else 0 for w in per_text], dtype=np.int64)
        for row, n, count, full in zip(rows, lengths, counts, whole, strict=True):
            status[row] = text_status(int(n), int(count), bool(full))
        return window_lists, counts, tokens


def single_windows(flat: np.ndarray, lengths: np.ndarray, room: int, prefix: list[int],
                   suffix: list[int]) -> tuple[pa.ListArray, np.ndarray]:
    """One window per text: `prefix + ids[:room] + suffix` for each text whose ids are the
    consecutive runs of `flat` of `lengths`, as a list<int32> array (a text of no token gets an
    empty list); and the text tokens each window kept (N,)."""
    kept = np.minimum(lengths, room)  # (N,)
    specials = len(prefix) + len(suffix)
    sizes = np.where(kept > 0, kept + specials, 0)
    offsets = np.concatenate([[0], np.cumsum(sizes)])  # (N + 1,)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if len(lengths) else lengths
    values = np.empty(int(offsets[-1]), dtype=np.int32)
    # position j of window n is prefix[j], then flat[starts[n] + j - len(prefix)], then suffix
    within = np.arange(len(values)) - np.repeat(offsets[:-1], sizes)
    text = np.repeat(np.arange(len(lengths)), sizes)
    body = (within >= len(prefix)) & (within < len(prefix) + np.repeat(kept, sizes))
    values[body] = flat[starts[text[body]] + within[body] - len(prefix)]
    if prefix:
        head = within < len(prefix)
        values[head] = np.asarray(prefix, np.int32)[within[head]]
    if suffix:
        tail = within >= len(prefix) + np.repeat(kept, sizes)
        values[tail] = np.asarray(suffix, np.int32)[
            (within - len(prefix) - np.repeat(kept, sizes))[tail]]
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(values)), kept


def nest(window_lists: pa.ListArray, todo: list[int], rows: int) -> pa.Array:
    """Each text's windows (`window_lists`: one list of windows per text tokenized, rows `todo`
    of the block, in order) as one list<list<int32>> over all `rows`: null where a row has no
    window (not tokenized here, or no token)."""
    counts = np.zeros(rows, dtype=np.int32)
    counts[todo] = pc.list_value_length(window_lists).to_numpy(zero_copy_only=False)
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]), pa.int32())
    values = pc.list_flatten(window_lists)  # (windows,) list<int32>
    return pa.ListArray.from_arrays(offsets, values, mask=pa.array(counts == 0))

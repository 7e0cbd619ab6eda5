"""`EmbedBatch`, the Ray Data callable class of the embedding job: the encoder loads once per
actor; each call embeds one block of the reader's numbered rows and gives every row a `status`:

    ok | truncated (embedded from its first max_length tokens) | null | empty | invalid_utf8

with a null embedding for all but ok/truncated.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import pyarrow as pa

from sentray.encode.config import EncoderConfig
from sentray.encode.encoder import SentenceEncoder

logger = logging.getLogger(__name__)

STATUSES = ("ok", "truncated", "null", "empty", "invalid_utf8")
EMBEDDED = ("ok", "truncated")


def embedding_type(dimension: int) -> pa.DataType:
    return pa.list_(pa.float32(), dimension)


def output_schema(dimension: int, id_type: pa.DataType) -> pa.Schema:
    return pa.schema([("id", id_type), ("embedding", embedding_type(dimension)),
                      ("status", pa.string()), ("source", pa.string()), ("row", pa.int64())])


class EmbedBatch:
    """Ray Data callable class: loads the encoder once per actor, embeds one batch of records.

    Takes the reader's records (id, text, read_error, source, row, source_rows) as a pyarrow
    Table and returns them with `embedding` and `status` instead of text and read_error.
    """

    def __init__(self, encoder_config: EncoderConfig) -> None:
        self.encoder = SentenceEncoder(encoder_config)
        self.special_tokens = self.encoder.tokenizer.num_special_tokens_to_add(pair=False)

    def __call__(self, batch: pa.Table) -> pa.Table:
        started = time.perf_counter()
        texts = batch.column("text").to_pylist()
        read_errors = batch.column("read_error").to_pylist()
        status = np.empty(len(texts), dtype=object)
        candidates = []
        for i, (text, error) in enumerate(zip(texts, read_errors, strict=True)):
            if error is not None:
                status[i] = error
            elif text is None:
                status[i] = "null"
            elif not text.strip():
                status[i] = "empty"
            else:
                candidates.append(i)
        vectors = np.zeros((len(texts), self.encoder.dimension), dtype=np.float32)
        if candidates:
            token_ids = self.encoder.tokenize([texts[i] for i in candidates])
            keep = []
            for i, ids in zip(candidates, token_ids, strict=True):
                if len(ids) <= self.special_tokens:  # nothing but control characters etc.
                    status[i] = "empty"
                    continue
                status[i] = "truncated" if len(ids) >= self.encoder.max_length and len(
                    self.encoder.tokenizer.encode(texts[i], add_special_tokens=True)
                ) > self.encoder.max_length else "ok"
                keep.append((i, ids))
            if keep:
                import torch

                positions = np.array([i for i, _ in keep])
                kept_ids = [ids for _, ids in keep]
                with torch.inference_mode():
                    for tokens in self.encoder.length_sorted_batches(kept_ids):
                        embedded = self.encoder.embed_tokens(tokens.input_ids,
                                                             tokens.attention_mask)
                        vectors[positions[tokens.positions]] = embedded.float().cpu().numpy()
        embedded_mask = np.isin(status, EMBEDDED)
        seconds = time.perf_counter() - started
        logger.info("embedded %d of %d rows in %.2f s (%.0f rows/s)", int(embedded_mask.sum()),
                    len(texts), seconds, len(texts) / max(seconds, 1e-9))
        dimension = self.encoder.dimension
        embeddings = pa.FixedSizeListArray.from_arrays(
            pa.array(vectors.reshape(-1)), dimension, mask=pa.array(~embedded_mask))
        return pa.table({
            "id": batch.column("id"),
            "embedding": embeddings,
            "status": pa.array(status.tolist(), pa.string()),
            "source": batch.column("source"),
            "row": batch.column("row"),
            "source_rows": batch.column("source_rows"),
        })

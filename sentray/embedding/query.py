"""`QueryEncoder`: queries embedded the way an output's rows were, so that they can be compared
with the stored vectors: the model, pooling, head, max_length, dimension, normalization, dtype
and code book that the output's `_settings.json` and `_quantization.json` record, through the
same `EmbedBatch` the job's actors ran."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from sentray.embedding import calibration
from sentray.embedding.actor import EmbedBatch
from sentray.embedding.config import VectorConfig
from sentray.encode.config import EncoderConfig
from sentray.kit import storage
from sentray.kit.settings_record import SETTINGS_FILE


class QueryEncoder:
    """Embeds texts into the stored form of the embedding job's output `output` (a folder,
    local or s3://)."""

    def __init__(self, output: str, *, device: str = "auto",
                 s3_endpoint: str | None = None) -> None:
        location = storage.locate(output, s3_endpoint)
        try:
            with location.filesystem.open_input_stream(location.join(SETTINGS_FILE).path) as f:
                self.settings = json.loads(f.read())["settings"]
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"{output} has no {SETTINGS_FILE}: not the output of "
                                    "jobs/embed.py") from exc
        s = self.settings
        self.ranges = calibration.read_stored(location)
        encoder = EncoderConfig(model=s["model"], pooling=s["pooling"], head=s["head"],
                                max_length=s["max_length"], device=device)
        vector = VectorConfig(truncate_dim=s["truncate_dim"], normalize=s["normalize"],
                              output_dtype=s["output_dtype"], long_text=s["long_text"],
                              chunk_overlap=s["chunk_overlap"] or 0,
                              max_windows=s["max_windows"] or VectorConfig.max_windows,
                              dedupe=False)
        if precision := s.get("precision"):
            if precision != "fp32" and not device.startswith("cuda"):
                precision = "fp32"  # half precision is a GPU's; on CPU the same model in fp32
            encoder = dataclasses.replace(encoder, precision=precision)
        self.actor = EmbedBatch(encoder, vector, self.ranges)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(N, width) vectors in the output's dtype; a text with nothing to embed (empty) gets
        a zero row."""
        n = len(texts)
        table = self.actor(pa.table({
            "id": [str(i) for i in range(n)], "text": list(texts), "read_error": [None] * n,
            "source": ["query"] * n, "row": list(range(n)), "source_rows": [n] * n}))
        column = table.column("embedding")
        width = column.type.list_size
        rows = [np.zeros(width) if v is None else v for v in column.to_pylist()]
        return np.asarray(rows, dtype=column.type.value_type.to_pandas_dtype())

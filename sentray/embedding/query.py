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

from sentray.embedding import calibration, vectors
from sentray.embedding.actor import EmbedBatch, EmbedSpec
from sentray.embedding.config import VectorConfig
from sentray.encode.config import EncoderConfig
from sentray.kit import storage
from sentray.kit.settings_record import SETTINGS_FILE


class QueryEncoder:
    """Embeds texts into the stored form of the embedding job's output `output`: its folder
    (local or s3://), or any one of its Parquet files (each file's schema metadata carries the
    settings and the code book: a file copied out of its output still says how)."""

    def __init__(self, output: str, *, device: str = "auto",
                 s3_endpoint: str | None = None) -> None:
        location = storage.locate(output, s3_endpoint)
        self._build(*stored_description(location), location, device)

    @classmethod
    def from_settings(cls, settings: dict, ranges: vectors.Ranges | None,
                      location: storage.Location, *, device: str = "auto",
                      float_output: bool = False) -> QueryEncoder:
        """The encoder of the output at `location` whose `stored_description` is (settings,
        ranges), as a table copied from it recorded them; `float_output`: the query as float32
        before any quantization (the asymmetric side of an int8 or binary search)."""
        encoder = cls.__new__(cls)
        encoder._build(settings, ranges, location, device, float_output)
        return encoder

    def _build(self, settings: dict, ranges: vectors.Ranges | None,
               location: storage.Location, device: str, float_output: bool = False) -> None:
        self.settings, self.ranges = settings, ranges
        s = self.settings
        encoder = EncoderConfig(model=s["model"], pooling=s["pooling"], head=s["head"],
                                max_length=s["max_length"], device=device)
        vector = VectorConfig(truncate_dim=s["truncate_dim"], normalize=s["normalize"],
                              output_dtype="float32" if float_output else s["output_dtype"],
                              long_text=s["long_text"],
                              chunk_overlap=s["chunk_overlap"] or 0,
                              max_windows=s["max_windows"] or VectorConfig.max_windows,
                              dedupe=False)
        if precision := s.get("precision"):
            if precision == "fp16" and not device.startswith("cuda"):
                precision = "fp32"  # fp16 is a GPU's; on a CPU the same model in fp32
            encoder = dataclasses.replace(encoder, precision=precision)
            if precision == "int8":  # the very model the rows were encoded by
                encoder = dataclasses.replace(encoder, int8_model=stored_int8_model(
                    location, s["int8_model"]))
        self.actor = EmbedBatch(EmbedSpec(encoder, vector, None if float_output else ranges))

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


def stored_int8_model(location: storage.Location, digest: str):
    """The int8 model of digest `digest`: the output folder's `_int8_model.onnx`, else (one
    copied file) the int8 cache of this machine."""
    from sentray.embedding import precision
    from sentray.encode.int8 import cache_dir, read_cached

    found = precision.read_stored(location)
    if found is None:
        for record in (cache_dir() / "int8").glob("*/record.json"):
            if json.loads(record.read_text()).get("digest") == digest:
                found = read_cached(record.parent.name)
                break
    if found is None or found.digest != digest:
        raise FileNotFoundError(
            f"{location.uri}: its rows were encoded by int8 model {digest[:12]}, which is "
            "neither beside it nor in this machine's int8 cache: pass the output folder, "
            "which holds it (_int8_model.onnx)")
    return found


def stored_description(location: storage.Location) -> tuple[dict, vectors.Ranges | None]:
    """(settings, code book) of an output folder (`_settings.json`, `_quantization.json`) or of
    one of its Parquet files (its `sentray.vectors` metadata); the code book is checked against
    the digest the settings recorded."""
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    from sentray.embedding.job import VECTORS_METADATA_KEY

    if location.filesystem.get_file_info(location.path).type == pafs.FileType.File:
        with location.filesystem.open_input_file(location.path) as handle:
            metadata = pq.read_schema(handle).metadata or {}
        if VECTORS_METADATA_KEY not in metadata:
            raise ValueError(f"{location.uri} has no {VECTORS_METADATA_KEY.decode()} metadata: "
                             "not a file written by jobs/embed.py")
        described = json.loads(metadata[VECTORS_METADATA_KEY])
        if "model_files" not in described:
            raise ValueError(f"{location.uri} was written before files described themselves "
                             "in full; pass its output folder instead")
        book = described.pop("code_book", None)
        ranges = vectors.Ranges.from_json(book) if book is not None else None
    else:
        try:
            with location.filesystem.open_input_stream(location.join(SETTINGS_FILE).path) as f:
                described = json.loads(f.read())["settings"]
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"{location.uri} has no {SETTINGS_FILE}: not the output "
                                    "of jobs/embed.py") from exc
        ranges = calibration.read_stored(location)
    if described.get("quantization_ranges") != calibration.ranges_digest(ranges):
        raise ValueError(f"{location.uri}: the code book found does not match the one its "
                         "vectors were written with (digest "
                         f"{described.get('quantization_ranges')})")
    return described, ranges

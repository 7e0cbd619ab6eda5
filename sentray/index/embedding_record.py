"""What a table's vectors are: the `EmbeddingDescription` the index job reads from an embedding
output and stores as the table's metadata, and `query_encoder`, the one function that builds the
encoder of a query from it. The index job and the search meet here, so the query goes through
the model, pooling, Ditto head, --truncate-dim, precision, normalization and dtype that made the
rows."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

import pyarrow as pa

from sentray.bulk_embedding import vectors
from sentray.bulk_embedding.output import EmbeddingOutput
from sentray.bulk_embedding.query import QueryEncoder
from sentray.kit import storage
from sentray.kit.settings_record import differences, settings_digest

METADATA_KEY = b"sentray.embedding"  # the table schema's metadata key (a format: kept)
VECTOR_COLUMN = "vector"
# float outputs as stored; int8/uint8 codes dequantized to float32 through the output's code
# book (their query: a float32 vector); packed bits as uint8 bytes (the distance: hamming)
FLOAT_DTYPES = ("float32", "float16")
SCALAR_DTYPES = vectors.SCALAR
BINARY_DTYPES = vectors.PACKED


@dataclass(frozen=True)
class EmbeddingDescription:
    """The settings of an embedding output, its code book and where it is: all a query needs
    to be embedded as its rows were."""

    settings: dict
    code_book: dict | None
    embeddings: str  # the output folder's URI, as given to the index job

    @property
    def digest(self) -> str:
        return settings_digest(self.settings)

    @property
    def dtype(self) -> str:
        return self.settings["output_dtype"]

    @property
    def dimension(self) -> int:
        return self.settings["truncate_dim"] or self.settings["dimension"]

    @property
    def width(self) -> int:
        """Values per stored vector (bytes for the packed dtypes)."""
        return vectors.stored_width(self.dimension, self.dtype)

    @property
    def metric(self) -> str:
        return "hamming" if self.dtype in BINARY_DTYPES else "cosine"

    @property
    def dequantized(self) -> bool:
        """Whether the table holds int8/uint8 codes dequantized (float32) by the code book."""
        return self.dtype in SCALAR_DTYPES

    @functools.cached_property
    def ranges(self) -> vectors.Ranges | None:
        """The code book (int8/uint8 outputs), as the embedding job quantized with it."""
        return None if self.code_book is None else vectors.Ranges.from_json(self.code_book)

    def vector_type(self) -> pa.DataType:
        value = {"float32": pa.float32(), "float16": pa.float16(), "int8": pa.float32(),
                 "uint8": pa.float32()}.get(self.dtype, pa.uint8())
        return pa.list_(value, self.width)

    def to_metadata(self) -> dict[bytes, bytes]:
        return {METADATA_KEY: json.dumps({
            "settings": self.settings, "code_book": self.code_book,
            "embeddings": self.embeddings, "digest": self.digest}).encode()}

    @classmethod
    def from_metadata(cls, metadata: dict | None, where: str) -> EmbeddingDescription:
        if not metadata or METADATA_KEY not in metadata:
            raise ValueError(f"{where} is not a table written by jobs/index.py (no "
                             f"{METADATA_KEY.decode()} metadata)")
        record = json.loads(metadata[METADATA_KEY])
        return cls(record["settings"], record["code_book"], record["embeddings"])


def describe_output(output: EmbeddingOutput) -> EmbeddingDescription:
    """The description of an embedding output folder; ValueError when it is not one."""
    settings, ranges = output.describe()
    return EmbeddingDescription(settings, None if ranges is None else ranges.to_json(),
                                output.uri)


def query_encoder(description: EmbeddingDescription, *, device: str = "auto",
                  s3_endpoint: str | None = None, float_output: bool = False) -> QueryEncoder:
    """The encoder of queries for a table of `description`: the embedding job's own actor,
    built from the settings its rows were made with (an int8 model is looked for beside the
    output, then in this machine's int8 cache)."""
    location = storage.locate(description.embeddings, s3_endpoint)
    return QueryEncoder.from_settings(description.settings, description.ranges, location,
                                      device=device, float_output=float_output)


def check_same_embedding(table: EmbeddingDescription, output: EmbeddingDescription,
                         table_uri: str) -> None:
    """ValueError naming what differs and the fix, when the table at `table_uri` holds vectors
    of other settings than the output about to be added to it."""
    if table.digest == output.digest:
        return
    changed = differences(table.settings, output.settings)
    raise ValueError(
        f"{table_uri} holds vectors of another embedding (settings digest {table.digest[:12]} "
        f"!= {output.digest[:12]} of {output.embeddings}):\n  " + "\n  ".join(changed) +
        "\nrerun with --overwrite to index this output afresh, or give another --index-uri")

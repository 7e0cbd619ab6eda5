"""The vector a user stores, from the pooled embedding: Matryoshka truncation, L2 normalization
and the output dtype, as pure numpy functions (N rows, D dimensions).

    pooled (N, D) float32 -> truncate to the first d dims -> L2-normalize -> quantize

int8/uint8 is scalar quantization per dimension with ranges fixed before any row is written
(`CodeBook`): the code of x in dimension j is clip(floor((x - min_j) / step_j), 0, 255) with
step_j = (max_j - min_j) / 255 (1 where max_j == min_j), minus 128 for int8, in float32. That is
sentence-transformers' `quantize_embeddings(..., ranges=...)` to the bit (tested), and what a
query must go through to be compared with the stored codes. binary/ubinary keep one bit per
dimension (x > 0), packed 8 to a byte, most significant bit first (`np.packbits`), minus 128 for
binary: the same as sentence-transformers and the packed-bit vector stores.

Which code book an int8/uint8 output is written with (a file, the output's own, or measured on
the input's first rows) is the job's (`sentray.bulk_embedding.job.code_book`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa

OutputDtype = Literal["float32", "float16", "int8", "uint8", "binary", "ubinary"]
SCALAR = ("int8", "uint8")  # dtypes that need ranges
PACKED = ("binary", "ubinary")  # one bit per dimension, 8 to a byte
ARROW_TYPES = {"float32": pa.float32(), "float16": pa.float16(), "int8": pa.int8(),
               "uint8": pa.uint8(), "binary": pa.int8(), "ubinary": pa.uint8()}
NUMPY_TYPES = {"float32": np.float32, "float16": np.float16, "int8": np.int8,
               "uint8": np.uint8, "binary": np.int8, "ubinary": np.uint8}


def truncate(vectors: np.ndarray, dimension: int | None) -> np.ndarray:
    """The first `dimension` dimensions (Matryoshka); all of them for None. (N, D) -> (N, d)."""
    return vectors if dimension is None else vectors[..., :dimension]


def normalize(vectors: np.ndarray) -> np.ndarray:
    """Each row divided by its L2 norm (a zero row stays zero). (N, D) -> (N, D) float32."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


@dataclass(frozen=True)
class CodeBook:
    """The code book of int8/uint8 quantization: each dimension's range [minimum, maximum],
    one for a whole corpus (a `--quantization-ranges` file, sentence-transformers' `ranges`;
    an output keeps its own as `_quantization.json`)."""

    minimum: np.ndarray  # (D,) float32
    maximum: np.ndarray  # (D,) float32
    rows: int = 0  # how many vectors they were taken from (0: given by the user)
    source: str = ""  # where they came from, for the record

    @classmethod
    def of(cls, vectors: np.ndarray, source: str = "") -> CodeBook:
        """The ranges of a calibration sample (N, D)."""
        if len(vectors) < 2:
            raise ValueError(f"int8/uint8 ranges need at least 2 calibration vectors, got "
                             f"{len(vectors)}")
        return cls(vectors.min(axis=0).astype(np.float32), vectors.max(axis=0).astype(np.float32),
                   len(vectors), source)

    @property
    def dimension(self) -> int:
        return len(self.minimum)

    @property
    def digest(self) -> str:
        """What the settings record of a code book: its values, not where it came from."""
        return hashlib.sha256(self.as_array().astype(np.float32).tobytes()).hexdigest()[:16]

    def as_array(self) -> np.ndarray:
        """sentence-transformers' `ranges` argument: (2, D), row 0 the minima, row 1 the maxima."""
        return np.vstack([self.minimum, self.maximum])

    def to_json(self) -> dict:
        return {"minimum": self.minimum.tolist(), "maximum": self.maximum.tolist(),
                "rows": self.rows, "source": self.source}

    @classmethod
    def from_json(cls, values: dict) -> CodeBook:
        return cls(np.asarray(values["minimum"], np.float32),
                   np.asarray(values["maximum"], np.float32), int(values.get("rows", 0)),
                   str(values.get("source", "")))

    @classmethod
    def read(cls, path: str | Path) -> CodeBook:
        """A code book from a file: the `ranges` of a job's `_quantization.json`, a JSON object
        with `minimum` and `maximum` lists, or a (2, D) array saved with `np.save` (.npy)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"quantization ranges file {path} does not exist")
        if path.suffix == ".npy":
            array = np.load(path)
            if array.ndim != 2 or array.shape[0] != 2:
                raise ValueError(f"{path}: ranges must be a (2, D) array of minima and maxima, "
                                 f"got shape {array.shape}")
            return cls(array[0].astype(np.float32), array[1].astype(np.float32), 0, str(path))
        values = json.loads(path.read_text())
        values = values.get("ranges", values)
        if not {"minimum", "maximum"} <= set(values):
            raise ValueError(f"{path}: expected `minimum` and `maximum` lists (or an "
                             "embedding output's code book)")
        ranges = cls.from_json({**values, "source": str(path)})
        if len(ranges.minimum) != len(ranges.maximum) or np.any(ranges.maximum < ranges.minimum):
            raise ValueError(f"{path}: minimum and maximum must have one value per dimension, "
                             "with minimum <= maximum")
        return ranges


def scalar_quantize(vectors: np.ndarray, ranges: CodeBook, dtype: Literal["int8", "uint8"]
                    ) -> np.ndarray:
    """int8/uint8 codes (N, D) of float vectors (N, D) with the given ranges."""
    starts = ranges.minimum.astype(np.float32, copy=False)
    steps = (ranges.maximum.astype(np.float32, copy=False) - starts) / 255
    steps = np.where(steps == 0, 1, steps)
    codes = np.clip(np.floor((vectors - starts) / steps), 0, 255)
    return codes.astype(np.uint8) if dtype == "uint8" else (codes - 128).astype(np.int8)


def scalar_dequantize(codes: np.ndarray, ranges: CodeBook) -> np.ndarray:
    """The float vectors (N, D) float32 that int8/uint8 codes (N, D) stand for: each code's
    bin's middle, min_j + (code + 0.5) * step_j (the inverse of `scalar_quantize` to within
    half a step); min_j itself in a dimension whose range is a single value."""
    starts = ranges.minimum.astype(np.float32, copy=False)
    steps = (ranges.maximum.astype(np.float32, copy=False) - starts) / 255  # (D,)
    unsigned = codes.astype(np.float32) + (128 if codes.dtype == np.int8 else 0)
    return (starts + np.where(steps == 0, 0, unsigned + 0.5) * steps).astype(np.float32)


def pack_bits(vectors: np.ndarray, dtype: Literal["binary", "ubinary"]) -> np.ndarray:
    """One bit per dimension (x > 0), 8 to a byte: (N, D) -> (N, ceil(D / 8))."""
    packed = np.packbits(vectors > 0, axis=-1)
    return packed if dtype == "ubinary" else (packed - 128).astype(np.int8)


def stored_width(dimension: int, dtype: OutputDtype) -> int:
    """Values per stored vector: D, or D / 8 bytes for the packed dtypes."""
    return (dimension + 7) // 8 if dtype in PACKED else dimension


def to_output(vectors: np.ndarray, dtype: OutputDtype, ranges: CodeBook | None = None
              ) -> np.ndarray:
    """Float vectors (N, D), already truncated and normalized as configured, as stored."""
    if dtype in SCALAR:
        if ranges is None:
            raise ValueError(f"output dtype {dtype} needs quantization ranges")
        return scalar_quantize(vectors, ranges, dtype)
    if dtype in PACKED:
        return pack_bits(vectors, dtype)
    return vectors.astype(NUMPY_TYPES[dtype])


def arrow_vectors(stored: np.ndarray, dtype: OutputDtype, valid: np.ndarray) -> pa.Array:
    """Stored vectors (N, W) as `fixed_size_list<type>[W]`, null where `valid` is False."""
    width = stored.shape[1]
    values = pa.array(np.ascontiguousarray(stored).reshape(-1), type=ARROW_TYPES[dtype])
    return pa.FixedSizeListArray.from_arrays(values, width, mask=pa.array(~valid))

"""The stored vector: truncation, normalization and quantization equal sentence-transformers' own
on the same float vectors, to the bit; the ranges file round-trips and bad ones are named."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from sentence_transformers.util import quantize_embeddings, truncate_embeddings

from sentray.bulk_embedding import vectors


@pytest.fixture(scope="module")
def floats() -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.normal(size=(64, 100)).astype(np.float32)  # 100: not a multiple of 8


@pytest.mark.parametrize("dimension", [None, 64, 37, 1])
def test_truncation_is_sentence_transformers(floats, dimension):
    assert np.array_equal(vectors.truncate(floats, dimension),
                          truncate_embeddings(floats, dimension))


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_scalar_quantization_is_sentence_transformers_with_the_same_ranges(floats, dtype):
    # ranges from the first half only, so the second half has values outside them: both clip
    ranges = vectors.CodeBook.of(floats[:32])
    ours = vectors.to_output(floats, dtype, ranges)
    theirs = quantize_embeddings(floats, precision=dtype, ranges=ranges.as_array())
    assert ours.dtype == theirs.dtype == np.dtype(dtype)
    # the same elementwise float32 steps (subtract, divide, floor, clip), each correctly rounded
    # by IEEE 754 on any CPU and SIMD width: equality holds by construction, no reduction involved
    assert np.array_equal(ours, theirs)
    assert ours.min() == (-128 if dtype == "int8" else 0)  # some values fell below the range
    flat = ranges.as_array().copy()
    flat[1, 5] = flat[0, 5]  # a dimension whose range is a point: step 1, as theirs
    # exact on any CPU: the same elementwise float32 steps as theirs (subtract, divide, floor:
    # each correctly rounded by IEEE 754 whatever the SIMD width), no reduction
    assert np.array_equal(vectors.to_output(floats, dtype, vectors.CodeBook(flat[0], flat[1])),
                          quantize_embeddings(floats, precision=dtype, ranges=flat))


@pytest.mark.parametrize("dtype", ["binary", "ubinary"])
def test_packed_bits_are_sentence_transformers(floats, dtype):
    ours = vectors.to_output(floats, dtype)
    theirs = quantize_embeddings(floats, precision=dtype)
    assert ours.shape == (64, 13) == theirs.shape  # ceil(100 / 8)
    assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)
    assert vectors.stored_width(100, dtype) == 13
    # the first byte by hand: bit 7 (most significant) is dimension 0
    bits = (floats[0, :8] > 0).astype(int)
    first = sum(bit << (7 - i) for i, bit in enumerate(bits))
    assert int(ours[0, 0]) == (first if dtype == "ubinary" else first - 128)


def test_normalization_gives_unit_rows_and_keeps_zero_rows(floats):
    rows = np.vstack([floats[:3], np.zeros((1, 100), np.float32)])
    unit = vectors.normalize(rows)
    assert np.allclose(np.linalg.norm(unit[:3], axis=1), 1.0, atol=1e-6)
    assert not unit[3].any()
    assert np.allclose(unit[:3] * np.linalg.norm(rows[:3], axis=1, keepdims=True), rows[:3],
                       atol=1e-6)


def test_arrow_column_types_say_what_they_hold(floats):
    valid = np.array([True] * 63 + [False])
    for dtype, value_type, width in [("float32", pa.float32(), 100),
                                     ("float16", pa.float16(), 100), ("int8", pa.int8(), 100),
                                     ("uint8", pa.uint8(), 100), ("binary", pa.int8(), 13),
                                     ("ubinary", pa.uint8(), 13)]:
        ranges = vectors.CodeBook.of(floats) if dtype in vectors.SCALAR else None
        column = vectors.arrow_vectors(vectors.to_output(floats, dtype, ranges), dtype, valid)
        assert column.type == pa.list_(value_type, width), dtype
        assert column.null_count == 1 and column[63].as_py() is None


def test_ranges_files_round_trip_and_bad_ones_are_named(tmp_path, floats):
    ranges = vectors.CodeBook.of(floats, source="test")
    path = tmp_path / "_quantization.json"
    path.write_text(json.dumps({"dtype": "int8", "ranges": ranges.to_json()}))
    again = vectors.CodeBook.read(path)
    assert np.array_equal(again.as_array(), ranges.as_array())
    np.save(tmp_path / "r.npy", ranges.as_array())  # saved and read back: bit for bit
    assert np.array_equal(vectors.CodeBook.read(tmp_path / "r.npy").as_array(), ranges.as_array())
    with pytest.raises(FileNotFoundError, match="does not exist"):
        vectors.CodeBook.read(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text(json.dumps({"minimum": [1.0], "maximum": [0.0]}))
    with pytest.raises(ValueError, match="minimum <= maximum"):
        vectors.CodeBook.read(tmp_path / "bad.json")
    np.save(tmp_path / "bad.npy", np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"\(2, D\)"):
        vectors.CodeBook.read(tmp_path / "bad.npy")
    with pytest.raises(ValueError, match="at least 2"):
        vectors.CodeBook.of(floats[:1])

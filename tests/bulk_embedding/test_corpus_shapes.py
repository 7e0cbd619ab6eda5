"""The embedding job's row path over corpus shapes searched by Hypothesis, not picked by hand
(issue 33: every hand-picked bad-input test mixed good and bad rows in one block, and a block
with nothing to encode crashed the job). Files (some empty, the same name in two folders), rows
of every kind (null, empty, whitespace, repeats of earlier rows in the same or another file,
longer than the model reads, invalid UTF-8, control characters), blocks of 1 row upward, 1-2
actors, dedupe on and off, every output dtype, --long-text both ways. Invariants: every input
row comes out exactly once with a unique id and the status its kind should get; each embedded
row equals its solo encoding and a repeat its first occurrence; the summary adds up.

In-process against `EmbedBatch` and the part-writing/accounting code (`corpus_shapes.
run_in_process`) on a tiny model, so a few dozen examples run in seconds; the same through
Ray and jobs/embed.py in the long tier. Examples that failed once are replayed first from
tests/hypothesis-examples (committed)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from corpus_shapes import corpora, discover, expected_rows, run_in_process, write_corpus
from hypothesis import given, settings
from hypothesis import strategies as st

from sentray.bulk_embedding import vectors
from sentray.bulk_embedding.actor import EmbedBatch, EmbedSpec
from sentray.bulk_embedding.config import VectorConfig
from sentray.bulk_embedding.job import summarize
from sentray.bulk_embedding.output import output_schema
from sentray.corpus import part_files
from sentray.encode.config import EncoderConfig
from sentray.kit import storage
from sentray.precision.plan import plan_encoder

MAX_LENGTH = 12  # the tiny model reads 10 text tokens: `long` rows are truncated or chunked
DIMENSION = 32
MAX_WINDOWS = 4  # --long-text chunk: a `long` row fits in 4 windows, a `very_long` one does not
DTYPES = ("float32", "float16", "int8", "uint8", "binary", "ubinary")
# A code book wide enough for the tiny model's unit vectors (each coordinate in [-1, 1]).
RANGES = vectors.CodeBook(np.full(DIMENSION, -1.0, np.float32), np.full(DIMENSION, 1.0, np.float32))


def expected_status(kind: str, long_text: str) -> str:
    return {"ok": "ok", "control_mixed": "ok", "null": "null", "empty": "empty",
            "whitespace": "empty", "control_only": "empty", "invalid_utf8": "invalid_utf8",
            "long": "chunked" if long_text == "chunk" else "truncated",
            "very_long": "truncated"}[kind]


class Encoders:
    """Actors and solo encodings, made once per test session (a tiny model loads in ~0.1 s,
    but hundreds of examples would load it hundreds of times)."""

    def __init__(self, model_dir: Path) -> None:
        self.encoder = plan_encoder(EncoderConfig(model=str(model_dir), pooling="mean",
                                                  max_length=MAX_LENGTH, device="cpu"))
        self.actors: dict[tuple, EmbedBatch] = {}
        self.solo_vectors: dict[tuple, np.ndarray] = {}

    def actor(self, index: int, dtype: str, long_text: str, dedupe: bool) -> EmbedBatch:
        key = (index, dtype, long_text, dedupe)
        if key not in self.actors:
            vector = VectorConfig(output_dtype=dtype, long_text=long_text, dedupe=dedupe,
                                  normalize=True, max_windows=MAX_WINDOWS)
            self.actors[key] = EmbedBatch(EmbedSpec(self.encoder, vector,
                                          RANGES if dtype in vectors.SCALAR else None))
        return self.actors[key]

    def solo(self, text: str, long_text: str) -> np.ndarray:
        """The float vector of `text` encoded alone (a batch of one, no cache)."""
        key = (text, long_text)
        if key not in self.solo_vectors:
            actor = self.actor(-1, "float32", long_text, dedupe=False)
            table = actor(pa.table({"id": ["q"], "text": [text], "read_error": [None],
                                    "source": ["q"], "row": [0], "source_rows": [1]}))
            self.solo_vectors[key] = np.asarray(table.column("embedding")[0].as_py(), np.float32)
        return self.solo_vectors[key]


@pytest.fixture(scope="module")
def encoders(tiny_model_dir) -> Encoders:
    return Encoders(tiny_model_dir)


def assert_stored_matches(stored: np.ndarray, floats: np.ndarray, dtype: str, what: str) -> None:
    """A stored vector against the float vector it should code. Another batch gives the same
    vector up to float rounding (padding and batch shape change the kernels' summation order:
    1e-5), so a scalar code may sit one step off where the float is at a step's edge, and a
    bit may flip where the float is within rounding of 0."""
    if dtype in ("float32", "float16"):
        tolerance = 1e-5 if dtype == "float32" else 2e-3  # float16 keeps 11 bits
        np.testing.assert_allclose(stored.astype(np.float32), floats, atol=tolerance,
                                   err_msg=what)
    elif dtype in vectors.SCALAR:
        expected = vectors.to_output(floats[None], dtype, RANGES)[0]
        assert np.abs(stored.astype(int) - expected.astype(int)).max() <= 1, what
    else:
        packed = stored.astype(np.int16) + (128 if dtype == "binary" else 0)  # int8: - 128
        bits = np.unpackbits(packed.astype(np.uint8))[:DIMENSION].astype(bool)
        sure = np.abs(floats) > 1e-4
        assert (bits[sure] == (floats[sure] > 0)).all(), what


def check_output(output: Path, folder: storage.Location, root: Path, files, sources,
                 summary: dict, dtype: str, long_text: str, dedupe: bool, exact_repeats: bool,
                 encoders: Encoders) -> None:
    expected = expected_rows(root, files, sources)
    tables = [pq.read_table(p) for p in sorted(output.rglob("part-*.parquet"))]
    table = pa.concat_tables([t for t in tables if t.num_rows]) if any(
        t.num_rows for t in tables) else None
    got = {} if table is None else {
        (s, r): (i, st_, e) for s, r, i, st_, e in zip(
            table.column("source").to_pylist(), table.column("row").to_pylist(),
            table.column("id").to_pylist(), table.column("status").to_pylist(),
            table.column("embedding").to_pylist(), strict=True)}
    # every input row exactly once, with a unique id
    rows_out = 0 if table is None else table.num_rows
    assert rows_out == len(expected) == len(got), "a row lost or written twice"
    assert set(got) == set(expected)
    ids = [value[0] for value in got.values()]
    assert len(set(ids)) == len(ids), "two rows share an id"
    counts: dict[str, int] = {}
    first_of: dict[str, np.ndarray] = {}
    for key in sorted(expected):
        row, (_, status, embedding) = expected[key], got[key]
        kind = row.of if row.kind == "repeat" else row.kind
        assert status == expected_status(kind, long_text), (key, row)
        counts[status] = counts.get(status, 0) + 1
        if status in ("ok", "truncated", "chunked"):
            stored = np.asarray(embedding, vectors.NUMPY_TYPES[dtype])
            assert_stored_matches(stored, encoders.solo(row.text, long_text), dtype,
                                  f"{key}: {row.text[:40]!r}")
            if row.text in first_of:  # a repeat: its first occurrence's vector
                if exact_repeats:
                    assert (stored == first_of[row.text]).all(), key
                else:
                    assert_stored_matches(stored, encoders.solo(row.text, long_text), dtype,
                                          f"repeat {key}")
            first_of.setdefault(row.text, stored)
        else:
            assert embedding is None, key
    # the summary's counts add up to the rows
    assert summary["rows_in"] == summary["rows_out"] == len(expected)
    assert summary["incomplete_sources"] == []
    assert {k: v for k, v in summary["status"].items() if v} == counts
    if not dedupe:
        assert summary["rows_not_encoded"] == 0


@settings(max_examples=40, deadline=None)
@given(files=corpora(), block=st.integers(1, 9), actors=st.integers(1, 2),
       order=st.permutations([0, 1]), dedupe=st.booleans(), dtype=st.sampled_from(DTYPES),
       long_text=st.sampled_from(["truncate", "chunk"]))
def test_any_corpus_shape_comes_out_whole(encoders, files, block, actors, order, dedupe, dtype,
                                          long_text):
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        corpus, sources = discover(write_corpus(root, files), rows_per_block=max(1, block // 2))
        output = root / "out"
        folder = storage.locate(str(output))
        pool = [encoders.actor(i, dtype, long_text, dedupe) for i in range(actors)]
        run_in_process(sources, corpus, pool, block, part_files.SingleFolder(folder), folder,
                       lambda source: output_schema(DIMENSION, pa.string(), dtype,
                                                    long_text == "chunk"),
                       [i for i in order if i < actors])
        summary = summarize(folder, sources)
        # a repeat's vector is its first occurrence's exactly when one actor with the cache on
        # made both (the actors keep their caches across examples: still the same vector)
        check_output(output, folder, root, files, sources, summary, dtype, long_text, dedupe,
                     exact_repeats=dedupe and actors == 1, encoders=encoders)


# -- the crashes Hypothesis searches for, as plain regression tests ------------------------------


def test_a_block_with_nothing_to_encode(encoders):
    """A block of only nulls, blanks and control characters, and a block of only texts the
    actor has encoded before: both crashed the tokenizer with an empty list (issue 33)."""
    actor = encoders.actor(0, "float32", "truncate", dedupe=True)
    blank = pa.table({"id": ["a", "b", "c", "d"], "text": [None, "", "   ", "\x00\x07"],
                      "read_error": [None] * 4, "source": ["s"] * 4, "row": [0, 1, 2, 3],
                      "source_rows": [8] * 4})
    out = actor(blank)
    assert out.column("status").to_pylist() == ["null", "empty", "empty", "empty"]
    assert out.column("embedding").null_count == 4
    seen = pa.table({"id": ["e", "f"], "text": ["A repeated line.", "A repeated line."],
                     "read_error": [None] * 2, "source": ["s"] * 2, "row": [4, 5],
                     "source_rows": [8] * 2})
    first, again = actor(seen), actor(seen)  # the second block: all in the actor's cache
    assert again.column("status").to_pylist() == ["ok", "ok"]
    assert again.column("_copied").to_pylist() == [True, True]
    assert again.column("embedding").to_pylist() == first.column("embedding").to_pylist()


@pytest.mark.long
@pytest.mark.ray
@settings(max_examples=3, deadline=None)
@given(files=corpora(max_files=3, max_rows=10), dedupe=st.booleans(),
       dtype=st.sampled_from(("float32", "int8", "binary")),
       long_text=st.sampled_from(["truncate", "chunk"]))
def test_any_corpus_shape_through_ray(ray_cluster, encoders, files, dedupe, dtype, long_text):
    """The same invariants end to end: jobs/embed.py on the shared Ray cluster, 2 actors,
    blocks of 2 rows (the code book given: the job would calibrate its own)."""
    from sentray.cli import main

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        input_value = write_corpus(root, files)
        _, sources = discover(input_value)
        output = root / "out"
        ranges = root / "ranges.json"
        ranges.write_text(f'{{"minimum": {[-1.0] * DIMENSION}, "maximum": {[1.0] * DIMENSION}}}')
        args = ["embed", "--input", input_value, "--output", str(output),
                "--model", str(encoders.encoder.model), "--pooling", "mean",
                "--max-length", str(MAX_LENGTH), "--normalize", "true",
                "--output-dtype", dtype, "--long-text", long_text, "--max-windows", str(MAX_WINDOWS),
                "--dedupe" if dedupe else "--no-dedupe", "--actors", "2",
                "--rows-per-batch", "2"]
        if dtype in vectors.SCALAR:
            args += ["--quantization-ranges", str(ranges)]
        summary = main(args)
        check_output(output, storage.locate(str(output)), root, files, sources, summary,
                     dtype, long_text, dedupe, exact_repeats=False, encoders=encoders)

"""The augmentation job's row path over corpus shapes searched by Hypothesis (issue 33), as
tests/embedding/test_corpus_shapes.py does for the embedding job: files (some empty, the same
name in two folders), rows of every kind, blocks of 1 row upward cut across files, 1-2 actors.
Invariants: every input row comes out exactly once, kept (with Y and Z) or rejected with the
reason its kind (and the corpus filter, given the row before it in its file) should get, ids
unique, and the summary adds up. In-process against `AugmentBatch` (spaCy + OpenIE) and the
part-writing/accounting code."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from corpus_shapes import corpora, discover, expected_rows, run_in_process, write_corpus
from hypothesis import given, settings
from hypothesis import strategies as st

from sentray.kit import storage

pytest.importorskip("triplet_extract")
pytest.importorskip("spacy")


@pytest.fixture(scope="module")
def actors():
    from sentray.sifter.actor import AugmentBatch
    from sentray.sifter.config import AugmentConfig

    config = AugmentConfig()
    first = AugmentBatch(config)
    return config, [first, first]  # one actor object, two names: its state is per call


def expected_reason(row, previous, config) -> str | None:
    from sentray.sifter.corpus_filter import filter_reason

    if row.text is None:
        return "invalid_utf8" if row.raw is not None else "null"
    if not row.text.strip():
        return "empty"
    return filter_reason(row.text, previous, min_words=config.min_words,
                         drop_short=not config.keep_short,
                         drop_capitalized_tail=not config.keep_capitalized_tail)


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(files=corpora(max_files=3, max_rows=10), block=st.integers(1, 7),
       order=st.permutations([0, 1]))
def test_any_corpus_shape_augments_whole(actors, files, block, order):
    from sentray.sifter.job import SplitOutputAndRejects, output_schema, summarize

    config, pool = actors
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        corpus, sources = discover(write_corpus(root, files), with_previous_text=True,
                                   rows_per_block=max(1, block // 2))
        output, rejects = (storage.locate(str(root / name)) for name in ("out", "rejects"))
        run_in_process(sources, corpus, pool, block, SplitOutputAndRejects(output, rejects),
                       output, lambda source: output_schema(pa.string()), order)
        summary = summarize(output, rejects, sources)

        expected = expected_rows(root, files, sources)
        kept, dropped = ({}, {})
        for folder, into in ((root / "out", kept), (root / "rejects", dropped)):
            for path in sorted(folder.rglob("part-*.parquet")) if folder.exists() else []:
                table = pq.read_table(path)
                reasons = (table.column("reject_reason").to_pylist()
                           if "reject_reason" in table.column_names else [None] * table.num_rows)
                for i, key in enumerate(zip(table.column("source").to_pylist(),
                                            table.column("row").to_pylist(), strict=True)):
                    assert key not in kept and key not in dropped, f"{key} written twice"
                    into[key] = (table.column("id")[i].as_py(), reasons[i],
                                 table.to_pylist()[i])
        assert set(kept) | set(dropped) == set(expected), "a row lost"
        ids = [value[0] for value in [*kept.values(), *dropped.values()]]
        assert len(set(ids)) == len(ids), "two rows share an id"
        for (key, index), row in expected.items():
            previous = expected[(key, index - 1)].text if index else None
            reason = expected_reason(row, previous, config)
            if reason is None:
                assert (key, index) in kept, (key, index, row)
                record = kept[(key, index)][2]
                assert record["text"] == row.text
                assert record["backbone_text"] is not None and record["pruned_text"] is not None
            else:
                assert dropped.get((key, index), (None, None))[1] == reason, (key, index, row)
        assert summary["rows_in"] == len(expected) == summary["rows_out"] + summary[
            "rows_rejected"]
        assert summary["rows_out"] == len(kept) and summary["incomplete_sources"] == []


@pytest.mark.long
@pytest.mark.ray
@settings(max_examples=3, deadline=None)
@given(files=corpora(max_files=3, max_rows=8))
def test_any_corpus_shape_through_ray(ray_cluster, actors, files):
    """The same through Ray and jobs/augment.py (2 actors, blocks of 2 rows): every row once,
    kept or rejected with its reason, and the summary adding up."""
    from sentray.cli import main

    config, _ = actors
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        input_value = write_corpus(root, files)
        _, sources = discover(input_value)
        summary = main(["augment", "--input", input_value, "--output", str(root / "out"),
                        "--actors", "2", "--rows-per-batch", "2"])
        expected = expected_rows(root, files, sources)
        assert summary["rows_in"] == len(expected) == summary["rows_out"] + summary[
            "rows_rejected"]
        written = []
        for folder in (root / "out", root / "out-rejects"):
            for path in sorted(folder.rglob("part-*.parquet")):
                table = pq.read_table(path)
                written += list(zip(table.column("source").to_pylist(),
                                    table.column("row").to_pylist(), strict=True))
        assert sorted(written) == sorted(expected), "a row lost or written twice"
        rejected = {}
        for path in sorted((root / "out-rejects").rglob("part-*.parquet")):
            table = pq.read_table(path)
            for key, reason in zip(zip(table.column("source").to_pylist(),
                                       table.column("row").to_pylist(), strict=True),
                                   table.column("reject_reason").to_pylist(), strict=True):
                rejected[key] = reason
        for (key, index), row in expected.items():
            previous = expected[(key, index - 1)].text if index else None
            assert rejected.get((key, index)) == expected_reason(row, previous, config)

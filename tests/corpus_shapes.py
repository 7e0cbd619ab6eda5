"""Hypothesis strategies for corpus shapes, shared by the property tests of the corpus jobs'
row path (tests/embedding/test_corpus_shapes.py, tests/sifter/test_augment_shapes.py): files
(some empty), rows of every kind a real corpus holds, repeats across blocks and files, and the
same file name in two input folders; and `run_in_process`, the corpus job's row path without
Ray: the reader's blocks, re-cut into blocks of any size as the streaming repartition does,
dealt to 1-2 actors, written as row-accounted parts."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st

from sentray.corpus import part_files
from sentray.corpus.reading import read_parquet_source, read_tasks, read_text_source
from sentray.corpus.sources import CorpusConfig, Source, discover_sources
from sentray.kit import storage

# What a row can be. `repeat` copies an earlier row of the corpus (same file or another);
# `long` is longer than the tiny test model reads (12 tokens) and `very_long` longer than 4
# windows of it (--long-text chunk cuts it too); `invalid_utf8` exists in text
# files only (a Parquet string column cannot hold it: there it becomes `null`).
KINDS = ("ok", "null", "empty", "whitespace", "repeat", "long", "very_long", "invalid_utf8",
         "control_only", "control_mixed")
WORDS = ("cat", "mat", "river", "stock", "market", "jury", "election", "guitar", "storm", "bridge")


@dataclass(frozen=True)
class Row:
    kind: str  # the kind drawn (a repeat keeps `repeat`, and `of` = the kind it copies)
    raw: bytes | None  # the line's bytes (text files) / None for a null value
    text: str | None  # what the reader gives (None: null or undecodable)
    of: str | None = None  # repeat: the kind of the row it copies


@dataclass(frozen=True)
class CorpusFile:
    folder: int  # which input folder it is in
    name: str  # its file name (the same name may be in two folders)
    fmt: str  # text | parquet
    rows: tuple[Row, ...]


def _text_of(kind: str, serial: int, draw) -> tuple[bytes | None, str | None]:
    word = draw(st.sampled_from(WORDS))
    if kind == "ok":
        return _encoded(f"The {word} number {serial} sat by the {draw(st.sampled_from(WORDS))}.")
    if kind == "null":
        return None, None
    if kind == "empty":
        return b"", ""
    if kind == "whitespace":
        return _encoded(draw(st.sampled_from([" ", "   ", "\t", " \t  "])))
    if kind in ("long", "very_long"):  # ~4 word pieces a repetition
        repeats = 6 if kind == "long" else 40
        return _encoded(" ".join(f"{word}{i % 7} and {serial}" for i in range(repeats)))
    if kind == "invalid_utf8":
        return b"caf\xe9 " + str(serial).encode(), None
    if kind == "control_only":
        return _encoded(draw(st.sampled_from(["\x00\x07", "\x01\x02\x03", "\u200b\u200b"])))
    if kind == "control_mixed":
        return _encoded(f"ctl\x00\x07 {word} {serial} \U0001F600 \u4e2d\u6587")
    raise AssertionError(kind)


def _encoded(text: str) -> tuple[bytes, str]:
    return text.encode(), text


@st.composite
def corpora(draw, max_files: int = 4, max_rows: int = 14,
            formats: tuple[str, ...] = ("text", "parquet")) -> list[CorpusFile]:
    """1..max_files files in two input folders (the same file name may be in both), each of
    0..max_rows rows of any KIND."""
    files: list[CorpusFile] = []
    earlier: list[Row] = []  # rows that a repeat can copy
    serial = itertools.count()
    names: set[tuple[int, str]] = set()
    for _ in range(draw(st.integers(1, max_files))):
        fmt = draw(st.sampled_from(formats))
        folder = draw(st.integers(0, 1))
        stem = draw(st.sampled_from(["x", "y"]))
        name = f"{stem}.{'txt' if fmt == 'text' else 'parquet'}"
        if (folder, name) in names:
            continue
        names.add((folder, name))
        rows = []
        for kind in draw(st.lists(st.sampled_from(KINDS), max_size=max_rows)):
            if kind == "repeat":
                candidates = [r for r in earlier + rows if r.kind != "repeat" and (
                    fmt == "parquet" or r.raw is not None)]
                if not candidates:
                    kind = "ok"
                else:
                    copied = draw(st.sampled_from(candidates))
                    if fmt == "parquet" and copied.kind == "invalid_utf8":
                        copied = Row("null", None, None)
                    rows.append(Row("repeat", copied.raw, copied.text, copied.kind))
                    continue
            if fmt == "parquet" and kind == "invalid_utf8":
                kind = "null"
            if fmt == "text" and kind == "null":
                kind = "empty"
            raw, text = _text_of(kind, next(serial), draw)
            rows.append(Row(kind, raw, text))
        earlier += rows
        files.append(CorpusFile(folder, name, fmt, tuple(rows)))
    return files


def write_corpus(root: Path, files: list[CorpusFile]) -> str:
    """The files under root/in0, root/in1; returns the --input value (both folders)."""
    folders = [root / "in0", root / "in1"]
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "keep.txt").write_bytes(b"")  # an empty file; a folder needs one file
    for file in files:
        path = folders[file.folder] / file.name
        if file.fmt == "text":
            path.write_bytes(b"".join(row.raw + b"\n" for row in file.rows))
        else:
            pq.write_table(pa.table({"text": pa.array([r.text for r in file.rows], pa.string())}),
                           path, row_group_size=5)
    return ",".join(str(f) for f in folders)


def expected_rows(root: Path, files: list[CorpusFile], sources: list[Source]
                  ) -> dict[tuple[str, int], Row]:
    """(source key, row) -> the row written there."""
    by_path = {s.path: s.key for s in sources}
    expected = {}
    for file in files:
        key = by_path[str(root / f"in{file.folder}" / file.name)]
        for index, row in enumerate(file.rows):
            expected[(key, index)] = row
    return expected


def run_in_process(sources: list[Source], corpus: CorpusConfig, actors: list, block: int,
                   route: part_files.Route, folder: storage.Location, empty_schema,
                   order: list[int]) -> None:
    """The corpus job's row path without Ray: every record the read tasks give, re-cut into
    blocks of `block` rows (across files, as the streaming repartition cuts them), block i
    handed to actor `order[i % len(order)]`, each result written with `write_block`; empty
    files get their empty part as the driver writes them."""
    tables = []
    todo = [(s, None) for s in sources if s.num_rows != 0]
    for source in sources:
        if source.num_rows == 0:
            part_files.write_empty_source(folder, source, empty_schema(source))
    for source, groups, first, runs in read_tasks(todo, corpus):
        if source.format == "text":
            tables.extend(read_text_source(source, corpus.rows_per_block,
                                           corpus.with_previous_text, runs))
        else:
            tables.extend(read_parquet_source(source, groups, first, corpus, runs))
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return
    records = pa.concat_tables(tables, promote_options="permissive")
    for i, start in enumerate(range(0, records.num_rows, block)):
        actor = actors[order[i % len(order)]]
        part_files.write_block(route, actor(records.slice(start, block)))


def discover(input_value: str, **corpus) -> tuple[CorpusConfig, list[Source]]:
    config = CorpusConfig(input=input_value, **corpus)
    return config, discover_sources(config)

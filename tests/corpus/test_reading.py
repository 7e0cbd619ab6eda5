"""Unit tests of sentray.corpus without Ray: line decoding, source discovery and validation,
read-task planning and the readers themselves."""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sentray.corpus.reading import read_parquet_source, read_tasks, read_text_source
from sentray.corpus.source_runs import source_runs
from sentray.corpus.sources import (
    INVALID_UTF8,
    CorpusConfig,
    Source,
    decode_lines,
    discover_sources,
)

# -- decode_lines ---------------------------------------------------------------------------------


@pytest.mark.parametrize("separator", ["\x0b", "\x0c", "\u2028", "\u2029", "\x1c", "\x85", "\r"])
def test_decode_lines_splits_on_newline_only(separator):
    """str.splitlines() would split on all of these; a corpus line must not be."""
    text = f"first{separator}still first\nsecond\n"
    texts, errors = decode_lines(text.encode("utf-8"))
    assert texts == [f"first{separator}still first", "second"]
    assert errors == [None, None]


def test_decode_lines_crlf():
    texts, errors = decode_lines(b"one\r\ntwo\r\n\r\nfour")
    assert texts == ["one", "two", "", "four"]
    assert errors == [None] * 4


def test_decode_lines_bom_is_dropped_once():
    texts, _ = decode_lines(b"\xef\xbb\xbfhello\nworld\n")
    assert texts == ["hello", "world"]
    # only a leading BOM is special; one inside a line is content
    texts, _ = decode_lines(b"a\n\xef\xbb\xbfb\n")
    assert texts == ["a", "\ufeffb"]


@pytest.mark.parametrize(("data", "expected"), [
    (b"a\nb\n", ["a", "b"]),  # trailing newline ends the last line
    (b"a\nb", ["a", "b"]),  # no trailing newline: the last line still counts
    (b"a\nb\n\n", ["a", "b", ""]),  # an empty last line is a line
    (b"\n", [""]),
    (b"", []),
    (b"\n\n\n", ["", "", ""]),
    (b"  \n\t\n", ["  ", "\t"]),  # whitespace is kept as is
])
def test_decode_lines_trailing_newlines(data, expected):
    texts, errors = decode_lines(data)
    assert texts == expected
    assert errors == [None] * len(expected)


def test_decode_lines_invalid_utf8_line_is_isolated():
    data = "caf\u00e9 ok\n".encode() + b"caf\xe9 latin-1\n" + b"\xff\xfe\n" + "\u4f60\u597d\n".encode()
    texts, errors = decode_lines(data)
    assert texts == ["caf\u00e9 ok", None, None, "\u4f60\u597d"]
    assert errors == [None, INVALID_UTF8, INVALID_UTF8, None]


def test_decode_lines_truncated_multibyte_is_invalid():
    # the first two bytes of a 3-byte sequence, then a newline
    texts, errors = decode_lines(b"ok\n\xe4\xbd\nok2")
    assert texts == ["ok", None, "ok2"]
    assert errors == [None, INVALID_UTF8, None]


# -- discover_sources -----------------------------------------------------------------------------


def write_parquet(path: Path, table: pa.Table, **kwargs) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, **kwargs)
    return path


@pytest.fixture()
def mixed_folder(tmp_path) -> Path:
    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    (root / "b.txt").write_text("one\ntwo\n")
    (root / "sub" / "a.text").write_text("three\n")
    write_parquet(root / "c.parquet", pa.table({"text": ["x", "y", "z"]}), row_group_size=2)
    write_parquet(root / "sub" / "d.pq", pa.table({"text": ["w"]}))
    (root / "notes.md").write_text("not a corpus file\n")
    (root / "_SUCCESS").write_text("")
    (root / ".hidden.txt").write_text("hidden\n")
    return root


def test_discover_sources_mixed_folder(mixed_folder):
    sources = discover_sources(CorpusConfig(input=str(mixed_folder)))
    assert [s.name for s in sources] == ["b.txt", "c.parquet", "sub/a.text", "sub/d.pq"]
    assert [s.format for s in sources] == ["text", "parquet", "text", "parquet"]
    assert [s.num_rows for s in sources] == [None, 3, None, 1]
    assert sources[1].row_groups == (2, 1)
    assert sources[3].row_groups == (1,)
    assert [s.uri for s in sources] == [str(mixed_folder / n) for n in
                                        ("b.txt", "c.parquet", "sub/a.text", "sub/d.pq")]
    keys = [s.key for s in sources]
    assert len(set(keys)) == 4
    assert all("/" not in k for k in keys)


def test_output_folder_inside_the_input_is_not_read(mixed_folder):
    """`--input data/ --output data/emb/`: a rerun must not take the output parts for input."""
    output = mixed_folder / "emb"
    (output / "c.parquet-0123456789").mkdir(parents=True)
    write_parquet(output / "c.parquet-0123456789" / "part-0-3-of-3.parquet",
                  pa.table({"id": ["a"], "status": ["ok"]}))
    names = [s.name for s in discover_sources(CorpusConfig(input=str(mixed_folder)),
                                              exclude=str(output))]
    assert names == ["b.txt", "c.parquet", "sub/a.text", "sub/d.pq"]
    with pytest.raises(ValueError, match="no column 'text'"):
        discover_sources(CorpusConfig(input=str(mixed_folder)))


def test_empty_text_files_have_zero_rows(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf")
    (tmp_path / "newline.txt").write_bytes(b"\n")  # one empty line: a row, not an empty file
    rows = {s.name: s.num_rows for s in discover_sources(CorpusConfig(input=str(tmp_path)))}
    assert rows == {"bom.txt": 0, "empty.txt": 0, "newline.txt": None}


def test_discover_sources_names_and_keys_are_stable(mixed_folder, monkeypatch):
    first = discover_sources(CorpusConfig(input=str(mixed_folder)))
    # a relative spelling of the same folder gives the same names and keys
    monkeypatch.chdir(mixed_folder.parent)
    second = discover_sources(CorpusConfig(input="corpus/"))
    assert [s.name for s in second] == [s.name for s in first]
    assert [s.key for s in second] == [s.key for s in first]
    # a single file is named by its base name
    single = discover_sources(CorpusConfig(input=str(mixed_folder / "sub" / "d.pq")))
    assert [s.name for s in single] == ["d.pq"]
    assert single[0].uri == first[3].uri
    # the key is the file name plus a digest of the full path: the same file, listed alone or
    # in its folder, writes to the same output folder
    assert single[0].key == first[3].key
    assert first[3].key.startswith("d.pq-")


def test_discover_sources_forced_format(mixed_folder):
    texts = discover_sources(CorpusConfig(input=str(mixed_folder), format="text"))
    assert [s.name for s in texts] == ["b.txt", "sub/a.text"]
    parquets = discover_sources(CorpusConfig(input=str(mixed_folder), format="parquet"))
    assert [s.name for s in parquets] == ["c.parquet", "sub/d.pq"]


def test_discover_sources_comma_separated_and_duplicates(mixed_folder):
    b, c = mixed_folder / "b.txt", mixed_folder / "c.parquet"
    sources = discover_sources(CorpusConfig(input=f"{b}, {c}"))
    assert [s.name for s in sources] == ["b.txt", "c.parquet"]
    with pytest.raises(ValueError, match="twice"):
        discover_sources(CorpusConfig(input=f"{b},{b}"))


def test_missing_text_column_names_file_and_columns(tmp_path):
    good = write_parquet(tmp_path / "in" / "a.parquet", pa.table({"text": ["x"]}))
    bad = write_parquet(tmp_path / "in" / "b.parquet",
                        pa.table({"sentence": ["x"], "label": [1]}))
    with pytest.raises(ValueError) as info:
        discover_sources(CorpusConfig(input=str(tmp_path / "in")))
    message = str(info.value)
    assert str(bad) in message
    assert str(good) not in message
    assert "'text'" in message and "sentence" in message and "label" in message
    # with the right column name the other file is the one that fails
    with pytest.raises(ValueError) as info:
        discover_sources(CorpusConfig(input=str(tmp_path / "in"), text_column="sentence"))
    assert str(good) in str(info.value) and "'sentence'" in str(info.value)


def test_missing_id_column(tmp_path):
    path = write_parquet(tmp_path / "a.parquet", pa.table({"text": ["x"], "key": [1]}))
    with pytest.raises(ValueError, match="'doc_id'") as info:
        discover_sources(CorpusConfig(input=str(path), id_column="doc_id"))
    assert str(path) in str(info.value)
    sources = discover_sources(CorpusConfig(input=str(path), id_column="key"))
    assert sources[0].num_rows == 1


@pytest.mark.parametrize("content", [os.urandom(4096), b"", b"PAR1", b"PAR1" + b"\0" * 64 + b"PAR1"],
                         ids=["random", "zero-bytes", "magic-only", "bad-footer"])
def test_corrupt_parquet_names_file(tmp_path, content):
    write_parquet(tmp_path / "in" / "good.parquet", pa.table({"text": ["x"]}))
    bad = tmp_path / "in" / "broken.parquet"
    bad.write_bytes(content)
    with pytest.raises(ValueError, match="not a readable Parquet file") as info:
        discover_sources(CorpusConfig(input=str(tmp_path / "in")))
    assert str(bad) in str(info.value)


@pytest.mark.parametrize(("values", "type_name"),
                         [(pa.array([1, 2], pa.int64()), "int64"), (pa.array([1.5, 2.5]), "double"),
                          (pa.array([["a"], ["b"]]), "list<")], ids=["int", "float", "list"])
def test_non_string_text_column(tmp_path, values, type_name):
    path = write_parquet(tmp_path / "a.parquet", pa.table({"text": values}))
    with pytest.raises(ValueError, match="expected a string column") as info:
        discover_sources(CorpusConfig(input=str(path)))
    assert str(path) in str(info.value)
    assert f"has type {type_name}" in str(info.value)


@pytest.mark.parametrize("values", [pa.array(["a", None], pa.large_string()),
                                    pa.array(["a", None], pa.string_view()),
                                    pa.array(["a", None]).dictionary_encode(),
                                    pa.array([b"a", None]), pa.array([b"a", None], pa.large_binary()),
                                    pa.array([b"a", None], pa.binary_view()), pa.nulls(2)],
                         ids=["large_string", "string_view", "dictionary", "binary",
                              "large_binary", "binary_view", "null"])
def test_accepted_text_column_types(tmp_path, values):
    """Every Arrow string and binary type is read as text (issue 44: string_view was refused)."""
    path = write_parquet(tmp_path / "a.parquet", pa.table({"text": values}))
    config = CorpusConfig(input=str(path))
    [source] = discover_sources(config)
    assert source.num_rows == 2
    [block] = read_parquet_source(source, [0], 0, config)
    expected = [None, None] if pa.types.is_null(values.type) else ["a", None]
    assert block.column("text").to_pylist() == expected
    assert block.column("read_error").to_pylist() == [None, None]


def test_id_column_with_text_input(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("x\n")
    with pytest.raises(ValueError, match="--id-column") as info:
        discover_sources(CorpusConfig(input=str(path), id_column="id"))
    assert str(path) in str(info.value)


def test_nonexistent_path(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        discover_sources(CorpusConfig(input=str(missing)))


def test_folder_without_corpus_files(tmp_path):
    (tmp_path / "readme.md").write_text("x")
    with pytest.raises(FileNotFoundError, match="no input files"):
        discover_sources(CorpusConfig(input=str(tmp_path)))


def test_unknown_suffix_single_file(tmp_path):
    path = tmp_path / "corpus.csv"
    path.write_text("x\n")
    with pytest.raises(ValueError, match="--format"):
        discover_sources(CorpusConfig(input=str(path)))
    assert discover_sources(CorpusConfig(input=str(path), format="text"))[0].format == "text"


@pytest.mark.parametrize("kwargs", [dict(input=""), dict(input="x", format="csv"),
                                    dict(input="x", text_column=""),
                                    dict(input="x", rows_per_read_task=0)])
def test_corpus_config_validation(kwargs):
    with pytest.raises(ValueError):
        CorpusConfig(**kwargs)


# -- read_tasks and readers -----------------------------------------------------------------------


@pytest.mark.parametrize(("rows", "row_group_size", "rows_per_read_task"),
                         [(103, 10, 25), (103, 10, 10), (103, 10, 5), (50, 7, 1000), (1, 1, 1)])
def test_read_tasks_cover_every_row_once(tmp_path, rows, row_group_size, rows_per_read_task):
    path = write_parquet(tmp_path / "a.parquet",
                         pa.table({"text": [f"s{i}" for i in range(rows)]}),
                         row_group_size=row_group_size)
    text = tmp_path / "b.txt"
    text.write_text("x\ny\n")
    config = CorpusConfig(input=f"{path},{text}", rows_per_read_task=rows_per_read_task)
    sources = discover_sources(config)
    parquet = sources[0]
    assert sum(parquet.row_groups) == rows
    assert len(parquet.row_groups) == -(-rows // row_group_size)

    tasks = read_tasks([(s, None) for s in sources], config)
    parquet_tasks = [t[:3] for t in tasks if t[0] is parquet]
    text_tasks = [t for t in tasks if t[0] is sources[1]]
    assert text_tasks == [(sources[1], [], 0, None)]
    # row groups: each once, in order, contiguous per task
    groups = [g for _, task_groups, _ in parquet_tasks for g in task_groups]
    assert groups == list(range(len(parquet.row_groups)))
    expected_first = 0
    for _, task_groups, first in parquet_tasks:
        assert task_groups == list(range(task_groups[0], task_groups[-1] + 1))
        assert first == expected_first
        task_rows = sum(parquet.row_groups[g] for g in task_groups)
        # grouped up to rows_per_read_task, but a single group is never split
        assert task_rows <= max(rows_per_read_task, row_group_size)
        expected_first += task_rows
    assert expected_first == rows
    # no two consecutive tasks could have been merged
    for (_, a, _), (_, b, _) in zip(parquet_tasks, parquet_tasks[1:], strict=False):
        merged = sum(parquet.row_groups[g] for g in a + b)
        assert merged > rows_per_read_task

    # reading every task gives every row exactly once, with the right row numbers
    seen = []
    for source, task_groups, first in parquet_tasks:
        for block in read_parquet_source(source, task_groups, first, config):
            assert block.column_names == ["id", "text", "read_error", "source", "row",
                                          "source_rows"]
            seen.extend(zip(block.column("row").to_pylist(), block.column("text").to_pylist(),
                            block.column("id").to_pylist(), strict=True))
            assert set(block.column("source_rows").to_pylist()) == {rows}
            assert set(block.column("source").to_pylist()) == {parquet.key}
    assert seen == [(i, f"s{i}", f"a.parquet:{i}") for i in range(rows)]


def test_read_tasks_exact_grouping(tmp_path):
    path = write_parquet(tmp_path / "a.parquet", pa.table({"text": ["x"] * 100}),
                         row_group_size=10)
    config = CorpusConfig(input=str(path), rows_per_read_task=30)
    sources = discover_sources(config)
    tasks = read_tasks([(s, None) for s in sources], config)
    assert [(groups, first) for _, groups, first, _ in tasks] == [
        ([0, 1, 2], 0), ([3, 4, 5], 30), ([6, 7, 8], 60), ([9], 90)]
    # a rerun reads only the row groups that hold rows still to do, and only those rows
    runs = [(15, 25), (95, 100)]
    tasks = read_tasks([(sources[0], runs)], config)
    assert [(groups, first) for _, groups, first, _ in tasks] == [([1, 2], 10), ([9], 90)]
    rows = [r for s, g, f, task_runs in tasks
            for block in read_parquet_source(s, g, f, config, task_runs)
            for r in block.column("row").to_pylist()]
    assert rows == [*range(15, 25), *range(95, 100)]


def test_read_parquet_with_id_column_and_nulls(tmp_path):
    table = pa.table({"sentence": ["a", None, "c", ""], "doc": [10, 20, 30, 40]})
    path = write_parquet(tmp_path / "a.parquet", table, row_group_size=3)
    config = CorpusConfig(input=str(path), text_column="sentence", id_column="doc",
                          rows_per_read_task=1)
    sources = discover_sources(config)
    blocks = [b for s, g, f, _ in read_tasks([(s, None) for s in sources], config)
              for b in read_parquet_source(s, g, f, config)]
    result = pa.concat_tables(blocks)
    assert result.column("id").type == pa.int64()
    assert result.column("id").to_pylist() == [10, 20, 30, 40]
    assert result.column("text").to_pylist() == ["a", None, "c", ""]
    assert result.column("read_error").to_pylist() == [None] * 4
    assert result.column("row").to_pylist() == [0, 1, 2, 3]


def test_binary_text_column_invalid_utf8(tmp_path):
    values = pa.array([b"good", b"caf\xe9", None, "\u00fcber".encode(), b"\xff"], pa.binary())
    path = write_parquet(tmp_path / "a.parquet", pa.table({"text": values}))
    config = CorpusConfig(input=str(path))
    sources = discover_sources(config)
    (source, groups, first, _), = read_tasks([(s, None) for s in sources], config)
    result = pa.concat_tables(read_parquet_source(source, groups, first, config))
    assert result.column("text").type == pa.string()
    assert result.column("text").to_pylist() == ["good", None, None, "\u00fcber", None]
    assert result.column("read_error").to_pylist() == [None, INVALID_UTF8, None, None,
                                                       INVALID_UTF8]
    assert result.column("id").to_pylist() == [f"a.parquet:{i}" for i in range(5)]


def test_null_typed_text_column(tmp_path):
    path = write_parquet(tmp_path / "a.parquet", pa.table({"text": pa.nulls(3)}))
    config = CorpusConfig(input=str(path))
    (source, groups, first, _), = read_tasks([(s, None) for s in discover_sources(config)], config)
    result = pa.concat_tables(read_parquet_source(source, groups, first, config))
    assert result.column("text").to_pylist() == [None] * 3
    assert result.column("read_error").to_pylist() == [None] * 3


def test_read_text_source_blocks(tmp_path):
    path = tmp_path / "dir" / "t.txt"
    path.parent.mkdir()
    path.write_bytes(b"a\n\xff\nc\x0bd\r\ne\n")
    sources = discover_sources(CorpusConfig(input=str(tmp_path)))
    blocks = list(read_text_source(sources[0], lines_per_block=3))
    assert [b.num_rows for b in blocks] == [3, 1]
    result = pa.concat_tables(blocks)
    assert result.column("id").to_pylist() == [f"dir/t.txt:{i}" for i in range(4)]
    assert result.column("text").to_pylist() == ["a", None, "c\x0bd", "e"]
    assert result.column("read_error").to_pylist() == [None, INVALID_UTF8, None, None]
    assert result.column("row").to_pylist() == [0, 1, 2, 3]
    assert set(result.column("source_rows").to_pylist()) == {4}


def test_read_empty_text_source(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    sources = discover_sources(CorpusConfig(input=str(path)))
    assert list(read_text_source(sources[0])) == []


def test_previous_text_follows_file_order_across_blocks_and_tasks(tmp_path):
    """`previous_text` is the text of the row before in the file, also across blocks and read
    tasks (the corpus filter's capitalized-last-word rule needs it)."""
    import pyarrow.parquet as pq_module

    texts = [f"line {i}" for i in range(23)]
    (tmp_path / "a.txt").write_text("\n".join(texts) + "\n")
    pq_module.write_table(pa.table({"text": texts}), tmp_path / "b.parquet", row_group_size=4)
    config = CorpusConfig(input=str(tmp_path), rows_per_block=5, rows_per_read_task=8,
                          with_previous_text=True)
    for source in discover_sources(config):
        got = {}
        for task_source, groups, first, _ in read_tasks([(source, None)], config):
            blocks = (read_text_source(task_source, 5, True) if task_source.format == "text"
                      else read_parquet_source(task_source, groups, first, config))
            for block in blocks:
                got.update(zip(block.column("row").to_pylist(),
                               block.column("previous_text").to_pylist(), strict=True))
        assert [got[r] for r in range(23)] == [None] + texts[:-1], source.name
    plain = next(read_text_source(discover_sources(config)[0], 5))
    assert "previous_text" not in plain.column_names


def test_a_split_run_is_one_part_per_folder_and_its_rows_add_up(tmp_path):
    """Kept and rejected rows of one run: one part each, named by the whole run; the source is
    complete only while both parts are there."""
    import pyarrow.compute as pc

    from sentray.corpus import part_files
    from sentray.kit import storage

    kept, rejected = storage.locate(str(tmp_path / "out")), storage.locate(str(tmp_path / "rej"))

    def split(table):
        odd = pc.equal(pc.bit_wise_and(table.column("row"), 1), 1)
        return [(kept, table.filter(pc.invert(odd))), (rejected, table.filter(odd))]

    block = pa.table({"source": ["s"] * 10, "row": [9, 0, 1, 2, 3, 4, 5, 6, 7, 8],
                      "source_rows": [12] * 10, "text": [str(i) for i in range(10)]})
    assert part_files.write_block(split, block) == {"s": 10}
    block = pa.table({"source": ["s"] * 2, "row": [10, 11], "source_rows": [12] * 2,
                      "text": ["a", "b"]})
    assert part_files.write_block(split, block) == {"s": 2}
    names = sorted(p.name for p in (tmp_path / "out" / "s").iterdir())
    assert names == [part_files.part_name(0, 10, 12, 5), part_files.part_name(10, 12, 12, 1)]
    assert names[0] == "part-000000000000-000000000010-of-000000000012-rows-5.parquet"
    assert len(list((tmp_path / "rej" / "s").iterdir())) == 2
    source = Source("s", "s", None, "s", "text")
    runs = source_runs([kept, rejected], _keyed(source, "s"))
    assert runs.complete and runs.total == 12 and runs.done == ((0, 10), (10, 12))
    only_kept = source_runs([kept], _keyed(source, "s"))  # the rejected half is not counted
    assert not only_kept.complete and only_kept.missing == [(0, 12)]
    (tmp_path / "rej" / "s" / part_files.part_name(10, 12, 12, 1)).unlink()
    runs = source_runs([kept, rejected], _keyed(source, "s"))
    assert runs.done == ((0, 10),) and runs.missing == [(10, 12)]  # the first run is kept
    assert [posixpath.basename(p.path) for p in runs.stale] == [
        part_files.part_name(10, 12, 12, 1)]  # the half of the dead run: to delete
    assert pq.read_table(tmp_path / "out" / "s").column("row").to_pylist() == [0, 2, 4, 6, 8, 10]


def _keyed(source, key: str):
    """A source whose output folder is named `key` (its `key` is a property of its uri)."""
    class Keyed(type(source)):
        @property
        def key(self) -> str:
            return key

    import dataclasses

    return Keyed(**{f.name: getattr(source, f.name) for f in dataclasses.fields(source)})


def test_source_runs_keep_finished_parts_and_drop_what_compaction_left(tmp_path):
    """Parts are the record: a killed run's finished parts count, the rows between them are
    missing; a part inside a bigger one (a compaction stopped before deleting what it merged)
    is stale; parts of an input that now has another row count are all stale."""
    from sentray.corpus import part_files
    from sentray.kit import storage

    folder = tmp_path / "out" / "s"
    folder.mkdir(parents=True)
    for first, end in [(0, 10), (10, 20), (30, 40), (0, 20)]:
        (folder / part_files.part_name(first, end, 50)).write_bytes(b"")
    out = storage.locate(str(tmp_path / "out"))
    source = _keyed(Source("s", "s", None, "s", "parquet", num_rows=50), "s")
    runs = source_runs([out], source)
    assert runs.done == ((0, 20), (30, 40)) and runs.missing == [(20, 30), (40, 50)]
    assert sorted(posixpath.basename(p.path) for p in runs.stale) == [
        part_files.part_name(0, 10, 50), part_files.part_name(10, 20, 50)]
    changed = _keyed(Source("s", "s", None, "s", "parquet", num_rows=60), "s")
    assert len(source_runs([out], changed).stale) == 4 and source_runs([out], changed).missing \
        == [(0, 60)]


def test_first_texts_are_the_inputs_first_rows_with_a_text_across_files(tmp_path):
    """What the probe encodes (`first_texts`): the first rows in the reader's file order, null
    and empty ones left out, across a text file and a Parquet file, no more than asked."""
    from sentray.corpus.reading import first_texts

    root = tmp_path / "corpus"
    root.mkdir()
    (root / "a.txt").write_text("one\n\ntwo\n")
    write_parquet(root / "b.parquet", pa.table({"text": ["three", None, "", "four", "five"]}),
                  row_group_size=2)
    config = CorpusConfig(input=str(root))
    sources = discover_sources(config)
    assert first_texts(sources, config, 100) == ["one", "two", "three", "four", "five"]
    assert first_texts(sources, config, 5) == ["one", "two", "three"]  # 5 rows: 2 with no text
    assert first_texts([], config, 10) == []


def test_spread_texts_take_runs_over_the_whole_input_not_its_head(tmp_path, monkeypatch):
    """What the probe encodes (`spread_texts`): runs of consecutive rows evenly spread over the
    input, across a text file and a Parquet file's row groups, null and empty rows left out;
    a larger text file's runs are read at byte offsets, from whole lines; an input of at most
    twice the rows asked: its first rows."""
    from sentray.corpus import reading
    from sentray.corpus.reading import first_texts, spread_texts

    root = tmp_path / "corpus"
    root.mkdir()
    # the head unlike the rest: 400 short lines, then 400 long ones
    (root / "a.txt").write_text("".join(f"short {i}\n" for i in range(400))
                                + "".join(f"a long line {i} " * 5 + "\n" for i in range(400)))
    write_parquet(root / "b.parquet", pa.table({"text": [
        None if i % 10 == 0 else f"parquet {i}" for i in range(800)]}), row_group_size=100)
    config = CorpusConfig(input=str(root))
    sources = discover_sources(config)
    texts = spread_texts(sources, config, 64)
    assert 50 <= len(texts) <= 64 and all(texts)  # 8 runs of 8, the Parquet's nulls left out
    assert len(set(texts)) == len(texts)
    short = [t for t in texts if t.startswith("short")]
    long = [t for t in texts if t.startswith("a long line")]
    parquet = sorted(int(t.split()[1]) for t in texts if t.startswith("parquet"))
    assert len(short) == len(long) == 16  # the text file's two quarter-runs each
    assert parquet[0] >= 50 and parquet[-1] >= 600  # from several of its row groups, not its head
    assert first_texts(sources, config, 64)[-1] == "short 63"  # what the head alone would be
    # a text file past WHOLE_TEXT_BYTES: runs from byte offsets, each a whole line
    monkeypatch.setattr(reading, "WHOLE_TEXT_BYTES", 1024)
    lines = (root / "a.txt").read_text().splitlines()
    again = spread_texts(sources[:1], config, 40)
    assert again and all(text in lines for text in again)
    assert any(t.startswith("short") for t in again) and any(t.startswith("a long") for t in again)
    # a small input: its first rows
    assert spread_texts(sources[:1], config, 1000) == first_texts(sources[:1], config, 1000)

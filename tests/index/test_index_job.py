"""The index job and the search on tiny embedding outputs: every row with a vector once, texts
joined back, incremental reruns that add only the new rows (and write nothing when there are
none), a killed run rolled back and redone exactly, a changed embedding refused, bad input
named, and a query that finds the row of its own text."""

from __future__ import annotations

import json
import shutil
import sys
import types
from pathlib import Path

import lancedb
import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import load_job

from sentray.index.index_state import STATE_FILE, IndexState
from sentray.index.search import VectorIndex, search

# -- tiny embedding outputs: the tiny random encoder, a few hundred Brown rows in two files (an
# empty line among them: a row without a vector), embedded once per session in this process


def embed(tiny_model_dir: Path, corpus: Path, output: Path, *extra: str) -> dict:
    """The embedding job in this process (no Ray, even when the session's cluster is up)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("RAY_ADDRESS", raising=False)
        patch.setitem(sys.modules, "ray", types.SimpleNamespace(is_initialized=lambda: False))
        return load_job("embed").main(["--input", str(corpus), "--output", str(output),
                                       "--model", str(tiny_model_dir), "--pooling", "mean",
                                       "--rows-per-batch", "64", *extra])


@pytest.fixture(scope="session")
def corpus_lines(brown_corpus) -> list[str]:
    return brown_corpus.read_text(encoding="utf-8").splitlines()[:260]


@pytest.fixture(scope="session")
def embedded(tmp_path_factory, tiny_model_dir, corpus_lines) -> Path:
    """A folder with `in/` (a.txt: 150 rows, an empty line among them; b.txt: 110 rows) and
    `out/`, the embedding of in/a.txt alone then, rerun, of in/ (b.txt added)."""
    root = tmp_path_factory.mktemp("embedded")
    (root / "in").mkdir()
    a = corpus_lines[:149] + [""]
    (root / "in" / "a.txt").write_text("\n".join(a[:40] + [""] + a[40:149]) + "\n")
    embed(tiny_model_dir, root / "in", root / "out-a")
    (root / "in" / "b.txt").write_text("\n".join(corpus_lines[150:260]) + "\n")
    shutil.copytree(root / "out-a", root / "out")
    embed(tiny_model_dir, root / "in", root / "out")
    return root


@pytest.fixture
def copy_of(embedded, tmp_path):
    """copy_of("out") -> a fresh copy of that output of `embedded` (its input stays where it
    is: an input file's key is made from its path)."""

    def copy(name: str) -> Path:
        return Path(shutil.copytree(embedded / name, tmp_path / name))

    return copy


# -- the tests


def read_table(uri):
    return lancedb.connect(str(uri.parent)).open_table(uri.stem)


def output_rows(output) -> dict[str, np.ndarray | None]:
    """id -> the vector the embedding job stored (None: no vector)."""
    rows = {}
    for part in sorted(output.glob("*/part-*.parquet")):
        table = pq.read_table(part)
        for i, v in zip(table.column("id").to_pylist(), table.column("embedding").to_pylist(),
                        strict=True):
            rows[i] = None if v is None else np.asarray(v, dtype=np.float32)
    return rows


def assert_table_is_output(uri, output) -> None:
    """Every row of `output` with a vector is in the table once, with that vector."""
    table = read_table(uri).to_arrow()
    ids = table.column("id").to_pylist()
    assert len(ids) == len(set(ids))
    expected = {i: v for i, v in output_rows(output).items() if v is not None}
    assert set(ids) == set(expected)
    for i, v in zip(ids, table.column("vector").to_pylist(), strict=True):
        # exact by construction: the table holds a copy of the stored float32 values, no kernel
        # computes them again
        np.testing.assert_array_equal(np.asarray(v, dtype=np.float32), expected[i])


def test_index_then_search_from_the_cli_and_python(embedded, copy_of, capsys):
    output = copy_of("out")
    index = load_job("index")
    summary = index.main([str(output), "--text-from", str(embedded / "in"),
                          "--min-index-rows", "256"])
    uri = output / "_index.lance"
    assert summary["rows_added"] == 259 and summary["rows_without_vector"] == 1
    assert summary["index"] == "IVF_HNSW_SQ"
    assert_table_is_output(uri, output)
    table = read_table(uri)
    stored = json.loads(table.schema.metadata[b"sentray.bulk_embedding"])
    assert stored["settings"] == json.loads((output / "_settings.json").read_text())["settings"]
    text = table.to_arrow().to_pylist()[7]
    capsys.readouterr()
    load_job("search").main([str(output), "--query", text["text"], "--query", "another one",
                             "-k", "3", "--json", "--refine-factor", "50"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()
             if line.startswith("{")]
    assert [line["query"] for line in lines] == [text["text"], "another one"]
    assert lines[0]["hits"][0]["id"] == text["id"]
    assert lines[0]["hits"][0]["score"] == pytest.approx(1.0, abs=1e-4)
    assert lines[0]["hits"][0]["text"] == text["text"] and len(lines[1]["hits"]) == 3
    # the Python API: the same encoder, the same hits
    hits = search(str(uri), [text["text"]], k=3, refine_factor=50)
    assert [h["id"] for h in hits[0]] == [h["id"] for h in lines[0]["hits"]]


def test_incremental_rerun_adds_only_new_rows_and_then_writes_nothing(embedded, copy_of,
                                                                      tmp_path):
    output = copy_of("out-a")  # the output before b.txt was added
    uri = tmp_path / "t.lance"
    index = load_job("index")
    first = index.main([str(output), "--index-uri", str(uri)])
    assert first["rows_added"] == 149
    # the embedding job adds b.txt to the same output
    b_key = next(p.name for p in (embedded / "out").iterdir() if p.name.startswith("b.txt"))
    shutil.copytree(embedded / "out" / b_key, output / b_key)
    second = index.main([str(output), "--index-uri", str(uri)])
    assert second["rows_added"] == 110 and second["rows"] == 259
    assert_table_is_output(uri, output)
    version = read_table(uri).version
    record = (uri / STATE_FILE).read_bytes()
    third = index.main([str(output), "--index-uri", str(uri)])
    assert third["rows_added"] == 0 and third["index_action"] is None
    assert read_table(uri).version == version and (uri / STATE_FILE).read_bytes() == record


@pytest.mark.parametrize("killed_at", [0, 1, 2])
def test_a_killed_run_is_rolled_back_and_redone_exactly(copy_of, tmp_path, monkeypatch,
                                                        killed_at):
    """Killed after a commit reached the table but before its record did (0: the empty
    table's creation, 1: the first rows, 2: later rows): the rerun rolls the table back to
    the last recorded version (or, with none, starts again) and adds the rest; no id twice,
    the vectors the output's."""
    output = copy_of("out")
    uri = tmp_path / "t.lance"
    args = [str(output), "--index-uri", str(uri), "--rows-per-commit", "100"]
    real_write = IndexState.write
    records = []

    def killed(self, location, version):
        records.append(version)
        if len(records) == killed_at + 1:
            raise KeyboardInterrupt("killed")
        real_write(self, location, version)

    monkeypatch.setattr(IndexState, "write", killed)
    with pytest.raises(KeyboardInterrupt):
        load_job("index").main(args)
    monkeypatch.setattr(IndexState, "write", real_write)
    assert read_table(uri).version == killed_at + 1  # the unrecorded commit is in the table
    again = load_job("index").main(args)
    assert again["rows"] == 259
    assert_table_is_output(uri, output)


def test_a_changed_embedding_is_refused_naming_the_fix(copy_of, tmp_path):
    output = copy_of("out")
    uri = tmp_path / "t.lance"
    load_job("index").main([str(output), "--index-uri", str(uri)])
    settings = json.loads((output / "_settings.json").read_text())
    settings["settings"]["truncate_dim"] = 16
    (output / "_settings.json").write_text(json.dumps(settings))
    with pytest.raises(SystemExit, match=r"another embedding(.|\n)*truncate_dim(.|\n)*"
                                         r"--overwrite"):
        load_job("index").main([str(output), "--index-uri", str(uri)])


def test_bad_input_is_named(embedded, copy_of, tmp_path, exit_message):
    index, search_job = load_job("index"), load_job("search")
    with pytest.raises(SystemExit) as info:
        index.main([str(embedded / "in")])
    assert "_settings.json: not the output of jobs/embed.py" in exit_message(info)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "_settings.json").write_text((embedded / "out" / "_settings.json").read_text())
    with pytest.raises(SystemExit) as info:
        index.main([str(empty)])
    assert "holds no part files" in exit_message(info)
    with pytest.raises(SystemExit) as info:
        index.main([str(embedded / "out"), "--index-uri", str(tmp_path / "t")])
    assert "must end with .lance" in exit_message(info)
    with pytest.raises(SystemExit) as info:
        search_job.main([str(embedded / "out"), "--query", ""])
    assert "--query number 1 is empty" in exit_message(info)
    with pytest.raises(SystemExit) as info:
        search_job.main([str(tmp_path), "--query", "a dog"])
    assert "no index at" in exit_message(info) and "sentray index" in exit_message(info)
    with pytest.raises(SystemExit) as info:
        search_job.main([str(embedded / "out")])
    assert "no query given" in exit_message(info)


def test_int8_codes_are_refused_not_searched_as_floats(copy_of):
    from sentray.bulk_embedding.output import EmbeddingOutput
    from sentray.index.embedding_record import describe_output

    output = copy_of("out")
    settings = json.loads((output / "_settings.json").read_text())
    settings["settings"]["output_dtype"] = "int8"
    (output / "_settings.json").write_text(json.dumps(settings))
    with pytest.raises(ValueError, match="int8 codes.*--output-dtype float32, float16 or "
                                         "binary"):
        describe_output(EmbeddingOutput.at(str(output)))


def test_a_binary_output_is_searched_by_hamming_then_rescored(embedded, tiny_model_dir,
                                                              tmp_path):
    """Packed bits are compared by hamming distance (exact), never as floats; rescoring ranks
    the candidates by the float query against their bits as +-1 (its own row's bits are the
    sign of its float vector: the best +-1 vector there is)."""
    output = tmp_path / "bits"
    embed(tiny_model_dir, embedded / "in" / "a.txt", output, "--output-dtype", "binary")
    summary = load_job("index").main([str(output), "--text-from", str(embedded / "in" / "a.txt")])
    assert summary["index"] == "none (exact search)" and summary["rows"] == 149
    table = read_table(output / "_index.lance")
    assert str(table.schema.field("vector").type) == "fixed_size_list<item: uint8>[4]"
    row = table.to_arrow().to_pylist()[11]
    index = VectorIndex(str(output))
    [plain] = index.search([row["text"]], k=3, refine_factor=0)
    assert plain[0]["score"] == 1.0 and row["id"] in {h["id"] for h in plain if h["score"] == 1}
    [rescored] = index.search([row["text"]], k=3, refine_factor=10)
    assert rescored[0]["id"] == row["id"] or rescored[0]["score"] == rescored[1]["score"]
    assert rescored[0]["score"] < 1.0  # a cosine of floats against +-1, not a bit count


def test_the_python_api_opens_once_and_answers_many(copy_of):
    output = copy_of("out")
    load_job("index").main([str(output)])
    index = VectorIndex(str(output))
    texts = read_table(output / "_index.lance").to_arrow().column("id").to_pylist()[:3]
    assert len(texts) == 3
    hits = index.search(["one query", "and another"], k=4)
    assert [len(h) for h in hits] == [4, 4]
    assert all(hits[0][i]["score"] >= hits[0][i + 1]["score"] for i in range(3))


def test_s3_output_index_and_search(embedded, moto_s3):
    """The output on S3 (a moto server on loopback), the table beside it, through the same
    storage options as the embedding job (--s3-endpoint and the environment's keys)."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")
    s3.create_bucket(Bucket="index-test")
    for path in (embedded / "out").rglob("*"):
        if path.is_file():
            key = f"emb/{path.relative_to(embedded / 'out')}"
            s3.put_object(Bucket="index-test", Key=key, Body=path.read_bytes())
    args = ["s3://index-test/emb", "--s3-endpoint", moto_s3]
    summary = load_job("index").main(args)
    assert summary["table"] == "s3://index-test/emb/_index.lance"
    assert summary["rows_added"] == 259
    assert load_job("index").main(args)["rows_added"] == 0
    text = embedded.joinpath("in", "b.txt").read_text().splitlines()[5]
    [hits] = search("s3://index-test/emb", [text], k=2, s3_endpoint=moto_s3)
    assert hits[0]["id"] == "b.txt:5"


@pytest.mark.ray
def test_the_ray_data_path_writes_the_same_table(ray_cluster, embedded, copy_of, tmp_path):
    """--write ray: each part read and written as Lance fragments by a Ray Data task, one
    commit a group; the same rows as the local path, texts joined on the workers."""
    output = copy_of("out")
    uri = tmp_path / "t.lance"
    summary = load_job("index").main([str(output), "--index-uri", str(uri), "--write", "ray",
                                      "--rows-per-commit", "100", "--text-from",
                                      str(embedded / "in")])
    assert summary["rows_added"] == 259
    assert_table_is_output(uri, output)
    assert read_table(uri).to_arrow().column("text").null_count == 0


@pytest.mark.long
@pytest.mark.slow
def test_the_bundled_sample_end_to_end_from_the_cli(tmp_path):
    """embed -> index -> search on the bundled sample with the packaged model, as the docs
    page runs it, each a command of its own."""
    import subprocess

    from sentray.corpus.sources import sample_corpus

    env = {**__import__("os").environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = tmp_path / "emb"

    def run(*words: str) -> str:
        done = subprocess.run([sys.executable, *words], capture_output=True, text=True, env=env,
                              cwd=Path(__file__).resolve().parents[2], check=True)
        return done.stdout

    run("jobs/embed.py", "--output", str(out))
    summary = json.loads(run("jobs/index.py", str(out), "--text-from", sample_corpus())
                         .splitlines()[-1])
    assert summary["rows"] == 1000 - summary["rows_without_vector"]
    line = Path(sample_corpus()).read_text(encoding="utf-8").splitlines()[123]
    found = json.loads(run("jobs/search.py", str(out), "--query", line, "--json").splitlines()[-1])
    assert found["hits"][0]["text"] == line

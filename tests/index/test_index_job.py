"""The index job and the search on tiny embedding outputs: every row with a vector once, texts
joined back, incremental reruns that add only the new rows (and write nothing when there are
none), a killed run rolled back and redone exactly, a changed embedding refused, bad input
named, and a query that finds the row of its own text."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import time
import types
from pathlib import Path

import lancedb
import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import load_job

from sentray.index.index_state import STATE_FILE, IndexState
from sentray.index.search import VectorIndex, search
from sentray.kit import storage

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
    # the one key that says what the vectors are, in the table as in every part file
    stored = json.loads(table.schema.metadata[b"sentray.vectors"])
    assert stored.pop("embeddings") == str(output)
    assert stored.pop("code_book") is None  # float32 rows: no code book
    assert stored == json.loads((output / "_settings.json").read_text())["settings"]
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


def claim_record(**fields) -> str:
    """A claim as another index run leaves it (host, pid, heartbeat as given)."""
    return json.dumps({"run": "other-run", "host": socket.gethostname(), "pid": os.getpid(),
                       "started": time.time() - 5, "heartbeat": time.time(),
                       "digest": "other-run", **fields})


def write_claim(table: Path, **fields) -> Path:
    """`claim_record(**fields)` where an index run on `table` keeps its claim."""
    path = Path(f"{table}.claims") / "_runs" / "other-run.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(claim_record(**fields))
    return path


def test_a_second_index_run_on_a_table_is_refused_naming_the_first(copy_of, tmp_path,
                                                                   monkeypatch):
    """While one run appends, a second run on the same table (here started from inside the
    first: the same process, alive) is refused before it writes anything; the first ends
    with the table whole and its claim gone."""
    from sentray.index import table_writing

    output = copy_of("out")
    uri = tmp_path / "t.lance"
    args = [str(output), "--index-uri", str(uri), "--rows-per-commit", "100"]
    refusals = []
    real_append = table_writing.append_local

    def append_and_try_a_second_run(*a, **kw):
        with pytest.raises(SystemExit) as info:
            load_job("index").main(args)
        refusals.append(str(info.value.code))
        return real_append(*a, **kw)

    monkeypatch.setattr(table_writing, "append_local", append_and_try_a_second_run)
    assert load_job("index").main(args)["rows"] == 259
    assert len(refusals) == 2  # one a commit (a group a part file here)
    assert f"{uri} is being indexed by run " in refusals[0]
    assert f"pid {os.getpid()}" in refusals[0] and "one index run at a time" in refusals[0]
    assert_table_is_output(uri, output)
    assert not list(Path(f"{uri}.claims").glob("_runs/*.json"))


@pytest.mark.parametrize("stale", ["killed", "silent_host"])
def test_a_stale_claim_is_taken_over_and_a_live_one_refused(copy_of, tmp_path, stale):
    """A claim whose process is gone (this host) or whose heartbeat stopped (another host)
    is taken over; the same claim from a living process, or a recent heartbeat, is refused."""
    import subprocess

    output = copy_of("out")
    uri = tmp_path / "t.lance"
    args = [str(output), "--index-uri", str(uri)]
    if stale == "killed":
        sleeper = subprocess.Popen(["sleep", "60"])
        claim = write_claim(uri, pid=sleeper.pid)
    else:
        claim = write_claim(uri, host="another-host", pid=1)
    with pytest.raises(SystemExit, match="is being indexed by run other-run"):
        load_job("index").main(args)
    assert not uri.exists()  # refused before writing anything
    if stale == "killed":
        sleeper.kill()
        sleeper.wait()
    else:
        write_claim(uri, host="another-host", pid=1, heartbeat=time.time() - 3600)
    assert load_job("index").main(args)["rows"] == 259
    assert not claim.exists()
    assert_table_is_output(uri, output)


def test_a_run_whose_table_was_taken_over_stops_without_recording(copy_of, tmp_path,
                                                                  monkeypatch):
    """A run stopped long enough for another to take its claim over (its claim file gone)
    commits and records nothing more; the next run finds the table exactly as recorded."""
    from sentray.index import table_writing

    output = copy_of("out")
    uri = tmp_path / "t.lance"
    args = [str(output), "--index-uri", str(uri), "--rows-per-commit", "100"]
    real_append = table_writing.append_local

    def append_then_lose_the_claim(*a, **kw):
        for path in Path(f"{uri}.claims").glob("_runs/*.json"):
            path.unlink()
        return real_append(*a, **kw)

    monkeypatch.setattr(table_writing, "append_local", append_then_lose_the_claim)
    with pytest.raises(SystemExit, match="took .* over while this run was stopped"):
        load_job("index").main(args)
    recorded = IndexState.read(storage.locate(str(uri)))
    assert recorded.rows == 0  # the first commit was made, never recorded
    monkeypatch.setattr(table_writing, "append_local", real_append)
    assert load_job("index").main(args)["rows"] == 259
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


def test_an_int8_output_is_searched_through_its_own_code_book(embedded, tiny_model_dir,
                                                             tmp_path):
    """int8 codes go into the table as the floats they stand for (the output's code book, each
    code its bin's middle), searched by cosine with the query as a float (never quantized)."""
    from sentray.bulk_embedding.vectors import CodeBook, scalar_dequantize

    output = tmp_path / "codes"
    embed(tiny_model_dir, embedded / "in" / "a.txt", output, "--output-dtype", "int8")
    summary = load_job("index").main([str(output), "--text-from", str(embedded / "in" / "a.txt")])
    assert summary["rows"] == 149
    table = read_table(output / "_index.lance")
    assert str(table.schema.field("vector").type) == "fixed_size_list<item: float>[32]"
    ranges = CodeBook.read(output / "_quantization.json")
    codes = output_rows(output)  # id -> the stored int8 codes, as float32
    for row in table.to_arrow().to_pylist()[:20]:
        expected = scalar_dequantize(codes[row["id"]].astype(np.int8)[None], ranges)[0]
        # the same float32 operations in the same order: equal to the bit on any CPU
        np.testing.assert_array_equal(np.asarray(row["vector"], np.float32), expected)
    index = VectorIndex(str(output))
    assert index.encoder.actor is not None and not index.binary
    row = table.to_arrow().to_pylist()[33]
    [hits] = index.search([row["text"]], k=3)
    assert hits[0]["id"] == row["id"] and hits[0]["score"] > 0.99


def test_dequantized_codes_are_within_half_a_step_of_the_floats():
    from sentray.bulk_embedding.vectors import CodeBook, scalar_dequantize, scalar_quantize

    rng = np.random.default_rng(0)
    floats = rng.standard_normal((200, 16)).astype(np.float32)
    floats[:, 3] = 0.25  # a dimension of one value: its range is a point
    ranges = CodeBook.of(floats)
    step = (ranges.maximum - ranges.minimum) / 255
    for dtype in ("int8", "uint8"):
        back = scalar_dequantize(scalar_quantize(floats, ranges, dtype), ranges)
        inside = floats < ranges.maximum  # the maximum itself is clipped into the top bin
        error = np.abs(back - floats)
        # half a step, and a float32 rounding of the values added to get there
        assert np.all(error[inside] <= np.broadcast_to(step / 2 + 1e-6, error.shape)[inside])
        assert np.all(back[:, 3] == np.float32(0.25))


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
    # a batch searched in one call finds what one call a query finds
    encoded = index.encode(["one query", "and another", "a third"])
    together = index.nearest_many(encoded, 5)
    assert [[h["id"] for h in hits] for hits in together] == [
        [h["id"] for h in index.nearest(query, 5)] for query in encoded]
    assert [h["id"] for h in together[1][:4]] == [h["id"] for h in hits[1]]


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


def test_one_index_run_at_a_time_on_s3(embedded, moto_s3):
    """The claim works through S3 as on a disk: a live run's claim there refuses a second
    run, naming it; a killed run's is taken over."""
    import subprocess

    import boto3

    s3 = boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")
    s3.create_bucket(Bucket="claims")
    for path in (embedded / "out").rglob("*"):
        if path.is_file():
            s3.put_object(Bucket="claims", Key=f"emb/{path.relative_to(embedded / 'out')}",
                          Body=path.read_bytes())
    sleeper = subprocess.Popen(["sleep", "60"])
    s3.put_object(Bucket="claims", Key="emb/t.lance.claims/_runs/other-run.json",
                  Body=claim_record(pid=sleeper.pid).encode())
    args = ["s3://claims/emb", "--index-uri", "s3://claims/emb/t.lance", "--s3-endpoint",
            moto_s3]
    with pytest.raises(SystemExit, match=f"is being indexed by run other-run .*pid "
                                         f"{sleeper.pid}"):
        load_job("index").main(args)
    sleeper.kill()
    sleeper.wait()
    assert load_job("index").main(args)["rows_added"] == 259
    listed = s3.list_objects_v2(Bucket="claims", Prefix="emb/t.lance.claims/")
    assert not [item["Key"] for item in listed.get("Contents", [])
                if item["Key"].endswith(".json")]  # no claim left (a folder marker may be)


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

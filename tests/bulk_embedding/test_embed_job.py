"""End-to-end tests of the bulk embedding job (jobs/embed.py) on a real local Ray cluster, with
the packaged model: awkward input lines, Parquet input, resuming, S3 (a moto server on
loopback), and a check that the local cluster listens on loopback only."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import ipaddress
import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import encoder_of

from sentray.corpus.sources import CorpusConfig, discover_sources

ROOT = Path(__file__).resolve().parents[2]
DIMENSION = 384  # all-MiniLM-L6-v2
EMBEDDING_TYPE = pa.list_(pa.float32(), DIMENSION)
OUTPUT_COLUMNS = ["id", "embedding", "status", "source", "row"]
# Small batches, so that a few hundred rows make several batches, spread over both actors.
RAY_ARGS = ["--actors", "2", "--rows-per-batch", "64"]


# -- helpers ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def embed_job():
    """jobs/embed.py as a module (jobs/ is not a package)."""
    spec = importlib.util.spec_from_file_location("sentray_jobs_embed", ROOT / "jobs" / "embed.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reference_encoder():
    from sentray.encode.config import EncoderConfig

    return encoder_of(EncoderConfig())


def source_keys(input_path: str | Path, **corpus) -> dict[str, str]:
    """name -> output folder name of every input file."""
    return {s.name: s.key for s in discover_sources(CorpusConfig(input=str(input_path), **corpus))}


def part_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("part-*.parquet"))


def read_source_output(folder: Path) -> pa.Table:
    tables = [pq.read_table(p) for p in part_files(folder)]
    assert tables, f"no parts in {folder}"
    return pa.concat_tables(tables).sort_by("row")


def read_all_output(output: Path) -> pa.Table:
    folders = sorted(p for p in output.iterdir() if p.is_dir() and not p.name.startswith("_"))
    return pa.concat_tables([read_source_output(f) for f in folders])


def assert_parts_tile(folder: Path, rows: int) -> None:
    """The part names tile [0, rows) and each part holds exactly the rows its name says."""
    position = 0
    for path in part_files(folder):
        _, first, end, _, total = path.stem.split("-")
        first, end, total = int(first), int(end), int(total)
        assert (first, total) == (position, rows), path.name
        table = pq.read_table(path)
        assert table.column("row").to_pylist() == list(range(first, end)), path.name
        position = end
    assert position == rows


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def assert_matches_reference(encoder, text: str, embedding: list[float]) -> None:
    """The job's vector is the encoder's, L2-normalized as all-MiniLM-L6-v2's own pipeline is
    (its sentence-transformers modules end with Normalize; the job follows the model)."""
    expected = encoder.encode([text])[0]
    expected = expected / np.linalg.norm(expected)
    got = np.asarray(embedding, dtype=np.float32)
    assert got.shape == (DIMENSION,)
    assert cosine(got, expected) > 0.9999, text[:60]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5, err_msg=text[:60])


def assert_embeddings_follow_status(table: pa.Table) -> None:
    assert table.schema.field("embedding").type == EMBEDDING_TYPE
    assert table.schema.field("status").type == pa.string()
    assert table.schema.field("row").type == pa.int64()
    embedded = [s in ("ok", "truncated") for s in table.column("status").to_pylist()]
    is_null = table.column("embedding").is_null().to_pylist()
    assert is_null == [not e for e in embedded]
    vectors = [v for v in table.column("embedding").to_pylist() if v is not None]
    assert all(len(v) == DIMENSION and np.all(np.isfinite(v)) and np.linalg.norm(v) > 0.1
               for v in vectors)


# -- awkward lines ----------------------------------------------------------------------------

LONG_LINE = ("word " * 2000)[:10_000]
# (raw bytes of the line without its newline, expected status, text to embed for the reference)
SPECIAL_LINES: list[tuple[bytes, str, str | None]] = [
    (b"A plain English sentence about a cat.", "ok", "A plain English sentence about a cat."),
    (b"", "empty", None),
    (b"   \t  ", "empty", None),
    (LONG_LINE.encode(), "truncated", LONG_LINE),
    ("Emoji time \U0001F600\U0001F389\U0001F44D\U0001F3FD!".encode(), "ok",
     "Emoji time \U0001F600\U0001F389\U0001F44D\U0001F3FD!"),
    ("\U0001F600\U0001F389".encode(), "ok", "\U0001F600\U0001F389"),
    ("\u6211\u7231\u81ea\u7136\u8bed\u8a00\u5904\u7406\u3002".encode(), "ok",
     "\u6211\u7231\u81ea\u7136\u8bed\u8a00\u5904\u7406\u3002"),
    ("\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645".encode(), "ok",
     "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645"),
    ("\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd".encode(), "ok",
     "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd"),
    (b"\x00\x01\x02", "empty", None),
    (b"\x0b\x0c", "empty", None),
    ("\u200b\u200b".encode(), "empty", None),  # zero-width spaces: nothing to embed
    (b'<p>Hello <b>world</b> &amp; <a href="https://example.com">a link</a></p>', "ok",
     '<p>Hello <b>world</b> &amp; <a href="https://example.com">a link</a></p>'),
    (b"caf\xe9 au lait (latin-1)", "invalid_utf8", None),
    (b"\xff\xfe\xfd", "invalid_utf8", None),
    (b"vertical\x0btab and form\x0cfeed stay on one line", "ok",
     "vertical\x0btab and form\x0cfeed stay on one line"),
    ("line\u2028separator and next\u0085line too".encode(), "ok",
     "line\u2028separator and next\u0085line too"),
    (b"windows line ending\r", "ok", "windows line ending"),  # "\r\n" in the file
]


@pytest.mark.long
@pytest.mark.ray
@pytest.mark.slow
def test_awkward_lines(ray_cluster, embed_job, reference_encoder, tmp_path):
    lines: list[tuple[bytes, str, str | None]] = []
    for i, special in enumerate(SPECIAL_LINES):  # spread among ordinary lines: several batches
        lines.append(special)
        for j in range(12):
            text = f"Ordinary sentence {i}-{j} about the weather in town."
            lines.append((text.encode(), "ok", text))
    in_dir = tmp_path / "in"
    in_dir.mkdir()
    (in_dir / "bad.txt").write_bytes(b"\n".join(raw for raw, _, _ in lines) + b"\n")
    output = tmp_path / "out"

    summary = embed_job.main(["--input", str(in_dir), "--output", str(output), *RAY_ARGS,
                              "--rows-per-file", "0"])  # a part per block, no compaction

    n = len(lines)
    assert n > 3 * 64
    key = source_keys(in_dir)["bad.txt"]
    folder = output / key
    assert len(part_files(folder)) >= 2  # several batches made several parts
    assert_parts_tile(folder, n)
    table = read_all_output(output)
    assert table.column_names == OUTPUT_COLUMNS
    assert table.num_rows == n
    ids = table.column("id").to_pylist()
    assert sorted(ids) == sorted(f"bad.txt:{i}" for i in range(n))
    assert ids == [f"bad.txt:{i}" for i in range(n)]  # sorted by row
    assert table.column("row").to_pylist() == list(range(n))
    assert set(table.column("source").to_pylist()) == {key}
    statuses = table.column("status").to_pylist()
    assert statuses == [status for _, status, _ in lines]
    assert_embeddings_follow_status(table)

    embeddings = table.column("embedding").to_pylist()
    for row, (_, status, text) in enumerate(lines):
        if text is not None and (status != "ok" or not text.startswith("Ordinary")):
            assert_matches_reference(reference_encoder, text, embeddings[row])
    ordinary = [(row, text) for row, (_, _, text) in enumerate(lines)
                if text and text.startswith("Ordinary")]
    expected = reference_encoder.encode([text for _, text in ordinary])
    for (row, text), vector in zip(ordinary, expected, strict=True):
        assert cosine(np.asarray(embeddings[row]), vector) > 0.9999, text
    # what sentence-transformers' own encode gives (unit vectors): dot products agree too.
    # Batches differ (ST pads the whole list by characters): float rounding, 1e-5.
    from sentence_transformers import SentenceTransformer

    from sentray.encode.model_lookup import resolve_model

    peer = SentenceTransformer(resolve_model("all-MiniLM-L6-v2").path, device="cpu")
    np.testing.assert_allclose(np.stack([embeddings[row] for row, _ in ordinary]),
                               peer.encode([text for _, text in ordinary]), atol=1e-5)

    counts = {s: statuses.count(s) for s in ("ok", "truncated", "chunked", "null", "empty",
                                             "invalid_utf8")}
    assert counts["truncated"] == 1 and counts["invalid_utf8"] == 2 and counts["empty"] == 5
    assert summary["status"] == counts
    assert summary["rows_in"] == summary["rows_out"] == n
    assert summary["incomplete_sources"] == []
    assert summary["processed_this_run"] == [str(in_dir / "bad.txt")]
    written = json.loads((output / "_summary.json").read_text())
    assert written["status"] == counts and written["rows_out"] == n


# -- Parquet ----------------------------------------------------------------------------------


def parquet_bytes(table: pa.Table, **kwargs) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **kwargs)
    return sink.getvalue()


@pytest.mark.ray
@pytest.mark.slow
def test_parquet_ids_nulls_custom_column_and_empty_file(ray_cluster, embed_job,
                                                        reference_encoder, tmp_path):
    in_dir = tmp_path / "in"
    in_dir.mkdir()
    rows = 150
    sentences = [None if i % 10 == 3 else "" if i % 25 == 7 else f"Parquet sentence {i}."
                 for i in range(rows)]
    doc_ids = [1_000_000 + 7 * i for i in range(rows)]
    docs = pa.table({"doc_id": pa.array(doc_ids, pa.int64()),
                     "sentence": pa.array(sentences, pa.string()),
                     "other": pa.array(range(rows))})
    pq.write_table(docs, in_dir / "docs.parquet", row_group_size=40)
    pq.write_table(docs.schema.empty_table(), in_dir / "empty.parquet")
    raw = [b"binary ok", b"caf\xe9", None, "na\u00efve".encode()]
    pq.write_table(pa.table({"doc_id": pa.array([1, 2, 3, 4], pa.int64()),
                             "sentence": pa.array(raw, pa.binary())}), in_dir / "bin.parquet")
    output = tmp_path / "out"
    args = ["--input", str(in_dir), "--output", str(output), "--text-column", "sentence",
            "--id-column", "doc_id", *RAY_ARGS]

    summary = embed_job.main(args)

    keys = source_keys(in_dir, text_column="sentence", id_column="doc_id")
    assert sorted(keys) == ["bin.parquet", "docs.parquet", "empty.parquet"]
    assert summary["sources"] == 3
    assert summary["incomplete_sources"] == []
    assert summary["rows_in"] == summary["rows_out"] == rows + 4

    table = read_source_output(output / keys["docs.parquet"])
    assert_parts_tile(output / keys["docs.parquet"], rows)
    assert table.schema.field("id").type == pa.int64()
    assert table.column("id").to_pylist() == doc_ids
    expected_status = ["null" if s is None else "empty" if s == "" else "ok" for s in sentences]
    assert table.column("status").to_pylist() == expected_status
    assert_embeddings_follow_status(table)
    embeddings = table.column("embedding").to_pylist()
    for row in (0, 1, 149):
        assert_matches_reference(reference_encoder, sentences[row], embeddings[row])

    binary = read_source_output(output / keys["bin.parquet"])
    assert binary.column("id").to_pylist() == [1, 2, 3, 4]
    assert binary.column("status").to_pylist() == ["ok", "invalid_utf8", "null", "ok"]
    assert_embeddings_follow_status(binary)
    assert_matches_reference(reference_encoder, "na\u00efve",
                             binary.column("embedding")[3].as_py())

    # the 0-row file is done: one empty part with the output schema
    empty_folder = output / keys["empty.parquet"]
    assert [p.name for p in part_files(empty_folder)] == [
        "part-000000000000-000000000000-of-000000000000.parquet"]
    empty = pq.read_table(part_files(empty_folder)[0])
    assert empty.num_rows == 0
    assert empty.column_names == OUTPUT_COLUMNS
    assert empty.schema.field("id").type == pa.int64()
    assert empty.schema.field("embedding").type == EMBEDDING_TYPE

    counts = dict.fromkeys(("ok", "truncated", "chunked", "null", "empty", "invalid_utf8"), 0)
    for status in expected_status + ["ok", "invalid_utf8", "null", "ok"]:
        counts[status] += 1
    assert summary["status"] == counts

    # a rerun from the config the run wrote finds every file, the empty one included, complete
    written = output / "_config.yaml"
    typed, _ = embed_job.parse_config(args)  # as typed; the file adds what the plan decided
    assert embed_job.parse_config(["--config", str(written)])[0] == dataclasses.replace(
        typed, encoder=dataclasses.replace(typed.encoder, pooling="last_avg"),
        vector=dataclasses.replace(typed.vector, normalize=True))
    again = embed_job.main(["--config", str(written)])
    assert again["processed_this_run"] == []
    assert again["status"] == counts and again["incomplete_sources"] == []


@pytest.mark.ray
@pytest.mark.slow
def test_blocks_with_nothing_to_encode(ray_cluster, embed_job, brown_corpus, tmp_path):
    """Issue 33's two crashes, as a user met them, in one run (one actor, blocks of 2 rows): an
    8-row Parquet file whose second block holds only blanks, and 100 Brown lines followed by
    the same 100 lines, whose second half's blocks are all in the actor's cache."""
    rows = ["A normal sentence.", None, "", "   ", "x" * 10_000,
            "emoji \U0001F600 and \u4e2d\u6587 and \u05e2\u05d1\u05e8\u05d9\u05ea",
            "ctl\x00\x07chars", "Last one."]
    in_dir = tmp_path / "in"
    in_dir.mkdir()
    pq.write_table(pa.table({"id": list(range(8)), "text": rows}), in_dir / "a-odd.parquet")
    lines = brown_corpus.read_text().splitlines()[:100]
    pq.write_table(pa.table({"id": list(range(1000, 1200)), "text": lines + lines}),
                   in_dir / "b-twice.parquet")
    summary = embed_job.main(["--input", str(in_dir), "--output", str(tmp_path / "out"),
                              "--id-column", "id", "--actors", "1", "--rows-per-batch", "2"])
    assert summary["rows_in"] == summary["rows_out"] == 208
    keys = source_keys(in_dir, id_column="id")
    odd = read_source_output(tmp_path / "out" / keys["a-odd.parquet"])
    assert odd.column("id").to_pylist() == list(range(8))
    assert odd.column("status").to_pylist() == ["ok", "null", "empty", "empty", "truncated",
                                                "ok", "ok", "ok"]
    twice = read_source_output(tmp_path / "out" / keys["b-twice.parquet"])
    vectors = twice.column("embedding").to_pylist()
    assert all(vectors[i] == vectors[i + 100] for i in range(100))  # a repeat: its twin's
    assert summary["rows_not_encoded"] == 100 + len(lines) - len(set(lines))


@pytest.mark.long
@pytest.mark.ray
@pytest.mark.slow
def test_a_pool_that_grows_writes_every_row_once_with_the_fixed_pools_vectors(
        ray_cluster, embed_job, reference_encoder, brown_corpus, tmp_path):
    """--actors 1-2: Ray Data starts one actor and may add a second while blocks wait (the
    cluster has room); rows, their accounting and their vectors are those of any pool (each
    row equals the plain encoder's, as a fixed pool's rows do: test_awkward_lines), and the
    run's _config.yaml repeats it."""
    lines = brown_corpus.read_text().splitlines()[:300]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    args = ["--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "out"),
            "--actors", "1-2", "--rows-per-batch", "20"]
    summary = embed_job.main(args)
    assert summary["rows_in"] == summary["rows_out"] == 300
    assert summary["config"]["pool"]["actors"] == {"minimum": 1, "maximum": 2}
    table = read_all_output(tmp_path / "out")
    assert table.column("id").to_pylist() == [f"in.txt:{i}" for i in range(300)]
    expected = reference_encoder.encode(lines)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)  # the model's Normalize
    np.testing.assert_allclose(np.stack(table.column("embedding").to_pylist()), expected,
                               atol=1e-5)  # other batches: float rounding
    written = tmp_path / "out" / "_config.yaml"
    assert "actors: 1-2" in written.read_text()
    assert embed_job.parse_config(["--config", str(written)]) == embed_job.parse_config(args)


def test_missing_text_column_fails_before_writing(embed_job, tmp_path):
    in_dir = tmp_path / "in"
    in_dir.mkdir()
    pq.write_table(pa.table({"text": ["fine"]}), in_dir / "a.parquet")
    pq.write_table(pa.table({"body": ["x"], "title": ["y"]}), in_dir / "b.parquet")
    (in_dir / "c.txt").write_text("a line\n")
    output = tmp_path / "out"
    with pytest.raises(SystemExit) as info:
        embed_job.main(["--input", str(in_dir), "--output", str(output), *RAY_ARGS])
    message = str(info.value.code)
    assert str(in_dir / "b.parquet") in message
    assert "'text'" in message and "body" in message and "title" in message
    assert "--text-column" in message
    assert not output.exists()


@pytest.mark.parametrize("content", [os.urandom(2048), b""], ids=["random", "zero-bytes"])
def test_corrupt_parquet_fails_before_writing(embed_job, tmp_path, content):
    in_dir = tmp_path / "in"
    in_dir.mkdir()
    pq.write_table(pa.table({"text": ["fine"]}), in_dir / "a.parquet")
    (in_dir / "broken.parquet").write_bytes(content)
    output = tmp_path / "out"
    with pytest.raises(SystemExit) as info:
        embed_job.main(["--input", str(in_dir), "--output", str(output), *RAY_ARGS])
    message = str(info.value.code)
    assert str(in_dir / "broken.parquet") in message
    assert "not a readable Parquet file" in message
    assert not output.exists()


def test_bad_arguments_exit_cleanly(embed_job, tmp_path, exit_message):
    (tmp_path / "a.txt").write_text("x\n")
    with pytest.raises(SystemExit, match="--id-column"):
        embed_job.main(["--input", str(tmp_path / "a.txt"), "--output", str(tmp_path / "o"),
                        "--id-column", "id"])
    with pytest.raises(SystemExit, match="does not exist"):
        embed_job.main(["--input", str(tmp_path / "missing"), "--output", str(tmp_path / "o")])
    with pytest.raises(SystemExit) as info:  # the flag's own check (N or MIN-MAX)
        embed_job.main(["--input", str(tmp_path / "a.txt"), "--output", str(tmp_path / "o"),
                        "--actors", "0"])
    assert "error: --actors: actors must be N >= 1" in exit_message(info)
    with pytest.raises(SystemExit) as info:  # a value that is not a number
        embed_job.main(["--actors", "two"])
    assert "--actors" in exit_message(info)
    assert not (tmp_path / "o").exists()


# -- resume -----------------------------------------------------------------------------------


@pytest.mark.long
@pytest.mark.ray
@pytest.mark.slow
def test_resume_redoes_only_missing_and_broken_sources(ray_cluster, embed_job, tmp_path,
                                                       monkeypatch):
    in_dir = tmp_path / "in"
    in_dir.mkdir()
    sizes = {"a.txt": 200, "b.txt": 90, "c.txt": 20}
    for name, n in sizes.items():
        (in_dir / name).write_text("".join(f"Line {i} of file {name}.\n" for i in range(n)))
    # a 0-byte text file has 0 rows, like a 0-row Parquet file: done, not a failure
    (in_dir / "empty.txt").write_bytes(b"")
    (in_dir / "bom-only.txt").write_bytes(b"\xef\xbb\xbf")  # also 0 lines
    output = tmp_path / "out"
    # a part per block (no compaction): the resume inside a file is what is tested
    args = ["--input", str(in_dir), "--output", str(output), *RAY_ARGS, "--rows-per-file", "0"]
    keys = source_keys(in_dir)

    first = embed_job.main(args)
    assert sorted(first["processed_this_run"]) == sorted(
        str(in_dir / n) for n in [*sizes, "empty.txt", "bom-only.txt"])
    assert first["incomplete_sources"] == []
    for name, n in sizes.items():
        assert_parts_tile(output / keys[name], n)
    for name in ("empty.txt", "bom-only.txt"):
        assert [p.name for p in part_files(output / keys[name])] == [
            "part-000000000000-000000000000-of-000000000000.parquet"]
    a_parts = part_files(output / keys["a.txt"])
    assert len(a_parts) >= 3, [p.name for p in a_parts]

    # break a.txt (one part gone), remove c.txt's output; b.txt stays, with a stray temp file
    a_parts[1].unlink()
    for path in (output / keys["c.txt"]).iterdir():
        path.unlink()
    (output / keys["c.txt"]).rmdir()
    b_before = {p.name: p.stat().st_mtime_ns for p in part_files(output / keys["b.txt"])}
    (output / keys["b.txt"] / ".tmp-0123456789abcdef").write_bytes(b"half a part")

    second = embed_job.main(args)
    assert second["processed_this_run"] == [str(in_dir / "a.txt"), str(in_dir / "c.txt")]
    assert {p.name: p.stat().st_mtime_ns for p in part_files(output / keys["b.txt"])} == b_before
    for name, n in sizes.items():
        assert_parts_tile(output / keys[name], n)
    table = read_all_output(output)
    expected_ids = sorted(f"{name}:{i}" for name, n in sizes.items() for i in range(n))
    assert sorted(table.column("id").to_pylist()) == expected_ids
    assert set(table.column("status").to_pylist()) == {"ok"}
    assert second["rows_in"] == second["rows_out"] == sum(sizes.values())
    assert second["status"]["ok"] == sum(sizes.values())

    # nothing left to do: no read, no actors
    import ray.data

    from sentray.bulk_embedding.actor import EmbedBatch
    from sentray.encode.encoder import SentenceEncoder

    def must_not_run(*args, **kwargs):
        raise AssertionError("a rerun with nothing to do started Ray Data work")

    monkeypatch.setattr(ray.data, "read_datasource", must_not_run)
    monkeypatch.setattr(EmbedBatch, "__init__", must_not_run)
    monkeypatch.setattr(SentenceEncoder, "__init__", must_not_run)
    recorded = {name: (output / name).read_bytes() for name in ("_summary.json", "_config.yaml")}
    third = embed_job.main(args)
    assert third["processed_this_run"] == []
    assert third["rows_out"] == sum(sizes.values())
    # a rerun with nothing to do writes nothing: the runs that did the work keep their record
    assert {name: (output / name).read_bytes() for name in recorded} == recorded
    runs = json.loads(recorded["_summary.json"])["runs"]
    assert [run["processed_this_run"] for run in runs] == [
        first["processed_this_run"], second["processed_this_run"]]
    assert sorted(read_all_output(output).column("id").to_pylist()) == expected_ids


# -- S3 ---------------------------------------------------------------------------------------


def test_s3_filesystem_pickles_env_credentials(moto_s3):
    """What Ray does with the job's filesystem: pickle it to a worker process that does not
    have the driver's AWS environment."""
    import pickle
    import subprocess
    import sys

    import boto3

    from sentray.kit import storage

    boto3.client("s3", endpoint_url=moto_s3).create_bucket(Bucket="pickle-test")
    boto3.client("s3", endpoint_url=moto_s3).put_object(Bucket="pickle-test", Key="k.txt",
                                                        Body=b"hello")
    filesystem = storage.s3_filesystem(moto_s3)
    assert filesystem.get_file_info("pickle-test/k.txt").size == 5  # fine in this process
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    # os._exit: skip pyarrow's S3 teardown at exit, which may crash a process that never
    # called finalize_s3 (its exit status is not what this test is about)
    code = ("import os, pickle, sys\n"
            "fs = pickle.loads(sys.stdin.buffer.read())\n"
            "with fs.open_input_stream('pickle-test/k.txt') as f:\n"
            "    sys.stdout.write(f.read().decode())\n"
            "sys.stdout.flush()\n"
            "os._exit(0)\n")
    result = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(filesystem),
                            env=env, capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-500:]
    assert result.stdout == b"hello"


@pytest.mark.ray
@pytest.mark.slow
def test_s3_input_and_output(ray_cluster, embed_job, moto_s3):
    import boto3

    s3 = boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")
    bucket = "sentray-test"
    s3.create_bucket(Bucket=bucket)
    text_lines = [f"S3 text line {i}." for i in range(70)] + ["", "\x00"]
    s3.put_object(Bucket=bucket, Key="in/lines.txt",
                  Body=("\n".join(text_lines) + "\n").encode())
    s3.put_object(Bucket=bucket, Key="in/sub/table.parquet",
                  Body=parquet_bytes(pa.table({"text": [f"S3 parquet row {i}." for i in range(50)]
                                              + [None]}), row_group_size=20))
    s3.put_object(Bucket=bucket, Key="in/ignored.md", Body=b"not a corpus file")
    args = ["--input", f"s3://{bucket}/in/", "--output", f"s3://{bucket}/out/",
            "--s3-endpoint", moto_s3, *RAY_ARGS]

    summary = embed_job.main(args)

    assert summary["processed_this_run"] == [f"s3://{bucket}/in/lines.txt",
                                            f"s3://{bucket}/in/sub/table.parquet"]
    assert summary["incomplete_sources"] == []
    assert summary["rows_in"] == summary["rows_out"] == 72 + 51
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="out/")["Contents"])
    parts = [k for k in keys if k.rsplit("/", 1)[-1].startswith("part-")]
    assert "out/_summary.json" in keys
    tables = [pq.read_table(io.BytesIO(s3.get_object(Bucket=bucket, Key=k)["Body"].read()))
              for k in parts]
    table = pa.concat_tables(tables)
    ids = table.column("id").to_pylist()
    expected = [f"lines.txt:{i}" for i in range(72)] + [f"sub/table.parquet:{i}" for i in range(51)]
    assert sorted(ids) == sorted(expected)
    assert_embeddings_follow_status(table)
    status = dict(zip(ids, table.column("status").to_pylist(), strict=True))
    assert status["lines.txt:70"] == "empty" and status["lines.txt:71"] == "empty"
    assert status["sub/table.parquet:50"] == "null"
    assert status["lines.txt:0"] == "ok"
    written = json.loads(s3.get_object(Bucket=bucket, Key="out/_summary.json")["Body"].read())
    assert written["rows_out"] == 123

    # the same through pyarrow's S3 filesystem, as the job sees it
    from sentray.kit import storage

    location = storage.locate(f"s3://{bucket}/out/", moto_s3)
    key = source_keys(f"s3://{bucket}/in/", s3_endpoint=moto_s3)["sub/table.parquet"]
    dataset = pq.ParquetDataset(f"{location.path}/{key}", filesystem=location.filesystem)
    assert sorted(dataset.read(columns=["row"]).column("row").to_pylist()) == list(range(51))

    again = embed_job.main(args)
    assert again["processed_this_run"] == []
    assert again["rows_out"] == 123
    after = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="out/")["Contents"])
    assert after == keys


# -- loopback ---------------------------------------------------------------------------------


@pytest.mark.ray
@pytest.mark.slow
def test_a_job_without_an_address_starts_a_loopback_only_cluster(tiny_model_dir, tmp_path):
    """jobs/embed.py run as `make demo` runs it, with no Ray address: it starts its own cluster,
    and while the job runs every socket that cluster's processes listen on is loopback. Ray's
    fixed agent port 52365 is held meanwhile, as another Ray on the machine holds it: the job's
    agent must not retry it (3.5 s of start-up and a traceback in its log)."""
    import socket
    import subprocess
    import sys
    import time

    import psutil  # Ray vendors it (ray/thirdparty_files), importable once ray is imported

    corpus = tmp_path / "small.txt"
    corpus.write_text("".join(f"Sentence {i} of a small corpus.\n" for i in range(40)))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # none: start one
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 52365))
        holder.listen()
    except OSError:  # another Ray holds it already: the same situation
        pass
    job = subprocess.Popen([sys.executable, str(ROOT / "jobs" / "embed.py"), "--input",
                            str(corpus), "--output", str(tmp_path / "out"), "--model",
                            str(tiny_model_dir), "--pooling", "mean", "--actors", "1",
                            "--in-process-rows", "0"],  # Ray, however small the input
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen: dict[int, str] = {}
    listening: set[tuple[str, str, int]] = set()
    session_dirs: list[str] = []
    while job.poll() is None:
        try:
            descendants = psutil.Process(job.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            break
        for process in descendants:
            try:
                name = process.name()
                connections = process.net_connections(kind="inet")
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            seen[process.pid] = name
            if "raylet" in name and not session_dirs:
                with contextlib.suppress(psutil.Error):
                    session_dirs += [a.split("=", 1)[1] for a in process.cmdline()
                                     if a.startswith("--session_dir=")]
            listening |= {(name, c.laddr.ip, c.laddr.port) for c in connections
                          if c.status == psutil.CONN_LISTEN}
        time.sleep(0.2)
    output = job.communicate()[0].decode(errors="replace")
    holder.close()
    assert job.returncode == 0, output[-3000:]
    summary = json.loads((tmp_path / "out" / "_summary.json").read_text())
    assert summary["rows_out"] == 40
    # the summary says where the seconds to the first row went (sentray.corpus.actor_pool)
    moments = summary["timings"]["since_launch"]
    assert None not in moments.values(), moments
    assert 0 < moments["ray_ready"] and 0 < moments["actor_process"], moments
    assert moments["actor_ready"] <= moments["first_row"] <= moments["first_part"], moments
    # `make demo` output fits on a screen: the job's own lines, not Ray Data's tables
    lines = output.strip().splitlines()
    assert len(lines) <= 16, output
    assert not any("logging_progress" in line or "streaming_executor" in line
                   for line in lines), output
    assert "40/40 rows" in output, output  # the closing progress line
    assert session_dirs, seen
    agent_log = Path(session_dirs[0]) / "logs" / "dashboard_agent.log"
    assert "failed to bind" not in agent_log.read_text().lower(), agent_log
    names = {n for n, _, _ in listening}
    assert any("gcs_server" in n for n in names) and any("raylet" in n for n in names), (
        seen, listening)
    exposed = sorted((n, f"{ip}:{port}") for n, ip, port in listening if not is_loopback(ip))
    assert exposed == [], exposed


def is_loopback(ip: str) -> bool:
    """127.0.0.1 or ::1, also written as an IPv4-mapped IPv6 address (::ffff:127.0.0.1), as a
    dual-stack socket bound to 127.0.0.1 shows."""
    address = ipaddress.ip_address(ip.split("%")[0])
    if address.version == 6 and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address) in ("127.0.0.1", "::1")


# -- the stored vector, reruns ----------------------------------------------------------------

GUITAR = "A man is playing a guitar."


def reading_example(output: Path) -> str:
    """The example of docs/embedding/reading-output.md, reading `output`."""
    text = (ROOT / "docs" / "embedding" / "reading-output.md").read_text()
    block = text.split("```python\n", 1)[1]
    return block.split("```", 1)[0].replace('output = "out/emb-int8"', f'output = "{output}"')


def run_reading_example(output: Path, capsys) -> list[str]:
    capsys.readouterr()
    exec(compile(reading_example(output), "docs/embedding/reading-output.md", "exec"), {})
    return [line.split()[0] for line in capsys.readouterr().out.splitlines()]


@pytest.mark.ray
def test_int8_chunked_output_a_refused_rerun_and_overwrite(ray_cluster, embed_job, tmp_path,
                                                           capsys):
    from sentray.bulk_embedding.query import QueryEncoder

    lines = [GUITAR, GUITAR, "Stocks fell sharply on Monday.", GUITAR, "",
             " ".join(["The committee met again and talked about the election."] * 60),
             *[f"Ordinary sentence number {i} about the weather." for i in range(24)]]
    corpus = tmp_path / "in.txt"
    corpus.write_text("\n".join(lines) + "\n")
    output = tmp_path / "out"
    args = ["--input", str(corpus), "--output", str(output), *RAY_ARGS, "--output-dtype",
            "int8", "--truncate-dim", "128", "--long-text", "chunk", "--code-book-rows", "20"]
    summary = embed_job.main(args)
    table = read_all_output(output)
    assert table.schema.field("embedding").type == pa.list_(pa.int8(), 128)
    assert table.column("status").to_pylist()[:6] == ["ok", "ok", "ok", "ok", "empty",
                                                      "chunked"]
    windows = table.column("windows").to_pylist()
    assert windows[5] > 1 and windows[0] == 1 and windows[4] == 0
    assert summary["rows_not_encoded"] == 2  # rows 1 and 3 took row 0's vector (one block)
    codes = np.stack([np.asarray(v) for v in table.column("embedding").to_pylist()[:4]
                      if v is not None])
    assert (codes[0] == codes[1]).all() and (codes[0] == codes[3]).all()
    # each file describes itself: the settings of _settings.json and the code book itself
    one_file = part_files(output / source_keys(corpus)["in.txt"])[0]
    recorded = json.loads(pq.read_schema(one_file).metadata[b"sentray.vectors"])
    quantization = json.loads((output / "_quantization.json").read_text())
    assert quantization["dtype"] == "int8" and len(quantization["ranges"]["minimum"]) == 128
    settings = json.loads((output / "_settings.json").read_text())["settings"]
    assert recorded == {**settings, "code_book": quantization["ranges"]}
    assert {key: recorded[key] for key in ("model", "pooling", "head", "dimension", "normalize",
                                           "output_dtype", "long_text", "max_length")} == {
        "model": "all-MiniLM-L6-v2", "pooling": "last_avg", "head": None, "dimension": 128,
        "normalize": True, "output_dtype": "int8", "long_text": "chunk", "max_length": 256}
    # a query coded with the stored code book matches its row: one code apart at most, where
    # float rounding of another batch crosses a step's edge; the same from one file alone
    query = QueryEncoder(str(output)).encode([GUITAR])[0]
    assert np.abs(query.astype(int) - codes[0].astype(int)).max() <= 1
    copied = tmp_path / "copied.parquet"
    copied.write_bytes(one_file.read_bytes())
    # the same process, model and batch of one: the same codes by construction
    assert (QueryEncoder(str(copied)).encode([GUITAR])[0] == query).all()
    ids = table.column("id").to_pylist()
    assert run_reading_example(output, capsys)[0] in ids[:4:1]  # a guitar row comes first

    before = sorted((p, p.stat().st_mtime_ns) for p in output.rglob("*"))
    with pytest.raises(SystemExit, match="output_dtype: 'int8' \\(stored\\) != 'binary'"):
        embed_job.main([*args[:-8], "--output-dtype", "binary", *args[-6:]])
    assert sorted((p, p.stat().st_mtime_ns) for p in output.rglob("*")) == before

    (output / "_notes.txt").write_text("the user's own file")  # "_": Parquet readers skip it
    embed_job.main([*args[:-8], "--output-dtype", "binary", *args[-6:], "--overwrite"])
    table = read_all_output(output)
    assert table.schema.field("embedding").type == pa.list_(pa.int8(), 16)  # 128 bits
    assert (output / "_notes.txt").read_text() == "the user's own file"
    assert not (output / "_quantization.json").exists()
    assert run_reading_example(output, capsys)[0] in ids[:4]

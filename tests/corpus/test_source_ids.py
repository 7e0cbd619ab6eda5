"""Default ids (`<name>:<row>`) are unique within an output: inputs holding files with the same
relative name are told apart by their paths (issue 33), local and on S3."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from sentray.corpus.reading import read_parquet_source, read_tasks, read_text_source
from sentray.corpus.sources import CorpusConfig, Source, discover_sources, unique_names


def read_ids(config: CorpusConfig) -> list[str]:
    """The ids of every record of the config's sources, read as the jobs' read tasks do."""
    sources = discover_sources(config)
    tables = []
    for source, groups, first, _ in read_tasks([(s, None) for s in sources], config):
        if source.format == "text":
            tables.extend(read_text_source(source))
        else:
            tables.extend(read_parquet_source(source, groups, first, config))
    return pa.concat_tables(tables).column("id").to_pylist()


def write(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def source(uri: str, name: str) -> Source:
    return Source(uri, uri, None, name)


# -- the rule, on names alone ---------------------------------------------------------------------


def test_names_grow_until_they_differ_and_the_rest_keep_theirs():
    sources = [source("/data/a/x.txt", "x.txt"), source("/data/b/x.txt", "x.txt"),
               source("/data/a/sub/y.txt", "sub/y.txt"), source("/data/b/sub/y.txt", "sub/y.txt"),
               source("/data/a/z.txt", "z.txt"), source("s3://bucket/in/x.txt", "x.txt")]
    names = [s.name for s in unique_names(sources)]
    assert names == ["a/x.txt", "b/x.txt", "a/sub/y.txt", "b/sub/y.txt", "z.txt", "in/x.txt"]
    # the order of the sources does not change the names
    assert [s.name for s in unique_names(sources[::-1])] == names[::-1]


def test_a_grown_name_never_takes_another_sources_name():
    # /d/c/ holds a/x.txt, so /d/a/x.txt can't be "a/x.txt"
    sources = [source("/d/a/x.txt", "x.txt"), source("/d/b/x.txt", "x.txt"),
               source("/d/c/a/x.txt", "a/x.txt")]
    assert [s.name for s in unique_names(sources)] == ["d/a/x.txt", "b/x.txt", "a/x.txt"]


def test_the_full_uri_when_no_run_of_components_differs():
    sources = [source("/bucket/x.txt", "x.txt"), source("s3://bucket/x.txt", "x.txt")]
    assert [s.name for s in unique_names(sources)] == ["/bucket/x.txt", "s3://bucket/x.txt"]


def test_no_collision_returns_the_sources_unchanged():
    sources = [source("/d/a/x.txt", "x.txt"), source("/d/a/y.txt", "y.txt")]
    assert unique_names(sources) == sources


# -- local inputs ---------------------------------------------------------------------------------


def test_two_folders_with_the_same_file_give_distinct_ids(tmp_path, caplog):
    write(tmp_path / "a" / "x.txt", "one\ntwo\n")
    write(tmp_path / "b" / "x.txt", "three\n")
    write(tmp_path / "b" / "only.txt", "four\n")
    config = CorpusConfig(input=f"{tmp_path / 'a'},{tmp_path / 'b'}")
    with caplog.at_level(logging.INFO, logger="sentray.corpus.sources"):
        names = [s.name for s in discover_sources(config)]
    assert names == ["a/x.txt", "only.txt", "b/x.txt"]
    assert f"{tmp_path / 'a' / 'x.txt'} -> a/x.txt" in caplog.text
    ids = read_ids(config)
    assert sorted(ids) == ["a/x.txt:0", "a/x.txt:1", "b/x.txt:0", "only.txt:0"]


def test_nested_same_names_need_three_components(tmp_path):
    write(tmp_path / "a" / "sub" / "x.txt", "one\n")
    write(tmp_path / "b" / "sub" / "x.txt", "two\n")
    write(tmp_path / "a" / "y.txt", "three\n")
    config = CorpusConfig(input=f"{tmp_path / 'a'},{tmp_path / 'b'}")
    assert [s.name for s in discover_sources(config)] == ["a/sub/x.txt", "y.txt", "b/sub/x.txt"]
    assert sorted(read_ids(config)) == ["a/sub/x.txt:0", "b/sub/x.txt:0", "y.txt:0"]


def test_parquet_inputs_with_the_same_name(tmp_path):
    import pyarrow.parquet as pq

    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        pq.write_table(pa.table({"text": ["p", "q"]}), tmp_path / folder / "x.parquet")
    config = CorpusConfig(input=f"{tmp_path / 'a'},{tmp_path / 'b'}")
    ids = read_ids(config)
    assert sorted(ids) == ["a/x.parquet:0", "a/x.parquet:1", "b/x.parquet:0", "b/x.parquet:1"]


def test_single_files_with_the_same_base_name(tmp_path):
    write(tmp_path / "a" / "x.txt", "one\n")
    write(tmp_path / "b" / "x.txt", "two\n")
    config = CorpusConfig(input=f"{tmp_path / 'a' / 'x.txt'},{tmp_path / 'b' / 'x.txt'}")
    assert sorted(read_ids(config)) == ["a/x.txt:0", "b/x.txt:0"]


def test_names_that_do_not_collide_are_unchanged(tmp_path):
    write(tmp_path / "a" / "x.txt", "one\n")
    write(tmp_path / "a" / "sub" / "x.txt", "two\n")  # same base name, different relative name
    write(tmp_path / "b" / "y.txt", "three\n")
    config = CorpusConfig(input=f"{tmp_path / 'a'},{tmp_path / 'b'}")
    assert [s.name for s in discover_sources(config)] == ["sub/x.txt", "x.txt", "y.txt"]
    assert sorted(read_ids(config)) == ["sub/x.txt:0", "x.txt:0", "y.txt:0"]


# -- S3 inputs ------------------------------------------------------------------------------------


@pytest.fixture()
def s3_inputs(moto_s3):
    import boto3

    s3 = boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")
    s3.create_bucket(Bucket="ids")
    s3.create_bucket(Bucket="other")
    for bucket, key, body in [("ids", "a/x.txt", "one\ntwo\n"), ("ids", "b/x.txt", "three\n"),
                              ("ids", "a/sub/y.txt", "four\n"), ("ids", "b/sub/y.txt", "five\n"),
                              ("ids", "b/z.txt", "six\n"), ("other", "a/x.txt", "seven\n")]:
        s3.put_object(Bucket=bucket, Key=key, Body=body.encode())
    return moto_s3


def test_s3_folders_with_the_same_files_give_distinct_ids(s3_inputs):
    config = CorpusConfig(input="s3://ids/a/,s3://ids/b/", s3_endpoint=s3_inputs)
    names = [s.name for s in discover_sources(config)]
    assert names == ["a/sub/y.txt", "a/x.txt", "b/sub/y.txt", "b/x.txt", "z.txt"]
    assert sorted(read_ids(config)) == ["a/sub/y.txt:0", "a/x.txt:0", "a/x.txt:1",
                                        "b/sub/y.txt:0", "b/x.txt:0", "z.txt:0"]


def test_s3_names_reach_into_the_bucket(s3_inputs):
    config = CorpusConfig(input="s3://ids/a/,s3://other/a/", s3_endpoint=s3_inputs)
    names = [s.name for s in discover_sources(config)]
    # ids/a/x.txt and other/a/x.txt differ only in their bucket; sub/y.txt is in one input only
    assert names == ["sub/y.txt", "ids/a/x.txt", "other/a/x.txt"]
    assert sorted(read_ids(config)) == ["ids/a/x.txt:0", "ids/a/x.txt:1", "other/a/x.txt:0",
                                        "sub/y.txt:0"]

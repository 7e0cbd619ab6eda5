"""sentray.corpus: how a corpus is cut into blocks for the actor pool (actor_pool), the two ways
of running them (running) and the driver's interface (corpus_job)."""

from __future__ import annotations

import os
import sys
import time

import pyarrow as pa
import pyarrow.dataset as pads
import pytest

from sentray.corpus import actor_pool, corpus_job, execution, part_files
from sentray.corpus.actor_pool import ActorCount, ActorPlan, ActorPoolConfig
from sentray.corpus.source_runs import Pending
from sentray.corpus.sources import (
    CorpusConfig,
    Source,
    decode_lines,
    discover_sources,
    estimate_rows,
)
from sentray.kit import storage


def text_source(path, lines: list[str] | bytes):
    data = lines if isinstance(lines, bytes) else "".join(f"{line}\n" for line in lines).encode()
    path.write_bytes(data)
    return discover_sources(CorpusConfig(input=str(path)))[0]


@pytest.mark.parametrize("data", [b"a\nb\nc\n", b"a\nb\nc", b"\xef\xbb\xbfa\r\nb\r\n\r\n",
                                  b"ok\n\xff\xfe broken\nlast", b"\n\n\n"])
def test_estimate_rows_counts_a_small_text_file_as_the_reader_does(tmp_path, data):
    source = text_source(tmp_path / "small.txt", data)
    assert estimate_rows(source) == len(decode_lines(data)[0])


def test_estimate_rows_extrapolates_a_large_text_file_from_pieces_spread_over_it(tmp_path):
    source = text_source(tmp_path / "large.txt", [f"sentence number {i:09d}" for i in range(20_000)])
    estimate = estimate_rows(source, sample_bytes=4096)
    # 26-byte lines: each of the 4 pieces of 1,024 bytes starts and ends inside a line, so the
    # count is off by < 4 lines of the pieces' 157, scaled by the file's 127 samples: within 3%.
    assert abs(estimate - 20_000) <= 600, estimate
    # a head unlike the rest: 2,000 short lines, then 18,000 four times as long; the head's
    # lines alone would say ~60,000 rows
    lines = [f"short {i:05d}" for i in range(2_000)] + [
        f"a much longer line, number {i:09d}, of the rest" for i in range(18_000)]
    skewed = text_source(tmp_path / "skewed.txt", lines)
    estimate = estimate_rows(skewed, sample_bytes=16384)
    # the pieces, at 1/8, 3/8, 5/8 and 7/8 of the file, all fall in the long lines (the short
    # ones are its first 3%): within 15% of the truth, where the head alone is 3 times over
    assert 17_000 <= estimate <= 23_000, estimate


def test_estimate_rows_of_parquet_is_its_row_count(tmp_path):
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": [f"row {i}" for i in range(37)]}), tmp_path / "a.parquet")
    assert estimate_rows(discover_sources(CorpusConfig(input=str(tmp_path)))[0]) == 37


class Unreadable:
    """A source filesystem that fails when opened: proves a source was never read."""

    def open_input_stream(self, path):
        raise AssertionError(f"{path} was read")


@pytest.mark.parametrize(("rows", "actors", "expected"), [
    ([1000], 2, 250),  # the bundled sample: two blocks per actor, not one block for one actor
    ([10_000], 2, 1000),  # five equal rounds of two blocks, not nine of 1,024 and one of 784
    ([300, 500], 2, 200),  # several small files count together
    ([1], 2, 1),
    ([4096], 2, 1024),  # exactly two rounds of the configured size
    ([4097], 2, 683),  # three rounds of two blocks
    ([1000], 8, 63),  # more actors, smaller blocks
    ([20_000], 2, 1024),  # eight rounds or more: the configured size
])
def test_block_rows_cuts_small_inputs_into_equal_rounds(tmp_path, rows, actors, expected):
    sources = [text_source(tmp_path / f"{i}.txt", ["x"] * n) for i, n in enumerate(rows)]
    pool = ActorPoolConfig(actors=actors, rows_per_batch=1024)
    assert actor_pool.block_rows([Pending(s, None) for s in sources], pool) == expected
    # a rerun sizes its blocks by the rows still to do
    half = [Pending(s, [(0, n // 2)]) for s, n in zip(sources, rows, strict=True)]
    assert actor_pool.block_rows(half, pool) == actor_pool.block_rows(
        [Pending(text_source(tmp_path / f"h{i}.txt", ["x"] * (n // 2)), None)
         for i, n in enumerate(rows)], pool)


def test_block_rows_stops_counting_once_there_are_enough(tmp_path):
    big = text_source(tmp_path / "big.txt", ["x"] * 20_000)
    never = text_source(tmp_path / "never.txt", ["x"] * 10)
    never = type(never)(never.uri, never.path, Unreadable(), never.name, never.format)
    pool = ActorPoolConfig(actors=2, rows_per_batch=1024)
    assert actor_pool.block_rows([Pending(big, None), Pending(never, None)], pool) == 1024


class TagWithProcess:
    """An actor that tags each row with the id of the process that handled it."""

    def __init__(self, spec: None) -> None:
        pass

    def __call__(self, batch: pa.Table) -> pa.Table:
        time.sleep(0.3)  # a batch takes a while, as a model's does, so no actor takes them all
        return batch.select(["id", "source", "row", "source_rows"]).append_column(
            "pid", pa.array([os.getpid()] * batch.num_rows, pa.int64()))


@pytest.mark.ray
def test_a_small_input_keeps_every_actor_busy(ray_cluster, tmp_path, monkeypatch):
    """The bundled 1,000-line sample with two actors: both embed rows (in one block of 1,024
    rows, one actor did all the work), every row once; the timings add up. The write tasks ask
    for no CPU (else Ray Data, which reserves CPUs for upstream operators first, starts none
    until every row is read: bench/bench_scale.py at 10M rows), and run at most one per actor."""
    import ray.data
    from ray import cloudpickle

    write = ray.data.Dataset.write_datasink
    asked: list = []
    monkeypatch.setattr(ray.data.Dataset, "write_datasink", lambda self, sink, **kwargs: (
        asked.append(kwargs), write(self, sink, **kwargs))[1])

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # tests/ is not on workers' path
    sources = [text_source(tmp_path / "sample.txt", [f"line {i}" for i in range(1000)])]
    output = storage.locate(str(tmp_path / "out"))
    timings = execution.run_actor_pool([Pending(s, None) for s in sources],
                                     CorpusConfig(input=str(tmp_path / "sample.txt")),
                                     ActorPlan(TagWithProcess, None),
                                     part_files.SingleFolder(output),
                                     ActorPoolConfig(actors=2, rows_per_batch=1024))
    table = pads.dataset(tmp_path / "out", format="parquet").to_table()
    assert sorted(table.column("row").to_pylist()) == list(range(1000))
    handled = {pid: table.column("pid").to_pylist().count(pid)
               for pid in set(table.column("pid").to_pylist())}
    assert len(handled) == 2, handled
    assert timings["rows_per_block"] == 250
    assert 0 <= timings["first_part"] <= timings["pipeline"], timings
    assert asked == [{"ray_remote_args": {"num_cpus": 0}, "concurrency": 2}]


@pytest.mark.parametrize(("processes", "each", "expected"), [(2, 1.0, 4), (1, 0.5, 3), (3, 1.5, 7)])
def test_a_local_cluster_gets_its_pool_plus_two_spare_cpus(processes, each, expected):
    """One rule for the corpus jobs and both trainers: the pool's CPUs, rounded up, plus two for
    Ray Data's read/write tasks and Ray Train's controller."""
    from sentray.kit.ray_cluster import local_cpus

    assert local_cpus(processes, each) == expected
    pool = ActorPoolConfig(actors=processes, cpus_per_actor=each)
    assert pool.local_cluster_cpus == expected
    assert ActorPoolConfig(actors=processes, cpus_per_actor=each, num_cpus=9).local_cluster_cpus == 9


def test_a_caught_job_error_no_longer_holds_what_the_job_held():
    """A failed Ray Data run frees its actor pool only when the dataset's last reference goes;
    the frames of the error a caller keeps must not be that reference (release_frames)."""
    import gc
    import traceback
    import weakref

    class Pool:  # stands in for the dataset and its actors
        pass

    def run():
        pool = Pool()  # noqa: F841 (held by this frame, as run_actor_pool holds its dataset)
        held.append(weakref.ref(pool))
        raise OSError("AWS Error SLOW_DOWN during PutObject")

    held: list = []
    try:
        try:
            run()
        except OSError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as caught:
        kept = caught  # the caller keeps the error
        execution.release_frames(kept)
    gc.collect()
    assert held[0]() is None
    assert "in run" in "".join(traceback.format_exception(kept))  # the text is kept


def test_actor_counts_are_n_or_min_max_in_flags_code_and_config_files():
    from ray.data import ActorPoolStrategy

    from sentray.kit.config_files import coerce

    assert ActorCount.parse("2") == ActorCount(2, 2) and ActorCount.parse(" 1 - 8 ").spec() == "1-8"
    assert ActorPoolConfig(actors=3).actors == ActorCount(3, 3)  # as code and old configs say
    assert ActorPoolConfig(actors="1-4").actors.maximum == 4
    assert coerce(ActorCount, 2) == ActorCount(2, 2)  # a YAML int, as _config.yaml had it
    for bad in ("0", "3-1", "two", "1-"):
        with pytest.raises(ValueError, match="actors must be"):
            ActorCount.parse(bad)
    fixed, growing = ActorCount(2, 2).strategy(), ActorCount(1, 8).strategy()
    assert isinstance(fixed, ActorPoolStrategy) and (fixed.min_size, fixed.max_size) == (2, 2)
    assert (growing.min_size, growing.max_size) == (1, 8)
    # a growing pool is sized for all it may grow to: its local cluster, its small-input blocks
    pool = ActorPoolConfig(actors="1-3", cpus_per_actor=1)
    assert pool.local_cluster_cpus == ActorPoolConfig(actors=3).local_cluster_cpus
    pending = [Pending(Source("s", "s", None, "s", "parquet", num_rows=600), None)]
    assert actor_pool.block_rows(pending, pool) == actor_pool.block_rows(
        pending, ActorPoolConfig(actors=3))


def test_a_corpus_job_answers_every_question_or_cannot_be_made():
    """The driver's interface: a job that leaves one of its four answers out fails when it is
    made, naming it, not half-way through a run."""
    from dataclasses import dataclass
    from typing import ClassVar

    @dataclass(frozen=True, kw_only=True)
    class NoRoute(corpus_job.CorpusJob):
        name: ClassVar[str] = "no-route"

        def actor(self):
            return ActorPlan(TagWithProcess, None)

        def empty_schema(self, source):
            return pa.schema([])

        def summarize(self, folders, sources):
            return {}

    with pytest.raises(TypeError, match="route"):
        NoRoute(config=None, folders=("out",), settings={}, sources=[])


def test_estimate_all_is_each_sources_estimate_in_order(tmp_path):
    """`estimate_all` (the job's and the progress line's estimates, files read at once on
    threads): each source's `estimate_rows`, in the sources' order."""
    import pyarrow.parquet as pq

    from sentray.corpus.sources import estimate_all

    root = tmp_path / "in"
    root.mkdir()
    for i in range(5):
        (root / f"{i}.txt").write_text("".join(f"line {j}\n" for j in range(10 * (i + 1))))
    pq.write_table(pa.table({"text": [f"row {i}" for i in range(37)]}), root / "z.parquet")
    sources = discover_sources(CorpusConfig(input=str(root)))
    assert estimate_all(sources) == [estimate_rows(s) for s in sources] == [10, 20, 30, 40, 50, 37]
    assert estimate_all([]) == []

"""sentray.corpus.actor_pool: an actor's first moments ride on its blocks to the driver and
never into the parts written."""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.parquet as pq

from sentray.corpus import actor_pool, part_files
from sentray.kit import storage


def block(rows: int = 3) -> pa.Table:
    return pa.table({"id": [f"a.txt:{i}" for i in range(rows)], "source": ["a.txt"] * rows,
                     "row": list(range(rows)), "source_rows": [rows] * rows}
                    ).replace_schema_metadata({b"sentray.vectors": b"{}"})


def test_moments_are_carried_and_taken_off_again():
    clock = actor_pool.ActorClock()
    assert clock.moments["actor_process"] <= time.time()
    clock.ready()
    clock.output()
    first = clock.moments["first_row"]
    clock.output()  # the first output only
    assert clock.moments["first_row"] == first
    table, moments = actor_pool.take(clock.stamp(block()))
    assert moments == clock.moments
    assert table.schema.metadata == {b"sentray.vectors": b"{}"}  # the rest kept
    assert actor_pool.take(table) == (table, None)


def test_the_earliest_of_each_moment_over_blocks_and_actors():
    found = actor_pool.earliest([
        {"actor_process": 5.0, "actor_ready": 9.0, "first_row": 9.5}, None,
        {"actor_process": 6.0, "actor_ready": 8.0, "first_row": None}])
    assert found == {"actor_process": 5.0, "actor_ready": 8.0, "first_row": 9.5}
    assert actor_pool.earliest([]) == dict.fromkeys(found)


def test_since_launch_counts_from_this_process_start():
    launched = actor_pool.process_started()
    moments = actor_pool.since_launch(launched + 3.0, launched + 9.0, {
        "actor_process": launched + 2.0, "actor_ready": launched + 6.0, "first_row": None})
    assert moments == {"ray_ready": 3.0, "actor_process": 2.0, "actor_ready": 6.0,
                       "first_row": None, "first_part": 9.0}


class Stamping:
    """An actor that stamps its moments on each block, as the embedding actor does."""

    def __init__(self, spec: None) -> None:
        self.clock = actor_pool.ActorClock()

    def __call__(self, table: pa.Table) -> pa.Table:
        self.clock.output()
        return self.clock.stamp(table.replace_schema_metadata({b"sentray.vectors": b"{}"}))


def test_a_part_written_in_process_holds_no_actor_moments(tmp_path):
    """The rows of a small input go through the job's own process (`execution.run_in_process`):
    the actor's moments are read from its clock, and its stamps never reach a part (on Ray, the
    sink takes them off each block: `part_files.make_sink`)."""
    from sentray.corpus.actor_pool import ActorPlan, ActorPoolConfig
    from sentray.corpus.execution import run_in_process
    from sentray.corpus.source_runs import pending_sources
    from sentray.corpus.sources import CorpusConfig, discover_sources

    (tmp_path / "a.txt").write_text("one\ntwo\nthree\n")
    out = storage.locate(str(tmp_path / "out"))
    corpus = CorpusConfig(input=str(tmp_path / "a.txt"))
    pending = pending_sources(discover_sources(corpus), [out])
    timings = run_in_process(pending, corpus, ActorPlan(Stamping, None),
                             part_files.SingleFolder(out), ActorPoolConfig())
    assert timings["actors"]["first_row"] is not None  # read from the clock
    (part,) = (tmp_path / "out").glob("*/part-*.parquet")
    metadata = pq.read_metadata(part).metadata
    assert actor_pool.TIMINGS_KEY not in metadata
    assert metadata[b"sentray.vectors"] == b"{}"
    assert pq.read_table(part).num_rows == 3

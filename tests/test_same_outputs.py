"""bench/same_outputs.py, the before/after check of a change that must not change behaviour:
its digests ignore what differs from run to run (how rows fell into parts, clocks, the work
folder) and nothing else."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("same_outputs", ROOT / "bench" / "same_outputs.py")
same_outputs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(same_outputs)


def write_output(folder: Path, cuts: list[int], vectors: list[float], seconds: float) -> None:
    """Rows 0-5 of one source in parts cut at `cuts`, and a summary that took `seconds`."""
    part_dir = folder / "out" / "input.txt-0123456789"
    part_dir.mkdir(parents=True)
    bounds = [0, *cuts, 6]
    for first, end in zip(bounds, bounds[1:], strict=False):
        pq.write_table(pa.table({"row": list(range(first, end)),
                                 "source": ["input.txt-0123456789"] * (end - first),
                                 "embedding": vectors[first:end]}),
                       part_dir / f"part-{first}-{end}-of-6.parquet")
    (folder / "out" / "_summary.json").write_text(json.dumps({
        "rows_in": 6, "seconds": seconds, "config": {"output": str(folder / "out")}}))


def digests(folder: Path) -> dict:
    return same_outputs.digest_folder(folder / "out", str(folder))


def test_rows_split_otherwise_timed_otherwise_elsewhere_are_the_same(tmp_path):
    write_output(tmp_path / "a", [2], [0.5, 1, 2, 3, 4, 5], seconds=1.0)
    write_output(tmp_path / "b", [3, 5], [0.5, 1, 2, 3, 4, 5], seconds=9.0)
    assert digests(tmp_path / "a") == digests(tmp_path / "b")


def test_one_value_changed_is_a_difference(tmp_path, capsys):
    write_output(tmp_path / "a", [2], [0.5, 1, 2, 3, 4, 5], seconds=1.0)
    write_output(tmp_path / "b", [2], [0.5, 1, 2, 3, 4, 5.000001], seconds=1.0)
    before, after = digests(tmp_path / "a"), digests(tmp_path / "b")
    assert before != after
    record = {"jobs": {"embed": {"files": before}}}
    assert same_outputs.compare(record, record) == 0
    assert same_outputs.compare(record, {"jobs": {"embed": {"files": after}}}) == 1
    assert "DIFFERENT: input.txt-KEY/*.parquet (6 rows)" in capsys.readouterr().out

"""`storage.write_bytes` on a local disk: a reader never sees a record half-written (the run
claims are rewritten every 10 s while other runs read them), and a failed write leaves no temporary."""

from __future__ import annotations

import json
import threading

import pytest

from sentray.kit import storage


def test_a_record_being_rewritten_is_always_read_whole(tmp_path):
    # a 2 MB record rewritten while another thread reads it: written in place (truncate, then
    # write) a read lands in the gap often enough; written beside it and renamed, never
    location = storage.locate(str(tmp_path / "record.json"))
    storage.write_bytes(location, json.dumps({"n": 0, "pad": "x" * 2_000_000}).encode())
    stop, partial, reads = threading.Event(), [], [0]

    def read() -> None:
        while not stop.is_set():
            try:
                json.loads((tmp_path / "record.json").read_bytes())
            except ValueError:
                partial.append(reads[0])
            reads[0] += 1

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in range(1, 60):
            storage.write_bytes(location, json.dumps({"n": n, "pad": "x" * 2_000_000}).encode())
    finally:
        stop.set()
        reader.join()
    assert reads[0] > 0 and partial == []
    assert json.loads((tmp_path / "record.json").read_bytes())["n"] == 59
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json"]  # no temporary left


def test_a_write_that_cannot_land_leaves_no_temporary(tmp_path):
    # the rename fails (a non-empty folder stands where the record goes): the error comes
    # out, what stood there stays, and the temporary written beside it is gone
    (tmp_path / "record.json").mkdir()
    (tmp_path / "record.json" / "keep").write_text("mine")
    with pytest.raises(OSError):
        storage.write_bytes(storage.locate(str(tmp_path / "record.json")), b'{"n": 2}')
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json"]
    assert (tmp_path / "record.json" / "keep").read_text() == "mine"

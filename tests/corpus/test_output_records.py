"""Two runs into one output: a run's claim refuses another with other settings before it writes
anything, lets one with the same settings proceed, and a claim left by a run that died (not
refreshed for STALE_S) is reported and taken over."""

from __future__ import annotations

import json
import logging
import time

import pytest

from sentray.corpus import output_records
from sentray.corpus.output_records import RunClaim, settings_digest
from sentray.kit import storage


def foreign_claim(folder, settings: dict, *, age: float = 0.0, started: float | None = None,
                  run: str = "20260101-000000-other") -> None:
    """The claim another run (another process, maybe another host) holds."""
    (folder / "_runs").mkdir(parents=True, exist_ok=True)
    now = time.time()
    (folder / "_runs" / f"{run}.json").write_text(json.dumps({
        "run": run, "host": "elsewhere", "pid": 4242, "started": started or now - age,
        "heartbeat": now - age, "digest": settings_digest(settings)}))


def test_a_live_run_with_other_settings_is_refused_before_writing(tmp_path):
    foreign_claim(tmp_path, {"pooling": "mean"})
    before = sorted(p.name for p in (tmp_path / "_runs").iterdir())
    with pytest.raises(ValueError, match="run 20260101-000000-other \\(host elsewhere, pid "
                                         "4242.*is writing .* with other settings"):
        with RunClaim(storage.locate(str(tmp_path)), {"pooling": "cls"}):
            pytest.fail("the run went on")
    assert sorted(p.name for p in (tmp_path / "_runs").iterdir()) == before  # no claim left


def test_runs_with_the_same_settings_both_proceed_and_clean_up(tmp_path):
    foreign_claim(tmp_path, {"pooling": "mean"})
    with RunClaim(storage.locate(str(tmp_path)), {"pooling": "mean"}) as claim:
        assert claim.location.path.endswith(".json")
        assert len(list((tmp_path / "_runs").iterdir())) == 2
    assert [p.name for p in (tmp_path / "_runs").iterdir()] == ["20260101-000000-other.json"]
    with RunClaim(storage.locate(str(tmp_path / "fresh")), {"pooling": "mean"}):
        pass
    assert not (tmp_path / "fresh" / "_runs").exists()  # nobody left: the folder goes too


def test_a_stale_claim_is_reported_and_taken_over(tmp_path, caplog):
    foreign_claim(tmp_path, {"pooling": "mean"}, age=output_records.STALE_S + 5)
    with caplog.at_level(logging.WARNING, logger="sentray.corpus.output_records"):
        with RunClaim(storage.locate(str(tmp_path)), {"pooling": "cls"}):
            pass
    message = " ".join(r.getMessage() for r in caplog.records)
    assert "stopped" in message and "stale lock" in message and "pid 4242" in message


def test_of_two_runs_that_claimed_at_once_the_later_steps_back(tmp_path, monkeypatch):
    """Both passed the first look before either had written its claim: the one that started
    later (here: this one) withdraws when it sees the other's."""
    real_beat = RunClaim._beat

    def beat_while_another_claims(self):
        real_beat(self)
        foreign_claim(tmp_path, {"pooling": "mean"}, started=self.started - 1)

    monkeypatch.setattr(RunClaim, "_beat", beat_while_another_claims)
    with pytest.raises(ValueError, match="with other settings"):
        with RunClaim(storage.locate(str(tmp_path)), {"pooling": "cls"}):
            pytest.fail("the run went on")
    assert [p.name for p in (tmp_path / "_runs").iterdir()] == ["20260101-000000-other.json"]


def test_a_claim_is_refreshed_while_the_run_lasts(tmp_path, monkeypatch):
    monkeypatch.setattr(output_records, "HEARTBEAT_S", 0.05)
    with RunClaim(storage.locate(str(tmp_path)), {"pooling": "mean"}) as claim:
        first = json.loads((tmp_path / "_runs" / f"{claim.run}.json").read_text())["heartbeat"]
        time.sleep(0.3)
        later = json.loads((tmp_path / "_runs" / f"{claim.run}.json").read_text())["heartbeat"]
    assert later > first


def test_overwrite_deletes_the_jobs_files_under_a_claim_that_stays(tmp_path, caplog):
    """--overwrite deletes under the run's own claim: the claim must survive it (else the run
    goes on unseen by others, every refresh failing), and so must other runs' claims."""
    (tmp_path / "_summary.json").write_text("{}")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "part-000000000000-000000000002-of-000000000002.parquet").write_text("")
    foreign_claim(tmp_path, {"pooling": "mean"}, run="20260101-000000-same")
    out = storage.locate(str(tmp_path))
    with caplog.at_level(logging.WARNING), RunClaim(out, {"pooling": "mean"}) as claim:
        assert output_records.remove_job_files([out]) == 2
        assert storage.exists(claim.location)
        claim._beat()  # what the keep-alive thread does every HEARTBEAT_S
    assert sorted(p.name for p in tmp_path.iterdir()) == ["_runs"]
    assert [p.name for p in (tmp_path / "_runs").iterdir()] == ["20260101-000000-same.json"]
    assert "could not refresh" not in caplog.text

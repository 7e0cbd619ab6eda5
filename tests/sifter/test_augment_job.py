"""jobs/augment.py on a real local Ray cluster: every row in the output or the rejects with its
reason, bad input never crashes, reruns resume; and `ray job submit` against a loopback head."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pyarrow.dataset as pads
import pytest
from conftest import ROOT, free_port, load_job

pytest.importorskip("spacy", reason="the openie extra is not installed")
pytest.importorskip("triplet_extract", reason="the openie extra is not installed")

RAY_ARGS = ["--actors", "2", "--rows-per-batch", "8"]
LONG = "The committee approved the plan after a long debate. " * 200  # ~10k characters
LINES = [
    "The cat sat on the mat.",  # 0 kept
    "",  # 1 empty
    "   \t ",  # 2 empty
    LONG.strip(),  # 3 kept: parsed from a truncated copy, text kept whole
    "Le petit chat noir dort sur le canapé.",  # 4 kept (non-English)
    "<p>Click <b>here</b> to read the full report now.</p>",  # 5 kept (markup)
    "We loved the show 🎉🎉 and 猫 liked it too ok.",  # 6 kept (emoji, CJK)
    "\x00\x01\x02",  # 7 too short (one 'word' of control characters)
    "Too short.",  # 8 too short
    "He met Mr.",  # 9 capitalized last word
    "Smith at noon on the bridge today.",  # 10 follows it
    "كان الطقس جميلا جدا في ذلك اليوم الطويل.",  # 11 kept (RTL)
    "Stock markets rose sharply on Monday morning.",  # 12 kept
]
EXPECTED_REJECTS = {1: "empty", 2: "empty", 7: "too_short", 8: "too_short",
                    9: "capitalized_last_word", 10: "follows_capitalized_last_word",
                    13: "invalid_utf8"}


@pytest.fixture(scope="module")
def augment_job():
    return load_job("augment")


def write_corpus(path):
    data = "\n".join(LINES).encode() + b"\n" + b"bad \xff\xfe bytes here ok\n"  # line 13
    path.write_bytes(data)
    return len(LINES) + 1


def read_folder(folder):
    return pads.dataset(str(folder), format="parquet").to_table().to_pylist()


@pytest.mark.ray
@pytest.mark.slow
def test_every_row_is_kept_or_rejected_with_its_reason(ray_cluster, augment_job, tmp_path):
    corpus = tmp_path / "bad.txt"
    rows = write_corpus(corpus)
    output, rejects = tmp_path / "out", tmp_path / "rej"
    summary = augment_job.main(["--input", str(corpus), "--output", str(output),
                                "--rejects", str(rejects), *RAY_ARGS])
    kept = {r["row"]: r for r in read_folder(output)}
    rejected = {r["row"]: r for r in read_folder(rejects)}
    assert set(kept) | set(rejected) == set(range(rows)) and not set(kept) & set(rejected)
    assert {row: r["reject_reason"] for row, r in rejected.items()} == EXPECTED_REJECTS
    assert summary["rows_in"] == rows
    assert summary["rows_out"] + summary["rows_rejected"] == rows
    assert summary["rejected_by_reason"] == {"empty": 2, "too_short": 2,
                                             "capitalized_last_word": 1,
                                             "follows_capitalized_last_word": 1,
                                             "invalid_utf8": 1}
    for row, record in kept.items():
        assert record["text"] == LINES[row] and record["id"] == f"bad.txt:{row}"
        assert record["backbone_text"].startswith(LINES[row].strip())
        assert record["backbone_source"] in ("openie", "dependency", "none")
        if record["backbone_source"] == "none":  # every backbone would repeat X: Y = X
            assert record["backbone_text"] == LINES[row]
        assert record["pruned_text"]
        if record["backbone_source"] == "openie":
            assert record["subject"] and record["relation"] and record["object"]
    assert kept[0]["pruned_text"] == "cat sat on mat."
    long = kept[3]
    assert long["text"] == LONG.strip() and len(long["backbone_text"]) > len(LONG.strip())
    # parsed from its first 1,000 characters (18 whole sentences, pruned by hand: "The", "the"
    # and "a" go); the rest is kept verbatim, not dropped
    assert long["pruned_text"].startswith("committee approved plan after long debate. " * 18)
    assert long["pruned_text"].endswith(LONG.strip()[1000:])
    assert json.loads((output / "_summary.json").read_text())["rows_in"] == rows
    again = augment_job.main(["--input", str(corpus), "--output", str(output),
                              "--rejects", str(rejects), *RAY_ARGS])
    assert again["processed_this_run"] == [] and again["rows_in"] == rows


@pytest.mark.long
@pytest.mark.ray
@pytest.mark.slow
def test_seeded_choice_is_reproducible_and_filters_switch_off(ray_cluster, augment_job,
                                                              tmp_path):
    corpus = tmp_path / "c.txt"
    write_corpus(corpus)
    runs = []
    for name in ("a", "b"):
        augment_job.main(["--input", str(corpus), "--output", str(tmp_path / name),
                          "--seed", "3", "--keep-short", "--keep-capitalized-tail", *RAY_ARGS])
        runs.append({r["row"]: r for r in read_folder(tmp_path / name)})
    assert runs[0] == runs[1]  # same seed, same triples, whatever the batching
    rejected = {r["reject_reason"] for r in read_folder(tmp_path / "a-rejects")}
    assert rejected == {"empty", "invalid_utf8"}  # the switchable rules are off


def test_bad_arguments_fail_before_ray(augment_job, tmp_path, exit_message):
    with pytest.raises(SystemExit, match="does not exist"):
        augment_job.main(["--input", str(tmp_path / "missing.txt"),
                          "--output", str(tmp_path / "o")])
    (tmp_path / "x.txt").write_text("One two three four.\n")
    with pytest.raises(SystemExit) as info:
        augment_job.main(["--input", str(tmp_path / "x.txt"), "--output", str(tmp_path / "o"),
                          "--rejects", str(tmp_path / "o")])
    assert "different folders" in exit_message(info)


def test_a_rerun_with_the_other_z_rule_is_refused_before_ray(augment_job, tmp_path,
                                                            exit_message, monkeypatch):
    """An output made with the Penn rule is never resumed with the UD rule (one kind of Z per
    output): the rule is in _settings.json, and a rerun that changes it stops naming it."""
    import ray

    from sentray.kit import storage
    from sentray.kit.settings_record import write_settings
    from sentray.sifter.config import AugmentConfig
    from sentray.sifter.job import augment_settings, check_backend

    corpus = tmp_path / "x.txt"
    corpus.write_text("One two three four.\n")
    out = tmp_path / "o"
    made = AugmentConfig(output=str(out)).resolved()
    (out / "a-1").mkdir(parents=True)
    (out / "a-1" / "part-000000000000-000000000001-of-000000000001.parquet").write_bytes(b"PAR1")
    write_settings(storage.locate(str(out)), augment_settings(made, check_backend(made)),
                   "augment")

    def must_not_run(*args, **kwargs):
        raise AssertionError("Ray started for a run that mixes two Z rules")

    monkeypatch.setattr(ray, "init", must_not_run)
    with pytest.raises(SystemExit) as info:
        augment_job.main(["--input", str(corpus), "--output", str(out), "--z-rule", "ud"])
    assert "z_rule: 'penn' (stored) != 'ud' (this run)" in exit_message(info)


def test_an_output_made_by_the_views_before_issue_36_is_not_resumed(augment_job, tmp_path,
                                                                    exit_message, monkeypatch):
    """Y's negation rule and Z's correlative pairs changed the rows of the same settings: an
    output whose _settings.json predates them (no `views_revision`) is not mixed into."""
    import ray

    from sentray.kit import storage
    from sentray.kit.settings_record import write_settings
    from sentray.sifter.config import AugmentConfig
    from sentray.sifter.job import augment_settings, check_backend
    from sentray.sifter.positives import VIEWS_REVISION

    corpus = tmp_path / "x.txt"
    corpus.write_text("One two three four.\n")
    out = tmp_path / "o"
    made = AugmentConfig(output=str(out)).resolved()
    (out / "a-1").mkdir(parents=True)
    (out / "a-1" / "part-000000000000-000000000001-of-000000000001.parquet").write_bytes(b"PAR1")
    before = augment_settings(made, check_backend(made))
    del before["views_revision"]
    write_settings(storage.locate(str(out)), before, "augment")
    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("Ray started"))
    with pytest.raises(SystemExit) as info:
        augment_job.main(["--input", str(corpus), "--output", str(out)])
    assert f"views_revision: None (stored) != {VIEWS_REVISION!r} (this run)" in exit_message(info)


def _wait_for(url: str, seconds: float) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:  # it answers (401 where token auth is on): it is up
            return
        except OSError:
            time.sleep(1)
    raise TimeoutError(url)


@pytest.mark.long
@pytest.mark.ray
@pytest.mark.slow
def test_ray_job_submit_against_a_loopback_head(tmp_path):
    """What users run: `ray start --head` on loopback, then `ray job submit ... jobs/augment.py`."""
    ray_bin = shutil.which("ray") or os.path.join(os.path.dirname(sys.executable), "ray")
    # Token authentication on, with one token shared by the head and the client (as docs/jobs/augment.md
    # says), so that even a loopback job API does not run code for anyone who asks.
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
           "RAY_USAGE_STATS_ENABLED": "0", "HF_HUB_OFFLINE": "1", "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    corpus = tmp_path / "small.txt"
    rows = write_corpus(corpus)
    output = tmp_path / "submitted"
    temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # unix socket paths must stay short
    # Free ports, not Ray's fixed defaults (8265, 52365): another Ray on this machine (the test
    # session's own cluster, a user's) holds those, and a job agent that cannot bind its port
    # leaves the head answering "No available agent to submit job" for ever.
    dashboard = f"http://127.0.0.1:{(dashboard_port := free_port())}"
    started = subprocess.run([ray_bin, "start", "--head", "--port=0", "--num-cpus=4",
                              "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard_port}",
                              f"--dashboard-agent-listen-port={(agent_port := free_port())}",
                              "--node-ip-address=127.0.0.1", f"--temp-dir={temp_dir}"],
                             env=env, capture_output=True, text=True, timeout=180)
    try:
        assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-2000:]
        _wait_for(f"{dashboard}/api/version", 120)
        # The head answers before its job agent is up ("No available agent"): wait for the
        # agent itself rather than paying a CLI start and an upload per early submit.
        _wait_for(f"http://127.0.0.1:{agent_port}/api/local_raylet_healthz", 120)
        submit = [ray_bin, "job", "submit", "--address", dashboard,
                  "--working-dir", str(ROOT), "--", sys.executable, "jobs/augment.py",
                  "--input", str(corpus), "--output", str(output), "--actors", "1"]
        for _ in range(10):  # the agent registers with the head a moment after it listens
            result = subprocess.run(submit, env=env, capture_output=True, text=True, timeout=600)
            if "No available agent" not in result.stdout + result.stderr:
                break
            time.sleep(2)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert "succeeded" in (result.stdout + result.stderr)
        summary = json.loads((output / "_summary.json").read_text())
        assert summary["rows_in"] == rows
        assert summary["rows_out"] + summary["rows_rejected"] == rows
    finally:
        _stop_cluster_in(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _stop_cluster_in(temp_dir: str, timeout: float = 5) -> None:
    """Stop the Ray cluster whose temp dir is `temp_dir`, and only it:
    `ray stop` would kill every Ray process on the machine (other tests' clusters, users' jobs).
    Its processes are those naming the temp dir or the GCS address on their command line, and
    their descendants (the agents retitle themselves `ray::...`, so they are found as the
    raylet's children, before it goes). What has not ended `timeout` s after SIGTERM is killed
    (some of Ray's helpers outlive a SIGTERM by 30 s)."""
    import psutil

    marks = [temp_dir]
    address_file = os.path.join(temp_dir, "ray_current_cluster")  # the GCS address
    if os.path.exists(address_file):
        marks.append(open(address_file).read().strip())

    def names(part: str, mark: str) -> bool:  # "X", "--flag=X", "X/..." (no "X1" or "X1/...")
        return any(value == mark or value.startswith(mark + os.sep) for value in part.split("="))

    def ours(process: psutil.Process) -> bool:
        try:
            return any(names(part, mark) for part in process.cmdline() for mark in marks)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return False

    processes = {p.pid: p for p in psutil.process_iter() if p.pid != os.getpid() and ours(p)}
    for process in list(processes.values()):
        try:
            processes.update({c.pid: c for c in process.children(recursive=True)})
        except psutil.NoSuchProcess:
            pass
    processes.pop(os.getpid(), None)
    for process in processes.values():
        try:
            process.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(list(processes.values()), timeout=timeout)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=timeout)

"""sentray.kit.early_ray: when a job starts its own cluster on a thread, and what becomes of it
(taken by the driver, or abandoned). Ray itself is replaced by a stand-in here; the real start
runs in tests/embedding/test_embed_job.py::test_a_job_without_an_address_starts_a_loopback_only_
cluster (a job launched as a user launches it)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest

from sentray.corpus.actor_pool import ActorPoolConfig
from sentray.corpus.sources import CorpusConfig
from sentray.kit import early_ray


@dataclass
class JobConfig:
    output: str
    pool: ActorPoolConfig = field(default_factory=ActorPoolConfig)
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    overwrite: bool = False


@pytest.fixture
def fake_ray(monkeypatch):
    """init_ray and ray.shutdown replaced: records the calls; init takes 0.2 s."""
    import ray

    calls = []

    def init_ray(address, *, num_cpus=None, num_gpus=None):
        calls.append(("init", num_cpus, threading.current_thread().name))
        time.sleep(0.2)
        return True

    monkeypatch.setattr("sentray.kit.ray_cluster.init_ray", init_ray)
    monkeypatch.setattr(ray, "shutdown", lambda *a, **k: calls.append(("shutdown",)))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    yield calls
    early_ray.abandon()


def test_a_fresh_output_starts_the_cluster_on_a_thread_and_the_driver_takes_it(fake_ray,
                                                                                 tmp_path):
    config = JobConfig(str(tmp_path / "out"), ActorPoolConfig(actors="3"))
    parked = sum(t.name == "early-ray" for t in threading.enumerate())
    early_ray.start_for(config)
    started_local, waited = early_ray.take(config.pool.local_cluster_cpus)
    assert started_local is True and 0 <= waited <= 5
    assert fake_ray == [("init", 5, "early-ray")]  # 3 actors + 2 spare CPUs, off the main thread
    # Ray's head processes die with the thread that started them (PR_SET_PDEATHSIG): it lives on
    assert sum(t.name == "early-ray" for t in threading.enumerate()) == parked + 1
    assert early_ray.take(5) is None  # taken once
    early_ray.abandon()
    assert ("shutdown",) not in fake_ray  # the driver's own, not abandoned


@pytest.mark.parametrize("case", ["address", "env", "rerun"])
def test_no_early_start_where_the_job_may_not_need_its_own_cluster(fake_ray, tmp_path,
                                                                   monkeypatch, case):
    output = tmp_path / "out"
    config = JobConfig(str(output))
    if case == "address":
        config.pool = ActorPoolConfig(address="127.0.0.1:6379")
    elif case == "env":
        monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    else:  # a rerun into an output that holds rows: it may find nothing to do
        output.mkdir()
        (output / "_settings.json").write_text("{}")
    early_ray.start_for(config)
    assert early_ray.take(4) is None
    assert fake_ray == []


def test_overwrite_starts_early_even_into_an_output_with_rows(fake_ray, tmp_path):
    output = tmp_path / "out"
    output.mkdir()
    (output / "_settings.json").write_text("{}")
    early_ray.start_for(JobConfig(str(output), overwrite=True))
    assert early_ray.take(4)[0] is True
    assert fake_ray == [("init", 4, "early-ray")]


def test_a_job_that_stops_before_needing_ray_shuts_its_early_cluster_down(fake_ray, tmp_path):
    early_ray.start_for(JobConfig(str(tmp_path / "out")))
    early_ray.abandon()
    assert fake_ray[-1] == ("shutdown",)
    assert early_ray.take(4) is None


def test_a_plan_that_asks_for_other_cpus_gets_a_cluster_of_its_own(fake_ray, tmp_path):
    early_ray.start_for(JobConfig(str(tmp_path / "out")))
    assert early_ray.take(7) is None  # the early one (4 CPUs) is shut down; the caller starts
    assert fake_ray[-1] == ("shutdown",)


def test_the_start_error_is_raised_in_the_driver(fake_ray, tmp_path, monkeypatch):
    def failing(address, *, num_cpus=None, num_gpus=None):
        raise RuntimeError("could not start a local Ray cluster")

    monkeypatch.setattr("sentray.kit.ray_cluster.init_ray", failing)
    early_ray.start_for(JobConfig(str(tmp_path / "out")))
    with pytest.raises(RuntimeError, match="could not start"):
        early_ray.take(4)

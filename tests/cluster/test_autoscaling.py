"""The jobs on an autoscaling cluster, on this machine, with Ray's own harness: the node types of
cluster.yaml (scaled down: `LocalNodeTypes`), launched from zero by Ray's autoscaler through its
fake multi-node provider (`LocalAutoscalingCluster`), a head that takes no work, jobs submitted
as users submit them (`ray job submit --working-dir <repo> -- python jobs/X.py ...`).

Each test starts from a cluster with no worker node and checks, from outside the job (Ray's
state API, sampled every second: `ClusterTimeline`), that the autoscaler launched workers for it,
that no actor ran on the head, that every row came out once, and that the idle workers are
removed again. One test loses a worker node mid-job. GPU: a fake GPU node offers the
GPU resource the autoscaler sees, not a CUDA device (tested), so `jobs/train.py --use-gpu` cannot
run here; training is tested on the CPU worker type instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.dataset as pads
import pytest
from conftest import ROOT

from sentray.testing.autoscaling_cluster import LocalAutoscalingCluster
from sentray.testing.cluster_timeline import ClusterTimeline
from sentray.testing.cluster_types import LocalNodeTypes

pytestmark = [pytest.mark.long, pytest.mark.ray, pytest.mark.slow]

IDLE_TIMEOUT_S = 15.0
ROWS = 10_000


@pytest.fixture(scope="module")
def cluster():
    """cluster.yaml's head (CPU: 0) and worker types, scaled down: cpu_worker with 2 CPUs, at
    most 2 nodes; gpu_worker with 1 CPU and 1 GPU, at most 1; both from min_workers 0."""
    types = LocalNodeTypes.from_cluster_yaml(ROOT / "cluster.yaml", cpus_per_worker=2,
                                             max_workers=2, idle_timeout_s=IDLE_TIMEOUT_S)
    types.workers["gpu_worker"]["max_workers"] = 1
    # a short folder: Ray's socket paths under it must stay within 107 characters
    folder = Path(tempfile.mkdtemp(prefix="ray-as-", dir="/tmp"))
    with LocalAutoscalingCluster(types, folder) as started:
        yield started
    shutil.rmtree(folder, ignore_errors=True)  # its sessions' logs: kept only if stop() raised


@pytest.fixture(scope="module")
def corpus(brown_corpus, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "brown-10k.txt"
    with brown_corpus.open() as lines:
        path.write_text("".join(next(lines) for _ in range(ROWS)))
    return path


def embed_args(corpus: Path, output: Path, model: Path, *extra: str) -> list[str]:
    return ["--input", str(corpus), "--output", str(output), "--model", str(model),
            "--pooling", "mean", "--precision", "fp32", "--rows-per-batch", "250", *extra]


def rows_of(folder: Path, columns: list[str]):
    return pads.dataset(folder, format="parquet").to_table(columns=columns)


def check_submitted(done: subprocess.CompletedProcess) -> dict:
    """The job's brief summary line (its last JSON line), once `ray job submit` says it
    succeeded."""
    log = done.stdout + done.stderr
    assert done.returncode == 0 and "succeeded" in log, log[-4000:]
    return json.loads(next(line for line in reversed(done.stdout.splitlines())
                           if line.startswith("{")))


def check_on_workers(cluster: LocalAutoscalingCluster, timeline: ClusterTimeline,
                     actor_name: str) -> None:
    """Workers were launched for the job (none before it), and none of its actors ran on the
    head: neither in any sample nor in Ray's record of every actor the job had."""
    assert timeline.samples[0].worker_count == 0, timeline.samples[0]
    assert timeline.max_workers() >= 1, timeline.to_json()[-5:]
    head = cluster.head_node_id()
    placed = [a["node_id"] for a in cluster.all_actors(actor_name) if a["node_id"]]
    assert placed and head not in placed, placed
    assert timeline.actors_on_head() == 0


def test_a_local_path_is_refused_before_any_work(cluster, corpus, tmp_path, tiny_model_dir):
    """One node now (the head) but an autoscaler that may add nodes elsewhere: many."""
    cluster.wait_for_workers(0)
    output = tmp_path / "refused"
    with ClusterTimeline(cluster) as timeline:
        done = cluster.submit("python", "jobs/embed.py",
                              *embed_args(corpus, output, tiny_model_dir, "--actors", "1"))
    log = " ".join((done.stdout + done.stderr).split())
    assert done.returncode != 0, log[-3000:]
    # the model folder too: every actor loads it on its own node
    assert (f"local paths (input {corpus}; output {output}; model {tiny_model_dir.resolve()})"
            in log), log[-3000:]
    assert "with an autoscaler that may add nodes on other machines" in log
    assert "s3://" in log and "--shared-paths" in log
    assert not output.exists()  # refused before any work: nothing written
    assert timeline.max_workers() == 0  # and no node launched for it


def test_the_embedding_scales_from_zero_and_back(cluster, corpus, tmp_path, tiny_model_dir):
    """jobs/embed.py --actors 1-3 on 10,000 rows: workers launched for it, its actors on them,
    every row once with the vectors of a local run, the workers removed once idle."""
    cluster.wait_for_workers(0)
    output, local = tmp_path / "cluster", tmp_path / "local"
    args = embed_args(corpus, output, tiny_model_dir, "--actors", "1-3", "--shared-paths")
    with ClusterTimeline(cluster, actor_name="EmbedBatch") as timeline:
        summary = check_submitted(cluster.submit("python", "jobs/embed.py", *args))
        idle_for = cluster.wait_for_workers(0, timeout=IDLE_TIMEOUT_S + 120)
        timeline.sample()  # one sample with the workers gone, whatever the thread's timing
    assert summary["rows_in"] == summary["rows_out"] == ROWS
    check_on_workers(cluster, timeline, "EmbedBatch")
    first_worker = timeline.first(lambda s: s.worker_count > 0)
    # removed once idle for the timeout, not before: the last sample with an actor at work, and
    # the first after it with no worker node (1 s samples: 3 s of slack)
    busy = [s for s in timeline.samples if s.actors][-1]
    gone = timeline.first(lambda s: s.t > busy.t and s.worker_count == 0)
    assert gone.t - busy.t >= IDLE_TIMEOUT_S - 3, (busy, gone)
    print(f"first worker node after {first_worker.t} s; at most {timeline.max_workers()} "
          f"workers and {timeline.max_actors()} actors; all workers gone {gone.t - busy.t:.0f} s "
          f"after the last actor was seen, {idle_for:.0f} s after the job ended")

    # the same command on this machine's own private cluster: the same vectors
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    here = subprocess.run([sys.executable, str(ROOT / "jobs" / "embed.py"),
                           *embed_args(corpus, local, tiny_model_dir, "--actors", "1-3",
                                       "--in-process-rows", "0")],  # on Ray, not in process
                          env=env, capture_output=True, text=True, timeout=600)
    assert here.returncode == 0, here.stderr[-4000:]
    ours, theirs = (rows_of(folder, ["id", "embedding"]).sort_by("id")
                    for folder in (output, local))
    ids = ours.column("id").to_pylist()
    assert ids == sorted(f"{corpus.name}:{i}" for i in range(ROWS))  # every row once
    assert ids == theirs.column("id").to_pylist()
    vectors, expected = (np.array(t.column("embedding").to_pylist()) for t in (ours, theirs))
    np.testing.assert_allclose(vectors, expected, rtol=0, atol=1e-6)


def test_a_worker_node_lost_mid_job_loses_no_row(cluster, corpus, tmp_path, tiny_model_dir):
    """A worker node killed outright while the embedding runs (raylet, object store, actors):
    the job finishes on the nodes left and the autoscaler's new ones, every row once."""
    cluster.wait_for_workers(0)
    output = tmp_path / "lost"
    args = embed_args(corpus, output, tiny_model_dir, "--actors", "1-3", "--shared-paths",
                      "--rows-per-batch", "100", "--rows-per-file", "0")
    killed: list[tuple[str, int]] = []  # (node id, parts written when it was killed)

    def kill_a_busy_worker() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not killed:
            busy = {a["node_id"] for a in cluster.actors("EmbedBatch") if a["node_id"]}
            parts = len(list(output.rglob("part-*.parquet")))
            if busy and parts >= 5:
                killed.append((sorted(busy)[0], parts))
                cluster.kill_node(killed[0][0])
            time.sleep(0.5)

    killer = threading.Thread(target=kill_a_busy_worker, daemon=True)
    with ClusterTimeline(cluster, actor_name="EmbedBatch") as timeline:
        killer.start()
        summary = check_submitted(cluster.submit("python", "jobs/embed.py", *args))
        killer.join()
    assert killed, "no worker node was killed mid-job"
    node, parts_then = killed[0]
    assert parts_then < ROWS // 100  # lost mid-job, with rows still to do
    assert len(list(output.rglob("part-*.parquet"))) == ROWS // 100  # a part per block, once
    assert summary["rows_in"] == summary["rows_out"] == ROWS
    ids = rows_of(output, ["id"]).column("id").to_pylist()
    assert sorted(ids) == sorted(f"{corpus.name}:{i}" for i in range(ROWS))
    assert node not in timeline.samples[-1].worker_ids  # gone from the cluster
    check_on_workers(cluster, timeline, "EmbedBatch")


@pytest.fixture(scope="module")
def augmented(cluster, corpus, tmp_path_factory) -> tuple[Path, dict, ClusterTimeline]:
    """jobs/augment.py on the first 1,000 rows, submitted to the cluster at rest."""
    cluster.wait_for_workers(0)
    folder = tmp_path_factory.mktemp("augment")
    small = folder / "brown-1k.txt"
    small.write_text("".join(corpus.read_text().splitlines(keepends=True)[:1000]))
    with ClusterTimeline(cluster, actor_name="AugmentBatch") as timeline:
        summary = check_submitted(cluster.submit(
            "python", "jobs/augment.py", "--input", str(small), "--output", str(folder / "out"),
            "--actors", "1-2", "--shared-paths"))
        cluster.wait_for_workers(0, timeout=IDLE_TIMEOUT_S + 120)
        timeline.sample()  # one sample with the workers gone
    return folder, summary, timeline


def test_the_augmentation_scales_from_zero_and_back(cluster, augmented):
    folder, summary, timeline = augmented
    check_on_workers(cluster, timeline, "AugmentBatch")
    # its workers removed once idle for the timeout, not before (1 s samples: 3 s of slack)
    busy = [s for s in timeline.samples if s.actors][-1]
    gone = timeline.first(lambda s: s.t > busy.t and s.worker_count == 0)
    assert gone.t - busy.t >= IDLE_TIMEOUT_S - 3, (busy, gone)
    assert summary["rows_in"] == summary["rows_out"] + summary["rows_rejected"] == 1000
    kept = rows_of(folder / "out", ["id"]).column("id").to_pylist()
    rejected = rows_of(folder / "out-rejects", ["id"]).column("id").to_pylist()
    assert sorted(kept + rejected) == sorted(f"brown-1k.txt:{i}" for i in range(1000))


def test_training_scales_up_the_cpu_worker_type(cluster, augmented, tmp_path, tiny_model_dir,
                                                data_dir):
    """jobs/train.py on the augmentation's output, one CPU worker: the autoscaler launches a
    cpu_worker for it (the head has no CPU), and the run exports its model."""
    folder, _, _ = augmented
    cluster.wait_for_workers(0)
    output = tmp_path / "train"
    with ClusterTimeline(cluster) as timeline:
        summary = check_submitted(cluster.submit(
            "python", "jobs/train.py", "--input", str(folder / "out"), "--output", str(output),
            "--model", str(tiny_model_dir), "--workers", "1", "--batch-size", "16",
            "--max-steps", "4", "--eval-steps", "4", "--data-dir", str(data_dir)))
    assert summary["steps"] == 4 and summary["exported"], summary
    assert timeline.samples[0].worker_count == 0
    assert max(s.workers.get("cpu_worker", 0) for s in timeline.samples) >= 1
    head = cluster.head_node_id()
    placed = [a["node_id"] for a in cluster.all_actors("RayTrainWorker") if a["node_id"]]
    assert placed and head not in placed, placed


GPU_PROBE = ("import json, ray, torch; ray.init(); "
             "probe = ray.remote(num_gpus=1)(lambda: [ray.get_gpu_ids(), torch.cuda.is_available()"
             ", ray.get_runtime_context().get_node_id()]); "
             "print('GPU-PROBE', json.dumps(ray.get(probe.remote())))")


def test_a_gpu_task_launches_the_gpu_worker_type_which_has_no_cuda(cluster):
    """A task that asks for a GPU makes the autoscaler launch cluster.yaml's GPU worker type;
    Ray hands it GPU 0, but the fake node has no CUDA device behind it: GPU code (jobs/train.py
    --use-gpu, jobs/embed.py --num-gpus 1) cannot run on it."""
    cluster.wait_for_workers(0)
    with ClusterTimeline(cluster) as timeline:
        done = cluster.submit("python", "-c", GPU_PROBE)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    found = re.search(r"^GPU-PROBE (\[.*\])$", done.stdout, flags=re.M)
    assert found, done.stdout[-3000:]
    gpu_ids, cuda, node = json.loads(found.group(1))
    assert gpu_ids == [0] and cuda is False
    assert max(s.workers.get("gpu_worker", 0) for s in timeline.samples) == 1
    assert node in {i for s in timeline.samples for i in s.worker_ids}

"""Local paths on a cluster that may span machines: refused before any work, unless declared
shared (`--shared-paths`). The cluster's shape is faked here (node hosts, its autoscaler); the
long tier (tests/cluster/test_autoscaling.py) runs the same check against a real local
autoscaling cluster."""

from __future__ import annotations

import json
import os

import pytest
import ray
from conftest import load_job

from sentray.kit import cluster_paths
from sentray.kit.cluster_paths import ClusterShape, check_paths, is_local

HOST = "this-host"
PATHS = {"input": ["/data/corpus.txt"], "output": ["/data/out"]}


def shape(hosts=(HOST,), autoscaling=False, started_by_job=False) -> ClusterShape:
    return ClusterShape(tuple(hosts), HOST, autoscaling, started_by_job)


@pytest.mark.parametrize("path, local", [
    ("/data/out", True), ("out/embeddings", True), ("file:///data/out", True),
    ("s3://bucket/out", False), ("S3://bucket/out", False), ("gs://bucket/x", False)])
def test_a_path_without_a_scheme_is_local(path, local):
    assert is_local(path) is local


@pytest.mark.parametrize("cluster, one", [
    (shape(started_by_job=True, autoscaling=None), True),  # the job's own local cluster
    (shape(hosts=(HOST, HOST, HOST)), True),  # several nodes, all on this machine, fixed
    (shape(hosts=(HOST, "other-host")), False),  # a node on another machine
    (shape(autoscaling=True), False),  # one node now, more (anywhere) later
    (shape(autoscaling=None), False),  # the autoscaler did not say: assume it may
    (shape(hosts=("other-host",)), False),  # the driver is not on the cluster's one node
], ids=["job's-own", "one-machine", "two-machines", "autoscaler", "unknown", "remote-node"])
def test_one_machine_is_told_from_many(cluster, one):
    assert cluster.one_machine is one


def test_local_paths_on_many_machines_are_refused_with_the_fixes():
    with pytest.raises(ValueError) as error:
        check_paths(PATHS, shape(hosts=(HOST, "ip-10-0-0-7")), shared=False)
    message = str(error.value)
    assert "local paths (input /data/corpus.txt; output /data/out)" in message
    assert "2 nodes on 2 machines" in message
    assert "read the input from its own disk" in message and "rows missing" in message
    assert "s3://bucket/prefix" in message and "IAM role" in message
    assert "--shared-paths" in message and "NFS, EFS" in message


def test_an_autoscaling_cluster_is_many_even_with_one_node():
    with pytest.raises(ValueError, match="1 node now, on the driver's machine, with an "
                                         "autoscaler that may add nodes on other machines"):
        check_paths({"input": [], "output": ["out/emb"]}, shape(autoscaling=True), False)


@pytest.mark.parametrize("paths, cluster, shared", [
    (PATHS, shape(autoscaling=True), True),  # declared shared
    ({"input": ["s3://b/in.txt"], "output": ["s3://b/out"]}, shape(autoscaling=True), False),
    (PATHS, shape(hosts=(HOST, HOST)), False),  # one machine
    (PATHS, shape(started_by_job=True), False),
], ids=["shared", "uris", "one-machine", "job's-own"])
def test_what_is_let_through(paths, cluster, shared):
    check_paths(paths, cluster, shared)


def test_only_the_local_paths_are_named():
    with pytest.raises(ValueError) as error:
        check_paths({"input": ["s3://b/in.txt"], "output": ["/data/out"]},
                    shape(autoscaling=True), False)
    assert "local paths (output /data/out)" in str(error.value)
    assert "read the input" not in str(error.value)


def test_the_read_only_provider_is_told_from_an_autoscaler():
    """Without an autoscaling config Ray's monitor names each node's type node_<its id>."""
    assert cluster_paths.readonly_types([("ab12", "node_ab12"), ("cd34", "node_cd34")])
    assert not cluster_paths.readonly_types([("ab12", "ray.head.default"), ("cd34", "cpu_worker")])


def test_the_autoscalers_status_decides(monkeypatch):
    """Read from the connected cluster's own store (the driver's GCS client), not through
    `internal_kv`'s module-level client, which follows the last head node started in the
    process: the head-loss drill starts a second cluster and every job after it was refused."""
    import types

    import ray._private.state
    import ray._private.worker

    status = {}
    monkeypatch.setattr(ray._private.state.state, "get_cluster_config", lambda: None)
    client = types.SimpleNamespace(internal_kv_get=lambda key, namespace: status.get(key))
    monkeypatch.setattr(ray._private.worker.global_worker, "gcs_client", client, raising=False)
    for mapping, expected in [({"f0": "ray.head.default", "f1": "cpu_worker"}, True),
                              ({"f0": "node_f0"}, False)]:
        report = {"autoscaler_report": {"node_type_mapping": mapping}}
        status[b"__autoscaling_status"] = json.dumps(report).encode()
        assert cluster_paths.autoscaler_adds_nodes(wait=0) is expected
    status.clear()
    assert cluster_paths.autoscaler_adds_nodes(wait=0) is None


def test_a_job_that_starts_its_own_cluster_is_not_checked(monkeypatch):
    """No address and no Ray connected: the job will start its one-node cluster here."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(cluster_paths, "current_shape", pytest.fail)
    cluster_paths.refuse_unshared_paths(None, "/data/in.txt", ["/data/out"], shared=False)


@pytest.mark.slow
@pytest.mark.parametrize("job", ["embed", "augment"])
def test_the_corpus_jobs_refuse_before_writing(job, tmp_path, tiny_model_dir, monkeypatch,
                                               exit_message):
    """On a cluster of two machines, jobs/embed.py and jobs/augment.py stop with the message
    before their output folder exists."""
    corpus = tmp_path / "in.txt"
    corpus.write_text("One sentence here.\nAnother sentence there.\n")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")  # as `ray job submit` sets it
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(cluster_paths, "current_shape",
                        lambda: shape(hosts=(HOST, "ip-10-0-0-7")))
    args = ["--input", str(corpus), "--output", str(tmp_path / "out"), "--actors", "1"]
    args += ["--model", str(tiny_model_dir), "--pooling", "mean"] if job == "embed" else []
    with pytest.raises(SystemExit) as error:
        load_job(job).main(args)
    assert "local paths (input" in exit_message(error) and "--shared-paths" in exit_message(error)
    assert not (tmp_path / "out").exists()


def test_a_cluster_joined_in_process_is_checked_one_started_here_is_not(monkeypatch):
    """No address: a Ray this process connected to (a notebook, a test session) is checked;
    one it started itself (the job's own, early or not) is this machine."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(cluster_paths, "current_shape", lambda: shape(autoscaling=True))
    monkeypatch.setattr(cluster_paths, "started_here", lambda: False)
    with pytest.raises(ValueError, match="local paths"):
        cluster_paths.refuse_unshared_paths(None, "/data/in.txt", ["/data/out"], shared=False)
    monkeypatch.setattr(cluster_paths, "started_here", lambda: True)
    cluster_paths.refuse_unshared_paths(None, "/data/in.txt", ["/data/out"], shared=False)


def test_paths_declared_shared_are_not_checked(monkeypatch):
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(cluster_paths, "current_shape", pytest.fail)
    cluster_paths.refuse_unshared_paths(None, "/mnt/efs/in.txt", ["/mnt/efs/out"], shared=True)
    cluster_paths.refuse_unshared_paths(None, "s3://b/in.txt", ["s3://b/out"], shared=False)


@pytest.mark.ray
def test_a_fixed_cluster_on_this_machine_is_one_machine(ray_cluster):
    """The test session's cluster: a head and two worker nodes on 127.0.0.1, no autoscaler."""
    found = cluster_paths.current_shape()
    assert len(found.hosts) >= 3 and found.autoscaling is False
    assert found.one_machine


def test_a_local_model_folder_on_many_machines_is_refused_unless_in_the_upload(monkeypatch):
    """The embedding job's actors load a --model folder on their own nodes: on a cluster of
    many machines it is checked like the input, even when input and output are URIs; a folder
    inside the job's --working-dir upload is on every node."""
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(cluster_paths, "started_here", lambda: False)
    monkeypatch.setattr(cluster_paths, "current_shape",
                        lambda: shape(hosts=(HOST, "ip-10-0-0-7")))
    with pytest.raises(ValueError) as error:
        cluster_paths.refuse_unshared_paths(None, "s3://b/in.txt", ["s3://b/out"], False,
                                            models=["/models/mine"])
    message = str(error.value)
    assert "local paths (model /models/mine)" in message
    assert "load the model folder from its own node's disk" in message
    assert "rows missing" not in message  # nothing is written to a local folder
    cluster_paths.refuse_unshared_paths(None, "s3://b/in.txt", ["s3://b/out"], True,
                                        models=["/models/mine"])  # --shared-paths
    upload = "/tmp/ray/session_1/runtime_resources/working_dir_files/_ray_pkg_ab12"
    monkeypatch.setattr(os, "getcwd", lambda: upload)
    assert cluster_paths.in_working_dir_upload(f"{upload}/models/mine")
    assert not cluster_paths.in_working_dir_upload("/models/mine")
    cluster_paths.refuse_unshared_paths(None, "s3://b/in.txt", ["s3://b/out"], False,
                                        models=[f"{upload}/models/mine"])


def test_the_embedding_job_names_its_model_folder_and_no_other_kind(tiny_model_dir, tmp_path,
                                                                     monkeypatch):
    from sentray.bulk_embedding.config import EmbedConfig
    from sentray.bulk_embedding.job import run_embedding
    from sentray.corpus.sources import CorpusConfig
    from sentray.encode.config import EncoderConfig

    checked = []

    def refuse(address, inputs, outputs, shared, models=()):  # the driver's check, then stop
        checked.append(tuple(models))
        raise RuntimeError("checked")

    monkeypatch.setattr(cluster_paths, "refuse_unshared_paths", refuse)
    corpus = tmp_path / "in.txt"
    corpus.write_text("a sentence\n")

    def folders(model: str) -> tuple[str, ...]:
        config = EmbedConfig(corpus=CorpusConfig(input=str(corpus)), output=str(tmp_path / "out"),
                             encoder=EncoderConfig(model=model, pooling="mean"))
        with pytest.raises(RuntimeError, match="checked"):
            run_embedding(config)
        return checked.pop()

    assert folders(str(tiny_model_dir)) == (str(tiny_model_dir.resolve()),)
    assert folders("all-MiniLM-L6-v2") == ()  # packaged: found in each node's own Python


def test_the_paths_check_of_a_job_in_its_own_process_does_not_import_ray(tmp_path):
    """No cluster given and none connected: nothing to check, and Ray (~0.4 s) not imported."""
    import subprocess
    import sys

    code = ("import sys; from sentray.kit.cluster_paths import refuse_unshared_paths; "
            f"refuse_unshared_paths(None, {str(tmp_path)!r}, [{str(tmp_path / 'out')!r}], "
            "False); print('ray' in sys.modules)")
    checked = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=60, env={k: v for k, v in __import__("os").environ.items()
                                              if k != "RAY_ADDRESS"})
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.strip() == "False"

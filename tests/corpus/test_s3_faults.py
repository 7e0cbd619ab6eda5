"""S3 misbehaving under the corpus jobs (a fault-injecting proxy on loopback in front of moto):
with throttling, server errors, connections cut mid-body and slow answers, the jobs complete
with every row once (pyarrow's S3 retries); past the retry budget a job stops with an error
naming S3 and the object, and a rerun completes. A part cut mid-upload never counts."""

from __future__ import annotations

import boto3
import pyarrow.dataset as pads
import pytest
from conftest import load_job

from sentray.kit import storage
from sentray.testing.s3_fault_proxy import FaultProxy, Faults

ROWS = 300


@pytest.fixture()
def bucket(moto_s3):
    s3 = boto3.client("s3", endpoint_url=moto_s3, region_name="us-east-1")
    s3.create_bucket(Bucket="flaky")
    lines = [f"Sentence number {i} about a flaky object store." for i in range(ROWS)]
    s3.put_object(Bucket="flaky", Key="in/corpus.txt", Body=("\n".join(lines) + "\n").encode())
    return s3


def read_ids(moto_s3: str, prefix: str) -> list:
    location = storage.locate(f"s3://flaky/{prefix}", moto_s3)
    dataset = pads.dataset(location.path, filesystem=location.filesystem, format="parquet")
    if "id" not in dataset.schema.names:  # no part there (every row went to the other folder)
        return []
    return dataset.to_table(columns=["id"]).column("id").to_pylist()


def embed_args(endpoint: str, model_dir) -> list[str]:
    return ["--input", "s3://flaky/in/", "--output", "s3://flaky/out/", "--s3-endpoint",
            endpoint, "--model", str(model_dir), "--pooling", "mean", "--actors", "2",
            "--rows-per-batch", "25"]


@pytest.mark.long
@pytest.mark.ray
def test_jobs_complete_through_throttling_errors_and_cut_connections(ray_cluster, moto_s3,
                                                                      bucket, tiny_model_dir):
    proxy = FaultProxy(int(moto_s3.rsplit(":", 1)[1]), Faults(
        slow_down=0.08, internal_error=0.04, cut_request=0.03, cut_response=0.03, delay=0.05,
        seed=1))
    try:
        summary = load_job("embed").main(embed_args(proxy.endpoint, tiny_model_dir))
        augment = load_job("augment").main([
            "--input", "s3://flaky/in/", "--output", "s3://flaky/aug/", "--s3-endpoint",
            proxy.endpoint, "--actors", "2", "--rows-per-batch", "50", "--keep-short"])
    finally:
        proxy.close()
    assert sum(proxy.faults.injected.values()) >= 10, proxy.faults.injected  # it did misbehave
    assert summary["rows_in"] == summary["rows_out"] == ROWS
    ids = read_ids(moto_s3, "out/")
    assert sorted(ids) == sorted(f"corpus.txt:{i}" for i in range(ROWS))  # every row once
    assert augment["rows_in"] == augment["rows_out"] + augment["rows_rejected"] == ROWS
    kept, rejected = read_ids(moto_s3, "aug/"), read_ids(moto_s3, "aug-rejects/")
    assert len(kept) + len(rejected) == len(set(kept) | set(rejected)) == ROWS


@pytest.mark.long
@pytest.mark.ray
def test_past_the_retry_budget_the_job_names_s3_and_a_rerun_completes(
        ray_cluster, moto_s3, bucket, tiny_model_dir, monkeypatch, exit_message):
    monkeypatch.setenv("SENTRAY_S3_MAX_ATTEMPTS", "2")
    # every upload of a part throttled: the rest goes through, no part can be written
    proxy = FaultProxy(int(moto_s3.rsplit(":", 1)[1]), Faults(
        slow_down=1.0, only=("PUT", "POST"), path_contains="/part-"))
    try:
        with pytest.raises(SystemExit) as info:
            load_job("embed").main(embed_args(proxy.endpoint, tiny_model_dir))
        with pytest.raises(SystemExit) as augment_info:
            load_job("augment").main([
                "--input", "s3://flaky/in/", "--output", "s3://flaky/aug/", "--s3-endpoint",
                proxy.endpoint, "--actors", "2", "--rows-per-batch", "50", "--keep-short"])
    finally:
        proxy.close()
    augment_message = exit_message(augment_info)
    assert "S3 failed while the job wrote to s3://flaky/aug/" in augment_message
    assert "part-" in augment_message and "SLOW_DOWN" in augment_message
    assert read_ids(moto_s3, "aug/") == read_ids(moto_s3, "aug-rejects/") == []
    message = exit_message(info)
    assert "S3 failed while the job wrote to s3://flaky/out/" in message
    assert "part-" in message and "SLOW_DOWN" in message  # the object, and what S3 said
    assert "run the same command again" in message
    assert read_ids(moto_s3, "out/") == []  # nothing half-uploaded counts as written
    healthy = FaultProxy(int(moto_s3.rsplit(":", 1)[1]))
    try:
        again = load_job("embed").main(embed_args(healthy.endpoint, tiny_model_dir))
    finally:
        healthy.close()
    assert again["rows_in"] == again["rows_out"] == ROWS
    assert sorted(read_ids(moto_s3, "out/")) == sorted(f"corpus.txt:{i}" for i in range(ROWS))

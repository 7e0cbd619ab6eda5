"""Offline checks of the Ray cluster launcher config (cluster.yaml).

Everything here runs locally: the config is validated against Ray's own
ray-schema.json and merged with Ray's AWS defaults, exactly as `ray up` does
before it talks to AWS. Nothing here calls `ray up` or creates AWS clients.
"""

from __future__ import annotations

import copy
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

CLUSTER_YAML = Path(__file__).resolve().parent.parent / "cluster.yaml"
WORKER_TYPES = ("cpu_worker", "gpu_worker")


@pytest.fixture(scope="module")
def raw_config() -> dict[str, Any]:
    with CLUSTER_YAML.open() as f:
        config = yaml.safe_load(f)
    assert isinstance(config, dict)
    return config


@pytest.fixture
def config(raw_config: dict[str, Any]) -> dict[str, Any]:
    """A fresh copy per test, so tests may mutate it."""
    return copy.deepcopy(raw_config)


def _head_ray_start(config: dict[str, Any]) -> list[str]:
    starts = [c for c in config["head_start_ray_commands"] if "ray start" in c]
    assert len(starts) == 1, starts
    # The command may be preceded by e.g. "ulimit -n 65536;".
    return shlex.split(starts[0].split(";")[-1])


def test_raw_config_passes_ray_schema(config: dict[str, Any]) -> None:
    validate_config(config)


def test_prepared_config_passes_ray_validation(config: dict[str, Any]) -> None:
    # Same order as ray's _bootstrap_config: merge defaults, then validate.
    prepared = prepare_config(config)
    validate_config(prepared)
    # Ray's default node types must not leak in when we define our own.
    assert set(prepared["available_node_types"]) == {prepared["head_node_type"], *WORKER_TYPES}


def test_workers_autoscale_from_zero(config: dict[str, Any]) -> None:
    node_types = config["available_node_types"]
    total_max = 0
    for name in WORKER_TYPES:
        node_type = node_types[name]
        assert node_type["min_workers"] == 0, name
        assert node_type["max_workers"] > 0, name
        total_max += node_type["max_workers"]
    assert config["max_workers"] >= total_max


def test_gpu_worker_has_gpu_and_cpu_worker_does_not(config: dict[str, Any]) -> None:
    node_types = config["available_node_types"]
    assert node_types["gpu_worker"]["resources"].get("GPU", 0) >= 1
    assert node_types["cpu_worker"]["resources"].get("GPU", 0) == 0


def test_dashboard_is_bound_to_localhost(config: dict[str, Any]) -> None:
    args = _head_ray_start(config)
    assert "--head" in args
    assert "--dashboard-host=127.0.0.1" in args
    assert "--autoscaling-config=~/ray_bootstrap_config.yaml" in args
    all_commands = (
        config["head_start_ray_commands"]
        + config["worker_start_ray_commands"]
        + config["setup_commands"]
        + config.get("head_setup_commands", [])
        + config.get("worker_setup_commands", [])
    )
    for command in all_commands:
        assert "0.0.0.0" not in command, command
    # No extra inbound rules (e.g. opening 8265) in the security group.
    assert "security_group" not in config["provider"]


def test_workers_join_the_head(config: dict[str, Any]) -> None:
    joined = " ".join(config["worker_start_ray_commands"])
    assert "ray start --address=$RAY_HEAD_IP:6379" in joined
    assert config["worker_start_ray_commands"][0] == "ray stop"
    assert config["head_start_ray_commands"][0] == "ray stop"


def test_project_is_mounted_and_installed(config: dict[str, Any]) -> None:
    assert config["file_mounts"] == {"/home/ubuntu/sentray": "."}
    setup = config["setup_commands"]
    torch_idx = [i for i, c in enumerate(setup) if "torch==2.13.0" in c]
    pkg_idx = [i for i, c in enumerate(setup) if '-e "/home/ubuntu/sentray[openie,runtimes,index,serve]"' in c]
    assert torch_idx, setup
    assert pkg_idx, setup
    assert max(torch_idx) < min(pkg_idx), "torch must be installed before the package"
    assert all(c.startswith("pip install") for c in (setup[torch_idx[0]], setup[pkg_idx[0]]))


def test_nodes_install_the_torch_the_project_pins(config: dict[str, Any]) -> None:
    """The cluster's torch is the one the Makefile installs and CI tests (a loose or different
    spec on a node pulls another build, on GPU nodes a multi-GB CUDA one)."""
    makefile = (CLUSTER_YAML.parent / "Makefile").read_text()
    pinned = {word for word in makefile.split() if word.startswith("torch==")}
    installed = {word.strip("'\"") for command in config["setup_commands"]
                 for word in shlex.split(command) if word.startswith("torch")}
    assert len(pinned) == 1 and installed == pinned, (installed, pinned)


def test_the_head_takes_no_work(config: dict[str, Any]) -> None:
    """CPU: 0 on the head: every task and actor goes to a worker, which the autoscaler launches
    from zero (the long-tier test tests/cluster/test_autoscaling.py shows it does)."""
    assert config["available_node_types"]["head"]["resources"] == {"CPU": 0}


def test_local_node_types_are_cluster_yamls_scaled_down(config: dict[str, Any]) -> None:
    """The local autoscaling cluster of the long tier, the demo and the bench: cluster.yaml's
    worker types, their CPUs scaled (m5.4xlarge's 16 vCPUs -> 2, g5.xlarge's 4 -> 1), the GPU
    kept, min_workers as written, max_workers capped; its config passes Ray's validator."""
    from sentray.testing.cluster_types import HEAD_TYPE, LocalNodeTypes

    local = LocalNodeTypes.from_cluster_yaml(CLUSTER_YAML, cpus_per_worker=2, max_workers=2)
    assert local.head == {"CPU": 0.0}
    assert set(local.workers) == set(WORKER_TYPES)
    assert local.workers["cpu_worker"]["resources"] == {"CPU": 2}
    assert local.workers["gpu_worker"]["resources"] == {"CPU": 1, "GPU": 1}
    for name in WORKER_TYPES:
        assert local.workers[name]["min_workers"] == config["available_node_types"][name][
            "min_workers"] == 0
        assert local.workers[name]["max_workers"] == 2
    autoscaling = local.autoscaling_config("127.0.0.1:6380")
    validate_config(autoscaling)
    assert autoscaling["provider"]["gcs_address"] == "127.0.0.1:6380"
    assert autoscaling["available_node_types"][HEAD_TYPE]["resources"] == {"CPU": 0.0}
    assert autoscaling["idle_timeout_minutes"] == 0.25


def test_an_unknown_instance_type_says_what_to_add(tmp_path, config: dict[str, Any]) -> None:
    from sentray.testing.cluster_types import LocalNodeTypes

    config["available_node_types"]["cpu_worker"]["node_config"]["InstanceType"] = "x9.huge"
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ValueError, match="x9.huge.*INSTANCE_SHAPES.*resources: {CPU: N}"):
        LocalNodeTypes.from_cluster_yaml(path)


def test_workers_have_a_role_for_s3(config: dict[str, Any]) -> None:
    """Ray gives only the head an instance profile; the workers' Ray Data tasks and actors read
    and write s3:// with their own (the profile `ray up` creates for the head: S3 access)."""
    for name in WORKER_TYPES:
        node_config = config["available_node_types"][name]["node_config"]
        assert node_config["IamInstanceProfile"] == {"Name": "ray-autoscaler-v1"}, name
    head = config["available_node_types"]["head"]["node_config"]
    assert "IamInstanceProfile" not in head  # Ray's own default, created by `ray up`

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

import jsonschema
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
    assert prepared["cluster_name"] == "sentray"
    assert prepared["provider"]["type"] == "aws"
    assert prepared["provider"]["region"] == "us-west-2"
    assert prepared["head_node_type"] == "head"
    assert set(prepared["available_node_types"]) == {"head", *WORKER_TYPES}
    # Ray's default node types must not leak in when we define our own.
    assert "ray.worker.default" not in prepared["available_node_types"]
    # prepare_config pins the head type to zero extra workers.
    assert prepared["available_node_types"]["head"]["max_workers"] == 0


def test_workers_autoscale_from_zero(config: dict[str, Any]) -> None:
    node_types = config["available_node_types"]
    total_max = 0
    for name in WORKER_TYPES:
        node_type = node_types[name]
        assert node_type["min_workers"] == 0, name
        assert node_type["max_workers"] > 0, name
        total_max += node_type["max_workers"]
    assert config["max_workers"] >= total_max
    assert config["idle_timeout_minutes"] == 5


def test_gpu_worker_has_gpu_and_cpu_worker_does_not(config: dict[str, Any]) -> None:
    node_types = config["available_node_types"]
    assert node_types["gpu_worker"]["resources"].get("GPU", 0) >= 1
    assert node_types["gpu_worker"]["node_config"]["InstanceType"].startswith("g5.")
    assert node_types["cpu_worker"]["resources"].get("GPU", 0) == 0


def test_every_node_type_has_an_image(config: dict[str, Any]) -> None:
    for name, node_type in config["available_node_types"].items():
        image = node_type["node_config"]["ImageId"]
        assert image == "latest_dlami" or image.startswith("ami-"), (name, image)


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
    pkg_idx = [i for i, c in enumerate(setup) if '-e "/home/ubuntu/sentray[openie]"' in c]
    assert torch_idx, setup
    assert pkg_idx, setup
    assert max(torch_idx) < min(pkg_idx), "torch must be installed before the package"
    assert all(c.startswith("pip install") for c in (setup[torch_idx[0]], setup[pkg_idx[0]]))


def _bogus_top_level_key(config: dict[str, Any]) -> None:
    config["not_a_ray_field"] = True


def _max_workers_wrong_type(config: dict[str, Any]) -> None:
    config["max_workers"] = "twelve"


def _resources_missing(config: dict[str, Any]) -> None:
    del config["available_node_types"]["gpu_worker"]["resources"]


def _gpu_count_not_integer(config: dict[str, Any]) -> None:
    config["available_node_types"]["gpu_worker"]["resources"]["GPU"] = "one"


def _unknown_node_type_key(config: dict[str, Any]) -> None:
    config["available_node_types"]["cpu_worker"]["min_nodes"] = 0


@pytest.mark.parametrize(
    "mutate",
    [
        _bogus_top_level_key,
        _max_workers_wrong_type,
        _resources_missing,
        _gpu_count_not_integer,
        _unknown_node_type_key,
    ],
)
def test_schema_rejects_broken_copies(config: dict[str, Any], mutate: Any) -> None:
    mutate(config)
    with pytest.raises(jsonschema.ValidationError):
        validate_config(config)


def test_rejects_min_workers_above_global_max(config: dict[str, Any]) -> None:
    config["available_node_types"]["cpu_worker"]["min_workers"] = config["max_workers"] + 1
    with pytest.raises(ValueError, match="max_workers"):
        validate_config(config)


def test_rejects_unknown_head_node_type(config: dict[str, Any]) -> None:
    config["head_node_type"] = "does_not_exist"
    with pytest.raises(ValueError, match="head_node_type"):
        validate_config(config)

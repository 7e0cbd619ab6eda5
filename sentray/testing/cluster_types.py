"""`LocalNodeTypes`: the node types of a Ray cluster launcher config (cluster.yaml), scaled down so
that a local autoscaling cluster of them fits one small machine, and written as the whole config
of Ray's fake multi-node provider (`sentray.testing.autoscaling_cluster`).

What is kept from cluster.yaml: the worker types' names, `min_workers`, their GPUs (the resource
the autoscaler sees: a fake GPU node has no CUDA device, only the GPU it advertises), the head's
own resources (CPU: 0, it takes no work) and the upscaling speed. What is scaled: CPUs (the
largest worker type gets `cpus_per_worker` logical CPUs, the others in proportion to their
instances' vCPUs, at least one), `max_workers` (capped), the idle timeout (seconds, not minutes)
and each node's object store.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# vCPUs and GPUs of the instance types cluster.yaml names (AWS's instance type pages): Ray
# detects them on the machine itself, so cluster.yaml does not say them
INSTANCE_SHAPES: dict[str, tuple[int, int]] = {
    "m5.xlarge": (4, 0), "m5.2xlarge": (8, 0), "m5.4xlarge": (16, 0), "m5.8xlarge": (32, 0),
    "g5.xlarge": (4, 1), "g5.2xlarge": (8, 1), "g5.4xlarge": (16, 1), "g5.12xlarge": (48, 4),
}
NODE_TYPE_LABEL = "sentray-node-type"  # a label on every worker node: the type it was launched as
HEAD_TYPE = "ray.head.default"  # the name the fake provider gives the head's type
# sentray.testing.local_node_provider's class (a name: the autoscaler imports it on the head)
LOCAL_PROVIDER = "sentray.testing.local_node_provider.LocalNodeProvider"


@dataclass(frozen=True)
class LocalNodeTypes:
    """The head's resources and the worker types, as the local autoscaler launches them."""

    head: dict[str, float]
    # worker type -> {"resources": {...}, "min_workers": int, "max_workers": int}
    workers: dict[str, dict[str, Any]]
    idle_timeout_s: float = 15.0  # a worker idle this long is removed
    upscaling_speed: float = 1.0
    object_store_bytes: int = 300 << 20  # each node's object store
    source: str = field(default="", compare=False)  # the config file they came from

    @classmethod
    def from_cluster_yaml(cls, path: str | Path, *, cpus_per_worker: int = 2,
                          max_workers: int = 2, only: tuple[str, ...] | None = None,
                          idle_timeout_s: float = 15.0,
                          object_store_bytes: int = 300 << 20) -> LocalNodeTypes:
        """The node types of the launcher config at `path`, scaled down (see the module's
        docstring); `only` keeps those worker types alone."""
        config = yaml.safe_load(Path(path).read_text())
        types = config["available_node_types"]
        head_name = config["head_node_type"]
        names = [name for name in types if name != head_name]
        unknown = sorted(set(only or ()) - set(names))
        if unknown:
            raise ValueError(f"no worker type {unknown} in {path}; it has {names}")
        shapes = {name: _shape(name, types[name]) for name in names}
        largest = max(cpus for cpus, _ in shapes.values())
        workers = {}
        for name in only or names:
            cpus, gpus = shapes[name]
            resources = {"CPU": max(1, math.ceil(cpus * cpus_per_worker / largest))}
            if gpus:
                resources["GPU"] = gpus
            workers[name] = {"resources": resources,
                             "min_workers": int(types[name].get("min_workers", 0)),
                             "max_workers": min(int(types[name]["max_workers"]), max_workers)}
        head = {key: float(value) for key, value in types[head_name]["resources"].items()}
        return cls(head=head, workers=workers, idle_timeout_s=idle_timeout_s,
                   upscaling_speed=float(config.get("upscaling_speed", 1.0)),
                   object_store_bytes=object_store_bytes, source=str(path))

    def autoscaling_config(self, gcs_address: str) -> dict[str, Any]:
        """The whole config of Ray's fake multi-node provider for a head at `gcs_address`."""
        node_types = {HEAD_TYPE: {"resources": dict(self.head), "node_config": {},
                                  "max_workers": 0}}
        for name, worker in self.workers.items():
            node_types[name] = {
                "resources": {**worker["resources"],
                              "object_store_memory": self.object_store_bytes},
                "labels": {NODE_TYPE_LABEL: name}, "node_config": {},
                "min_workers": worker["min_workers"], "max_workers": worker["max_workers"]}
        return {
            "cluster_name": "sentray-local",
            "max_workers": sum(w["max_workers"] for w in self.workers.values()),
            "upscaling_speed": self.upscaling_speed,
            "idle_timeout_minutes": self.idle_timeout_s / 60,
            # Ray's fake multi-node provider, each node with its own runtime-env folder
            "provider": {"type": "external", "module": LOCAL_PROVIDER,
                         "gcs_address": gcs_address, "use_node_id_as_ip": True,
                         "disable_node_updaters": True, "disable_launch_config_check": True},
            "available_node_types": node_types, "head_node_type": HEAD_TYPE,
            "auth": {}, "docker": {}, "file_mounts": {}, "cluster_synced_files": [],
            "file_mounts_sync_continuously": False, "rsync_exclude": [], "rsync_filter": [],
            "initialization_commands": [], "setup_commands": [], "head_setup_commands": [],
            "worker_setup_commands": [], "head_start_ray_commands": [],
            "worker_start_ray_commands": [],
        }


def _shape(name: str, node_type: dict[str, Any]) -> tuple[int, int]:
    """(vCPUs, GPUs) of a node type: its `resources` where it states them, else its instance
    type's."""
    resources = node_type.get("resources") or {}
    instance = (node_type.get("node_config") or {}).get("InstanceType")
    if "CPU" in resources:
        return int(resources["CPU"]), int(resources.get("GPU", 0))
    if instance not in INSTANCE_SHAPES:
        raise ValueError(f"node type {name!r}: instance type {instance!r} is not in "
                         f"INSTANCE_SHAPES ({', '.join(INSTANCE_SHAPES)}); add its vCPUs and "
                         "GPUs there, or state resources: {CPU: N} in the config")
    cpus, gpus = INSTANCE_SHAPES[instance]
    return cpus, int(resources.get("GPU", gpus))

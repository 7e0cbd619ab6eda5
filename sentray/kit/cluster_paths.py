"""Paths that work across nodes: a job's local (non-URI) input or output path is refused, before
any work, on a Ray cluster whose nodes may not share the driver's filesystem.

On a cluster of several machines every node reads and writes its own disk: a local --output
would leave each node's parts on that node (and the driver, counting rows on its own disk,
would find them missing), a local --input would be read from whichever node a read task lands
on. What every node sees alike is an object store (s3://, with the nodes' IAM role) or a mount
every node has at the same path (NFS, EFS), which only the user can vouch for: `--shared-paths`.

How a job tells one machine from many (`ClusterShape.one_machine`), conservatively:

- a cluster the job started itself is its own machine;
- a cluster it joined (an address, $RAY_ADDRESS as `ray job submit` sets it, or a Ray already
  connected in the process) is one machine only when every node alive now runs on the driver's
  host AND no autoscaler can add a node: one node now is not one node later. An autoscaler
  counts when the cluster was started with an autoscaling config (`ray up`, `ray start
  --autoscaling-config`, KubeRay); a cluster of `ray start` nodes without one has only Ray's
  read-only provider, which launches nothing.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sentray.kit.ray_quiet import private_hook

logger = logging.getLogger(__name__)

SHARED_FLAG = "--shared-paths"
# The autoscaler publishes its status every few seconds (5 s by default); a job that joins a
# cluster started a moment ago waits this long for the first one.
STATUS_WAIT_S = 12.0


def is_local(path: str) -> bool:
    """True for a path on the local filesystem (no scheme, or file://); False for a URI such as
    s3://bucket/key."""
    scheme, sep, _ = path.partition("://")
    return not sep or scheme.lower() == "file"


@dataclass(frozen=True)
class ClusterShape:
    """What the driver knows about where the job's tasks may run."""

    hosts: tuple[str, ...]  # the host of each node alive now
    driver_host: str
    # whether an autoscaler may add nodes (None: the cluster did not say)
    autoscaling: bool | None
    started_by_job: bool = False

    @property
    def one_machine(self) -> bool:
        """True when every node the job can use now or later shares the driver's disk."""
        if self.started_by_job:
            return True
        return self.autoscaling is False and set(self.hosts) <= {self.driver_host}

    def describe(self) -> str:
        """"3 nodes on 2 machines", "1 node now, on this machine, with an autoscaler that may
        add nodes on other machines", ..."""
        machines = len(set(self.hosts) | {self.driver_host})
        nodes = f"{len(self.hosts)} node{'s' * (len(self.hosts) != 1)}"
        where = "on the driver's machine" if machines == 1 else f"on {machines} machines"
        if self.autoscaling:
            return (f"{nodes} now, {where}, with an autoscaler that may add nodes on other "
                    "machines")
        if self.autoscaling is None:
            return f"{nodes} now, {where}, whose autoscaler did not say whether it adds nodes"
        return f"{nodes} {where}"


def check_paths(paths: dict[str, Sequence[str]], shape: ClusterShape, shared: bool) -> None:
    """Refuse the local paths in `paths` ("input", "output" or "model" -> paths) unless `shape`
    is one machine or the user declared them `shared`; raises ValueError naming the paths, the
    cluster, what would go wrong and the fixes."""
    if shared or shape.one_machine:
        return
    local = {role: [p for p in given if is_local(p)] for role, given in paths.items()}
    local = {role: given for role, given in local.items() if given}
    if not local:
        return
    named = "; ".join(f"{role} {', '.join(given)}" for role, given in local.items())
    harm = []
    if "input" in local:
        harm.append("each node would read the input from its own disk, where it may not be")
    if "model" in local:
        harm.append("each actor would load the model folder from its own node's disk, where "
                    "it may not be (a Hugging Face id, the packaged model or a folder inside "
                    "the job's --working-dir upload is loaded on every node alike)")
    if set(local) - {"input", "model"}:
        harm.append("each node would write its parts to its own disk, where the driver "
                    "would not find them (rows missing)")
    raise ValueError(
        f"local paths ({named}) on a Ray cluster of {shape.describe()}: {'; '.join(harm)}. "
        "Use object store URIs every node reaches (s3://bucket/prefix, read and written with "
        "the nodes' IAM role), or, if these paths are on storage every node mounts at the same "
        f"place (NFS, EFS), say so with {SHARED_FLAG}. See docs/cluster.md, \"Where data "
        "lives\".")


# Where Ray unpacks a job's --working-dir upload on each node (and where `ray job submit` starts
# the driver): <temp dir>/session_<name>/runtime_resources/working_dir_files/<package>/
WORKING_DIR_FILES = "/runtime_resources/working_dir_files/"


def in_working_dir_upload(path: str) -> bool:
    """True for a path inside the job's --working-dir upload as this driver sees it: every node
    unpacks the same files, and a relative model folder is found from each actor's own copy
    (`ResolvedModel.path`)."""
    import os

    cwd = os.getcwd()
    return WORKING_DIR_FILES in cwd and os.path.abspath(path).startswith(cwd + os.sep)


def split_inputs(spec: str | None) -> list[str]:
    """The paths of a comma-separated --input."""
    return [part.strip() for part in (spec or "").split(",") if part.strip()]


def current_shape(started_by_job: bool = False) -> ClusterShape:
    """The shape of the cluster this process is connected to (Ray initialized)."""
    import ray

    hosts = tuple(node.get("NodeManagerHostname") or node.get("NodeManagerAddress", "?")
                  for node in ray.nodes() if node.get("Alive"))
    autoscaling = None if started_by_job else autoscaler_adds_nodes()
    return ClusterShape(hosts, socket.gethostname(), autoscaling, started_by_job)


def autoscaler_adds_nodes(wait: float = STATUS_WAIT_S) -> bool | None:
    """Whether the connected cluster's autoscaler may launch nodes: from the cluster config that
    autoscaler v2 reports (Ray Data's own test: a node group that can grow), else from the
    status autoscaler v1 publishes (its node types are the config's, or `node_<id>` for each
    node when there is no config: Ray's read-only provider). None when neither is there after
    `wait` seconds."""
    deadline = time.monotonic() + wait
    while True:
        with private_hook("telling an autoscaling cluster from a fixed one"):
            import ray._private.state
            import ray._private.worker

            config = ray._private.state.state.get_cluster_config()
            if config is not None and config.node_group_configs:
                return any(group.max_count == -1 or group.max_count > group.min_count
                           for group in config.node_group_configs if group.max_count != 0)
            # the connected cluster's own key-value store: `internal_kv`'s module-level client
            # follows the last head node started in this process (a test's second cluster)
            status = ray._private.worker.global_worker.gcs_client.internal_kv_get(
                b"__autoscaling_status", None)
            if status:
                mapping = json.loads(status)["autoscaler_report"]["node_type_mapping"] or {}
                return readonly_types(mapping.items()) is False
        if time.monotonic() >= deadline:
            return None
        time.sleep(1.0)


def readonly_types(node_types: Iterable[tuple[str, str]]) -> bool:
    """True when every (node id, node type) is Ray's read-only provider's `node_<id>`."""
    return all(kind == f"node_{node_id}" for node_id, kind in node_types)


def refuse_unshared_paths(address: str | None, inputs: str | None, outputs: Sequence[str],
                          shared: bool, models: Sequence[str] = ()) -> None:
    """The corpus jobs' check, before any work: on a cluster joined at `address` (or
    $RAY_ADDRESS, as `ray job submit` sets it, or one this process is connected to) that may
    span machines, refuse local `inputs` (a comma-separated --input), `outputs` (folders) and
    `models` (model folders every actor loads; one inside the job's own --working-dir upload
    is on every node) unless `shared`. Not checked: a job whose paths are all URIs, and one that
    runs on a local cluster it starts itself (or runs its rows in its own process:
    `sentray.corpus.execution`), whose one node is this machine."""
    import os
    import sys

    paths = {"input": split_inputs(inputs), "output": list(outputs),
             "model": [m for m in models if not in_working_dir_upload(m)]}
    if shared or not any(is_local(p) for given in paths.values() for p in given):
        return
    address = address or os.environ.get("RAY_ADDRESS")
    # not imported: not connected (a job in its own process; importing Ray takes ~0.4 s)
    connected = "ray" in sys.modules and sys.modules["ray"].is_initialized()
    if not address and (not connected or started_here()):
        return  # the job's own cluster, on this machine
    import ray

    if not ray.is_initialized():
        from sentray.kit.ray_cluster import init_ray

        init_ray(address)
    shape = current_shape()
    logger.info("Ray cluster: %s", shape.describe())
    check_paths(paths, shape, shared)


def started_here() -> bool:
    """True when this process started the Ray cluster it is connected to (its head node runs
    here), False when it joined one."""
    with private_hook("telling a cluster this process started from one it joined"):
        import ray._private.worker

        return bool(ray._private.worker._global_node.head)
    return False

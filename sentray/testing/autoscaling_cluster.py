"""A local autoscaling Ray cluster on 127.0.0.1, for tests, the cluster demo and the bench: the
node types of cluster.yaml, scaled down to this machine, launched and removed by Ray's own
autoscaler through the fake multi-node provider that Ray's test suite uses
(`ray.cluster_utils.AutoscalingCluster`).

Why not `AutoscalingCluster` itself: its start() and shutdown() run `ray stop --force`, which ends
every Ray process on the machine, other people's clusters included. This starts the head the way
it does (`RAY_FAKE_CLUSTER=1 ray start --head --autoscaling-config ...`) with its own temp dir and
ports, marks every process of the cluster with an environment variable that the worker nodes the
autoscaler launches (and their workers, and the jobs' drivers) inherit, and ends only the
processes that carry the mark. Three more things Ray's harness leaves out, found by trying it
here: the installed wheel does not ship the provider's example.yaml (the whole config is written
here), the provider dials port 6379 unless `provider.gcs_address` says otherwise, and without
`--node-ip-address 127.0.0.1` on the head a submitted job's driver dials the machine's external
address (this machine must only ever talk to loopback). Two more of its own: each fake node
unpacks a job's working dir into a folder of its own (`sentray.testing.local_node_provider` says
why), and the cluster uses token authentication with a token of its own.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentray.testing.cluster_types import HEAD_TYPE, NODE_TYPE_LABEL, LocalNodeTypes

logger = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
# the repository this package is in (an editable install: jobs/ beside it), jobs' working dir
REPOSITORY = Path(__file__).resolve().parents[2]
# every process of one local cluster carries this variable, set to the cluster's own id
MARK = "SENTRAY_LOCAL_CLUSTER"
ENVIRONMENT = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # bind and advertise 127.0.0.1 only
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_FAKE_CLUSTER": "1",  # the fake provider refuses to run without it
    "AUTOSCALER_UPDATE_INTERVAL_S": "1",  # the autoscaler's loop: every second (Ray's tests do)
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class Ports:
    gcs: int
    dashboard: int
    client: int
    agent: int

    @classmethod
    def free(cls) -> Ports:
        return cls(free_port(), free_port(), free_port(), free_port())


class LocalAutoscalingCluster:
    """A head that takes no work and worker types that the autoscaler launches from zero, every
    process on 127.0.0.1 under `temp_dir`. `start()`, then submit jobs to `dashboard_url`
    (`ray job submit --address ...`), watch `nodes()`, and `stop()` (also on `with`)."""

    def __init__(self, node_types: LocalNodeTypes, temp_dir: Path, *,
                 env: dict[str, str] | None = None, working_dir: Path = REPOSITORY) -> None:
        self.node_types, self.temp_dir = node_types, Path(temp_dir)
        self.working_dir = Path(working_dir)  # uploaded with each job (`--working-dir`)
        self.ports = Ports.free()
        self.cluster_id = uuid.uuid4().hex
        # token authentication, with a token of its own: loopback is reachable by every user of
        # the machine (the Jobs API runs code), and another cluster's token (~/.ray/auth_token,
        # written by a local ray.init) is not this one's
        self.token = secrets.token_hex(32)
        self.env = {**os.environ, **ENVIRONMENT, **(env or {}), MARK: self.cluster_id,
                    "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token}
        for name in ("RAY_ADDRESS", "RAY_AUTH_TOKEN_PATH"):  # never another cluster's
            self.env.pop(name, None)
        self.started = False

    @property
    def address(self) -> str:
        """The head's GCS address (`ray.init(address=...)`, `--address` of a job)."""
        return f"{LOOPBACK}:{self.ports.gcs}"

    @property
    def dashboard_url(self) -> str:
        """The Jobs API and state API (`ray job submit --address ...`)."""
        return f"http://{LOOPBACK}:{self.ports.dashboard}"

    def autoscaling_config(self) -> dict[str, Any]:
        return self.node_types.autoscaling_config(self.address)

    def start(self, timeout: float = 120) -> LocalAutoscalingCluster:
        """Start the head (its autoscaler starts with it) and wait until its Jobs API answers."""
        self.temp_dir.mkdir(parents=True, exist_ok=True)
        config = self.temp_dir / "autoscaling.json"
        config.write_text(json.dumps(self.autoscaling_config(), indent=1))
        head = self.node_types.head
        command = [
            sys.executable, "-m", "ray.scripts.scripts", "start", "--head",
            f"--autoscaling-config={config}", f"--temp-dir={self.temp_dir}",
            f"--node-ip-address={LOOPBACK}", f"--port={self.ports.gcs}",
            f"--dashboard-host={LOOPBACK}", f"--dashboard-port={self.ports.dashboard}",
            f"--ray-client-server-port={self.ports.client}",
            f"--dashboard-agent-listen-port={self.ports.agent}",
            f"--num-cpus={head.get('CPU', 0):g}", f"--num-gpus={head.get('GPU', 0):g}",
            f"--object-store-memory={self.node_types.object_store_bytes}",
            "--disable-usage-stats"]
        self.started = True
        done = subprocess.run(command, env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode != 0:
            self.stop()
            raise RuntimeError(f"`ray start --head` failed ({done.returncode}):\n"
                               f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        try:
            self._wait_for_jobs_api(timeout)
        except BaseException:
            self.stop()  # a head that came up without its Jobs API is not left running
            raise
        logger.info("local autoscaling cluster up: GCS %s, Jobs API %s, worker types %s",
                    self.address, self.dashboard_url, ", ".join(self.node_types.workers))
        return self

    def _wait_for_jobs_api(self, timeout: float) -> None:
        import urllib.request

        deadline = time.monotonic() + timeout
        request = urllib.request.Request(f"{self.dashboard_url}/api/version",
                                         headers=self._headers())
        while True:
            try:
                with urllib.request.urlopen(request, timeout=5):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the Jobs API at {self.dashboard_url} did not answer "
                                       f"within {timeout:.0f} s") from None
                time.sleep(0.5)

    def __enter__(self) -> LocalAutoscalingCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- what runs where ---------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}

    def _state(self, resource: str, filters: list | None = None) -> list:
        """Ray's state API over the head's HTTP address, with this cluster's token (the
        `ray.util.state.list_*` functions would send this process's own, if any)."""
        from ray.util.state.api import StateApiClient
        from ray.util.state.common import ListApiOptions, StateResource

        client = StateApiClient(address=self.dashboard_url, headers=self._headers())
        return client.list(StateResource(resource),
                           options=ListApiOptions(limit=10_000, filters=filters or []),
                           raise_on_missing_output=False)

    def nodes(self) -> list[dict[str, Any]]:
        """The nodes alive now: [{"node_id", "type", "resources", "is_head"}]."""
        alive = self._state("nodes", [("state", "=", "ALIVE")])
        return [{"node_id": node.node_id, "is_head": node.is_head_node,
                 "type": (node.labels or {}).get(NODE_TYPE_LABEL)
                 or (HEAD_TYPE if node.is_head_node else "?"),
                 "resources": node.resources_total} for node in alive]

    def head_node_id(self) -> str:
        return next(node["node_id"] for node in self.nodes() if node["is_head"])

    def actors(self, name: str | None = None) -> list[dict[str, Any]]:
        """Actors alive now (whose class name contains `name`, if given: Ray Data names a pool's
        actors `MapWorker(MapBatches(EmbedBatch))`): [{"actor_id", "class_name", "node_id",
        "pid", "state"}]."""
        return [a for a in self.all_actors(name) if a["state"] == "ALIVE"]

    def all_actors(self, name: str | None = None) -> list[dict[str, Any]]:
        """Every actor the cluster has had (alive, restarting or dead), as `actors`."""
        return [{"actor_id": a.actor_id, "class_name": a.class_name, "node_id": a.node_id,
                 "pid": a.pid, "state": a.state} for a in self._state("actors")
                if name is None or name in (a.class_name or "")]

    def processes(self, node_id: str | None = None) -> list[int]:
        """Pids of every process of this cluster (those whose environment carries its mark), or
        of one of its worker nodes (`node_id`: the fake provider names each node's processes
        with it)."""
        import psutil

        marks = {f"{MARK}={self.cluster_id}".encode()}
        if node_id is not None:
            marks.add(f"RAY_OVERRIDE_NODE_ID_FOR_TESTING={node_id}".encode())
        found = []
        for pid in psutil.pids():
            try:
                with open(f"/proc/{pid}/environ", "rb") as handle:
                    if marks <= set(handle.read().split(b"\0")):
                        found.append(pid)
            except OSError:
                continue  # gone meanwhile, or not ours to read
        return found

    def kill_node(self, node_id: str) -> int:
        """Kill a worker node outright, as a lost machine goes: its raylet, object store, agents
        and workers (SIGKILL). Returns how many processes were killed."""
        if node_id == self.head_node_id():
            raise ValueError("kill_node is for worker nodes; stop() ends the head")
        pids = self.processes(node_id)
        for pid in pids:
            _signal(pid, signal.SIGKILL)
        logger.info("killed worker node %s (%d processes)", node_id, len(pids))
        return len(pids)

    def submit_command(self, *entrypoint: str) -> list[str]:
        """`ray job submit` of `entrypoint` (e.g. python jobs/embed.py ARGS) to this cluster, as
        the README writes it: the repository as the job's working dir, uploaded through the
        Jobs API."""
        return [sys.executable, "-m", "ray.scripts.scripts", "job", "submit",
                "--address", self.dashboard_url, "--working-dir", str(self.working_dir), "--",
                *entrypoint]

    def submit(self, *entrypoint: str, timeout: float = 900) -> subprocess.CompletedProcess:
        """Run `submit_command` to the end (it follows the job's log); returns the finished
        process: its output is the job's log, its exit status 0 when the job succeeded."""
        return subprocess.run(self.submit_command(*entrypoint), env=self.env,
                              cwd=self.working_dir, capture_output=True, text=True,
                              timeout=timeout)

    def wait_for_workers(self, count: int = 0, timeout: float = 180) -> float:
        """Wait until exactly `count` worker nodes are alive; returns the seconds it took."""
        started = time.monotonic()
        while sum(1 for node in self.nodes() if not node["is_head"]) != count:
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"{count} worker nodes expected within {timeout:.0f} s; "
                                   f"alive: {[n['type'] for n in self.nodes()]}")
            time.sleep(1)
        return time.monotonic() - started

    def stop(self, grace: float = 10) -> None:
        """End every process of this cluster, and no other: SIGTERM, then SIGKILL after
        `grace` seconds for what is left."""
        if not self.started:
            return
        pids = self.processes()
        for pid in pids:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (pids := [p for p in pids if _alive(p)]):
            time.sleep(0.2)
        for pid in self.processes():
            _signal(pid, signal.SIGKILL)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_alive(p) for p in self.processes()):
            time.sleep(0.2)
        self.started = False
        logger.info("local autoscaling cluster %s stopped", self.address)


def _signal(pid: int, which: signal.Signals) -> None:
    try:
        os.kill(pid, which)
    except OSError:
        pass


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False

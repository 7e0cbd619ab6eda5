"""Connecting to Ray: an existing cluster when an address is given, else a private local one
bound to 127.0.0.1 only.

Ray's dashboard and job API have no authentication by default; one reachable from the network
lets anyone run code on the machine (CVE-2023-48022). A cluster a job starts for itself
therefore binds loopback and starts no dashboard at all, through Ray's public options
(`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`, the node address, `include_dashboard=False`); the job
then checks the node's address and stops if it is not loopback. One private setting helps
but is not needed: a free port for the node agent (`_agent_on_any_port`).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import os
import signal
import socket
import tempfile
import time
from pathlib import Path

from sentray.kit.ray_quiet import private_hook, quiet_ray
from sentray.kit.repeating import Repeating

logger = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
# Set for a local cluster before Ray starts; child processes (raylet, workers) inherit them.
LOOPBACK_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # single-node mode: bind and advertise 127.0.0.1
    "RAY_USAGE_STATS_ENABLED": "0",
}

# Logical CPUs a job's own cluster gets beyond its actors' or workers': Ray Data's read and
# write tasks and Ray Train's controller need their own, or they starve behind the pool.
SPARE_CPUS = 2


def local_cpus(processes: int, cpus_each: float) -> int:
    """Logical CPUs of a local cluster for `processes` actors or workers of `cpus_each`: the
    one rule of every job (a cluster given by address keeps its own)."""
    return math.ceil(processes * cpus_each) + SPARE_CPUS


def init_ray(address: str | None = None, *, num_cpus: int | None = None,
             num_gpus: int | None = None) -> bool:
    """Connect to `address` (or $RAY_ADDRESS, as `ray job submit` sets it); with neither, start
    a local loopback-only cluster. Returns True when this call started a local cluster (the
    caller should `ray.shutdown()` it)."""
    import ray

    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        logger.info("connecting to Ray cluster at %s", address)
        ray.init(address=address, log_to_driver=True)
        quiet_ray()
        return False
    for key, value in LOOPBACK_ENV.items():
        os.environ.setdefault(key, value)
    # Ray reads the variable when it is imported; if that already happened, say it again.
    with private_hook("re-reading RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER after ray was imported"):
        from ray._private import ray_constants

        ray_constants.ENABLE_RAY_CLUSTER = False
    logger.info("starting a local Ray cluster on %s (num_cpus=%s, num_gpus=%s)", LOOPBACK,
                num_cpus, num_gpus)
    for attempt in range(1, LOCAL_START_ATTEMPTS + 1):
        begun = time.time()
        try:
            with _agent_on_any_port():
                ray.init(address="local", _node_ip_address=LOOPBACK, include_dashboard=False,
                         num_cpus=num_cpus, num_gpus=num_gpus, configure_logging=False)
            break
        except Exception as exc:
            if STARTUP_TIMEOUT not in str(exc):
                raise
            session, cause = _failed_session(begun)
            _stop_session_processes(session)
            if attempt == LOCAL_START_ATTEMPTS:
                raise RuntimeError(
                    f"could not start a local Ray cluster ({LOCAL_START_ATTEMPTS} tries): "
                    f"{cause or exc}. Ray gives its node's agents fixed times to start (15-30 s; "
                    "ray-project/ray#65983) and on a machine this busy they did not. Start the "
                    "job again when the machine is less busy, or start Ray once beside it "
                    f"(`ray start --head --node-ip-address {LOOPBACK}`) and pass --address "
                    f"{LOOPBACK}:6379") from exc
            logger.warning("the local Ray cluster did not start (%s); trying again",
                           cause or exc)
    node_address = ray.util.get_node_ip_address()
    if node_address != LOOPBACK:  # never run on a cluster the network can reach
        ray.shutdown()
        raise RuntimeError(f"the private Ray cluster came up on {node_address}, not {LOOPBACK}; "
                           "set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 before starting the job")
    quiet_ray()
    return True


# Ray's words when a starting node does not register in time (its raylet gave up on an agent)
STARTUP_TIMEOUT = "timed out during startup"
LOCAL_START_ATTEMPTS = 2


def _failed_session(begun: float) -> tuple[Path | None, str | None]:
    """The Ray session folder this process's failed local start made (Ray names it after the
    starting process's pid; the newest since `begun`, never another job's) and the raylet's own
    reason, which Ray's exception leaves out ('Check failed: ... Timed out waiting for file
    .../metrics_agent_port_...')."""
    root = Path(os.environ.get("RAY_TMPDIR") or tempfile.gettempdir()) / "ray"
    sessions = [f for f in root.glob(f"session_2*_{os.getpid()}")
                if f.is_dir() and f.stat().st_mtime >= begun - 1]
    if not sessions:
        return None, None
    session = max(sessions, key=lambda f: f.stat().st_mtime)
    log = session / "logs" / "raylet.out"
    lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
    failed = [line for line in lines if "Check failed" in line]
    if not failed:
        return session, None
    reason = failed[-1].split("Check failed:", 1)[1].strip()
    reason = reason.split("has_value() ", 1)[-1]  # Ray's assertion text, then its message
    return session, f"Ray's raylet: {reason}"


def _stop_session_processes(session: Path | None) -> None:
    """End what a failed start left running (its GCS, agents): they name the session folder
    on their command lines, and would otherwise hold ports and memory for the job's life.
    Linux (/proc) only; elsewhere they stay until the job ends."""
    if session is None:
        return
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if str(session).encode() in (entry / "cmdline").read_bytes():
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue  # gone meanwhile, or not ours to read


@contextlib.contextmanager
def _agent_on_any_port():
    """Start the node's dashboard agent on a port the OS picks, not Ray's fixed 52365.

    `ray.init` offers no option for it. With another Ray on the machine (a second job, a test
    cluster) holding 52365, the agent retries the bind for 3.5 s, logs a traceback, and the
    cluster starts that much later; a private job cluster has no dashboard and no use for that
    port. Ray reads the port from the private `RayParams` (pinned ray==2.60.0), so its default
    is set there for this one call; where that name has moved, the cluster starts as Ray
    would."""
    patched = None
    with private_hook("a free port for Ray's node agent (it takes Ray's fixed 52365)"):
        from ray._private import parameter

        original = parameter.RayParams
        if "dashboard_agent_listen_port" not in inspect.signature(original.__init__).parameters:
            raise TypeError("RayParams takes no dashboard_agent_listen_port")

        class RayParams(original):
            def __init__(self, *args, **kwargs):
                kwargs.setdefault("dashboard_agent_listen_port", 0)
                super().__init__(*args, **kwargs)

        parameter.RayParams = RayParams
        patched = (parameter, original)
    try:
        yield
    finally:
        if patched is not None:
            patched[0].RayParams = patched[1]


class ClusterWatch:
    """While a job runs, check every `every` seconds that the cluster's head (its GCS) still
    answers; when it has not for `grace` seconds, say that the cluster is gone and how to
    resume, and end the process. (Ray's own driver waits 60 s for a lost GCS, then exits the
    process from C++, with nothing a job can catch or explain.)"""

    def __init__(self, resume_hint: str, *, every: float = 2.0, grace: float = 10.0) -> None:
        self.resume_hint, self.every, self.grace = resume_hint, every, grace
        self._loop: Repeating | None = None
        self._silent_since: float | None = None
        self.address: str | None = None

    def __enter__(self) -> ClusterWatch:
        import ray

        self.address = ray.get_runtime_context().gcs_address
        self._loop = Repeating("ClusterWatch", self._check, self.every).start()
        return self

    def _answers(self) -> bool:
        host, port = self.address.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=self.every):
                return True
        except OSError:
            return False

    def _check(self) -> None:
        if self._answers():
            self._silent_since = None
            return
        self._silent_since = self._silent_since or time.monotonic()
        if time.monotonic() - self._silent_since >= self.grace:
            logger.error("the Ray cluster at %s is gone: its head node has not answered for "
                         "%.0f s. %s", self.address, self.grace, self.resume_hint)
            logging.shutdown()
            os._exit(HEAD_LOST_EXIT)

    def __exit__(self, *exc) -> None:
        if self._loop is not None:
            self._loop.stop()


HEAD_LOST_EXIT = 75  # EX_TEMPFAIL: try again (on a new cluster)

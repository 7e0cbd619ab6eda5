"""A job's private local Ray cluster, started on a thread as soon as the job's flags are parsed,
while the driver imports its model code, finds its input and plans its run.

Starting a local cluster takes 3-4 s (a GCS, a raylet, their agents) and a driver's imports
(torch, transformers, Ray Data) and planning 2-3 s; one after the other they were most of the
time to a job's first embedded row. The start is left on the thread only when it is certainly
needed and cheap to abandon: no address is given (nor $RAY_ADDRESS), and the job's output
holds no settings record yet (a fresh run, or --overwrite: it has rows to write; a rerun may
find nothing to do, and then starts no Ray at all). The corpus driver `take`s the started
cluster when it needs Ray; a job that stops before that (bad input, refused settings)
`abandon`s it: the thread is waited for and the cluster shut down.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)


@dataclass
class _Start:
    num_cpus: int
    began: float = field(default_factory=time.time)
    thread: threading.Thread | None = None
    started_local: bool | None = None
    error: BaseException | None = None
    ready_at: float | None = None
    ready: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        from sentray.kit.ray_cluster import init_ray

        ray_worker_log = logging.getLogger("ray._private.worker")
        ray_worker_log.addFilter(_no_sigterm_note)
        try:
            self.started_local = init_ray(None, num_cpus=self.num_cpus)
        except BaseException as exc:  # said by `take`, in the main thread
            self.error = exc
        finally:
            ray_worker_log.removeFilter(_no_sigterm_note)
        self.ready_at = self.ready_at or time.time()
        self.ready.set()
        # Ray starts its head processes with PR_SET_PDEATHSIG: the kernel kills them when the
        # *thread* that started them ends. So this thread stays until the process ends.
        threading.Event().wait()


def _no_sigterm_note(record: logging.LogRecord) -> bool:
    """Ray's note that it set no SIGTERM handler off the main thread: `take` sets it."""
    return "SIGTERM handler is not set" not in record.getMessage()


_pending: _Start | None = None


def start_for(config) -> None:
    """Start early for a corpus job's `config` (its `pool`, `output`, `corpus.s3_endpoint` and
    `overwrite`) when it will start a local cluster and has rows to write (see above)."""
    from sentray.kit import settings_record, storage

    pool = getattr(config, "pool", None)
    if pool is None or pool.address or os.environ.get("RAY_ADDRESS"):
        return
    if not config.overwrite:
        try:
            output = storage.locate(config.output, config.corpus.s3_endpoint)
            if storage.exists(output.join(settings_record.SETTINGS_FILE)):
                return  # a rerun: it may have nothing to do
        except Exception:  # noqa: BLE001 -- the job itself will say what is wrong with it
            return
    start(pool.local_cluster_cpus)


def start(num_cpus: int) -> None:
    """Begin starting a local cluster of `num_cpus` logical CPUs on a thread."""
    global _pending
    if _pending is not None:
        return
    _pending = _Start(num_cpus)
    _pending.thread = threading.Thread(target=_pending.run, name="early-ray", daemon=True)
    _pending.thread.start()
    logger.debug("starting a local Ray cluster on a thread (num_cpus=%d)", num_cpus)


def take(num_cpus: int) -> tuple[bool, float] | None:
    """The cluster started early, if one was and it has `num_cpus` CPUs: waits for its start,
    raises its error, and returns (whether it is a local cluster this process started, the
    seconds this call waited). None when there was no early start (or one of other CPUs, which
    is then shut down)."""
    global _pending
    pending, _pending = _pending, None
    if pending is None:
        return None
    waited = time.time()
    pending.ready.wait()
    if pending.error is not None:
        raise pending.error
    if pending.num_cpus != num_cpus:  # planned otherwise after all: start as asked
        _shutdown(pending)
        return None
    # Ray sets its SIGTERM handler (exit, so that atexit shuts the cluster down) only from the
    # main thread; set the same here
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))
    logger.info("local Ray cluster ready %.1f s after the job began starting it (waited %.1f s "
                "for it)", pending.ready_at - pending.began, time.time() - waited)
    return pending.started_local, round(time.time() - waited, 2)


def abandon() -> None:
    """A job that ended without taking its early cluster: wait for its start and shut it
    down."""
    global _pending
    pending, _pending = _pending, None
    if pending is not None:
        pending.ready.wait()
        _shutdown(pending)


def _shutdown(pending: _Start) -> None:
    if pending.error is None and pending.started_local:
        import ray

        ray.shutdown()

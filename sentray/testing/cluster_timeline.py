"""`ClusterTimeline`: what a local autoscaling cluster (`sentray.testing.autoscaling_cluster`) does
while a job runs, sampled every `every` seconds from outside the job (Ray's state API over the
head's HTTP address, and a rows-written count): the worker nodes alive by type, the actors of a
pool and where they run, the rows written. The cluster demo prints its node events as they
happen; the bench keeps its samples (bench/results/autoscale*.json) and plots them; the tests
assert on them (no worker before the job, none on the head, all gone after the idle timeout).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sample:
    """The cluster at `t` seconds after the timeline started."""

    t: float
    workers: dict[str, int]  # worker type -> nodes alive
    worker_ids: tuple[str, ...]  # the worker nodes alive (node ids)
    actors: int  # actors of the pool alive
    actor_nodes: tuple[str, ...]  # the node of each
    rows: int | None  # rows written (None: not counted)

    @property
    def worker_count(self) -> int:
        return sum(self.workers.values())


@dataclass
class ClusterTimeline:
    """Samples of `cluster` every `every` seconds in a thread, from `start()` (or `with`) to
    `stop()`. `actor_name`: the pool's actor class (part of Ray Data's actor name);
    `rows`: a function that counts the rows written so far; `on_change(sample, message)`:
    called when the worker nodes or the pool's size change (the demo prints it)."""

    cluster: Any  # a LocalAutoscalingCluster
    actor_name: str | None = None
    rows: Callable[[], int] | None = None
    every: float = 1.0
    on_change: Callable[[Sample, str], None] | None = None
    samples: list[Sample] = field(default_factory=list)
    head_id: str | None = None
    errors: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0

    def start(self) -> ClusterTimeline:
        self._started = time.monotonic()
        self.head_id = self.cluster.head_node_id()
        self._thread = threading.Thread(target=self._run, name="ClusterTimeline", daemon=True)
        self._thread.start()
        return self

    def __enter__(self) -> ClusterTimeline:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while True:
            try:
                self.sample()
            except Exception as exc:  # a state API call that timed out on a busy machine
                self.errors += 1
                logger.debug("timeline sample failed: %s", exc)
            if self._stop.wait(self.every):
                return

    def sample(self) -> Sample:
        """Take one sample now (also called by the thread) and keep it."""
        t = round(time.monotonic() - self._started, 1)
        workers: dict[str, int] = {}
        ids = []
        for node in self.cluster.nodes():
            if not node["is_head"]:
                workers[node["type"]] = workers.get(node["type"], 0) + 1
                ids.append(node["node_id"])
        actors = self.cluster.actors(self.actor_name) if self.actor_name else []
        rows = self.rows() if self.rows is not None else None
        sample = Sample(t, workers, tuple(sorted(ids)), len(actors),
                        tuple(a["node_id"] or "" for a in actors), rows)
        before = self.samples[-1] if self.samples else None
        self.samples.append(sample)
        if self.on_change is not None and (message := _change(before, sample)):
            self.on_change(sample, message)
        return sample

    # -- what the samples say ----------------------------------------------------------------------

    def first(self, condition: Callable[[Sample], bool]) -> Sample | None:
        """The first sample for which `condition` holds."""
        return next((s for s in self.samples if condition(s)), None)

    def max_workers(self) -> int:
        return max((s.worker_count for s in self.samples), default=0)

    def max_actors(self) -> int:
        return max((s.actors for s in self.samples), default=0)

    def actors_on_head(self) -> int:
        """Samples that saw an actor of the pool on the head node (there should be none)."""
        return sum(1 for s in self.samples if self.head_id in s.actor_nodes)

    def to_json(self) -> list[dict[str, Any]]:
        return [asdict(s) for s in self.samples]


def _change(before: Sample | None, now: Sample) -> str:
    """What changed between two samples, in words ("" when nothing did)."""
    words = []
    old_ids = set(before.worker_ids) if before else set()
    added, removed = set(now.worker_ids) - old_ids, old_ids - set(now.worker_ids)
    if added:
        words.append(f"+{len(added)} worker node{'s' * (len(added) > 1)}")
    if removed:
        words.append(f"-{len(removed)} worker node{'s' * (len(removed) > 1)}")
    if before is None or before.actors != now.actors:
        words.append(f"pool {now.actors} actor{'s' * (now.actors != 1)}")
    if not words:
        return ""
    kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(now.workers.items())) or "none"
    rows = f", {now.rows:,} rows written" if now.rows is not None else ""
    return f"{'; '.join(words)} -> worker nodes: {kinds}{rows}"

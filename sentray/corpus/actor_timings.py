"""Where a corpus job's first seconds go: when its actors' processes started, when they were
ready (model loaded) and when they made their first output, carried to the driver in the
schema metadata of the blocks they return (the part sink reads it and drops it), and set beside
the driver's own moments (its process start, Ray ready, the first part written) in the summary's
`timings.since_launch`:

    ray_ready       the cluster answers (None: the rows ran in the job's own process,
                    sentray.corpus.in_process)
    actor_process   the first actor's process started (Ray's worker)
    actor_ready     the first actor constructed: its imports done and its model loaded
    first_row       the first actor's first forward pass returned: the first rows embedded
    first_part      the first part file written (a whole block done)

each in seconds since the job's process started (Linux, macOS: psutil; None where unknown).
"""

from __future__ import annotations

import json
import os
import time

import pyarrow as pa

TIMINGS_KEY = b"sentray.actor_timings"
MOMENTS = ("ray_ready", "actor_process", "actor_ready", "first_row", "first_part")


def process_started() -> float | None:
    """Unix time this process started."""
    try:
        import psutil

        return psutil.Process(os.getpid()).create_time()
    except Exception:  # noqa: BLE001 -- a figure for the summary, never worth a failure
        return None


class ActorClock:
    """An actor's moments: create it first thing in the actor's constructor, call `ready` at its
    end and `output` after each forward pass; `stamp` puts them on a returned table."""

    def __init__(self) -> None:
        self.moments = {"actor_process": process_started(), "actor_ready": None,
                        "first_row": None}

    def ready(self) -> None:
        self.moments["actor_ready"] = time.time()

    def output(self) -> None:
        if self.moments["first_row"] is None:
            self.moments["first_row"] = time.time()

    def stamp(self, table: pa.Table) -> pa.Table:
        metadata = dict(table.schema.metadata or {})
        metadata[TIMINGS_KEY] = json.dumps(self.moments).encode()
        return table.replace_schema_metadata(metadata)


def take(table: pa.Table) -> tuple[pa.Table, dict | None]:
    """The table without its actor moments, and the moments (None when it has none)."""
    metadata = dict(table.schema.metadata or {})
    moments = metadata.pop(TIMINGS_KEY, None)
    if moments is None:
        return table, None
    return table.replace_schema_metadata(metadata or None), json.loads(moments)


def earliest(moments: list[dict | None]) -> dict:
    """Each actor moment's earliest value over the actors' blocks."""
    found = {}
    for name in ("actor_process", "actor_ready", "first_row"):
        values = [m[name] for m in moments if m and m.get(name) is not None]
        found[name] = min(values, default=None)
    return found


def since_launch(ray_ready: float | None, first_part: float | None, actors: dict) -> dict:
    """The job's moments (Unix times) as seconds since its process started (ray_ready None:
    the rows ran in the job's own process, `sentray.corpus.in_process`)."""
    launched = process_started()
    absolute = {"ray_ready": ray_ready, **actors, "first_part": first_part}
    return {name: (round(absolute[name] - launched, 2)
                   if launched is not None and absolute.get(name) is not None else None)
            for name in MOMENTS}

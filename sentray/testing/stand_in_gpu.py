"""A stand-in for a GPU of known speed, for benches and tests (never a user's setting): it takes
the real padded token ids an encoder actor would hand its model, "runs" them by sleeping the
time a GPU of the chosen rate would take (`rows_per_second` or `tokens_per_second` of real,
unpadded tokens), and returns fixed vectors. With it the job's CPU side (reading, tokenizing,
the hand-offs, storing, writing) is measured as if that GPU were there: if the CPU side keeps up,
the stand-in is busy nearly all the time; if not, it waits.

Each call appends one line to `log` (JSON: pid, start, end, rows, tokens, busy seconds), so a
bench reads every actor's busy time after the run (`busy_fraction`). The vector of a row is a
function of nothing but its position in the dimension (`FIXED_VALUE`): every embedded row gets
the same one, whose L2 norm is known.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FIXED_VALUE = 0.5  # every dimension of every vector


@dataclass(frozen=True)
class StandInGPU:
    """(B, T) ids and mask -> (B, D) fixed vectors, after the time the rate implies."""

    dimension: int
    rows_per_second: float | None = None
    tokens_per_second: float | None = None
    log: str | None = None  # a file each call appends its line to

    def __post_init__(self) -> None:
        if (self.rows_per_second is None) == (self.tokens_per_second is None):
            raise ValueError("a stand-in GPU runs at rows_per_second or at tokens_per_second")
        if (self.rows_per_second or self.tokens_per_second) <= 0:
            raise ValueError("a stand-in GPU's rate must be > 0")

    def seconds(self, rows: int, tokens: int) -> float:
        """What a GPU of this rate takes for `rows` rows holding `tokens` real tokens."""
        if self.rows_per_second is not None:
            return rows / self.rows_per_second
        return tokens / self.tokens_per_second

    def __call__(self, input_ids, attention_mask):
        import torch

        start = time.perf_counter()
        rows, tokens = int(input_ids.shape[0]), int(attention_mask.sum())
        busy = self.seconds(rows, tokens)
        # A GPU computes for exactly `busy`; a sleep overshoots by a fraction of a millisecond.
        # The batch ends `busy` after the later of its call and the last batch's end as the GPU
        # would have had it, so that the overshoots do not add up: time lost is the CPU side's.
        state = _STATE.setdefault(id(self), {"gpu_free": 0.0})
        end = max(start, state["gpu_free"]) + busy
        state["gpu_free"] = end
        remaining = end - time.perf_counter()
        if remaining > 0:
            time.sleep(remaining)
        if self.log:
            handle = _LOGS.get(self.log)
            if handle is None:  # kept open: a line a call costs microseconds, not an open()
                handle = _LOGS[self.log] = open(self.log, "a", buffering=1, encoding="utf-8")
            now, wall = time.perf_counter(), time.time()
            handle.write(json.dumps({"pid": os.getpid(), "start": wall - (now - start),
                                     "end": wall,
                                     "rows": rows, "tokens": tokens, "busy": busy}) + "\n")
        return torch.full((rows, self.dimension), FIXED_VALUE, dtype=torch.float32)


_STATE: dict[int, dict] = {}  # per stand-in in this process: when its GPU is free again
_LOGS: dict[str, object] = {}  # open log files of this process, by path


def fixed_vector(dimension: int, normalize: bool) -> np.ndarray:
    """The vector every row embedded by the stand-in is stored as (before quantization)."""
    vector = np.full(dimension, FIXED_VALUE, dtype=np.float32)
    return vector / np.linalg.norm(vector) if normalize else vector


def busy_fraction(log: str | Path) -> dict:
    """From a stand-in's log: per process and in all, the busy seconds over the span from its
    first call's start to its last call's end (a GPU that is never kept waiting: 1.0)."""
    lines = [json.loads(line) for line in Path(log).read_text(encoding="utf-8").splitlines()
             if line.strip()]
    if not lines:
        raise ValueError(f"{log}: the stand-in GPU was never called")
    per_process = {}
    for pid in sorted({line["pid"] for line in lines}):
        mine = [line for line in lines if line["pid"] == pid]
        span = max(line["end"] for line in mine) - min(line["start"] for line in mine)
        busy = sum(line["busy"] for line in mine)
        per_process[pid] = {"calls": len(mine), "rows": sum(line["rows"] for line in mine),
                            "busy_seconds": round(busy, 3), "span_seconds": round(span, 3),
                            "busy_fraction": round(busy / span, 4) if span > 0 else None}
    busy = sum(p["busy_seconds"] for p in per_process.values())
    span = sum(p["span_seconds"] for p in per_process.values())
    return {"processes": len(per_process), "rows": sum(p["rows"] for p in per_process.values()),
            "busy_seconds": round(busy, 3), "span_seconds": round(span, 3),
            "busy_fraction": round(busy / span, 4) if span > 0 else None,
            "per_process": list(per_process.values())}

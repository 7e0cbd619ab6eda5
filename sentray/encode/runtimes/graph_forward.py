"""`GraphForward`: the forward of a runtime that runs an exported ONNX graph (its `graph_runner`:
a callable from the graph's named inputs to its first output)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np


class GraphForward:
    """A compiled graph as an encoder's forward: padded (B, T) ids and mask -> (B, D) fp32, on
    the CPU, not differentiable."""

    def __init__(self, run: Callable[[dict[str, np.ndarray]], np.ndarray]) -> None:
        import torch

        self.run = run
        self.pooled = None  # no torch model
        self.device = torch.device("cpu")

    def autocast(self):
        return contextlib.nullcontext()

    def __call__(self, input_ids, attention_mask):
        import torch

        pooled = self.run({"input_ids": input_ids.cpu().numpy(),
                           "attention_mask": attention_mask.cpu().numpy()})
        # a copy: a runtime may reuse its output's memory on the next call
        return torch.from_numpy(np.array(pooled, dtype=np.float32))  # (B, D)


def default_threads(threads: int | None) -> int:
    """`threads`, else torch's (a job's parallelism is its actors: one stream each)."""
    if threads:
        return threads
    import torch

    return torch.get_num_threads()

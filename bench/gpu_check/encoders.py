"""What steps 2 and 3 share: the encoders they measure, loaded once, and a GPU-aware timer.

CUDA kernels run asynchronously, so a wall-clock time is only the GPU's time once the device has
been synchronized before and after; `best_seconds` does that and keeps the fastest pass (the
least disturbed by the rest of the machine)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable


class Encoders:
    """One SentenceEncoder per (pooling, ditto_impl, precision), loaded once, shared by steps 2
    and 3."""

    def __init__(self, args: argparse.Namespace, device: str) -> None:
        self.args, self.device, self.cache = args, device, {}

    def get(self, pooling: str, ditto_impl: str, precision: str):
        from sentray.encode.config import EncoderConfig
        from sentray.encode.encoder import SentenceEncoder
        from sentray.precision.plan import plan_encoder

        key = (pooling, ditto_impl, precision)
        if key not in self.cache:
            ditto = pooling == "ditto"
            self.cache[key] = SentenceEncoder(plan_encoder(EncoderConfig(
                model=self.args.model, pooling=pooling, head=self.args.head if ditto else None,
                device=self.device, precision=precision, batch_size=self.args.batch_size,
                ditto_impl=ditto_impl)))
        return self.cache[key]

    def clear(self) -> None:
        """Drop every encoder and hand their GPU memory back (step 4's jobs need it)."""
        import torch

        self.cache.clear()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def synchronize(device: str) -> None:
    """Wait for the GPU's queued kernels (nothing to wait for on CPU)."""
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def best_seconds(run: Callable[[], object], repeats: int, device: str) -> float:
    """The fastest of `repeats` timed calls of `run`, each between two synchronizations."""
    best = float("inf")
    for _ in range(repeats):
        synchronize(device)
        started = time.perf_counter()
        run()
        synchronize(device)
        best = min(best, time.perf_counter() - started)
    return best

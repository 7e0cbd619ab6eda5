"""bf16 autocast on a CPU, measured before training with it: a flag does not say whether bf16
is faster there (on an Intel Xeon with AVX512-BF16 and no AMX it ran at 0.65x fp32; on an AVX2
CPU bf16 is emulated, about 0.16x). The trainer times a forward-backward pass of its own model on
one small batch in fp32 and under bf16 autocast, logs the ratio, and warns with it where bf16
is the slower."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)


def autocast_speedup(step: Callable[[], None], *, repeats: int = 2,
                     clock: Callable[[], float] = time.perf_counter) -> float:
    """fp32 seconds / bf16-autocast seconds of `step` (a forward-backward pass) on the CPU,
    best of `repeats` after a warm-up each."""
    import torch

    def best(enabled: bool) -> float:
        times = []
        for attempt in range(repeats + 1):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
                started = clock()
                step()
                if attempt:  # the first is a warm-up
                    times.append(clock() - started)
        return min(times)

    return best(False) / max(best(True), 1e-12)


def check_cpu_bf16(step: Callable[[], None], cpu: str) -> float:
    """Measure, log and (where bf16 is slower) warn; returns the speed-up."""
    speedup = autocast_speedup(step)
    if speedup < 1.0:
        logger.warning("--precision bf16: bf16 autocast measured %.2fx the speed of fp32 on this "
                       "CPU (%s), one forward-backward pass of this model: training would be "
                       "slower than fp32. Use --precision fp32 here.", speedup, cpu)
    else:
        logger.info("--precision bf16: bf16 autocast measured %.2fx the speed of fp32 on this "
                    "CPU (%s), one forward-backward pass of this model", speedup, cpu)
    return speedup

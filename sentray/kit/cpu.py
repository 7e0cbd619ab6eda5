"""What CPU this machine has (`cpu_info`: its model name and feature flags, read from
/proc/cpuinfo on Linux) and which of its features run bf16 natively (`cpu_bf16_features`). A
flag does not predict speed (AVX512-BF16 meant 2.88x fp32 on one AMD EPYC and 0.65x on an Intel
Xeon without AMX): `--precision auto` measures (`sentray.precision`); these facts name the CPU
in logs, records and warnings."""

from __future__ import annotations

import functools
import platform
from pathlib import Path

# CPU flags (as /proc/cpuinfo names them) under which torch's CPU kernels run bf16 natively:
# AMX tiles (Sapphire Rapids and later) or AVX512-BF16 (Cooper Lake, Zen 4 and later).
BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")


@functools.cache
def cpu_info() -> dict:
    """{"name": the CPU's model name, "flags": its feature flags} of this machine."""
    name, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                name = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
            if flags and name:
                break
    except OSError:  # not Linux
        pass
    return {"name": name, "flags": frozenset(flags)}


def cpu_bf16_features(flags: frozenset[str] | None = None) -> list[str]:
    """The native-bf16 features this CPU (or `flags`) has, of BF16_CPU_FLAGS."""
    flags = cpu_info()["flags"] if flags is None else flags
    return [flag for flag in BF16_CPU_FLAGS if flag in flags]


def cpu_bf16_native(flags: frozenset[str] | None = None) -> bool:
    return bool(cpu_bf16_features(flags))

"""The precision an encoder runs in, and what the CPU offers for it.

    fp32   exact: the vectors sentence-transformers' fp32 `encode` gives (the default)
    bf16   on a GPU: autocast; on a CPU: the weights cast to bfloat16 (as sentence-transformers'
           `model_kwargs={"torch_dtype": torch.bfloat16}` does; faster there than autocast,
           which converts every weight on every call), pooling in fp32 either way
    fp16   GPU only (autocast); a CPU has no fast fp16 matmul
    int8   CPU only: NNCF static int8 on ONNX Runtime (`sentray.encode.int8`)
    auto   on a CPU, measured: fp32, bf16 and int8 timed on this CPU, the fastest that passes
           its quality gate against fp32 (`sentray.encode.precision_probe`; a CPU flag does
           not predict it: AVX512-BF16 meant 2.88x fp32 on one AMD EPYC and 0.65x on an Intel
           Xeon without AMX); on a GPU, fp16 (every CUDA GPU runs it fast). A job decides it
           once, in its driver, and records it: its actors never mix two precisions

A CPU without AMX or AVX512-BF16 emulates bf16: an explicit bf16 there runs with a warning that
names the missing feature. Which CPU a machine has is read from /proc/cpuinfo (Linux)."""

from __future__ import annotations

import functools
import logging
import platform
from pathlib import Path
from typing import TYPE_CHECKING

from sentray.encode.config import Precision

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

# CPU flags (as /proc/cpuinfo names them) under which torch's CPU kernels run bf16 natively:
# AMX tiles (Sapphire Rapids and later) or AVX512-BF16 (Cooper Lake, Zen 4 and later).
BF16_CPU_FLAGS = ("amx_bf16", "avx512_bf16")
# bf16 ÷ fp32 speed on a CPU that emulates bf16, measured on this project's AVX2-only machine
# (AMD EPYC, 2 cores; all-MiniLM-L6-v2, 500 Brown sentences, batch 32, one thread: sentray
# 11.5 vs 70.9 sentences/s, sentence-transformers 9.1 vs 60.4; bench/results/
# precision-avx2.json), said in the warning.
EMULATED_BF16_SPEED = 0.16
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


def resolve_precision(requested: Precision, device: torch.device | str,
                      flags: frozenset[str] | None = None) -> Precision:
    """The precision to run `requested` in on `device` (a torch.device or its type, "cpu" or
    "cuda"): auto decided; fp16 on a CPU refused; bf16 on a CPU that emulates it warned about
    (it runs, at the measured cost)."""
    device_type = getattr(device, "type", device)
    if requested == "auto":
        if device_type == "cuda":  # every CUDA GPU has fast fp16 (bf16 needs Ampere or later)
            return "fp16"
        return "auto"  # on a CPU: measured (sentray.encode.precision_probe), never assumed
    if device_type != "cpu" and requested == "int8":
        raise ValueError("precision 'int8' runs on a CPU (ONNX Runtime); on a GPU use fp16 "
                         "(every CUDA GPU) or bf16 (Ampere or later)")
    if device_type == "cpu" and requested == "fp16":
        raise ValueError("precision 'fp16' is for GPUs; on a CPU use bf16 (native with AMX or "
                         "AVX512-BF16) or fp32")
    if device_type == "cpu" and requested == "bf16" and not cpu_bf16_native(flags):
        logger.warning(
            "precision bf16 on %s, which has neither %s: bf16 is emulated there (on this "
            "project's AVX2-only AMD EPYC it ran at %.2fx fp32, docs/precision.md). "
            "--precision auto measures it on this CPU; fp32 is the safe choice.",
            cpu_info()["name"], " nor ".join(BF16_CPU_FLAGS), EMULATED_BF16_SPEED)
    return requested


def torch_dtype(precision: Precision) -> torch.dtype:
    import torch

    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]

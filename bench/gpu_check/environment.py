"""What the figures were measured on, and the ceiling they are set against.

`environment()` goes into the report's header: versions, the device, the commit (a table is
only comparable with another measured on the same code and stack). `peak_tflops()` is the GPU's
data-sheet peak for a precision, the denominator of step 2's "fraction of peak"."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess

from bench.gpu_check.repo_io import ROOT

# Dense (no 2:4 sparsity) peak TFLOP/s from NVIDIA's data sheets, as (name substring, fp16/bf16
# tensor cores, tf32 tensor cores, fp32 without tensor cores). First match of
# torch.cuda.get_device_name() wins, so the PCIe/NVL variants come before their SXM names.
PEAK_TFLOPS: tuple[tuple[str, float, float, float], ...] = (
    ("H100 PCIe", 756.0, 378.0, 51.0),
    ("H100 NVL", 835.0, 418.0, 60.0),
    ("H200 NVL", 835.0, 418.0, 60.0),
    ("H100", 989.0, 494.0, 67.0),
    ("H200", 989.0, 494.0, 67.0),
    ("A100", 312.0, 156.0, 19.5),
)


def environment() -> dict:
    """Versions, threads, the device and the git commit (with whether the tree was dirty)."""
    import torch
    import transformers

    cuda = torch.cuda.is_available()
    env = {"python": platform.python_version(), "torch": torch.__version__,
           "transformers": transformers.__version__, "torch_cuda": torch.version.cuda,
           "cuda_available": cuda, "cpu_count": os.cpu_count(),
           "torch_threads": torch.get_num_threads(),
           "float32_matmul_precision": torch.get_float32_matmul_precision(),
           "device_name": torch.cuda.get_device_name() if cuda else None,
           "gpu_count": torch.cuda.device_count() if cuda else 0}
    with contextlib.suppress(ImportError):
        import ray
        env["ray"] = ray.__version__
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        env["git_commit"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, text=True,
                                           capture_output=True, check=True).stdout.strip()
        env["git_dirty"] = bool(subprocess.run(["git", "status", "--porcelain"], cwd=ROOT,
                                               text=True, capture_output=True).stdout.strip())
    return env


def peak_tflops(precision: str, override: float | None) -> tuple[float | None, str]:
    """The peak this precision's matmuls can reach on this GPU, and what that figure is."""
    import torch

    if override is not None:
        return override, "--peak-tflops"
    if not torch.cuda.is_available():
        return None, "CPU: no peak table"
    name = torch.cuda.get_device_name()
    for key, half, tf32, fp32 in PEAK_TFLOPS:
        if key in name:
            if precision in ("fp16", "bf16"):
                return half, f"{key} {precision} tensor cores, dense"
            if torch.get_float32_matmul_precision() != "highest":
                return tf32, f"{key} tf32 tensor cores, dense (fp32 matmuls run as tf32)"
            return fp32, (f"{key} fp32 without tensor cores (torch's default keeps tf32 off; "
                          f"tf32 peak would be {tf32:g})")
    return None, f"unknown GPU {name!r}: pass --peak-tflops"

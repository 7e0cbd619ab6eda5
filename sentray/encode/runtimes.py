"""The runtimes a plan runs on, each the same call: padded (B, T) ids and mask -> (B, D) fp32
sentence embeddings.

    torch        the `PooledEncoder` on the plan's device: fp32; bf16 weights on a CPU (as
                 sentence-transformers' `model_kwargs={"torch_dtype": torch.bfloat16}`: faster
                 there than autocast, which converts every weight on every call); fp16 and bf16
                 autocast on a GPU; the pooling in fp32 either way
    onnxruntime  the plan's artefact (the int8 model: the pooled encoder as one ONNX graph, any
                 pooling, Ditto's diagonal included) on ONNX Runtime's CPU provider

`build_forward(plan)` builds the one the plan names; it decides nothing.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from sentray.encode.plan import INSTALL_HINT, EncoderPlan
from sentray.encode.pooled_model import PooledEncoder

AUTOCAST = {"fp16": torch.float16, "bf16": torch.bfloat16}


def torch_device(device: str) -> torch.device:
    """The plan's device in this process (auto: cuda where torch sees a GPU, else cpu)."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but torch sees no CUDA GPU")
    return resolved


class TorchForward:
    """The plan's `PooledEncoder` (loaded, or around a model handed in) on its device."""

    def __init__(self, plan: EncoderPlan, device: torch.device,
                 model: torch.nn.Module | None = None) -> None:
        if model is None:
            pooled = PooledEncoder.load(plan.model, plan.pooling, head=plan.head,
                                        ditto_impl=plan.ditto_impl, device=device)
        else:
            pooled = PooledEncoder(model, plan.pooling, head=plan.head,
                                   ditto_impl=plan.ditto_impl)
        self.pooled = pooled.to(device).eval()
        self.device = device
        if device.type == "cpu" and plan.precision == "bf16":
            self.pooled.to(torch.bfloat16)  # bf16 weights (see the module's docstring)
        self.dtype = AUTOCAST.get(plan.precision) if device.type == "cuda" else None

    def autocast(self):
        if self.dtype is not None:
            return torch.autocast("cuda", dtype=self.dtype)
        return torch.autocast(self.device.type, enabled=False)

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        with self.autocast():
            return self.pooled(input_ids.to(self.device), attention_mask.to(self.device))


class OnnxRuntimeForward:
    """The plan's artefact on ONNX Runtime (CPU): not differentiable."""

    def __init__(self, plan: EncoderPlan, threads: int | None = None) -> None:
        try:
            import onnxruntime
        except ImportError as exc:
            raise ImportError(INSTALL_HINT) from exc
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(plan.artefact.data, options,
                                                    providers=["CPUExecutionProvider"])
        self.pooled = None  # no torch model
        self.device = torch.device("cpu")

    def autocast(self):
        return contextlib.nullcontext()

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        pooled = self.session.run(None, {"input_ids": input_ids.cpu().numpy(),
                                         "attention_mask": attention_mask.cpu().numpy()})[0]
        return torch.from_numpy(np.ascontiguousarray(pooled, dtype=np.float32))  # (B, D)


def build_forward(plan: EncoderPlan, model: torch.nn.Module | None = None):
    """The forward pass of `plan` on its runtime (`model`: a module handed in, torch only)."""
    if plan.runtime == "torch":
        return TorchForward(plan, torch_device(plan.device), model)
    if plan.runtime == "onnxruntime":
        if plan.artefact is None:
            raise ValueError(f"a plan on onnxruntime ({plan.precision}) needs its artefact")
        return OnnxRuntimeForward(plan)
    raise ValueError(f"unknown runtime {plan.runtime!r}; known: torch, onnxruntime")

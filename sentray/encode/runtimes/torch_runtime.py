"""torch: the plan's `PooledEncoder` on its device, the reference every other runtime is gated
against and the default of every precision it runs.

    fp32  the model itself
    bf16  on a CPU, bf16 weights (as sentence-transformers' `model_kwargs={"torch_dtype":
          torch.bfloat16}`: faster there than autocast, which converts every weight on every
          call); on a GPU, autocast
    fp16  autocast on a GPU

The pooling runs in fp32 either way; every pooling is computed right. No artefact: it runs the
model's own files. Its side effects: none to silence (it pins no threads; the job sets its
thread count)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sentray.encode.runtimes.runtime import Runtime

if TYPE_CHECKING:
    import torch



def torch_device(device: str) -> torch.device:
    """The plan's device in this process (auto: cuda where torch sees a GPU, else cpu)."""
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but torch sees no CUDA GPU")
    return resolved


class TorchForward:
    """The plan's `PooledEncoder` (loaded, or around a model handed in) on its device."""

    def __init__(self, plan, device: torch.device,
                 model: torch.nn.Module | None = None) -> None:
        import torch

        from sentray.encode.pooled_model import PooledEncoder

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
        autocast = {"fp16": torch.float16, "bf16": torch.bfloat16}
        self.dtype = autocast.get(plan.precision) if device.type == "cuda" else None

    def autocast(self):
        import torch

        if self.dtype is not None:
            return torch.autocast("cuda", dtype=self.dtype)
        return torch.autocast(self.device.type, enabled=False)

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        with self.autocast():
            return self.pooled(input_ids.to(self.device), attention_mask.to(self.device))


def build_forward(plan, model: torch.nn.Module | None = None,
                  threads: int | None = None) -> TorchForward:
    """The plan's forward (`threads`: this process's torch threads, set by the job)."""
    return TorchForward(plan, torch_device(plan.device), model)


def runs_as_itself(precision: str) -> bool:
    """bf16: whether torch's oneDNN has bf16 kernels here (`_is_mkldnn_bf16_supported`; False
    on this project's AVX2 EPYC, where its bf16 falls back to reference code: 5 sentences/s
    against fp32's 80)."""
    if precision != "bf16":
        return True
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return True


# Eager kernels: a new input shape costs no more than a seen one. In the probe's runs on this
# project's AMD EPYC (Zen 5), each of torch fp32's 128 rows' four batches called twice, the
# first calls cost 0.018 s more than the timed ones in all (~4%; bf16's 0.087 s): warming
# every shape doubled its ~0.6 s of probe time for next to nothing. Its very first call is
# still warmed apart.
SHAPES_COMPILE = False

RUNTIME = Runtime(name="torch", precisions={"fp32": None, "bf16": None, "fp16": None},
                  probed=("fp32", "bf16"), package=None, extra=None,
                  build_forward=build_forward, runs_as_itself=runs_as_itself,
                  shapes_compile=SHAPES_COMPILE)
